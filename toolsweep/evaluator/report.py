"""The sweep report: a terminal table of cells and a self-contained HTML page.

Both read cell summaries (`stats.cell_summary`): values are unscaled, and `MetricSpec.scale`
says how to show them (100 for percentages). The HTML page has no scripts and no external
resources: charts are inline SVG drawn here, so the file opens anywhere, offline, and every piece
of text in it (model names come from user configs) is escaped.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from toolsweep.evaluator.completeness import PARTIAL_MARK, PARTIAL_NOTE, is_partial, units_text
from toolsweep.evaluator.floor import ABOVE, BELOW, NOT_DISTINGUISHABLE, floor_label, floor_of
from toolsweep.evaluator.floor import finite as _finite
from toolsweep.evaluator.protocols import MetricSpec, ReportTable
from toolsweep.evaluator.stats import min_tasks_for_interval
from toolsweep.evaluator.types import TerminationReason

__all__ = [
    "format_cells_table", "format_headline_table", "render_html_report", "write_html_report", "format_estimate", "convergence_chart",
    "headline_chart", "table_has_data",
]

_REASONS = [r.value for r in TerminationReason]
_MISSING = "—"


# ----------------------------------------------------------------------------- numbers


def _fmt(x: Any, scale: float = 1.0) -> str:
    """A scaled number: one decimal for percentages and large values, three otherwise."""
    v = _finite(x)
    if v is None:
        return _MISSING
    v *= scale
    if v == 0:
        v = 0.0  # no "-0.0"
    return f"{v:.1f}" if scale >= 100 or abs(v) >= 1000 else f"{v:.3f}"


def format_estimate(metric: Mapping[str, Any] | None, scale: float = 1.0) -> str:
    """`value [ci_low, ci_high]`, scaled."""
    if not metric or _finite(metric.get("value")) is None:
        return _MISSING
    lo, hi = _fmt(metric.get("ci_low"), scale), _fmt(metric.get("ci_high"), scale)
    return f"{_fmt(metric['value'], scale)} [{lo}, {hi}]"


def cell_estimate(cell: Mapping[str, Any] | None, spec: MetricSpec) -> str:
    """A cell's `value [low, high]` of one metric, the value marked `*` when the cell is partial (not
    every unit recorded), so a partial estimate is never read as a whole one."""
    text = format_estimate(((cell or {}).get("metrics") or {}).get(spec.name), spec.scale)
    if text == _MISSING or not is_partial(cell or {}):
        return text
    value, _, rest = text.partition(" [")
    return f"{value}{PARTIAL_MARK} [{rest}" if rest else value + PARTIAL_MARK


# ----------------------------------------------------------------------------- the no-LLM floor

FLOOR_MARKS = {ABOVE: "▲", BELOW: "▼", NOT_DISTINGUISHABLE: "≈"}
"""A model's estimate against the floor, in one character beside it."""

FLOOR_WORDS = {ABOVE: "above the floor", BELOW: "below the floor", NOT_DISTINGUISHABLE: "not distinguishable"}


def floor_legend(confidence: float) -> str:
    """What the marks beside an estimate say, once under a table that shows them."""
    return (f"▲ above the no-LLM floor, ▼ below it, ≈ not distinguishable: the paired {100 * confidence:g}% CI "
            "of model − floor on the same tasks and seeds (above = better, by the metric's direction)")


def withheld(diff: Mapping[str, Any] | None) -> bool:
    """A paired difference with a value but no interval: it stood on too few tasks for one
    (`stats.min_tasks_for_interval`), so it has no p-value and decides no floor mark either."""
    d = diff or {}
    no_interval = _finite(d.get("ci_low")) is None or _finite(d.get("ci_high")) is None
    return _finite(d.get("value")) is not None and no_interval


def _tasks_text(diff: Mapping[str, Any] | None) -> str:
    tasks = (diff or {}).get("tasks")
    return "" if tasks is None else f" ({int(tasks)} task{'' if int(tasks) == 1 else 's'})"


TINY_LISTED = 12
"""Withheld comparisons named in a note; the rest are counted."""


def tiny_cells_note(names: Sequence[str], confidence: float) -> str:
    """Why the named comparisons show no interval, p-value or floor mark: the rule, said where it applied."""
    k = min_tasks_for_interval(confidence)
    more = len(names) - TINY_LISTED
    listed = ", ".join(names[:TINY_LISTED]) + (f" and {more} more" if more > 0 else "")
    return (f"no interval, p-value or floor mark on {listed}: fewer than {k} tasks, too few for a "
            f"{100 * confidence:g}% interval (a bootstrap over k tasks draws one task k times with probability "
            f"k^(1−k), more than the {50 * (1 - confidence):g}% tail below {k} tasks, so the interval's ends "
            "would be single tasks' values)")


def _withheld_floor_cells(own: Sequence[Mapping[str, Any]], spec: MetricSpec) -> list[str]:
    """`model / setting (k tasks)` of each cell whose difference from the floor on `spec` is withheld."""
    out = []
    for c in own:
        reading = floor_of(c, spec.name)
        if not c.get("is_floor") and reading is not None and withheld(reading.get("difference")):
            out.append(f"{c['model']} / {c['setting']}{_tasks_text(reading.get('difference'))}")
    return out


