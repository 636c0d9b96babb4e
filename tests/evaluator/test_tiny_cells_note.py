"""A comparison on fewer tasks than an interval can stand on (`stats.min_tasks_for_interval`: 4 at 95%)
has no interval, no p-value and no floor mark; the report says so where it happens, naming the cells and
the rule, in the terminal tables and in report.html (paired table, summary, cells and the floor details),
so a blank is never read as "not distinguishable". Built from real cell summaries and paired bootstraps."""

from __future__ import annotations

import math
import random
from html import unescape

from toolsweep.evaluator.floor import attach_floors
from toolsweep.evaluator.protocols import MetricSpec
from toolsweep.evaluator.report import format_cells_table, format_headline_table, render_html_report
from toolsweep.evaluator.summary import CellTable

SPECS = [MetricSpec(name="success", scale=100)]
RULE = "fewer than 4 tasks, too few for a 95% interval"


def specs_for(benchmark: str, setting: str) -> list[MetricSpec]:
    return SPECS


def _summaries(confidence: float = 0.95):
    """Setting "wide" has 12 tasks, "tiny" 2 (a breakdown cell); `good` always succeeds, the floor on a coin."""
    table = CellTable()
    for setting, tasks in (("wide", 12), ("tiny", 2)):
        for t in range(tasks):
            for seed in range(3):
                coin = float(random.Random(f"{setting}-{t}-{seed}").random() < 0.3)
                for model, success in (("floor", coin), ("good", 1.0)):
                    table.cells[(model, "b", setting)].add(f"t{t}", seed, "answered", {"success": success})
    kw = dict(n_resamples=1000, confidence=confidence, seed=0)
    cells = table.summarize(specs_for, **kw)
    paired = table.paired(specs_for, **kw)
    attach_floors(cells, paired, "floor", specs_for, {"b": "coin"})
    return cells, paired


def test_the_paired_rows_carry_their_task_count_and_only_the_tiny_one_is_withheld():
    _, paired = _summaries()
    rows = {p["setting"]: p for p in paired}
    assert rows["tiny"]["tasks"] == 2 and rows["wide"]["tasks"] == 12
    assert math.isnan(rows["tiny"]["ci_low"]) and math.isnan(rows["tiny"]["p_value"])
    # rows are A − B in name order: floor − good, a large difference that would look decided
    assert (rows["tiny"]["model_a"], rows["tiny"]["model_b"]) == ("floor", "good") and rows["tiny"]["value"] <= -0.5
    assert rows["wide"]["ci_high"] < 0 and rows["wide"]["p_value"] < 0.05


def test_the_terminal_tables_name_the_tiny_cell_and_the_rule():
    cells, _ = _summaries()
    for text in (format_cells_table(cells, {"b": SPECS}), format_headline_table(cells, {"b": SPECS})):
        notes = [line for line in text.splitlines() if line.startswith("no interval, p-value or floor mark on")]
        assert len(notes) == 1, text
        assert "good / tiny (2 tasks)" in notes[0] and RULE in notes[0]
        assert "wide" not in notes[0]  # the decided cell is not named
    table = format_cells_table(cells, {"b": SPECS})
    tiny_row = next(line for line in table.splitlines() if line.startswith("good") and " tiny " in line)
    wide_row = next(line for line in table.splitlines() if line.startswith("good") and " wide " in line)
    assert "too few tasks (2 tasks)" in tiny_row and "▲" not in tiny_row
    assert "▲" in wide_row


def test_the_html_report_says_why_in_the_paired_table_and_under_the_cell_tables():
    cells, paired = _summaries()
    page = unescape(render_html_report({"run_id": "r"}, cells, {"b": SPECS}, paired=paired))
    # the paired table's verdict and its note, the summary's note and the cells table's note
    assert page.count("too few tasks (2 tasks)") >= 3  # paired verdict, cells column, floor details
    assert page.count("no interval, p-value or floor mark on") == 3
    assert "tiny success: floor (coin) − good (2 tasks)" in page
    assert page.count("good / tiny (2 tasks)") == 2 and RULE in page


def test_with_every_cell_large_enough_no_note_is_printed():
    cells, paired = _summaries()
    wide = [c for c in cells if c["setting"] == "wide"]
    assert "no interval, p-value" not in format_cells_table(wide, {"b": SPECS})
    page = render_html_report({}, wide, {"b": SPECS}, paired=[p for p in paired if p["setting"] == "wide"])
    assert "no interval, p-value" not in page and "too few tasks" not in page


def test_the_rule_follows_the_confidence():
    cells, _ = _summaries(confidence=0.99)
    text = format_headline_table(cells, {"b": SPECS}, confidence=0.99)
    assert "fewer than 5 tasks, too few for a 99% interval" in text and "0.5% tail" in text
