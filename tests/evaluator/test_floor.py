"""The floor judgement and partial cells from real cell summaries and paired bootstraps (no Ray): the
direction of a metric decides "above", the floor's own policy is never told apart from it, a partial
cell is marked in the terminal tables and report.html, and a cell with no unit recorded is named."""

from __future__ import annotations

import math
import random

import pytest

from toolsweep.evaluator.completeness import attach_completeness, given_up_by_cell
from toolsweep.evaluator.floor import ABOVE, BELOW, NOT_DISTINGUISHABLE, attach_floors, judge
from toolsweep.evaluator.protocols import MetricSpec
from toolsweep.evaluator.report import format_cells_table, format_headline_table, render_html_report
from toolsweep.evaluator.summary import CellTable

SPECS = [MetricSpec(name="success", scale=100), MetricSpec(name="errors", higher_is_better=False)]


def specs_for(benchmark: str, setting: str) -> list[MetricSpec]:
    return SPECS


def test_judge_follows_the_metrics_direction_and_says_nothing_without_an_interval():
    assert judge(0.1, 0.3) == ABOVE and judge(-0.3, -0.1) == BELOW and judge(-0.1, 0.1) == NOT_DISTINGUISHABLE
    assert judge(0.0, 0.0) == NOT_DISTINGUISHABLE  # the floor's own policy: exactly zero is not above
    assert judge(0.1, 0.3, higher_is_better=False) == BELOW  # more errors than the floor is worse
    assert judge(-0.3, -0.1, higher_is_better=False) == ABOVE
    assert judge(math.nan, 0.1) is None and judge(None, None) is None
    # a descriptive metric (no better direction in the paper) is never above or below the floor
    assert judge(0.1, 0.3, higher_is_better=None) is None and judge(-0.3, -0.1, higher_is_better=None) is None


def test_planbench_xl_descriptive_metrics_get_no_direction_as_the_paper_marks_none():
    """Tab. 3 marks Acc and EGT up, ITCR and UIRR down, and turns, EDT and S/C not at all: an oracle that
    explores less than the floor is not 'below' it, and the paired table says which is larger, not better."""
    from toolsweep.benchmarks.planbench_xl.metrics import MAIN_METRICS
    from toolsweep.evaluator.report import _verdict

    directions = {s.name: s.higher_is_better for s in MAIN_METRICS}
    assert directions == {"accuracy": True, "egt_precision": True, "turns": None, "edt": None, "s_c_ratio": None,
                          "itcr": False, "uirr": False}
    edt = next(s for s in MAIN_METRICS if s.name == "edt")
    assert _verdict({"ci_low": -2.0, "ci_high": -1.0}, edt) == ("B larger", "")
    assert _verdict({"ci_low": 1.0, "ci_high": 2.0}, MAIN_METRICS[0])[0] == "A better"


def _table(n_tasks: int = 12, seeds: int = 3) -> CellTable:
    """The floor succeeds on a coin per (task, seed) and errs once a failed episode; `copy` does exactly
    the same, `good` always succeeds without errors, `bad` never succeeds and errs twice per episode."""
    table = CellTable()
    for t in range(n_tasks):
        for seed in range(seeds):
            coin = float(random.Random(f"{t}-{seed}").random() < 0.5)
            for model, success, errors in (("floor", coin, 1 - coin), ("copy", coin, 1 - coin),
                                           ("good", 1.0, 0.0), ("bad", 0.0, 2.0)):
                table.cells[(model, "b", "s")].add(f"t{t}", seed, "answered", {"success": success, "errors": errors})
    return table


def _cells(table: CellTable):
    kw = dict(n_resamples=1000, confidence=0.95, seed=0)
    cells = table.summarize(specs_for, **kw)
    paired = table.paired(specs_for, **kw)
    attach_floors(cells, paired, "floor", specs_for, {"b": "coin"})
    return {c["model"]: c for c in cells}, paired


def test_every_model_is_judged_against_the_floor_by_its_paired_interval():
    cells, paired = _cells(_table())
    assert cells["floor"]["is_floor"] and cells["floor"]["floor"] == {"model": "floor", "policy": "coin"}
    judged = {m: {k: r["judgement"] for k, r in cells[m]["floor"]["metrics"].items()} for m in ("copy", "good", "bad")}
    assert judged["good"] == {"success": ABOVE, "errors": ABOVE}  # fewer errors than the floor is above it
    assert judged["bad"] == {"success": BELOW, "errors": BELOW}
    assert judged["copy"] == {"success": NOT_DISTINGUISHABLE, "errors": NOT_DISTINGUISHABLE}
    copy = cells["copy"]["floor"]["metrics"]["success"]["difference"]
    assert (copy["value"], copy["ci_low"], copy["ci_high"], copy["n"]) == (0.0, 0.0, 0.0, 36)
    assert str(copy["value"]) == "0.0"  # not "-0.0" where the row was floor − copy
    # model − floor is the summary's own paired row, its sign flipped where the floor is model A
    for model in ("good", "bad"):
        row = next(p for p in paired if {p["model_a"], p["model_b"]} == {model, "floor"} and p["metric"] == "errors")
        diff = cells[model]["floor"]["metrics"]["errors"]["difference"]
        if row["model_a"] == model:
            assert (diff["value"], diff["ci_low"], diff["ci_high"]) == (row["value"], row["ci_low"], row["ci_high"])
        else:
            assert (diff["value"], diff["ci_low"], diff["ci_high"]) == pytest.approx(
                (-row["value"], -row["ci_high"], -row["ci_low"]))
    floor_success = cells["floor"]["metrics"]["success"]
    assert cells["good"]["floor"]["metrics"]["success"]["floor"] == {
        k: floor_success[k] for k in ("value", "ci_low", "ci_high")}


