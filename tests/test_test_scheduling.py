"""How pytest-xdist gets the tests (tests/conftest.py): which tests one worker runs together, and which
start first."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def root_conftest(pytestconfig):
    """tests/conftest.py as pytest loaded it (`from conftest import` may find tests/k8s/conftest.py)."""
    here = Path(__file__).resolve().parent / "conftest.py"
    found = [p for p in pytestconfig.pluginmanager.get_plugins() if getattr(p, "__file__", None)
             and Path(p.__file__).resolve() == here]
    assert found, "tests/conftest.py is not loaded"
    return found[0]


def test_ray_files_files_of_one_computation_and_the_browser_tier_stay_whole(root_conftest):
    xdist_scope = root_conftest.xdist_scope
    assert xdist_scope("tests/cluster/test_waves.py::test_a[x]") == "tests/cluster/test_waves.py"
    assert xdist_scope("tests/evaluator/test_interval_methods.py::test_b[lognormal 50x3]") == \
        "tests/evaluator/test_interval_methods.py"
    assert xdist_scope("tests/browser/test_browser_views.py::test_c") == "tests/browser/"
    assert xdist_scope("tests/evaluator/test_stats.py::test_d") == "tests/evaluator/test_stats.py::test_d"


class _Item:
    def __init__(self, name: str, minutes: float | None) -> None:
        self.name = name
        self.mark = None if minutes is None else pytest.mark.long(minutes=minutes).mark

    def get_closest_marker(self, name: str):
        return self.mark if name == "long" else None


def test_long_tests_start_first_and_the_longest_before_the_others(root_conftest):
    items = [_Item("a", None), _Item("b", 3), _Item("c", None), _Item("d", 7), _Item("e", 3)]
    root_conftest.pytest_collection_modifyitems(None, items)
    assert [i.name for i in items] == ["d", "b", "e", "a", "c"]
