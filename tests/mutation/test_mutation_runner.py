"""The mutation check's own rules: a mutant applies only where its snippet occurs exactly once in the
named function, never to the checkout, and every declared mutant applies to today's code."""

from __future__ import annotations

import ast
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
    # a parameter id with spaces is kept whole (it is what killers.json names for the next run)
    spaced = "FAILED tests/c.py::test_z[I can't - do that] - AssertionError: x\nFAILED tests/c.py::test_w"
    assert failed_tests(spaced, "FAILED") == ["tests/c.py::test_z[I can't - do that]", "tests/c.py::test_w"]
    assert summary_line(out) == "1 failed, 4 passed in 2.0s"


def test_a_kill_is_a_failed_test_and_errors_alone_are_no_kill():
    from tests.mutation.run import ERROR, KILLED, SURVIVED, TIMEOUT, verdict

    failed = "F\nFAILED tests/a.py::test_x - assert 1 == 2\n=== 1 failed in 2.0s ==="
    setup_error = "E\nERROR tests/a.py::test_x - RuntimeError: Ray did not start\n=== 1 error in 9.0s ==="
    both = "FE\nFAILED tests/a.py::test_x - assert 0\nERROR tests/a.py::test_y - RuntimeError\n=== 1 failed, 1 error ==="
    assert verdict(1, failed) == KILLED and verdict(1, both) == KILLED
    assert verdict(1, setup_error) == ERROR  # exit 1 with only errors: the tests never judged the mutant
    assert verdict(1, "") == ERROR
    for rc in (2, 3, 4, 5):  # interrupted (collection error), internal error, usage error, nothing collected
        assert verdict(rc, "ERROR tests/a.py - ImportError\nFAILED tests/a.py::test_x") == ERROR
    assert verdict(0, "=== 3 passed ===") == SURVIVED and verdict(None, "") == TIMEOUT


def test_a_setup_error_in_a_real_pytest_run_is_reported_as_an_error(tmp_path):
    from tests.mutation.run import ERROR, KILLED, run_tests, verdict

    (tmp_path / "test_setup.py").write_text(
        "import pytest\n\n@pytest.fixture\ndef ray():\n    raise RuntimeError('Ray did not start')\n\n"
        "def test_uses_ray(ray):\n    assert True\n")
    (tmp_path / "test_fails.py").write_text("def test_x():\n    assert 1 == 2\n")
    (tmp_path / "test_broken.py").write_text("import no_such_module_here\n")
    rc, out = run_tests(tmp_path, ["test_setup.py"], timeout=120)
    assert rc == 1 and verdict(rc, out) == ERROR
    rc, out = run_tests(tmp_path, ["test_fails.py"], timeout=120)
    assert rc == 1 and verdict(rc, out) == KILLED
    rc, out = run_tests(tmp_path, ["test_broken.py"], timeout=120)
    assert rc == 2 and verdict(rc, out) == ERROR


def test_no_test_selection_in_the_mutant_list_is_bound_twice():
    # a second `T_VERDICTS = ...` once sent six mutants of the text verdicts to the endpoint-verdict test,
    # which never reads text: they survived while the list read as if their corpus test ran
    tree = ast.parse((REPO / "tests" / "mutation" / "mutants.py").read_text())
    names = [t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)]
    assert sorted({n for n in names if names.count(n) > 1}) == []


def test_each_verdict_mutant_runs_the_tests_of_its_own_module():
    # a mutant's selection must be able to reach its code: the text-verdict mutants run the verdict corpora,
    # but for the one whose failure only a scored ToolMaze episode shows (a success claim as a wise abort)
    text = [m for m in MUTANTS if m.file == "toolsweep/evaluator/verdicts.py"]
    assert len(text) == 7 and all(m.tests == ("tests/verdicts/test_verdict_corpora.py",) or m.tests[0].startswith(
        "tests/verdicts/test_toolmaze_abort_judge.py::") for m in text)


def test_a_forked_run_imports_the_copys_toolsweep_and_a_hung_one_is_stopped(tmp_path):
    # each run is forked from a process that imported the test tools from the checkout's environment: the
    # copy's own `toolsweep` must still be the one its tests import, and a hung run must end at its timeout
    from tests.mutation.run import run_tests

    (tmp_path / "toolsweep").mkdir()
    (tmp_path / "toolsweep" / "__init__.py").write_text("WHERE = 'the copy'\n")
    (tmp_path / "test_where.py").write_text(
        "import time\n\nimport toolsweep\n\n\ndef test_where():\n    assert toolsweep.WHERE == 'the copy'\n\n\n"
        "def test_hangs():\n    time.sleep(600)\n")
    rc, out = run_tests(tmp_path, ["test_where.py::test_where"], timeout=120)
    assert rc == 0, out
    rc, _ = run_tests(tmp_path, ["test_where.py::test_hangs"], timeout=3)
    assert rc is None  # stopped at its timeout (the test sleeps 600 s), never read as a pass or a kill


def test_the_tests_that_killed_a_mutant_last_run_first_and_end_the_run(tmp_path):
    # a run stops at its first failure (-x): the recorded killer, named first, must run ahead of the tests
    # before it in its file, and the rest of the selection still runs when it no longer fails
    from tests.mutation.run import KILLED, SURVIVED, run_tests, verdict

    (tmp_path / "toolsweep").mkdir()
    (tmp_path / "toolsweep" / "__init__.py").write_text("")
    (tmp_path / "tests" / "mutation").mkdir(parents=True)
    (tmp_path / "tests" / "mutation" / "first.py").write_text((REPO / "tests" / "mutation" / "first.py").read_text())
    (tmp_path / "test_order.py").write_text(
        "def test_slow_and_passing():\n    pass\n\n\ndef test_fails_first():\n    assert 0\n\n\n"
        "def test_killer():\n    assert 0\n")
    rc, out = run_tests(tmp_path, ["test_order.py"], timeout=120)
    assert verdict(rc, out) == KILLED and failed_tests(out) == ["test_order.py::test_fails_first"], out
    assert summary_line(out).startswith("1 failed, 1 passed")
    rc, out = run_tests(tmp_path, ["test_order.py"], timeout=120, first=["test_order.py::test_killer"])
    assert verdict(rc, out) == KILLED and failed_tests(out) == ["test_order.py::test_killer"], out
    assert summary_line(out).startswith("1 failed") and "passed" not in summary_line(out), out  # nothing before it
    (tmp_path / "test_order.py").write_text("def test_passes():\n    pass\n\n\ndef test_killer():\n    pass\n")
    rc, out = run_tests(tmp_path, ["test_order.py"], timeout=120, first=["test_order.py::test_killer"])
    assert verdict(rc, out) == SURVIVED and summary_line(out).startswith("2 passed"), out


def test_recorded_killers_are_kept_per_mutant_and_dropped_when_it_survives(tmp_path):
    from tests.mutation.run import ERROR, KILLED, SURVIVED, Outcome, load_killers, record_killers

    path = tmp_path / "killers.json"
    a, b, c = (Mutant(i, "m.py", "grade", "c", "d", ("t",), "why") for i in ("a", "b", "c"))
    record_killers([Outcome(a, KILLED, 1.0, "", ["t.py::x"]), Outcome(b, KILLED, 1.0, "", ["t.py::y"])], path)
    assert load_killers(path) == {"a": ["t.py::x"], "b": ["t.py::y"]}
    record_killers([Outcome(a, SURVIVED, 1.0), Outcome(c, ERROR, 1.0)], path)
    assert load_killers(path) == {"b": ["t.py::y"]}  # b was not run: kept