def _floor_cell(own: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """A cell of the floor model among a benchmark's cells (it names the floor and its policy)."""
    return next((c for c in own if c.get("is_floor")), None)


def _floor_name(own: Sequence[Mapping[str, Any]]) -> str | None:
    floor = _floor_cell(own)
    return None if floor is None else str(floor["model"])


def _model_label(cell: Mapping[str, Any]) -> str:
    """The model's name; the floor's says it is the floor and which policy plays it."""
    if not cell.get("is_floor"):
        return str(cell["model"])
    return floor_label(str(cell["model"]), ((cell.get("floor") or {}).get("policy")))


def floor_mark(cell: Mapping[str, Any] | None, spec: MetricSpec) -> str:
    """`▲`, `▼` or `≈` for a model's metric against the floor; empty without a judgement."""
    reading = floor_of(cell or {}, spec.name)
    return FLOOR_MARKS.get(str((reading or {}).get("judgement")), "")


def _difference_text(reading: Mapping[str, Any] | None, spec: MetricSpec) -> str:
    """model − floor as `+12.0 [8.0, 16.0]` (scaled), or `—`."""
    diff = (reading or {}).get("difference")
    text = format_estimate(diff, spec.scale)
    if text == _MISSING:
        return text
    v = _finite((diff or {}).get("value"))
    return ("+" + text) if v is not None and v * spec.scale > 0 and not text.startswith("+") else text


def _versus_floor(cell: Mapping[str, Any], spec: MetricSpec) -> str:
    """`▲ +12.0 [8.0, 16.0]` (model − floor, with its mark) for a model; `(the floor)` for the floor's own cell."""
    if cell.get("is_floor"):
        return "(the floor)"
    reading = floor_of(cell, spec.name)
    if reading is not None and withheld(reading.get("difference")):
        return f"{_MISSING} too few tasks{_tasks_text(reading.get('difference'))}"
    if reading is None or reading.get("judgement") is None:
        return _MISSING
    return f"{FLOOR_MARKS[reading['judgement']]} {_difference_text(reading, spec)}"


def _units_cell(cell: Mapping[str, Any]) -> str:
    """`done/expected` units, `*` when partial, with the units given up: `87/100* (3 given up)`."""
    if "units_expected" not in cell:
        return ""
    text = f"{cell.get('units_done', 0)}/{cell['units_expected']}"
    if not is_partial(cell):
        return text
    given_up = int(cell.get("units_given_up") or 0)
    return text + PARTIAL_MARK + (f" ({given_up} given up)" if given_up else "")


def _ordered_models(own: Sequence[Mapping[str, Any]]) -> list[str]:
    """The benchmark's models by name, the floor first: it is the reference, not a contender."""
    floor = _floor_name(own)
    rest = sorted({str(c["model"]) for c in own} - {floor})
    return ([floor] if floor is not None else []) + rest


def _missing_lines(missing: Sequence[Mapping[str, Any]], benchmark: str) -> list[str]:
    """The benchmark's cells with no unit recorded, one line."""
    own = [m for m in missing if str(m.get("benchmark")) == benchmark]
    if not own:
        return []
    return ["no unit recorded yet: " + "; ".join(
        f"{m['model']} / {m['setting']} (0/{m.get('units_expected', '?')} units"
        + (f", {m['units_given_up']} given up" if m.get("units_given_up") else "") + ")" for m in own)]


def _missing_blocks(cells: Sequence[Mapping[str, Any]], missing: Sequence[Mapping[str, Any]]) -> list[str]:
    """A block for each benchmark none of whose cells has a unit recorded yet."""
    shown = {str(c["benchmark"]) for c in cells}
    return [f"== {b}\n" + "\n".join(_missing_lines(missing, b))
            for b in sorted({str(m["benchmark"]) for m in missing} - shown)]


def _reasons_in(cells: Iterable[Mapping[str, Any]]) -> list[str]:
    """Termination reasons that occur, in the enum's order, unknown ones after."""
    seen = {r for c in cells for r, k in (c.get("terminations") or {}).items() if k}
    return [r for r in _REASONS if r in seen] + sorted(seen - set(_REASONS))


def _terminations_text(terminations: Mapping[str, int] | None) -> str:
    t = terminations or {}
    order = [r for r in _REASONS if t.get(r)] + sorted(r for r in t if r not in _REASONS and t[r])
    return " ".join(f"{r}={t[r]}" for r in order) or _MISSING


def _by_benchmark(cells: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = {}
    for c in sorted(cells, key=lambda c: (str(c["benchmark"]), str(c["setting"]), str(c["model"]))):
        out.setdefault(str(c["benchmark"]), []).append(c)
    return out


def _metric_specs(
    benchmark: str,
    cells: Sequence[Mapping[str, Any]],
    specs_by_benchmark: Mapping[str, Sequence[MetricSpec]],
) -> list[MetricSpec]:
    """The benchmark's metrics that appear in its cells, in the benchmark's order; metrics the
    cells carry without a spec are shown unscaled after them."""
    present: list[str] = []
    for c in cells:
        for name in c.get("metrics") or {}:
            if name not in present:
                present.append(name)
    specs = [s for s in specs_by_benchmark.get(benchmark, []) if s.name in present]
    known = {s.name for s in specs}
    return specs + [MetricSpec(name=n) for n in present if n not in known]


def headline_metric_names(
    cells: Sequence[Mapping[str, Any]], specs_by_benchmark: Mapping[str, Sequence[MetricSpec]]
) -> dict[str, str]:
    """Each benchmark's headline metric: its first metric that its cells carry. One name per benchmark,
    used by the terminal summary, report.html, `compare` and MLflow alike (summary.json keeps it), so a
    setting whose own first metric differs (APB's `broken`: replace) is not shown under another name."""
    out: dict[str, str] = {}
    for benchmark, own in _by_benchmark(cells).items():
        specs = _metric_specs(benchmark, own, specs_by_benchmark)
        if specs:
            out[benchmark] = specs[0].name
    return out


def _header(spec: MetricSpec) -> str:
    return f"{spec.name} (%)" if spec.scale == 100 else spec.name


# ----------------------------------------------------------------------------- text table


def _text_table(header: list[str], rows: list[list[str]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(r: list[str]) -> str:
        cells = [v.rjust(w) if i in right else v.ljust(w) for i, (v, w) in enumerate(zip(r, widths))]
        return "  ".join(cells).rstrip()

    return [line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]


TERMINAL_METRICS = 6
"""Metrics per benchmark in the terminal table (benchmarks list their headline metrics first); the
rest are in summary.json and report.html. More would not fit a terminal."""


def format_cells_table(
    cells: Sequence[Mapping[str, Any]],
    specs_by_benchmark: Mapping[str, Sequence[MetricSpec]],
    max_metrics: int | None = TERMINAL_METRICS,
    confidence: float = 0.95,
    missing: Sequence[Mapping[str, Any]] = (),
) -> str:
    """A plain-text table per benchmark: one row per (model, setting) cell with n, the headline
    metrics as `value [low, high]` (scaled), and the termination counts; a first line says what the
    brackets are. With a floor in the sweep, a column says where each model's headline metric stands
    against it (model − floor, paired); a partial cell's values are marked `*` and its units shown.
    `missing`: the cells with no unit recorded (summary.json's `cells_missing`)."""
    if not cells:
        return "no finished episodes yet"
    blocks = [interval_legend(confidence)]
    for benchmark, own in _by_benchmark(cells).items():
        specs = _metric_specs(benchmark, own, specs_by_benchmark)
        hidden = len(specs) - max_metrics if max_metrics is not None and len(specs) > max_metrics else 0
        if hidden:
            specs = specs[:max_metrics]
        floor = _floor_name(own) is not None and bool(specs)
        partial = any(is_partial(c) for c in own)
        header = ["model", "setting", "n", *(["units"] if partial else []), *(_header(s) for s in specs),
                  *([f"{specs[0].name} − floor"] if floor else []), "terminations"]
        rows = [
            [
                _model_label(c),
                str(c["setting"]),
                str(c.get("n", "")),
                *([_units_cell(c)] if partial else []),
                *(cell_estimate(c, s) for s in specs),
                *([_versus_floor(c, specs[0])] if floor else []),
                _terminations_text(c.get("terminations")),
            ]
            for c in own
        ]
        right = set(range(2, 3 + int(partial) + len(specs) + int(floor)))
        note = [f"(+{hidden} more metrics in summary.json and report.html)"] if hidden else []
        if floor:
            note.append(floor_legend(confidence))
            tiny = _withheld_floor_cells(own, specs[0])
            if tiny:
                note.append(tiny_cells_note(tiny, confidence))
        if partial:
            note.append(PARTIAL_NOTE)
        note += _missing_lines(missing, benchmark)
        blocks.append("\n".join([f"== {benchmark}", *_text_table(header, rows, right), *note]))
    return "\n\n".join(blocks + _missing_blocks(cells, missing))


def interval_legend(confidence: float) -> str:
    """What `value [low, high]` means, said once above a terminal table."""
    return f"value [low, high] = the estimate and its {100 * confidence:g}% CI (bootstrap over tasks)"


TERMINAL_MODELS = 4
"""Model columns per block of the end-of-run summary (each ~22 characters): more get another block."""


def format_headline_table(
    cells: Sequence[Mapping[str, Any]], specs_by_benchmark: Mapping[str, Sequence[MetricSpec]],
    confidence: float = 0.95, missing: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The end-of-run summary: per benchmark its headline metric (its first), settings down and models
    across as `value [low, high]`; short and narrow enough for a terminal. The floor, when the sweep
    has one, is the first column and every model's estimate carries its mark against it (▲ ▼ ≈); a
    partial cell's value is marked `*` with its units. Every metric, the paper tables and the
    terminations are in report.html and `toolsweep report --full`."""
    if not cells:
        return "no finished episodes yet"
    blocks = [interval_legend(confidence)]
    for benchmark, own in _by_benchmark(cells).items():
        specs = _metric_specs(benchmark, own, specs_by_benchmark)
        if not specs:
            continue
        spec = specs[0]
        settings = list(dict.fromkeys(str(c["setting"]) for c in own))
        models = _ordered_models(own)
        by_cell = {(str(c["setting"]), str(c["model"])): c for c in own}
        labels = {str(c["model"]): _model_label(c) for c in own}
        episodes = sum(int(c.get("n") or 0) for c in own)
        arrow = _direction_words(spec)
        lines = [f"== {benchmark}: {_header(spec)}, {arrow} ({episodes} episodes)"]

        def entry(s: str, m: str) -> str:
            c = by_cell.get((s, m))
            text = cell_estimate(c, spec)
            mark = floor_mark(c, spec)
            units = units_text(c or {})
            return text + (f" {mark}" if mark else "") + (f" ({units})" if units else "")

        for i in range(0, len(models), TERMINAL_MODELS):
            chunk = models[i : i + TERMINAL_MODELS]
            rows = [[s, *(entry(s, m) for m in chunk)] for s in settings]
            lines += _text_table(["setting", *(labels[m] for m in chunk)], rows, set(range(1, 1 + len(chunk))))
        if _floor_name(own) is not None:
            lines.append(floor_legend(confidence))
            tiny = _withheld_floor_cells(own, spec)
            if tiny:
                lines.append(tiny_cells_note(tiny, confidence))
        if any(is_partial(c) for c in own):
            lines.append(PARTIAL_NOTE)
        lines += _missing_lines(missing, benchmark)
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks + _missing_blocks(cells, missing))


# ----------------------------------------------------------------------------- SVG

_PALETTE = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
]
_REASON_COLORS = {
    "answered": "#59a14f",
    "max_turns": "#edc948",
    "agent_format_error": "#f28e2b",
    "context_exceeded": "#b07aa1",
    "timeout": "#9c755f",
    "env_error": "#e15759",
    "infra_error": "#7f7f7f",
}


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _short(label: str, n: int = 22) -> str:
    return label if len(label) <= n else label[: n - 1] + "…"


def _nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round tick values covering [lo, hi]."""
    span = hi - lo
    raw = span / max(1, n - 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    ticks = []
    t = first
    while t <= hi + step * 1e-9:
        ticks.append(round(t, 10))
        t += step
    if ticks[-1] < hi:
        ticks.append(round(t, 10))
    return ticks


def _legend(
    items: list[tuple[str, str]], x0: float, y0: float, max_width: float
) -> tuple[list[str], float]:
    """Legend swatches laid out in rows; returns the SVG parts and the height used."""
    parts, x, y = [], x0, y0
    for label, color in items:
        text = _short(label, 28)
        w = 18 + 7 * len(text)
        if x > x0 and x + w > x0 + max_width:
            x, y = x0, y + 16
        parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="10" height="10" fill="{color}"/>')
        parts.append(f'<text x="{x + 14:.1f}" y="{y + 9:.1f}">{_e(text)}<title>{_e(label)}</title></text>')
        x += w + 10
    return parts, (y - y0) + 16


def _bar_chart(
    title: str,
    groups: list[str],
    series: list[str],
    values: Mapping[tuple[str, str], tuple[float, float | None, float | None]],
) -> str:
    """Horizontal grouped bars (a row per group = setting, a bar per series = model) with CI whiskers,
    as inline SVG: any number of settings stays legible, each label on its own line."""
    left, right, plot_w, bar_h, gap = 180, 16, 420, 9, 8
    width = left + plot_w + right
    colors = {s: _PALETTE[i % len(_PALETTE)] for i, s in enumerate(series)}
    legend, legend_h = _legend([(s, colors[s]) for s in series], 8, 24, width - 16)
    top = 24 + legend_h + 14
    row_h = max(1, len(series)) * bar_h + gap
    bottom = top + len(groups) * row_h
    height = bottom + 8

    finite = [v for triple in values.values() for v in triple if v is not None and math.isfinite(v)]
    lo = min([0.0, *finite])
    hi = max([0.0, *finite])
    if hi - lo < 1e-12:
        hi = lo + 1.0
    ticks = _nice_ticks(lo, hi)
    lo, hi = min(lo, ticks[0]), max(hi, ticks[-1])

    def x(v: float) -> float:
        return left + (v - lo) / (hi - lo) * plot_w

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e(title)}">',
        f'<text class="title" x="8" y="16">{_e(title)}</text>',
        *legend,
    ]
    for t in ticks:
        parts.append(
            f'<line class="grid" x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{top - 4}" y2="{bottom}"/>'
            f'<text class="tick" x="{x(t):.1f}" y="{top - 6}" text-anchor="middle">{_e(_tick(t))}</text>'
        )
    parts.append(f'<line class="axis" x1="{x(0):.1f}" x2="{x(0):.1f}" y1="{top - 4}" y2="{bottom}"/>')
    for gi, g in enumerate(groups):
        gy = top + gi * row_h + gap / 2
        parts.append(
            f'<text class="label" x="{left - 6}" y="{gy + len(series) * bar_h / 2 + 4:.1f}" text-anchor="end">'
            f"{_e(_short(g, 28))}<title>{_e(g)}</title></text>"
        )
        for si, s in enumerate(series):
            v, ci_lo, ci_hi = values.get((g, s), (math.nan, None, None))
            if v is None or not math.isfinite(v):
                continue
            has_ci = ci_lo is not None and ci_hi is not None
            y = gy + si * bar_h
            x0, x1 = sorted((x(0.0), x(v)))
            tip = f"{s} · {g}: {_tick(v)}"
            if has_ci:
                tip += f" [{_tick(ci_lo)}, {_tick(ci_hi)}]"
            parts.append(
                f'<rect x="{x0:.1f}" y="{y + 1:.1f}" width="{max(x1 - x0, 0.5):.1f}" height="{bar_h - 2}" '
                f'fill="{colors[s]}"><title>{_e(tip)}</title></rect>'
            )
            if has_ci:
                cy = y + bar_h / 2
                parts.append(
                    f'<path class="whisker" d="M{x(ci_lo):.1f},{cy:.1f}H{x(ci_hi):.1f}'
                    f'M{x(ci_lo):.1f},{cy - 3:.1f}v6M{x(ci_hi):.1f},{cy - 3:.1f}v6"/>'
                )
    parts.append("</svg>")
    return "".join(parts)


def _tick(v: float) -> str:
    return f"{v:.4g}"


def _termination_chart(rows: list[tuple[str, Mapping[str, int]]], reasons: list[str]) -> str:
    """One stacked horizontal bar per cell: the share of each termination reason."""
    left, width, bar_h = 200, 640, 14
    colors = {r: _REASON_COLORS.get(r, _PALETTE[i % len(_PALETTE)]) for i, r in enumerate(reasons)}
    legend, legend_h = _legend([(r, colors[r]) for r in reasons], 8, 8, width - 16)
    top = 8 + legend_h + 6
    height = top + len(rows) * (bar_h + 6) + 6
    plot_w = width - left - 12
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="termination reasons">',
        *legend,
    ]
    for i, (label, counts) in enumerate(rows):
        y = top + i * (bar_h + 6)
        parts.append(
            f'<text class="label" x="{left - 6}" y="{y + 11}" text-anchor="end">{_e(_short(label, 30))}'
            f"<title>{_e(label)}</title></text>"
        )
        total = sum(int(counts.get(r, 0)) for r in reasons)
        x = float(left)
        for r in reasons:
            k = int(counts.get(r, 0))
            if not k or not total:
                continue
            w = plot_w * k / total
            parts.append(
                f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{colors[r]}">'
                f"<title>{_e(f'{label}: {r} {k} of {total}')}</title></rect>"
            )
            x += w
    parts.append("</svg>")
    return "".join(parts)


def _y_range(values: Sequence[float], spec: MetricSpec | None) -> tuple[float, float]:
    """The y range of a convergence chart: the data's, padded when flat, never past a fraction's [0, 1]
    (scaled: [0, 100])."""
    lo, hi = min(values), max(values)
    if hi - lo < 1e-12:
        pad = 0.05 * (abs(lo) or 1.0)
        lo, hi = lo - pad, hi + pad
    if spec is not None and spec.scale == 100:  # a percentage of a [0, 1] fraction
        lo, hi = max(lo, 0.0), min(hi, 100.0)
        if hi - lo < 1e-12:
            lo, hi = (max(0.0, hi - 10.0), hi) if hi > 0 else (0.0, 10.0)
    return lo, hi


def convergence_chart(label: str, points: Sequence[Any], spec: MetricSpec | None = None) -> str:
    """The estimate and its interval against episodes done, scaled for display by the metric's spec."""
    scale = spec.scale if spec is not None else 1.0
    pts = []
    for p in points:
        if isinstance(p, Mapping):
            n, v, lo, hi = p.get("n"), p.get("value"), p.get("ci_low"), p.get("ci_high")
        else:
            n, v, lo, hi = (list(p) + [None] * 4)[:4]
        if _finite(n) is not None and _finite(v) is not None:
            lo_, hi_ = _finite(lo), _finite(hi)
            pts.append((float(n), float(v) * scale, None if lo_ is None else lo_ * scale,
                        None if hi_ is None else hi_ * scale))
    pts.sort()
    title = label if spec is None or spec.scale != 100 else f"{label} (%)"
    width, height, left, top, plot_w, plot_h = 420, 210, 52, 26, 350, 150
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e(title)}">',
        f'<text class="title" x="{left}" y="16">{_e(_short(title, 60))}<title>{_e(title)}</title></text>',
    ]
    if pts:
        xs = [p[0] for p in pts]
        x_lo, x_hi = min(xs), max(xs)
        if x_hi == x_lo:
            x_hi = x_lo + 1
        y_ticks = _nice_ticks(*_y_range([v for p in pts for v in p[1:] if v is not None], spec))
        y_lo, y_hi = y_ticks[0], y_ticks[-1]

        def px(n: float) -> float:
            return left + (n - x_lo) / (x_hi - x_lo) * plot_w

        def py(v: float) -> float:
            return top + plot_h - (v - y_lo) / (y_hi - y_lo) * plot_h

        for t in y_ticks:
            parts.append(
                f'<line class="grid" x1="{left}" x2="{left + plot_w}" y1="{py(t):.1f}" y2="{py(t):.1f}"/>'
                f'<text class="tick" x="{left - 4}" y="{py(t) + 3:.1f}" text-anchor="end">{_e(_tick(t))}</text>'
            )
        band = [p for p in pts if p[2] is not None and p[3] is not None]
        if band:
            poly = [f"{px(p[0]):.1f},{py(p[3]):.1f}" for p in band]
            poly += [f"{px(p[0]):.1f},{py(p[2]):.1f}" for p in reversed(band)]
            parts.append(f'<polygon class="band" points="{" ".join(poly)}"/>')
        line = " ".join(f"{px(p[0]):.1f},{py(p[1]):.1f}" for p in pts)
        parts.append(f'<polyline class="estimate" points="{line}"/>')
        parts.append(
            f'<text class="tick" x="{left}" y="{top + plot_h + 16}">{_e(_tick(x_lo))}</text>'
            f'<text class="tick" x="{left + plot_w}" y="{top + plot_h + 16}" text-anchor="end">'
            f"{_e(_tick(x_hi))} episodes</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


# ----------------------------------------------------------------------------- HTML

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;
max-width:1440px;padding:0 16px;color:#222;line-height:1.4}
h1{margin-bottom:4px}h2{border-bottom:2px solid #ddd;padding-bottom:4px;margin-top:36px}
h3{margin-top:24px}
.scroll{max-width:100%;overflow-x:auto}
table{border-collapse:collapse;margin:8px 0 16px;font-size:14px}
th,td{border:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top;overflow-wrap:break-word;min-width:3em}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.better-a{color:#1a7f37}td.better-b{color:#9a3412}
td.floor-above{color:#1a7f37}td.floor-below{color:#9a3412}td.floor-same{color:#555}
td.floor{background:#f7f7f2;font-style:italic}td.partial{background:#fff8e1}
dl.meta{display:grid;grid-template-columns:max-content auto;gap:2px 16px;font-size:14px}
dl.meta dt{font-weight:600}dl.meta dd{margin:0;overflow-wrap:anywhere}
.note{color:#555;font-size:13px}.charts{display:flex;flex-wrap:wrap;gap:16px}
.side{display:flex;flex-wrap:wrap;gap:24px;align-items:flex-start}.side>div{max-width:100%}
details{margin:8px 0}details>summary{cursor:pointer;font-weight:600}
details details{margin-left:16px}details details>summary{font-weight:400}
svg.chart{font-size:11px;background:#fff;border:1px solid #eee;max-width:100%;height:auto}
svg .title{font-weight:600;font-size:12px}svg .grid{stroke:#eee}svg .axis{stroke:#888}
svg .tick{fill:#666}svg .whisker{stroke:#222;stroke-width:1.2;fill:none}
svg .band{fill:#4e79a7;opacity:.2}svg .estimate{fill:none;stroke:#4e79a7;stroke-width:1.5}
pre{background:#f7f7f7;padding:8px;overflow:auto;font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere}
nav ul{display:flex;flex-wrap:wrap;gap:4px 16px;list-style:none;padding:0}
"""

MODELS_PER_TABLE = 6
"""Model columns per table in the summary and in the per-setting metric tables: more would not fit a
1600-px window; a sweep with more models gets several tables."""

CONVERGENCE_SHOWN = 12
"""Convergence charts shown open; the rest of the cells whose estimate moved are behind a toggle."""

_EMPTY_VALUES = {"", "n/a", "na", "nan", "none", "—", "-", "–"}


def _td(cell: Sequence[str]) -> str:
    """(text, css class) or (text, css class, tooltip) as a table cell, all escaped."""
    v, cls = cell[0], cell[1]
    attrs = (f' class="{_e(cls)}"' if cls else "") + (f' title="{_e(cell[2])}"' if len(cell) > 2 and cell[2] else "")
    return f"<td{attrs}>{'<br>'.join(_e(line) for line in str(v).split(chr(10)))}</td>"


def _html_table(header: Sequence[str], rows: Iterable[Sequence[Sequence[str]]]) -> str:
    """Rows of (text, css class) pairs, or (text, css class, tooltip) triples; all text escaped; wide
    tables scroll inside their box, never the page."""
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(_td(c) for c in r) + "</tr>" for r in rows)
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _details(summary: str, body: str, open_: bool = False) -> str:
    return f"<details{' open' if open_ else ''}><summary>{_e(summary)}</summary>{body}</details>"


def _anchor(name: str) -> str:
    return "b-" + (re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-") or "x")


def _chunks(items: Sequence[str], size: int) -> list[list[str]]:
    return [list(items[i : i + size]) for i in range(0, len(items), size)] or [[]]


def _meta(manifest: Mapping[str, Any]) -> str:
    config = manifest.get("config") if isinstance(manifest.get("config"), Mapping) else {}
    items: list[tuple[str, Any]] = [
        ("run id", manifest.get("run_id")),
        ("created", manifest.get("created_at")),
        ("config sha256", manifest.get("config_sha256")),
        ("git sha", manifest.get("git_sha")),
        ("seeds", (config or {}).get("seeds")),
    ]
    versions = manifest.get("versions")
    if isinstance(versions, Mapping):
        items.append(("versions", ", ".join(f"{k} {v}" for k, v in versions.items() if v)))
    benches = manifest.get("benchmarks")
    if isinstance(benches, Mapping):
        items.append(
            (
                "benchmarks",
                ", ".join(
                    f"{k} {v.get('version', '')}".strip() if isinstance(v, Mapping) else f"{k} {v}"
                    for k, v in benches.items()
                ),
            )
        )
    return '<dl class="meta">' + "".join(
        f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in items if v not in (None, "", [], {})
    ) + "</dl>"


def _verdict(p: Mapping[str, Any], spec: MetricSpec | None) -> tuple[str, str]:
    """Which model the interval says is better, by the metric's direction (A − B > 0 is "A better"
    only when higher is better)."""
    lo, hi = _finite(p.get("ci_low")), _finite(p.get("ci_high"))
    if lo is None or hi is None:
        return "", ""
    if lo <= 0 <= hi:
        return "CI covers 0", ""
    a_higher = lo > 0
    if spec is not None and spec.higher_is_better is None:  # descriptive: which is larger, not which is better
        return ("A larger", "") if a_higher else ("B larger", "")
    a_better = a_higher if (spec is None or spec.higher_is_better) else not a_higher
    direction = "" if spec is None or spec.higher_is_better else " (lower is better)"
    return ("A better" + direction, "better-a") if a_better else ("B better" + direction, "better-b")


def _paired_table(
    paired: Sequence[Mapping[str, Any]], specs: Mapping[str, MetricSpec], level: str,
    labels: Mapping[str, str] | None = None,
) -> str:
    """`labels`: display names of models (the floor's says it is the floor)."""
    labels = labels or {}
    rows, tiny = [], []
    for p in paired:
        spec = specs.get(str(p.get("metric")))
        verdict, cls = _verdict(p, spec)
        if withheld(p):
            verdict = "too few tasks" + _tasks_text(p)
            name = lambda m: labels.get(str(p.get(m, "")), str(p.get(m, "")))  # noqa: E731
            tiny.append(f"{p.get('setting', '')} {p.get('metric', '')}: {name('model_a')} − {name('model_b')}"
                        + _tasks_text(p))
        rows.append(
            [
                (str(p.get("setting", "")), ""),
                (str(p.get("metric", "")), ""),
                (labels.get(str(p.get("model_a", "")), str(p.get("model_a", ""))), ""),
                (labels.get(str(p.get("model_b", "")), str(p.get("model_b", ""))), ""),
                (str(p.get("n", "")), "num"),
                (format_estimate(p, spec.scale if spec else 1.0), f"num {cls}".strip()),
                (verdict, cls),
            ]
        )
    table = _html_table(["setting", "metric", "model A", "model B", "pairs", f"A − B [{level}]", ""], rows)
    return table + (f'<p class="note">{_e(tiny_cells_note(tiny, _confidence(level)))}.</p>' if tiny else "")


def _table_cell(v: Any) -> tuple[str, str]:
    """A paper-table value: numbers right-aligned, one decimal from 10 up, three below."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v), ""
    if isinstance(v, int):
        return str(v), "num"
    if not math.isfinite(v):
        return _MISSING, "num"
    return (f"{v:.1f}" if abs(v) >= 10 else f"{v:.3f}"), "num"


def _has_data(value: Any) -> bool:
    """A table entry that carries a number (a finite number, or text that starts with one, e.g.
    "41.3 ±2.0")."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return math.isfinite(value)
    text = str(value).strip().lower()
    return text not in _EMPTY_VALUES and bool(re.match(r"[-+]?(\d|\.\d)", text))


def table_has_data(table: ReportTable) -> bool:
    """Whether a paper table shows anything: rows, with a number somewhere past the row label."""
    return any(_has_data(v) for row in table.rows for v in row[1:])


WIDE_TABLE_COLUMNS = 12
"""A paper table with more columns than this does not read at 1600 px (ToolMaze's Tables 21-22 have 53):
with few rows it is shown transposed (a row per column), else split into parts of this many columns,
each repeating the row labels."""


def _marks_partial_values(table: ReportTable) -> bool:
    """Whether a table marks its own numbers `*` (ToolMaze's do, value by value)."""
    return any(str(v).rstrip().endswith(PARTIAL_MARK) for row in table.rows for v in row[1:])


def mark_partial_tables(tables: Sequence[ReportTable], cells: Sequence[Mapping[str, Any]]) -> list[ReportTable]:
    """A paper table built from partial cells says so: one that does not mark its numbers itself gets
    `*` on its title and a note naming the partial cells, so no table shows a partial number as whole."""
    partial = [c for c in cells if is_partial(c)]
    if not partial:
        return list(tables)
    names = ", ".join(f"{c['model']} / {c['setting']} ({units_text(c)})" for c in partial[:6])
    more = f" and {len(partial) - 6} more" if len(partial) > 6 else ""
    out = []
    for t in tables:
        if _marks_partial_values(t):
            out.append(t)
            continue
        note = f"{PARTIAL_MARK} built from partial cells: {names}{more}. {PARTIAL_NOTE.split(': ', 1)[1]}"
        out.append(t.model_copy(update={"title": f"{t.title} {PARTIAL_MARK}", "note": f"{t.note} {note}".strip()}))
    return out


def _report_table_html(table: ReportTable) -> str:
    header = [str(c) for c in table.columns]
    rows = [[_table_cell(v) for v in r] for r in table.rows]
    note = f'<p class="note">{_e(table.note)}</p>' if table.note else ""
    if len(header) <= WIDE_TABLE_COLUMNS + 1 or not rows:
        return f"<h4>{_e(table.title)}</h4>{_html_table(header, rows)}{note}"
    if len(rows) <= WIDE_TABLE_COLUMNS:
        labels = [text for text, _ in (r[0] for r in rows)]
        flipped = [[(header[j], ""), *(r[j] if j < len(r) else ("", "") for r in rows)] for j in range(1, len(header))]
        how = f'<p class="note">Transposed to read on a screen: a row per column of the paper\'s table ({len(header) - 1}).</p>'
        return f"<h4>{_e(table.title)}</h4>{how}{_html_table([header[0], *labels], flipped)}{note}"
    parts = []
    for start in range(1, len(header), WIDE_TABLE_COLUMNS):
        cols = [0, *range(start, min(start + WIDE_TABLE_COLUMNS, len(header)))]
        parts.append(_html_table([header[j] for j in cols], [[r[j] if j < len(r) else ("", "") for j in cols] for r in rows]))
    how = f'<p class="note">Split to read on a screen: {len(parts)} parts of at most {WIDE_TABLE_COLUMNS} columns.</p>'
    return f"<h4>{_e(table.title)}</h4>{how}{''.join(parts)}{note}"


def _paper_tables(tables: Sequence[ReportTable]) -> str:
    """The tables with data, in order; the names of those without (a setting the sweep did not run,
    a correlation across fewer than three models) in one line, not as header-only tables."""
    shown = [t for t in tables if table_has_data(t)]
    empty = [t.title for t in tables if not table_has_data(t)]
    parts = [_report_table_html(t) for t in shown]
    if empty:
        parts.append(
            '<p class="note">Not shown, no data in this run: ' + "; ".join(_e(t) for t in empty) + ".</p>"
        )
    return "".join(parts)


def _as_table(t: ReportTable | Mapping[str, Any]) -> ReportTable:
    return t if isinstance(t, ReportTable) else ReportTable.model_validate(t)


def _headline_values(
    own: Sequence[Mapping[str, Any]], spec: MetricSpec
) -> dict[tuple[str, str], tuple[float, float | None, float | None]]:
    """(setting, model) -> the metric's value and interval, scaled for display."""
    values = {}
    for c in own:
        m = (c.get("metrics") or {}).get(spec.name) or {}
        v = _finite(m.get("value"))
        if v is None:
            continue
        lo, hi = _finite(m.get("ci_low")), _finite(m.get("ci_high"))
        values[(str(c["setting"]), str(c["model"]))] = (
            v * spec.scale,
            None if lo is None else lo * spec.scale,
            None if hi is None else hi * spec.scale,
        )
    return values


def _settings_and_models(own: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[str]]:
    settings = list(dict.fromkeys(str(c["setting"]) for c in own))
    return settings, _ordered_models(own)


_FLOOR_CLASS = {ABOVE: "floor-above", BELOW: "floor-below", NOT_DISTINGUISHABLE: "floor-same"}


def _estimate_td(cell: Mapping[str, Any] | None, spec: MetricSpec) -> tuple[str, str, str]:
    """A model's estimate as a table cell: `value [low, high]`, its mark against the floor (▲ ▼ ≈, the
    difference in the tooltip), `*` and the units when the cell is partial; the floor's own cells shaded."""
    if cell is None:
        return _MISSING, "num", ""
    text = cell_estimate(cell, spec)
    classes, tips = ["num"], []
    reading = floor_of(cell, spec.name)
    judgement = (reading or {}).get("judgement")
    if judgement in FLOOR_MARKS:
        text += f" {FLOOR_MARKS[judgement]}"
        classes.append(_FLOOR_CLASS[judgement])
        floor_text = format_estimate((reading or {}).get("floor"), spec.scale)
        tips.append(f"{FLOOR_WORDS[judgement]}: model − floor = {_difference_text(reading, spec)} "
                    f"(paired, same tasks and seeds); floor {floor_text}")
    if cell.get("is_floor"):
        classes.append("floor")
        tips.append("the no-LLM floor (the benchmark's baseline policy), not a contender")
    if is_partial(cell):
        text += f" ({units_text(cell)})"
        classes.append("partial")
        tips.append("partial cell: " + PARTIAL_NOTE.removeprefix("* partial cell: "))
    # the value and its mark on one line, the interval (and units) under it: six models and a floor
    # side by side then fit a 1600-px window
    value, _, rest = text.partition(" [")
    if rest:
        interval, _, after = rest.partition("]")
        mark = next((f" {m}" for m in FLOOR_MARKS.values() if after.startswith(f" {m}")), "")
        text = f"{value}{mark}\n[{interval}]{after[len(mark):]}"
    return text, " ".join(classes), "; ".join(tips)


def _confidence(level: str) -> float:
    """The confidence of a level such as "95% CI"."""
    return (_finite(level.split("%")[0]) or 95.0) / 100


def _table_notes(own: Sequence[Mapping[str, Any]], level: str, missing: Sequence[Mapping[str, Any]] = (),
                 benchmark: str = "", spec: MetricSpec | None = None) -> str:
    """The legend of the floor marks and the partial mark, when a table shows them, the cells whose
    difference from the floor on `spec` was withheld (too few tasks) and the cells with no unit recorded."""
    lines = []
    if _floor_name(own) is not None:
        lines.append(floor_legend(_confidence(level)))
        tiny = _withheld_floor_cells(own, spec) if spec is not None else []
        if tiny:
            lines.append(tiny_cells_note(tiny, _confidence(level)))
    if any(is_partial(c) for c in own):
        lines.append(PARTIAL_NOTE)
    lines += _missing_lines(missing, benchmark)
    return "".join(f'<p class="note">{_e(line)}.</p>' for line in lines)


def _arrow(spec: MetricSpec) -> str:
    return {True: "↑", False: "↓"}.get(spec.higher_is_better, "")


def _direction_words(spec: MetricSpec) -> str:
    return {True: "higher is better", False: "lower is better"}.get(spec.higher_is_better, "descriptive, no better direction")


def _lower_note(spec: MetricSpec) -> str:
    return " (lower is better)" if spec.higher_is_better is False else ""


def headline_chart(benchmark: str, own: Sequence[Mapping[str, Any]], spec: MetricSpec, level: str) -> str:
    """The benchmark's headline metric per setting and model, with intervals (inline SVG)."""
    settings, models = _settings_and_models(own)
    return _bar_chart(
        f"{benchmark}: {_header(spec)} {_arrow(spec)} ({level})", settings, models, _headline_values(own, spec)
    )


def _summary_section(
    grouped: Mapping[str, Sequence[Mapping[str, Any]]],
    specs_by_benchmark: Mapping[str, Sequence[MetricSpec]],
    level: str,
    missing: Sequence[Mapping[str, Any]] = (),
) -> str:
    """Each benchmark's headline metric: settings down, models across (the floor first), value
    [interval] with each model's mark against the floor and partial cells marked."""
    parts = ['<section id="summary"><h2>Summary</h2>']
    for benchmark, own in grouped.items():
        specs = _metric_specs(benchmark, own, specs_by_benchmark)
        if not specs:
            continue
        spec = specs[0]
        settings, models = _settings_and_models(own)
        by_cell = {(str(c["setting"]), str(c["model"])): c for c in own}
        episodes = sum(int(c.get("n") or 0) for c in own)
        parts.append(
            f'<h3><a href="#{_anchor(benchmark)}">{_e(benchmark)}</a>: {_e(_header(spec))} {_arrow(spec)}</h3>'
            f'<p class="note">{episodes} episodes in {len(own)} cells; {level}.'
            + (f" {_e(spec.description)}." if spec.description else "")
            + "</p>"
        )
        labels = {str(c["model"]): _model_label(c) for c in own}
        tables = []
        for chunk in _chunks(models, MODELS_PER_TABLE):
            rows = [[(s, "")] + [_estimate_td(by_cell.get((s, m)), spec) for m in chunk] for s in settings]
            tables.append(_html_table(["setting", *(labels.get(m, m) for m in chunk)], rows))
        notes = _table_notes(own, level, missing, benchmark, spec)
        parts.append(f'<div class="side"><div>{"".join(tables)}</div>{headline_chart(benchmark, own, spec, level)}</div>{notes}')
    parts.append("</section>")
    return "".join(parts)


def _units_td(cell: Mapping[str, Any]) -> tuple[str, str]:
    """`done/expected` units of a cell (marked when partial), or blank when the summary does not know."""
    return _units_cell(cell), "num partial" if is_partial(cell) else "num"


def _cells_section(own: Sequence[Mapping[str, Any]], specs: list[MetricSpec], level: str,
                   missing: Sequence[Mapping[str, Any]] = (), benchmark: str = "") -> str:
    """The cells with the benchmark's first metrics open (and, with a floor, the headline metric against
    it); every metric by setting, every metric against the floor, the variance decomposition, the
    charts and the termination reasons behind toggles."""
    floor = _floor_name(own) is not None and bool(specs)
    # the column against the floor takes a metric's place: ten columns are what a 1600-px window holds
    shown = specs[: TERMINAL_METRICS - int(floor)]
    units = any(is_partial(c) for c in own)  # whole cells need no column: n says it
    header = ["model", "setting", "n", *(["units"] if units else []), *(_header(s) for s in shown),
              *([f"{shown[0].name} − floor"] if floor else [])]
    rows = []
    for c in own:
        versus = []
        if floor:
            reading = floor_of(c, shown[0].name)
            judgement = (reading or {}).get("judgement")
            versus = [(_versus_floor(c, shown[0]), f"num {_FLOOR_CLASS.get(str(judgement), '')}".strip())]
        rows.append([
            (_model_label(c), "floor" if c.get("is_floor") else ""),
            (str(c["setting"]), ""),
            (str(c.get("n", "")), "num"),
            *([_units_td(c)] if units else []),
            *((cell_estimate(c, s), "num") for s in shown),
            *versus,
        ])
    notes = _table_notes(own, level, missing, benchmark, shown[0] if floor else None)
    parts = [f"<h3>Cells ({level})</h3>", _html_table(header, rows), notes]
    described = [s for s in shown if s.description]
    if described:
        parts.append(
            '<p class="note">'
            + "; ".join(
                f"{_e(s.name)}: {_e(s.description)}{_lower_note(s)}"
                for s in described
            )
            + "</p>"
        )
    if floor:
        parts.append(_floor_details(own, specs, level))
    variance = _variance_details(own, specs)
    if variance:
        parts.append(variance)
    settings, models = _settings_and_models(own)
    if len(specs) > len(shown):
        by_cell = {(str(c["setting"]), str(c["model"])): c for c in own}
        per_setting = []
        for setting in settings:
            tables = []
            for chunk in _chunks(models, MODELS_PER_TABLE):
                t_rows = [
                    [(_header(s), ""), (_arrow(s), "")]
                    + [_estimate_td(by_cell.get((setting, m)), s) for m in chunk]
                    for s in specs
                ]
                labels = {str(c["model"]): _model_label(c) for c in own}
                tables.append(_html_table(["metric", "", *(labels.get(m, m) for m in chunk)], t_rows))
            per_setting.append(_details(setting, "".join(tables)))
        parts.append(_details(f"All {len(specs)} metrics, by setting", "".join(per_setting)))
    charts = [
        _bar_chart(f"{_header(s)} {_arrow(s)}", settings, models, values)
        for s in shown
        if (values := _headline_values(own, s))
    ]
    if charts:
        parts.append(_details(f"Charts: metrics by model ({level})", f'<div class="charts">{"".join(charts)}</div>'))
    reasons = _reasons_in(own)
    t_rows = [
        [(str(c["model"]), ""), (str(c["setting"]), "")]
        + [(str(int((c.get("terminations") or {}).get(r, 0))), "num") for r in reasons]
        + [(str(sum(int(v) for v in (c.get("terminations") or {}).values())), "num")]
        for c in own
    ]
    body = _html_table(["model", "setting", *reasons, "total"], t_rows)
    if reasons:
        body += _termination_chart(
            [(f"{c['model']} / {c['setting']}", c.get("terminations") or {}) for c in own], reasons
        )
    parts.append(_details("Termination reasons", body))
    return "".join(parts)


def _floor_details(own: Sequence[Mapping[str, Any]], specs: list[MetricSpec], level: str) -> str:
    """Every metric of every model against the floor: the model's value, the floor's, model − floor with
    its paired interval and the judgement, behind a toggle."""
    rows = []
    for c in own:
        if c.get("is_floor"):
            continue
        for s in specs:
            reading = floor_of(c, s.name)
            if reading is None:
                continue
            judgement = reading.get("judgement")
            diff = reading.get("difference") or {}
            rows.append([
                (str(c["setting"]), ""), (_header(s), ""), (str(c["model"]), ""),
                (cell_estimate(c, s), "num"),
                (format_estimate(reading.get("floor"), s.scale), "num floor"),
                (_difference_text(reading, s), "num"),
                (str(diff.get("n", "")), "num"),
                ("too few tasks" + _tasks_text(diff) if withheld(diff) else
                 FLOOR_WORDS.get(str(judgement), _MISSING) + _lower_note(s), _FLOOR_CLASS.get(str(judgement), "")),
            ])
    if not rows:
        return ""
    floor = _floor_cell(own) or {}
    title = f"Every metric against the floor, {_model_label(floor)} ({len(rows)} rows)"
    body = _html_table(["setting", "metric", "model", "model's value", "floor's value", f"model − floor [{level}]",
                        "pairs", ""], rows)
    return _details(title, body)


def _num(x: Any, digits: int = 3) -> str:
    v = _finite(x)
    return _MISSING if v is None else f"{v:.{digits}f}"


def _pass_k_text(curve: Mapping[str, Any] | None) -> str:
    """pass^k at k = 1, 2, 4, ... and the largest k: `pass^1 0.80 · pass^2 0.72 · pass^3 0.61`."""
    if not curve:
        return _MISSING
    ks = sorted(int(k) for k in curve)
    chosen = [k for k in ks if k & (k - 1) == 0 or k == ks[-1]]
    return " · ".join(f"pass^{k} {_num(curve[str(k)], 2)}" for k in chosen)


def _variance_rows(own: Sequence[Mapping[str, Any]], specs: Sequence[MetricSpec]) -> list[list[tuple[str, str]]]:
    rows = []
    for s in specs:
        for c in own:
            vc = (c.get("variance") or {}).get(s.name)
            if not vc:
                continue
            rows.append([
                (_model_label(c), "floor" if c.get("is_floor") else ""), (str(c["setting"]), ""), (s.name, ""),
                (str(vc.get("n_tasks", "")), "num"), (_num(vc.get("mean_seeds"), 1), "num"),
                (_num(vc.get("var_task"), 4), "num"), (_num(vc.get("var_within"), 4), "num"),
                (_num(vc.get("icc"), 2), "num"), (_num(vc.get("design_effect"), 2), "num"),
                (_num(vc.get("effective_n"), 1), "num"),
                (_pass_k_text((c.get("pass_k") or {}).get(s.name)), "num"),
            ])
    return rows


VARIANCE_HEADER = ["model", "setting", "metric", "tasks", "episodes / task", "var between tasks",
                   "var within tasks", "ICC", "design effect", "effective n", "pass^k (all k seeds succeed)"]


def _variance_details(own: Sequence[Mapping[str, Any]], specs: list[MetricSpec]) -> str:
    """Where each cell's variance is (summary.json's `variance` and `pass_k`): between tasks vs within a
    task (seeds and residual), the intra-class correlation, the design effect and the effective number of
    independent episodes, and pass^k; the headline metric open in the toggle, every other behind one."""
    if not specs:
        return ""
    first = _variance_rows(own, specs[:1])
    rest = _variance_rows(own, specs[1:])
    if not first and not rest:
        return ""
    body = ('<p class="note">Unscaled (a 0-1 rate\'s variance). ICC: the share of the variance that is '
            "between tasks; design effect 1 + (episodes per task − 1) × ICC; effective n = episodes / design "
            "effect: more seeds add little where the ICC is high, more tasks do. pass^k: the chance that k "
            "seeds of a task all succeed (tau-bench), for success metrics with several seeds.</p>")
    if first:
        body += _html_table(VARIANCE_HEADER, first)
    if rest:
        body += _details(f"Every other metric ({len(rest)} rows)", _html_table(VARIANCE_HEADER, rest))
    return _details("Variance: between and within tasks, ICC, effective n, pass^k", body)


def _benchmark_section(
    benchmark: str,
    own: Sequence[Mapping[str, Any]],
    specs: list[MetricSpec],
    tables: Sequence[ReportTable],
    paired: Sequence[Mapping[str, Any]],
    level: str,
    declared: Sequence[MetricSpec] = (),
    missing: Sequence[Mapping[str, Any]] = (),
) -> str:
    """`declared`: every metric the benchmark declares (a paired difference may be of a metric no
    cell shows), for each metric's direction."""
    parts = [f'<section id="{_anchor(benchmark)}"><h2>{_e(benchmark)}</h2>']
    if tables:
        parts.append("<h3>Paper tables</h3>" + _paper_tables(tables))
    if paired:
        by_name = {s.name: s for s in [*declared, *specs]}
        headline = specs[0].name if specs else None
        first = [p for p in paired if p.get("metric") == headline] or list(paired)
        rest = [p for p in paired if p not in first]
        labels = {str(c["model"]): _model_label(c) for c in own if c.get("is_floor")}
        parts.append("<h3>Paired differences (A minus B, same task and seed)</h3>")
        parts.append(_paired_table(first, by_name, level, labels))
        if rest:
            parts.append(_details(f"Every other metric ({len(rest)} rows)", _paired_table(rest, by_name, level, labels)))
    if own:
        parts.append(_cells_section(own, specs, level, missing, benchmark))
    elif any(str(m.get("benchmark")) == benchmark for m in missing):
        parts.append("".join(f'<p class="note">{_e(line)}.</p>' for line in _missing_lines(missing, benchmark)))
    parts.append("</section>")
    return "".join(parts)


def _convergence_spec(label: str, specs_by_benchmark: Mapping[str, Sequence[MetricSpec]]) -> MetricSpec | None:
    """The spec of a convergence label "model | benchmark | setting — metric"."""
    for benchmark, specs in specs_by_benchmark.items():
        if f" | {benchmark} | " in label:
            for s in specs:
                if label.endswith(f" — {s.name}"):
                    return s
    return None


def _moved(points: Sequence[Any]) -> bool:
    """Whether the estimate changed as episodes finished (a flat line says nothing a table does not)."""
    values = set()
    for p in points:
        v = _finite(p.get("value") if isinstance(p, Mapping) else (list(p) + [None, None])[1])
        if v is not None:
            values.add(round(v, 12))
    return len(values) > 1


def _convergence_section(
    convergence: Mapping[str, Sequence[Any]], specs_by_benchmark: Mapping[str, Sequence[MetricSpec]]
) -> str:
    moved = {label: pts for label, pts in convergence.items() if _moved(pts)}
    flat = len(convergence) - len(moved)
    parts = ['<section id="convergence"><h2>Convergence</h2>']
    parts.append(
        '<p class="note">Each cell\'s headline estimate and its interval as episodes finished'
        + (f"; {flat} cells whose estimate never moved are not drawn" if flat else "")
        + ".</p>"
    )
    charts = []
    for label, pts in moved.items():
        spec = _convergence_spec(str(label), specs_by_benchmark)
        charts.append(convergence_chart(str(label), pts, spec))
    if charts:
        parts.append(f'<div class="charts">{"".join(charts[:CONVERGENCE_SHOWN])}</div>')
        if len(charts) > CONVERGENCE_SHOWN:
            more = len(charts) - CONVERGENCE_SHOWN
            parts.append(_details(f"{more} more cells", f'<div class="charts">{"".join(charts[CONVERGENCE_SHOWN:])}</div>'))
    parts.append("</section>")
    return "".join(parts)


def render_html_report(
    manifest: Mapping[str, Any],
    cells: Sequence[Mapping[str, Any]],
    specs_by_benchmark: Mapping[str, Sequence[MetricSpec]],
    tables: Sequence[ReportTable] | Mapping[str, Sequence[ReportTable]] = (),
    paired: Sequence[Mapping[str, Any]] | None = None,
    convergence: Mapping[str, Sequence[Any]] | None = None,
    missing: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The report page, read top to bottom: the headline metric of every benchmark per model, then per
    benchmark its paper tables, paired differences and cells, with breakdowns behind toggles, then the
    convergence of the cells that moved.

    `tables` are the benchmarks' paper-style tables (a list, or {benchmark: list} to place each
    under its benchmark). `paired` rows carry benchmark,
    setting, model_a, model_b, metric, n, value, ci_low, ci_high (A minus B). `convergence` maps a
    label "model | benchmark | setting — metric" to points {n, value, ci_low, ci_high}. `missing`: the
    cells of the config with no unit recorded (summary.json's `cells_missing`).
    """
    config = manifest.get("config") if isinstance(manifest.get("config"), Mapping) else {}
    sweep = manifest.get("sweep") or manifest.get("name") or config.get("name") or "sweep"
    run_id = manifest.get("run_id", "")
    boot = config.get("bootstrap") if isinstance(config.get("bootstrap"), Mapping) else {}
    level = f"{100 * float(boot.get('confidence', 0.95)):g}% CI"
    grouped = _by_benchmark(cells)
    tables_by_bench: dict[str, list[ReportTable]] = {}
    loose_tables: list[ReportTable] = []
    if isinstance(tables, Mapping):
        for b, ts in tables.items():
            tables_by_bench.setdefault(str(b), []).extend(_as_table(t) for t in ts)
    else:
        loose_tables = [_as_table(t) for t in tables]
    paired = list(paired or [])

    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(f'toolsweep report: {sweep} {run_id}'.strip())}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<header><h1>{_e(sweep)}</h1>{_meta(manifest)}",
        _details("manifest.json", f"<pre>{_e(json.dumps(manifest, indent=2, sort_keys=True, default=str))}</pre>"),
        "</header>",
    ]
    names = list(grouped) + [b for b in tables_by_bench if b not in grouped]
    names += sorted({str(m["benchmark"]) for m in missing} - set(names))
    if names:
        links = "".join(f'<li><a href="#{_anchor(b)}">{_e(b)}</a></li>' for b in names)
        extra = '<li><a href="#convergence">convergence</a></li>' if convergence else ""
        out.append(f'<nav><ul><li><a href="#summary">summary</a></li>{links}{extra}</ul></nav>')
    if not cells:
        out.append("<p>No finished episodes yet.</p>")
    else:
        out.append(_summary_section(grouped, specs_by_benchmark, level, missing))
    for benchmark in names:
        own = grouped.get(benchmark, [])
        specs = _metric_specs(benchmark, own, specs_by_benchmark)
        own_paired = [p for p in paired if str(p.get("benchmark")) == benchmark]
        out.append(
            _benchmark_section(
                benchmark, own, specs, tables_by_bench.get(benchmark, []), own_paired, level,
                declared=specs_by_benchmark.get(benchmark, ()), missing=missing,
            )
        )
    if loose_tables:
        out.append('<section id="tables"><h2>Paper tables</h2>' + _paper_tables(loose_tables) + "</section>")
    stray = [p for p in paired if str(p.get("benchmark")) not in names]
    if stray:
        out.append("<section><h2>Paired differences</h2>" + _paired_table(stray, {}, level) + "</section>")
    if convergence:
        out.append(_convergence_section(convergence, specs_by_benchmark))
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def write_html_report(path: str | os.PathLike[str], *args: Any, **kwargs: Any) -> Path:
    """Render the report (same arguments as `render_html_report`) and write it atomically: a
    reader never sees a half-written page, and a crash leaves the previous one."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = render_html_report(*args, **kwargs)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes it owner-only; a report is meant to be shared
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
