"""`toolsweep compare`: models side by side per (benchmark, setting), from one or more run directories,
with the paired differences a run holds, as text, Markdown, CSV, LaTeX or JSON."""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
from pathlib import Path
from typing import Any

from toolsweep.evaluator.rundir import RunDirectory, read_summary, strict_json

HELP = """\
Put models side by side per (benchmark, setting): each cell's metric with its bootstrap interval,
from one or more run directories (a model that appears in several is labelled by its run), and the
paired differences between models of the same run (same tasks and seeds) with their intervals.

examples:
  toolsweep compare runs/toolmaze/main
  toolsweep compare runs/a/main runs/b/main --metric accuracy --format latex > table.tex
  toolsweep compare runs/apb/main --format md
"""


def _pct(v: Any, scale: float = 100.0) -> str:
    return "–" if not isinstance(v, (int, float)) or not math.isfinite(v) else f"{scale * v:.1f}"


def collect(paths: list[str], metric: str | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(rows, paired): one row per (benchmark, setting, model) with value and interval; paired differences."""
    rows, paired = [], []
    for path in paths:
        run_dir = RunDirectory(path)
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
            rows.append({"benchmark": cell["benchmark"], "setting": cell["setting"], "model": cell["model"] + label,
                         "metric": name, "value": stats.get("value"), "ci_low": stats.get("ci_low"),
                         "ci_high": stats.get("ci_high"), "n": cell.get("n")})
        shown = {(r["benchmark"], r["setting"], r["metric"]) for r in rows}
        for p in summary.get("paired", []):
            # the differences of the metric shown for the cell (the headline, or --metric), not of every metric
            if (p.get("benchmark"), p.get("setting"), p.get("metric")) in shown:
                paired.append({**p, "model_a": p["model_a"] + label, "model_b": p["model_b"] + label})
    if metric is not None and not rows:
        raise ValueError(f"no cell has the metric {metric!r}")
    return rows, paired


def render(rows: list[dict[str, Any]], paired: list[dict[str, Any]], fmt: str) -> str:
    if fmt == "json":
        return strict_json({"cells": rows, "paired": paired}, indent=2)
    models = list(dict.fromkeys(r["model"] for r in rows))
    keys = list(dict.fromkeys((r["benchmark"], r["setting"], r["metric"]) for r in rows))
    at = {(r["benchmark"], r["setting"], r["metric"], r["model"]): r for r in rows}

    def cell(k: tuple[str, str, str], m: str) -> str:
        r = at.get((*k, m))
        return "" if r is None else f"{_pct(r['value'])} [{_pct(r['ci_low'])}, {_pct(r['ci_high'])}]"

    head = ["benchmark", "setting", "metric (%)", *models]
    body = [[k[0], k[1], k[2], *(cell(k, m) for m in models)] for k in keys]
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow(["benchmark", "setting", "metric", "model", "value", "ci_low", "ci_high", "n"])
        for r in rows:
            writer.writerow([r["benchmark"], r["setting"], r["metric"], r["model"], r["value"], r["ci_low"],
                             r["ci_high"], r["n"]])
        return buf.getvalue()
    if fmt == "latex":
        esc = lambda t: str(t).replace("_", r"\_").replace("%", r"\%").replace("&", r"\&")  # noqa: E731
        lines = [r"\begin{tabular}{lll" + "r" * len(models) + "}", r"\toprule",
                 " & ".join(esc(h) for h in head) + r" \\", r"\midrule"]
        lines += [" & ".join(esc(c) for c in row) + r" \\" for row in body]
        lines += [r"\bottomrule", r"\end{tabular}"]
        return "\n".join(lines)
    if fmt == "md":
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(row) + " |" for row in body]
    else:
        widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
        lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)) for row in [head, *body]]
    defined = [p for p in paired if isinstance(p.get("value"), (int, float)) and math.isfinite(p["value"])]
    undefined = len(paired) - len(defined)
    if fmt == "md":
        if defined:
            lines += ["", "Paired differences (A − B, same tasks and seeds), in points:", "",
                      "| benchmark | setting | metric | A | B | A − B [CI] |", "|---|---|---|---|---|---|"]
            lines += [f"| {p['benchmark']} | {p['setting']} | {p['metric']} | {p['model_a']} | {p['model_b']} | "
                      f"{_pct(p['value'])} [{_pct(p['ci_low'])}, {_pct(p['ci_high'])}] |" for p in defined]
        if undefined:
            lines += ["", f"{undefined} paired differences are undefined (no pair of episodes where both have "
                          "the metric) and left out."]
        return "\n".join(lines)
    if defined:
        lines.append("")
        lines.append("paired differences (A - B, same tasks and seeds):")
        for p in defined:
            lines.append(f"  {p['benchmark']}/{p['setting']} {p['metric']}: {p['model_a']} - {p['model_b']} = "
                         f"{_pct(p['value'])} [{_pct(p['ci_low'])}, {_pct(p['ci_high'])}]")
    if undefined:
        lines.append(f"({undefined} paired differences undefined: no pair of episodes where both have the metric)")
    return "\n".join(lines)


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
