"""ToolMaze's paper tables mark every number that rests on a partial cell `*`, as the summary does."""

from __future__ import annotations

from toolsweep.benchmarks.toolmaze import PERTURBED, report_tables
from toolsweep.evaluator.completeness import PARTIAL_MARK

LEVELS = (1, 2, 3, 4)


def _cells(partial: set[str]) -> list[dict]:
    settings = [f"C{c}-P0-std" for c in LEVELS] + [f"C{c}-{p}-{pr}" for c in LEVELS for p in PERTURBED
                                                   for pr in ("std", "hint")]
    est = {"value": 1.0, "ci_low": 1.0, "ci_high": 1.0}
    return [{"model": "m", "benchmark": "toolmaze", "setting": s, "n": 1,
             "metrics": {"tsr": est, "prr": est, "rc": {"value": 0.0, "ci_low": 0.0, "ci_high": 0.0}},
             "complete": s not in partial, "units_done": 1, "units_expected": 1 if s not in partial else 100}
            for s in settings]


def _table(tables, number: str):
    return next(t for t in tables if t.title.startswith(f"ToolMaze Table {number}:"))


def test_a_partial_cell_is_marked_in_tables_21_22_and_every_average_over_it():
    tables = report_tables(_cells({"C2-P3-std", "C1-P0-std"}))
    t21 = _table(tables, "21")
    row = dict(zip(t21.columns, t21.rows[0]))
    assert row["C2 P3 TSR"] == "100.00" + PARTIAL_MARK and row["C2 P3 RC"] == "0.00" + PARTIAL_MARK
    assert row["C1 TSR NP"] == "100.00" + PARTIAL_MARK
    assert row["C2 P2 TSR"] == "100.00" and row["C3 P3 TSR"] == "100.00"  # whole cells stay plain
    t22 = _table(tables, "22")
    hint = dict(zip(t22.columns, t22.rows[0]))
    assert hint["C1 TSR NP"].endswith(PARTIAL_MARK)  # NP uses the standard prompt's cell in both tables
    assert [k for k, v in hint.items() if str(v).endswith(PARTIAL_MARK)] == ["C1 TSR NP"]
    assert hint["C2 P3 TSR"] == "100.00"  # the hint prompt's C2-P3 cell is whole
    t2 = _table(tables, "2")
    std = dict(zip(t2.columns, t2.rows[0]))
    assert std["TSR P3"].endswith(PARTIAL_MARK) and std["TSR NP"].endswith(PARTIAL_MARK)
    assert std["TSR P1"] == "100.00" and std["Avg."].endswith(PARTIAL_MARK)
    t20 = _table(tables, "20")
    by_level = dict(zip(t20.columns, t20.rows[0]))
    assert by_level["C2 TSR"].endswith(PARTIAL_MARK) and by_level["C3 TSR"] == "100.00"
    assert all("partial cell" in t.note for t in tables)


def test_whole_cells_print_plain_numbers_and_no_partial_note():
    tables = report_tables(_cells(set()))
    assert not any(str(v).endswith(PARTIAL_MARK) for t in tables for r in t.rows for v in r)
    assert not any("partial cell" in t.note for t in tables)
