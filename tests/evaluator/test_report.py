"""The terminal table and the HTML report: numbers, scaling, escaping, well-formed markup."""

from __future__ import annotations

import math
from html.parser import HTMLParser

import numpy as np
import pytest

from toolsweep.evaluator.protocols import MetricSpec, ReportTable
from toolsweep.evaluator.report import format_cells_table, render_html_report, write_html_report
from toolsweep.evaluator.stats import cell_summary

EVIL = '<script>alert("owned")</script> & <b>'

SPECS = {
    "toolmaze": [
        MetricSpec(name="success", scale=100, description="tasks solved"),
        MetricSpec(name="itcr", kind="ratio", numerator="bad", denominator="calls", higher_is_better=False),
    ],
    "apb": [MetricSpec(name="f1", scale=100)],
}


def _metric(v, lo, hi):
    return {"value": v, "ci_low": lo, "ci_high": hi}


CELLS = [
    {
        "model": "oracle",
        "benchmark": "toolmaze",
        "setting": "easy",
        "n": 40,
        "terminations": {"answered": 40},
        "metrics": {"success": _metric(1.0, 1.0, 1.0), "itcr": _metric(0.0, 0.0, 0.0)},
    },
    {
        "model": EVIL,
        "benchmark": "toolmaze",
        "setting": "easy",
        "n": 40,
        "terminations": {"answered": 31, "max_turns": 6, "env_error": 3},
        "metrics": {"success": _metric(0.4131, 0.2874, 0.5627), "itcr": _metric(0.3333, 0.2512, 0.4218)},
    },
    {
        "model": "oracle",
        "benchmark": "toolmaze",
        "setting": "hard",
        "n": 20,
        "terminations": {"answered": 19, "timeout": 1},
        "metrics": {"success": _metric(0.95, 0.85, 1.0), "itcr": _metric(math.nan, math.nan, math.nan)},
    },
    {
        "model": "random",
        "benchmark": "apb",
        "setting": "default",
        "n": 12,
        "terminations": {"agent_format_error": 12},
        "metrics": {"f1": _metric(0.12345, 0.05, 0.2)},
    },
]

MANIFEST = {
    "sweep": "nightly <sweep>",
    "run_id": "20261122-101500",
    "config_sha256": "ab" * 32,
    "git_sha": "0123abcd",
    "versions": {"toolsweep": "0.1.0", "ray": "2.60.0", "python": "3.11.9"},
    "benchmarks": {"toolmaze": {"version": "1.2"}, "apb": {"version": "0.9"}},
    "config": {"name": "nightly <sweep>", "seeds": [42]},
}

PAIRED = [
    {
        "benchmark": "toolmaze", "setting": "easy", "model_a": "oracle", "model_b": EVIL,
        "metric": "success", "value": 0.5871, "ci_low": 0.4372, "ci_high": 0.7133, "n": 40,
    }
]

TABLES = [
    ReportTable(title="Table 3: success by difficulty", columns=["model", "easy", "hard"],
                rows=[["oracle", 100.0, 95.0], [EVIL, 41.3, "n/a"]], note="macro-average over settings")
]


class StrictParser(HTMLParser):
    """Checks that every element is closed in order and collects the text and tags."""

    VOID = {"meta", "br", "hr", "img", "input", "link", "rect", "line", "path", "polygon", "polyline"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1:]}>"
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


@pytest.fixture(scope="module")
def page() -> str:
    convergence = {
        "oracle / toolmaze / easy / success": [
            {"n": 10, "value": 0.9, "ci_low": 0.7, "ci_high": 1.0},
            {"n": 40, "value": 1.0, "ci_low": 1.0, "ci_high": 1.0},
        ]
    }
    return render_html_report(MANIFEST, CELLS, SPECS, TABLES, PAIRED, convergence)


@pytest.fixture(scope="module")
def parsed(page) -> StrictParser:
    p = StrictParser()
    p.feed(page)
    p.close()
    return p


def test_text_table_shows_scaled_values_with_their_intervals():
    text = format_cells_table(CELLS, SPECS)
    assert "41.3 [28.7, 56.3]" in text  # success x 100, one decimal
    assert "0.333 [0.251, 0.422]" in text  # itcr unscaled, three decimals
    assert "100.0 [100.0, 100.0]" in text
    assert "12.3 [5.0, 20.0]" in text
    assert "answered=31 max_turns=6 env_error=3" in text
    assert "answered=19 timeout=1" in text
    assert "agent_format_error=12" in text
    lines = text.splitlines()
    assert lines[0] == "== apb" and "== toolmaze" in lines
    hard = next(line for line in lines if "hard" in line)
    assert "95.0 [85.0, 100.0]" in hard and "—" in hard  # undefined itcr shows as a dash
    assert "success (%)" in text and "f1 (%)" in text
    # Columns line up: every row of a block is as wide as its header rule.
    block = text.split("\n\n")[1].splitlines()
    assert block[2].startswith("-")


