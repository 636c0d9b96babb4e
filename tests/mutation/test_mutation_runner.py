"""The mutation check's own rules: a mutant applies only where its snippet occurs exactly once in the
named function, never to the checkout, and every declared mutant applies to today's code."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mutation.mutants import MUTANTS, Mutant
from tests.mutation.run import REPO, apply, failed_tests, function_span, summary_line

SOURCE = '''
def grade(c):
    if c >= 0.7:
        return 0.6
    return 0.4


class Cell:
    def grade(self, c):
        if c >= 0.7:
            return 1.0
        return 0.0
'''


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "m.py").write_text(SOURCE)
    return tmp_path


def mutant(function: str, original: str = "c >= 0.7", mutated: str = "c > 0.7") -> Mutant:
    return Mutant("m", "m.py", function, original, mutated, ("tests",), "why")


def test_a_mutant_changes_only_its_function(tree):
    assert apply(mutant("Cell.grade"), tree) is None
    text = (tree / "m.py").read_text()
    assert "    if c >= 0.7:\n        return 0.6" in text and "        if c > 0.7:\n            return 1.0" in text


def test_a_snippet_missing_or_repeated_or_a_function_missing_is_refused(tree):
    assert "occurs 0 times" in apply(mutant("grade", original="c >= 0.9"), tree)
    assert "occurs 2 times" in apply(mutant("grade", original="return"), tree)
    assert "not found" in apply(mutant("nothing"), tree)
    assert "does not parse" in apply(mutant("grade", mutated="c >>= 0.7"), tree)
    assert (tree / "m.py").read_text() == SOURCE  # nothing written when a mutant is refused


def test_function_spans_cover_methods_by_class():
    span = function_span(SOURCE, "Cell.grade")
    assert SOURCE[span[0]:span[1]].lstrip().startswith("def grade(self, c)")


def test_every_declared_mutant_applies_to_todays_code(tmp_path):
    ids = [m.id for m in MUTANTS]
    assert len(ids) == len(set(ids))
    for m in MUTANTS:
        (tmp_path / m.file).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / m.file).write_text((REPO / m.file).read_text())
        assert apply(m, tmp_path) is None, m.id
        assert m.tests and all(not t.startswith("tests/") or (REPO / t.split("::")[0]).exists() for t in m.tests), m.id


def test_the_report_names_failing_tests_and_the_summary():
    out = "....F\nFAILED tests/a.py::test_x - assert 1 == 2\nERROR tests/b.py::test_y\n=== 1 failed, 4 passed in 2.0s ==="
    assert failed_tests(out) == ["tests/a.py::test_x", "tests/b.py::test_y"]
    assert summary_line(out) == "1 failed, 4 passed in 2.0s"
