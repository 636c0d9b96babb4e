"""How pytest-xdist gets the tests (tests/conftest.py): which tests one worker runs together, and which
start first."""

from __future__ import annotations

import pytest
from conftest import pytest_collection_modifyitems, xdist_scope


def test_ray_files_files_of_one_computation_and_the_browser_tier_stay_whole():
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


def test_long_tests_start_first_and_the_longest_before_the_others():
    items = [_Item("a", None), _Item("b", 3), _Item("c", None), _Item("d", 7), _Item("e", 3)]
    pytest_collection_modifyitems(None, items)
    assert [i.name for i in items] == ["d", "b", "e", "a", "c"]