def test_text_table_of_real_cell_summaries():
    rng = np.random.default_rng(0)
    n = 30
    cell = cell_summary(
        "m", "toolmaze", "easy", [f"t{i}" for i in range(n)], [0] * n,
        {"success": (rng.random(n) < 0.5).astype(float), "bad": rng.integers(0, 3, n), "calls": rng.integers(3, 6, n)},
        {"answered": n}, SPECS["toolmaze"], n_resamples=1000,
    )
    text = format_cells_table([cell], SPECS)
    s = cell["metrics"]["success"]
    assert f"{100 * s['value']:.1f} [{100 * s['ci_low']:.1f}, {100 * s['ci_high']:.1f}]" in text
    r = cell["metrics"]["itcr"]
    assert f"{r['value']:.3f} [{r['ci_low']:.3f}, {r['ci_high']:.3f}]" in text


def test_html_is_well_formed_and_has_charts(parsed):
    assert parsed.stack == []
    assert parsed.tags[0] == "html"
    # One bar chart per (benchmark, metric) with values, one termination chart per benchmark,
    # and one convergence chart.
    assert parsed.tags.count("svg") == 3 + 2 + 1
    assert "rect" in parsed.tags and "path" in parsed.tags  # bars and whiskers
    assert "polyline" in parsed.tags


def test_html_contains_every_cells_numbers(page, parsed):
    text = " ".join(parsed.text)
    for needle in [
        "41.3 [28.7, 56.3]", "0.333 [0.251, 0.422]", "100.0 [100.0, 100.0]", "95.0 [85.0, 100.0]",
        "12.3 [5.0, 20.0]", "58.7 [43.7, 71.3]",  # the paired difference, scaled
        "Table 3: success by difficulty", "macro-average over settings", "A higher",
        "20261122-101500", "ray 2.60.0", "toolmaze 1.2",
    ]:
        assert needle in text, needle
    # Termination counts, including env_error, appear in the breakdown table.
    assert "env_error" in text and "agent_format_error" in text
    assert "nightly <sweep>" in text  # shown as text...
    assert "<title>toolsweep report: nightly &lt;sweep&gt;" in page  # ...escaped in the source


def test_html_escapes_a_malicious_model_name(page, parsed):
    assert "<script" not in page
    assert "<b>" not in page
    assert "script" not in parsed.tags and "b" not in parsed.tags
    text = "".join(parsed.text)
    assert EVIL in text  # displayed literally, in tables, chart labels and tooltips
    assert page.count("&lt;script&gt;") >= 4


def test_empty_report_and_mapping_of_tables():
    html = render_html_report({"run_id": "r1"}, [], {}, {"apb": TABLES})
    p = StrictParser()
    p.feed(html)
    assert p.stack == []
    assert "No finished episodes yet." in html and "Table 3: success by difficulty" in html
    assert format_cells_table([], {}) == "no finished episodes yet"


def test_write_html_report_replaces_the_file_atomically(tmp_path):
    target = tmp_path / "run" / "report.html"
    write_html_report(target, MANIFEST, CELLS, SPECS, TABLES)
    first = target.read_text(encoding="utf-8")
    assert first == render_html_report(MANIFEST, CELLS, SPECS, TABLES)
    write_html_report(target, MANIFEST, CELLS[:1], SPECS, [])
    second = target.read_text(encoding="utf-8")
    assert second != first and "Table 3" not in second
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.html"]  # no temp files left
    assert target.stat().st_mode & 0o044  # readable by others, not mkstemp's 0600


def test_interval_level_comes_from_the_sweep_config():
    manifest = {**MANIFEST, "config": {**MANIFEST["config"], "bootstrap": {"confidence": 0.9}}}
    html = render_html_report(manifest, CELLS, SPECS, [], PAIRED)
    assert "Metrics by model (90% CI)" in html and "A − B [90% CI]" in html
    assert "95% CI" not in html


def test_terminal_table_keeps_headline_metrics_and_says_how_many_are_hidden():
    specs = [MetricSpec(name=f"m{i}") for i in range(9)]
    cell = {"model": "a", "benchmark": "b", "setting": "s", "n": 1, "terminations": {"answered": 1},
            "metrics": {f"m{i}": {"value": i / 10, "ci_low": 0.0, "ci_high": 1.0} for i in range(9)}}
    text = format_cells_table([cell], {"b": specs})
    assert "m5" in text and "m6" not in text
    assert "+3 more metrics" in text
    full = format_cells_table([cell], {"b": specs}, max_metrics=None)
    assert "m8" in full and "more metrics" not in full