def test_a_sweep_without_a_floor_gets_no_floor_sections():
    table = _table()
    plain = table.summarize(specs_for, n_resamples=200, confidence=0.95, seed=0)
    attach_floors(plain, table.paired(specs_for, n_resamples=200, confidence=0.95, seed=0), None, specs_for)
    assert all("floor" not in c and "is_floor" not in c for c in plain)
    assert "− floor" not in format_cells_table(plain, {"b": SPECS}) and "▲" not in render_html_report({}, plain, {"b": SPECS})


def test_the_tables_put_the_floor_first_and_mark_each_model_against_it():
    cells, paired = _cells(_table())
    own = list(cells.values())
    text = format_headline_table(own, {"b": SPECS})
    head = next(line for line in text.splitlines() if line.startswith("setting")).split()
    assert head[1:3] == ["floor", "(coin)"] and head[3:] == ["bad", "copy", "good"]
    row = next(line for line in text.splitlines() if line.startswith("s "))
    assert row.count("▼") == 1 and row.count("≈") == 1 and row.count("▲") == 1
    page = render_html_report({"run_id": "r"}, own, {"b": SPECS}, [], paired)
    assert page.index(">floor (coin)</th>") < page.index(">bad</th>")
    assert "Every metric against the floor" in page and "(lower is better)" in page
    assert "floor-above" in page and "floor-below" in page and "floor-same" in page
    assert "above the floor: model − floor = +" in page  # the tooltip says the difference


def test_partial_and_missing_cells_are_marked_in_every_table(tmp_path):
    cells, paired = _cells(_table(n_tasks=6, seeds=2))
    own = list(cells.values())
    failures = tmp_path / "failures.jsonl"
    failures.write_text('{"unit_id": "x", "unit": {"model": "bad", "benchmark": "b", "setting": "s"}}\nnot json\n')
    given_up = given_up_by_cell(failures)
    assert given_up == {("bad", "b", "s"): 1}
    units = {(m, "b", "s"): 12 for m in cells} | {("good", "b", "s"): 20, ("late", "b", "s"): 12,
                                                  ("floor", "other", "s"): 4}
    missing = attach_completeness(own, units, given_up)
    assert [(m["model"], m["benchmark"], m["units_expected"], m["units_done"]) for m in missing] == \
        [("floor", "other", 4, 0), ("late", "b", 12, 0)]
    assert cells["floor"]["complete"] and not cells["good"]["complete"] and cells["good"]["units_done"] == 12
    text = format_headline_table(own, {"b": SPECS}, missing=missing)
    assert "100.0* [100.0, 100.0] ▲ (12/20 units)" in text and "partial cell" in text
    assert "no unit recorded yet: late / s (0/12 units)" in text
    assert "== other\nno unit recorded yet: floor / s (0/4 units)" in text  # a benchmark with no cell at all
    full = format_cells_table(own, {"b": SPECS}, missing=missing)
    assert "12/20*" in full and "12/12" in full and "late / s" in full
    page = render_html_report({"run_id": "r"}, own, {"b": SPECS}, [], paired, missing=missing)
    assert "100.0* ▲<br>[100.0, 100.0] (12/20 units)" in page and "12/20*" in page  # the interval under the value
    assert "late / s (0/12 units)" in page and 'class="num partial"' in page
    assert '<section id="b-other">' in page and "floor / s (0/4 units)" in page
    # a summary made without the config's units (an old run directory) marks nothing
    plain, _ = _cells(_table(n_tasks=6, seeds=2))
    assert "*" not in format_headline_table(list(plain.values()), {"b": SPECS})


def test_the_variance_decomposition_is_a_table_of_the_report():
    cells, _ = _cells(_table())
    page = render_html_report({"run_id": "r"}, list(cells.values()), {"b": SPECS})
    assert "Variance: between and within tasks, ICC, effective n, pass^k" in page
    vc = cells["floor"]["variance"]["success"]
    assert f"{vc['icc']:.2f}" in page and f"{vc['effective_n']:.1f}" in page
    curve = cells["floor"]["pass_k"]["success"]
    assert f"pass^3 {curve['3']:.2f}" in page and f"pass^2 {curve['2']:.2f}" in page
