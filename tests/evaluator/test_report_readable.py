"""Tables a person can read: paper tables too wide for a screen are transposed or split (every value
kept), and terminal tables say what their brackets are."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from toolsweep.evaluator.protocols import MetricSpec, ReportTable
from toolsweep.evaluator.report import (
    WIDE_TABLE_COLUMNS,
    _report_table_html,
    format_cells_table,
    format_headline_table,
)


class _Tables(HTMLParser):
    """Each <table>'s rows as lists of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _parse(html: str) -> list[list[list[str]]]:
    p = _Tables()
    p.feed(html)
    return p.tables


def _wide(n_rows: int, n_cols: int) -> ReportTable:
    columns = ["Model", *(f"C{j} tsr" for j in range(1, n_cols))]
    rows = [[f"model-{i}", *(float(i * 100 + j) for j in range(1, n_cols))] for i in range(n_rows)]
    return ReportTable(title="Table 21: wide", columns=columns, rows=rows)


def test_a_53_column_table_with_few_rows_is_transposed_keeping_every_value():
    table = _wide(2, 53)
    [shown] = _parse(_report_table_html(table))
    assert max(len(r) for r in shown) == 3  # the label column and one per model
    assert shown[0] == ["Model", "model-0", "model-1"]
    assert len(shown) == 1 + 52
    assert shown[1] == ["C1 tsr", "1.000", "101.0"] and shown[-1] == ["C52 tsr", "52.0", "152.0"]


def test_a_table_wide_and_long_is_split_into_parts_repeating_the_row_labels():
    table = _wide(WIDE_TABLE_COLUMNS + 3, 30)
    parts = _parse(_report_table_html(table))
    assert len(parts) == 3 and all(len(p[0]) <= WIDE_TABLE_COLUMNS + 1 for p in parts)
    assert all(p[0][0] == "Model" and [r[0] for r in p[1:]] == [f"model-{i}" for i in range(15)] for p in parts)
    assert sum(len(p[0]) - 1 for p in parts) == 29  # every column once


def test_a_narrow_table_is_left_as_it_is():
    [shown] = _parse(_report_table_html(_wide(3, 5)))
    assert shown[0] == ["Model", "C1 tsr", "C2 tsr", "C3 tsr", "C4 tsr"] and len(shown) == 4


def test_terminal_tables_say_what_the_brackets_are():
    spec = MetricSpec(name="accuracy", kind="mean", column="accuracy", scale=100)
    cell = {"model": "m", "benchmark": "b", "setting": "s", "n": 4, "terminations": {"answered": 4},
            "metrics": {"accuracy": {"value": 0.5, "ci_low": 0.25, "ci_high": 0.75}}}
    for text in (format_headline_table([cell], {"b": [spec]}, confidence=0.9),
                 format_cells_table([cell], {"b": [spec]}, confidence=0.9)):
        assert re.search(r"\[low, high\].*90% CI", text.splitlines()[0])
        assert "50.0 [25.0, 75.0]" in text
