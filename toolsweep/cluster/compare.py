"""`toolsweep compare`: models side by side per (benchmark, setting), from one or more run directories,
with the paired differences a run holds, as text, Markdown, CSV, LaTeX or JSON. A run with a no-LLM
floor (`floor: true`) shows it as the first column and each model's mark against it (paired); a partial
cell (units given up or not run yet) is marked `*` with its units."""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
from pathlib import Path
from typing import Any

from toolsweep.evaluator.completeness import PARTIAL_MARK, PARTIAL_NOTE, is_partial, units_text
from toolsweep.evaluator.floor import ABOVE, BELOW, NOT_DISTINGUISHABLE, floor_label, floor_of
from toolsweep.evaluator.rundir import RunDirectory, read_summary, strict_json

HELP = """\
Put models side by side per (benchmark, setting): each cell's metric with its bootstrap interval,
from one or more run directories (a model that appears in several is labelled by its run), and the
paired differences between models of the same run (same tasks and seeds) with their intervals.
With a floor in the run (`floor: true`), it comes first and every model's entry carries its mark
against it: ▲ above, ▼ below, ≈ not distinguishable (the paired interval of model − floor); a
partial cell (units given up or not run yet) is marked * with its units.

examples:
  toolsweep compare runs/toolmaze/main
  toolsweep compare runs/a/main runs/b/main --metric accuracy --format latex > table.tex
  toolsweep compare runs/apb/main --format md

--format latex writes a booktabs tabular with the same marks as the other formats (▲ ▼ as amssymb's
\\blacktriangle and \\blacktriangledown): the document needs \\usepackage{booktabs} and \\usepackage{amssymb}.
"""


def _pct(v: Any, scale: float = 100.0) -> str:
    if not isinstance(v, (int, float)) or not math.isfinite(v):
        return "–"
    text = f"{scale * v:.1f}"
    return "0.0" if text == "-0.0" else text


