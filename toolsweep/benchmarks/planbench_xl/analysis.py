"""Paper-style tables and the spec §6.3 correlation analysis.

`PAPER_TABLE3` is reference data quoted from the paper (PlanBench-XL, Table 3, default setting);
it is used only to check the analysis code (Pearson r of EDT, EGT and ITCR with accuracy) and to
print the paper's numbers next to a sweep's own.
"""

from __future__ import annotations

import math
from typing import Any

from toolsweep.benchmarks.planbench_xl.metrics import LSTAR_GROUPS, MAIN_METRICS
from toolsweep.evaluator.protocols import ReportTable

# Reference data from the paper, Table 3 (default setting): Acc, EGT, Turns, EDT, S/C, ITCR, UIRR.
PAPER_TABLE3: dict[str, tuple[float, ...]] = {
    "Qwen3-8B": (0.00, 35.31, 25.65, 7.64, 0.20, 6.11, 0.10),
    "Qwen3-14B": (0.92, 47.77, 35.74, 12.01, 0.09, 3.94, 0.93),
    "Qwen3-32B": (2.75, 62.36, 12.03, 18.54, 1.59, 10.05, 7.43),
    "Llama-3.1-8B-Instruct": (0.00, 41.33, 21.62, 9.89, 1.49, 18.03, 5.25),
    "Llama-3.3-70B-Instruct": (18.96, 59.67, 19.13, 19.20, 2.22, 21.47, 2.13),
    "DeepSeek-V4-Flash": (63.08, 65.57, 31.41, 25.34, 2.80, 8.27, 3.29),
    "Gemini-3.1-Pro": (77.06, 91.47, 19.55, 27.41, 1.59, 0.68, 0.30),
    "Gemini-3.5-Flash": (52.19, 85.29, 57.87, 25.16, 10.44, 2.94, 0.00),
    "GPT-5.4-Mini": (3.07, 71.25, 10.81, 9.22, 1.97, 51.71, 4.42),
    "GPT-5.4": (51.90, 72.92, 22.92, 20.65, 2.70, 6.28, 1.91),
}
TABLE3_COLUMNS = ["accuracy", "egt_precision", "turns", "edt", "s_c_ratio", "itcr", "uirr"]
TABLE3_HEADERS = ["Acc. (%)", "EGT Prec. (%)", "Avg. Turns", "Mean EDT", "S/C Ratio", "ITCR (%)", "UIRR (%)"]


def pearson(xs: list[float], ys: list[float]) -> float:
    n = len(xs)
    if n != len(ys) or n < 2:
        raise ValueError("pearson needs two sequences of equal length >= 2")
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy) if sxx and syy else math.nan


def correlations_with_accuracy(table: dict[str, dict[str, float]]) -> dict[str, float]:
    """Pearson r of each Table 3 metric with accuracy across models (spec §6.3)."""
    models = sorted(table)
    acc = [table[m]["accuracy"] for m in models]
    return {c: pearson([table[m][c] for m in models], acc) for c in TABLE3_COLUMNS if c != "accuracy"}


def paper_table3() -> dict[str, dict[str, float]]:
    return {m: dict(zip(TABLE3_COLUMNS, v)) for m, v in PAPER_TABLE3.items()}


def _fmt(metric: dict[str, float] | None, scale: float) -> str:
    if not metric or metric.get("value") is None or math.isnan(metric["value"]):
        return "n/a"
    v = metric["value"] * scale
    lo, hi = metric.get("ci_low"), metric.get("ci_high")
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return f"{v:.2f}"
    return f"{v:.2f} ± {(hi - lo) * scale / 2:.2f}"


def report_tables(cells: list[dict[str, Any]]) -> list[ReportTable]:
    tables: list[ReportTable] = []
    scales = {s.name: s.scale for s in MAIN_METRICS}
    settings = sorted({c["setting"] for c in cells}, key=lambda s: (s != "default", s))
    for setting in settings:
        rows = [[c["model"]] + [_fmt(c["metrics"].get(k), scales[k]) for k in TABLE3_COLUMNS]
                for c in sorted((c for c in cells if c["setting"] == setting), key=lambda c: c["model"])]
        tables.append(ReportTable(
            title=f"PlanBench-XL — {setting} setting (paper Table 3 layout; value ± 95% CI half-width)",
            columns=["Model"] + TABLE3_HEADERS, rows=rows,
            note="Accuracy is grounded (gold substring and target datatype reached). S/C, ITCR and UIRR "
                 "are ratios of global totals; EGT precision is over queries with a trusted execution.",
        ))
    # Accuracy by shortest-path length (paper Fig. 5).
    rows = []
    for c in sorted(cells, key=lambda c: (c["model"], c["setting"])):
        if c["setting"] == "single_step":
            continue
        rows.append([c["model"], c["setting"]] + [_fmt(c["metrics"].get(f"accuracy_lstar_{g}"), 100.0)
                                                   for g in LSTAR_GROUPS])
    if rows:
        tables.append(ReportTable(title="PlanBench-XL — accuracy (%) by L* (paper Fig. 5)",
                                  columns=["Model", "Setting", "L*=5", "L*=6", "L*=7", "L*>=8"], rows=rows))
    # Error analysis (paper §6): categories and ending types among failures.
    keys = ["category_no_traction", "category_irrecoverable_drift", "category_weak_recovery",
            "category_other", "category_format_error", "ending_surrender", "ending_wrong_tool_value",
            "ending_search_exhaustion", "ending_other"]
    rows = [[c["model"], c["setting"]] + [_fmt(c["metrics"].get(k), 100.0) for k in keys]
            for c in sorted(cells, key=lambda c: (c["model"], c["setting"]))]
    if rows:
        tables.append(ReportTable(
            title="PlanBench-XL — error analysis (% of failures; paper Figs. 6-8)",
            columns=["Model", "Setting", "No Traction", "Irrec. Drift", "Weak Recovery", "Other",
                     "Format Error", "Surrender", "Wrong value", "Search exhaustion", "Other ending"], rows=rows))
    # Correlations across the sweep's models in the default setting, next to the paper's.
    default = {c["model"]: {k: c["metrics"][k]["value"] for k in TABLE3_COLUMNS if k in c["metrics"]}
               for c in cells if c["setting"] == "default"}
    default = {m: v for m, v in default.items() if len(v) == len(TABLE3_COLUMNS)
               and not any(math.isnan(x) for x in v.values())}
    paper = correlations_with_accuracy(paper_table3())
    ours = correlations_with_accuracy(default) if len(default) >= 3 else {}
    tables.append(ReportTable(
        title="PlanBench-XL — Pearson r with accuracy across models (default setting)",
        columns=["Metric", "This sweep", "Paper Table 3"],
        rows=[[k, f"{ours[k]:.3f}" if k in ours and not math.isnan(ours[k]) else "n/a", f"{paper[k]:.3f}"]
              for k in ("edt", "egt_precision", "itcr", "turns", "s_c_ratio", "uirr")],
        note="The paper column is recomputed from the paper's Table 3 (reference data in analysis.py).",
    ))
    return tables
