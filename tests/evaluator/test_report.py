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
    assert lines[0].startswith("value [low, high] = the estimate and its 95% CI")
    assert lines[2] == "== apb" and "== toolmaze" in lines
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
    # A headline chart per benchmark in the summary, one bar chart per (benchmark, metric) with values,
    # one termination chart per benchmark, and one convergence chart (its estimate moved).
    assert parsed.tags.count("svg") == 2 + 3 + 2 + 1
    assert "rect" in parsed.tags and "path" in parsed.tags  # bars and whiskers
    assert "polyline" in parsed.tags


def test_html_contains_every_cells_numbers(page, parsed):
    text = " ".join(parsed.text)
    for needle in [
        "41.3 [28.7, 56.3]", "0.333 [0.251, 0.422]", "100.0 [100.0, 100.0]", "95.0 [85.0, 100.0]",
        "12.3 [5.0, 20.0]", "58.7 [43.7, 71.3]",  # the paired difference, scaled
        "Table 3: success by difficulty", "macro-average over settings", "A better",
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
    assert "metrics by model (90% CI)" in html and "A − B [90% CI]" in html
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


# ----------------------------------------------------------------------------- a report read top to bottom


def _wide_benchmark(n_metrics: int = 40, n_settings: int = 29, models: tuple[str, ...] = ("a", "b")):
    """An APB-sized benchmark: many settings and many metrics per cell."""
    specs = [MetricSpec(name="correct", scale=100, description="answer correct")] + [
        MetricSpec(name=f"m{i}", scale=100) for i in range(n_metrics - 1)
    ]
    cells = [
        {"model": m, "benchmark": "wide", "setting": f"setting_{s:02d}", "n": 10, "terminations": {"answered": 10},
         "metrics": {sp.name: _metric(0.5, 0.25, 0.75) for sp in specs}}
        for m in models for s in range(n_settings)
    ]
    return cells, {"wide": specs}


def _tables(page: str) -> list[list[str]]:
    """Each table's header cells."""
    out = []
    for t in page.split("<table>")[1:]:
        head = t.split("</thead>")[0]
        out.append([h.split("</th>")[0] for h in head.split("<th>")[1:]])
    return out


def test_the_summary_comes_first_with_each_benchmarks_headline_metric(page):
    summary = page.index('<section id="summary">')
    assert summary < page.index('id="b-toolmaze"') and summary < page.index('id="b-apb"')
    head = page[summary:page.index("</section>", summary)]
    # toolmaze's headline (its first metric) per setting and model, apb's likewise; nothing else
    assert "success (%)" in head and "f1 (%)" in head and "itcr" not in head
    assert "41.3<br>[28.7, 56.3]" in head and "12.3<br>[5.0, 20.0]" in head  # the interval under the value
    assert "100 episodes in 3 cells" in head  # toolmaze: 40 + 40 + 20


def test_a_wide_benchmark_keeps_every_table_narrow_and_its_breakdowns_collapsed():
    cells, specs = _wide_benchmark(n_metrics=40, models=tuple(f"model{i}" for i in range(8)))
    page = render_html_report({"run_id": "r"}, cells, specs)
    widths = [len(h) for h in _tables(page)]
    # the cells table: model, setting, n and the first metrics; summary and per-setting tables split
    # the 8 models into tables of at most MODELS_PER_TABLE
    assert max(widths) <= 3 + 6
    assert "m38 (%)" in page  # every metric is still there...
    first_details = page.index("<details><summary>All 40 metrics, by setting</summary>")
    assert page.index("m38 (%)") > first_details  # ...behind a toggle
    assert page.count("<details><summary>setting_") == 29
    assert "<details open" not in page


def test_tables_without_data_are_named_not_drawn():
    cells, specs = _wide_benchmark(n_metrics=2, n_settings=2)
    tables = {"wide": [
        ReportTable(title="Table 4 — refinement", columns=["model", "base", "refined"], rows=[]),
        ReportTable(title="Pearson r", columns=["metric", "r"], rows=[["edt", "n/a"], ["turns", "n/a"]]),
        ReportTable(title="Table 1", columns=["model", "CR"], rows=[["a", "41.3 ±2.0"]]),
    ]}
    page = render_html_report({"run_id": "r"}, cells, specs, tables)
    assert "<h4>Table 1</h4>" in page
    assert "<h4>Table 4 — refinement</h4>" not in page and "<h4>Pearson r</h4>" not in page
    assert "Not shown, no data in this run: Table 4 — refinement; Pearson r." in page


def test_paired_differences_say_which_model_is_better_by_the_metrics_direction():
    specs = {"toolmaze": [MetricSpec(name="success", scale=100),
                          MetricSpec(name="errors", higher_is_better=False)]}
    paired = [
        {"benchmark": "toolmaze", "setting": "easy", "model_a": "x", "model_b": "y", "metric": "success",
         "value": 0.2, "ci_low": 0.1, "ci_high": 0.3, "n": 30},
        {"benchmark": "toolmaze", "setting": "easy", "model_a": "x", "model_b": "y", "metric": "errors",
         "value": 0.2, "ci_low": 0.1, "ci_high": 0.3, "n": 30},
        {"benchmark": "toolmaze", "setting": "easy", "model_a": "x", "model_b": "y", "metric": "errors",
         "value": 0.0, "ci_low": -0.1, "ci_high": 0.1, "n": 30},
    ]
    page = render_html_report({"run_id": "r"}, CELLS[:2], specs, [], paired)
    assert '<td class="better-a">A better</td>' in page  # more success
    assert '<td class="better-b">B better (lower is better)</td>' in page  # more errors
    assert "<td>CI covers 0</td>" in page
    assert "<th>pairs</th>" in page and "<th>cells</th>" not in page
    # the headline metric's differences are open, the others behind a toggle
    assert page.index("Every other metric (2 rows)") < page.index("B better (lower is better)")


def _tick_values(svg: str) -> list[float]:
    """The numbers on a chart's value axis (not the episode counts)."""
    import re

    return [float(v) for v in re.findall(r'<text class="tick" x="52\.?0?"[^>]*text-anchor="end">([-0-9.]+)</text>', svg)] + [
        float(v) for v in re.findall(r'<text class="tick" x="48"[^>]*text-anchor="end">([-0-9.]+)</text>', svg)]


def test_convergence_draws_cells_that_moved_on_the_metrics_own_axis():
    flat = [{"n": float(n), "value": 1.0, "ci_low": 1.0, "ci_high": 1.0} for n in (5, 10, 20)]
    moved = [{"n": 5.0, "value": 0.8, "ci_low": 0.4, "ci_high": 1.0},
             {"n": 20.0, "value": 0.95, "ci_low": 0.85, "ci_high": 1.0}]
    convergence = {"oracle | toolmaze | easy — success": flat, "x | toolmaze | hard — success": moved}
    page = render_html_report({"run_id": "r"}, CELLS, SPECS, [], [], convergence)
    section = page[page.index('<section id="convergence">'):]
    assert section.count("<svg") == 1
    assert "x | toolmaze | hard — success (%)" in section and "oracle | toolmaze | easy" not in section
    assert "1 cells whose estimate never moved are not drawn" in section
    ticks = _tick_values(section)
    assert ticks and min(ticks) >= 0 and max(ticks) <= 100  # percentages, never past 100
    assert max(ticks) >= 95 and min(ticks) <= 40  # and they cover the band


def test_a_flat_fraction_gets_an_axis_inside_its_range():
    from toolsweep.evaluator.report import convergence_chart

    svg = convergence_chart("c", [{"n": 1, "value": 1.0, "ci_low": 1.0, "ci_high": 1.0},
                                  {"n": 2, "value": 1.0, "ci_low": 1.0, "ci_high": 1.0}], SPECS["toolmaze"][0])
    ticks = _tick_values(svg)
    assert max(ticks) == 100 and min(ticks) >= 0  # not the 100..200 of a padded flat line


def test_the_end_of_run_summary_is_the_headline_per_setting_and_model_in_narrow_blocks():
    from toolsweep.evaluator.report import format_headline_table

    cells, specs = _wide_benchmark(n_metrics=40, n_settings=3, models=tuple(f"model-{i}" for i in range(6)))
    text = format_headline_table(cells + CELLS, {**specs, **SPECS})
    lines = text.splitlines()
    assert "== wide: correct (%), higher is better (180 episodes)" in lines
    assert "== toolmaze: success (%), higher is better (100 episodes)" in lines
    assert "m1 (%)" not in text and "itcr" not in text and "answered" not in text  # the headline only
    # 6 models: a block of 4 and a block of 2, each line far narrower than the cells table's
    assert sum(line.startswith("setting ") for line in lines) == 2 + 1 + 1  # wide, apb, toolmaze
    assert max(map(len, lines)) <= 100
    assert "50.0 [25.0, 75.0]" in text and "41.3 [28.7, 56.3]" in text


def test_a_paper_table_from_partial_cells_says_so_unless_it_marks_its_numbers():
    from toolsweep.evaluator.protocols import ReportTable
    from toolsweep.evaluator.report import mark_partial_tables

    whole = {"model": "m", "benchmark": "b", "setting": "s1", "complete": True, "units_done": 4, "units_expected": 4,
             "terminations": {"answered": 4}}
    part = {**whole, "setting": "s2", "complete": False, "units_done": 1}
    plain = ReportTable(title="Table 1", columns=["model", "x"], rows=[["m", 0.5]], note="paper note")
    marked = ReportTable(title="Table 2", columns=["model", "x"], rows=[["m", "50.00*"]])
    out = mark_partial_tables([plain, marked], [whole, part])
    assert out[0].title == "Table 1 *" and "m / s2 (1/4 units)" in out[0].note and out[0].note.startswith("paper note")
    assert out[1] == marked  # it marks its own numbers
    assert mark_partial_tables([plain], [whole]) == [plain]