def collect(paths: list[str], metric: str | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(rows, paired): one row per (benchmark, setting, model) with value and interval; paired differences."""
    rows, paired = [], []
    for path in paths:
        run_dir = RunDirectory(path)
        if not run_dir.summary_path.exists():
            raise ValueError(
                f"{path} is not a finished run directory (it holds no summary.json): pass runs/<sweep>/<run-id> "
                "of a run that `toolsweep run` finished or interrupted (`toolsweep report` rebuilds a lost summary)")
        summary = read_summary(run_dir.summary_path)
        label = "" if len(paths) == 1 else f"@{Path(path).parent.name}/{Path(path).name}"
        headlines = summary.get("headline_metrics") or {}
        for cell in summary.get("cells", []):
            metrics = cell.get("metrics") or {}
            # the benchmark's headline (the name `run` and report.html use), not the setting's first metric
            default = headlines.get(cell["benchmark"])
            name = metric if metric in metrics else default if metric is None and default in metrics \
                else next(iter(metrics), None) if metric is None else None
            if name is None:
                continue
            stats = metrics[name]
            row = {"benchmark": cell["benchmark"], "setting": cell["setting"], "model": cell["model"] + label,
                   "metric": name, "value": stats.get("value"), "ci_low": stats.get("ci_low"),
                   "ci_high": stats.get("ci_high"), "n": cell.get("n"), "is_floor": bool(cell.get("is_floor"))}
            row.update(_floor_fields(cell, name))
            if "units_expected" in cell:
                row.update({k: cell.get(k) for k in ("complete", "units_done", "units_expected", "units_given_up")})
            rows.append(row)
        shown = {(r["benchmark"], r["setting"], r["metric"]) for r in rows}
        for p in summary.get("paired", []):
            # the differences of the metric shown for the cell (the headline, or --metric), not of every metric
            if (p.get("benchmark"), p.get("setting"), p.get("metric")) in shown:
                paired.append({**p, "model_a": p["model_a"] + label, "model_b": p["model_b"] + label})
    if metric is not None and not rows:
        raise ValueError(f"no cell has the metric {metric!r}")
    return rows, paired


def _floor_fields(cell: dict[str, Any], metric: str) -> dict[str, Any]:
    """The cell's floor reading of `metric` as flat fields (for CSV and JSON rows)."""
    reading = floor_of(cell, metric)
    if reading is None:
        return {}
    floor, diff = reading.get("floor") or {}, reading.get("difference") or {}
    return {"floor_model": (cell.get("floor") or {}).get("model"), "floor_value": floor.get("value"),
            "minus_floor": diff.get("value"), "minus_floor_ci_low": diff.get("ci_low"),
            "minus_floor_ci_high": diff.get("ci_high"), "vs_floor": reading.get("judgement")}


MARKS = {ABOVE: "▲", BELOW: "▼", NOT_DISTINGUISHABLE: "≈"}
LATEX_MARKS = {"▲": r"$\blacktriangle$", "▼": r"$\blacktriangledown$", "≈": r"$\approx$"}
"""The same marks as the other formats, as amssymb's symbols (pdflatex has no ▲ ▼ glyphs of its own)."""
LATEX_NEEDS = r"% needs \usepackage{booktabs} (\toprule, \midrule, \bottomrule) and \usepackage{amssymb} (the marks)"


def _entry(r: dict[str, Any]) -> str:
    """`value [low, high]`, the mark against the floor, `*` and the units of a partial cell."""
    star = PARTIAL_MARK if is_partial(r) else ""
    text = f"{_pct(r['value'])}{star} [{_pct(r['ci_low'])}, {_pct(r['ci_high'])}]"
    mark = MARKS.get(str(r.get("vs_floor")), "")
    units = units_text(r)
    return text + (f" {mark}" if mark else "") + (f" ({units})" if units else "")


def _signed(v: Any) -> str:
    text = _pct(v)
    return "+" + text if isinstance(v, (int, float)) and math.isfinite(v) and v > 0 and text != "0.0" else text


def render(rows: list[dict[str, Any]], paired: list[dict[str, Any]], fmt: str) -> str:
    if fmt == "json":
        return strict_json({"cells": rows, "paired": paired}, indent=2)
    floors = list(dict.fromkeys(r["model"] for r in rows if r.get("is_floor")))
    models = floors + [m for m in dict.fromkeys(r["model"] for r in rows) if m not in floors]
    keys = list(dict.fromkeys((r["benchmark"], r["setting"], r["metric"]) for r in rows))
    at = {(r["benchmark"], r["setting"], r["metric"], r["model"]): r for r in rows}

    def cell(k: tuple[str, str, str], m: str) -> str:
        r = at.get((*k, m))
        return "" if r is None else _entry(r)

    head = ["benchmark", "setting", "metric (%)", *(floor_label(m, None) if m in floors else m for m in models)]
    body = [[k[0], k[1], k[2], *(cell(k, m) for m in models)] for k in keys]
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf)
        extra = ["is_floor", "floor_value", "minus_floor", "minus_floor_ci_low", "minus_floor_ci_high", "vs_floor",
                 "complete", "units_done", "units_expected", "units_given_up"]
        writer.writerow(["benchmark", "setting", "metric", "model", "value", "ci_low", "ci_high", "n", *extra])
        for r in rows:
            writer.writerow([r["benchmark"], r["setting"], r["metric"], r["model"], r["value"], r["ci_low"],
                             r["ci_high"], r["n"], *(r.get(k, "") for k in extra)])
        return buf.getvalue()
    if fmt == "latex":
        esc = lambda t: "".join(LATEX_MARKS.get(ch, ch) for ch in  # noqa: E731
                                str(t).replace("_", r"\_").replace("%", r"\%").replace("&", r"\&"))
        lines = [LATEX_NEEDS, r"\begin{tabular}{lll" + "r" * len(models) + "}", r"\toprule",
                 " & ".join(esc(h) for h in head) + r" \\", r"\midrule"]
        lines += [" & ".join(esc(c) for c in row) + r" \\" for row in body]
        lines += [r"\bottomrule", r"\end{tabular}"]
        lines += [f"% {esc(note)}" for note in _notes(rows)]
        return "\n".join(lines)
    if fmt == "md":
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(row) + " |" for row in body]
    else:
        widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
        lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)) for row in [head, *body]]
    notes = _notes(rows)
    versus = [r for r in rows if r.get("vs_floor") is not None]
    defined = [p for p in paired if isinstance(p.get("value"), (int, float)) and math.isfinite(p["value"])]
    undefined = len(paired) - len(defined)
    if fmt == "md":
        lines += [""] + [f"{n}  " for n in notes] if notes else []
        if versus:
            lines += ["", "Against the no-LLM floor (model − floor, same tasks and seeds), in points:", "",
                      "| benchmark | setting | metric | model | floor | model − floor [CI] | |", "|---|---|---|---|---|---|---|"]
            lines += [f"| {r['benchmark']} | {r['setting']} | {r['metric']} | {r['model']} | {_pct(r.get('floor_value'))} | "
                      f"{_signed(r['minus_floor'])} [{_pct(r['minus_floor_ci_low'])}, {_pct(r['minus_floor_ci_high'])}] | "
                      f"{r['vs_floor']} |" for r in versus]
        if defined:
            lines += ["", "Paired differences (A − B, same tasks and seeds), in points:", "",
                      "| benchmark | setting | metric | A | B | A − B [CI] |", "|---|---|---|---|---|---|"]
            lines += [f"| {p['benchmark']} | {p['setting']} | {p['metric']} | {p['model_a']} | {p['model_b']} | "
                      f"{_pct(p['value'])} [{_pct(p['ci_low'])}, {_pct(p['ci_high'])}] |" for p in defined]
        if undefined:
            lines += ["", f"{undefined} paired differences are undefined (no pair of episodes where both have "
                          "the metric) and left out."]
        return "\n".join(lines)
    lines += notes
    if versus:
        lines.append("")
        lines.append("against the no-LLM floor (model - floor, same tasks and seeds):")
        for r in versus:
            lines.append(f"  {r['benchmark']}/{r['setting']} {r['metric']}: {r['model']} - {r.get('floor_model') or 'floor'} = "
                         f"{_signed(r['minus_floor'])} [{_pct(r['minus_floor_ci_low'])}, {_pct(r['minus_floor_ci_high'])}]: "
                         f"{r['vs_floor']}")
    if defined:
        lines.append("")
        lines.append("paired differences (A - B, same tasks and seeds):")
        for p in defined:
            lines.append(f"  {p['benchmark']}/{p['setting']} {p['metric']}: {p['model_a']} - {p['model_b']} = "
                         f"{_pct(p['value'])} [{_pct(p['ci_low'])}, {_pct(p['ci_high'])}]")
    if undefined:
        lines.append(f"({undefined} paired differences undefined: no pair of episodes where both have the metric)")
    return "\n".join(lines)


def _notes(rows: list[dict[str, Any]]) -> list[str]:
    """The legends of the marks the table shows."""
    out = []
    if any(r.get("vs_floor") for r in rows):
        out.append("▲ above the no-LLM floor, ▼ below it, ≈ not distinguishable: the paired CI of model − floor "
                   "(above = better, by the metric's direction)")
    if any(is_partial(r) for r in rows):
        out.append(PARTIAL_NOTE)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="toolsweep compare", description=HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dirs", nargs="+", help="runs/<sweep>/<run-id> (one or more)")
    parser.add_argument("--metric", help="the metric to show (default: each benchmark's headline metric)")
    parser.add_argument("--format", choices=("text", "md", "csv", "latex", "json"), default="text")
    args = parser.parse_args(argv)
    try:
        rows, paired = collect(args.run_dirs, args.metric)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(render(rows, paired, args.format))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
