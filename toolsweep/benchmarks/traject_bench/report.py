"""Paper-style tables from cell summaries.

- Table 2 layout (parallel): one table per (pool, method); rows = models; columns = simple and hard
  EM, Inclusion, Usage, Traj-Satisfy, Acc (plus retrieval rate for retrieval pools, as Table 4).
- Table 3 layout (sequential): one table per (pool, method); rows = models; EM .. Acc.
- Per-domain and per-length breakdowns (Figure 2's axis) from the breakdown metrics.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from toolsweep.evaluator.protocols import ReportTable

if TYPE_CHECKING:
    from toolsweep.benchmarks.traject_bench import TrajectBench

COLS = (("em", "EM"), ("inclusion", "Inclusion"), ("usage", "Usage"),
        ("traj_satisfy_proxy", "Traj-Satisfy*"), ("answer_facts", "Answer-facts (not Acc)"))  # fmt: skip

JUDGED_COLS = (("em", "EM"), ("inclusion", "Inclusion"), ("usage", "Usage"),
               ("traj_satisfy_llm", "Traj-Satisfy"), ("acc_llm", "Acc"))  # fmt: skip

JUDGED_NOTE = (
    "Traj-Satisfy and Acc by the LLM judge the sweep serves (option judge: llm:<model>; the paper used "
    "Claude-4); their agreement with the deterministic proxies is in the judge table. Tools are replayed "
    "from the release's recordings; retrieval is BM25 (the paper's dense retrievers need weights)."
)

NOTE = (
    "Traj-Satisfy* is a deterministic, gold-informed proxy of the paper's LLM judge (0-10). Acc needs "
    "the LLM judge (option judge: llm:<model>); Answer-facts is a deterministic diagnostic, not Acc "
    "(a prose restatement of the tool outputs can pass it). Tools are replayed from the release's "
    "recordings; retrieval is BM25 (the paper's dense retrievers need weights)."
)


def _v(cell: dict[str, Any] | None, key: str) -> float | None:
    if cell is None:
        return None
    m = cell.get("metrics", {}).get(key)
    if not m:
        return None
    v = m.get("value")
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return round(float(v), 3)


def build_tables(bench: TrajectBench, cells: list[dict[str, Any]]) -> list[ReportTable]:
    mine = [c for c in cells if c.get("benchmark", bench.name) == bench.name and c["setting"] in bench.settings()]
    by: dict[tuple[str, str], dict[str, dict[str, Any]]] = defaultdict(dict)  # (pool, method) -> model/split -> cell
    models: list[str] = []
    for c in mine:
        spec = bench.spec(c["setting"])
        by[(spec.pool, spec.method)][f"{c['model']}\x00{spec.split}"] = c
        if c["model"] not in models:
            models.append(c["model"])
    tables: list[ReportTable] = []
    judged = bench.judge_model is not None
    cols, note = (JUDGED_COLS, JUDGED_NOTE) if judged else (COLS, NOTE)
    for (pool, method), group in sorted(by.items()):
        rr = pool.startswith("retrieval") or method in ("react-static", "react-dynamic")
        par_cols = [*cols, ("retrieval_rate", "RR")] if rr else list(cols)
        if any(k.endswith("\x00par-simple") or k.endswith("\x00par-hard") for k in group):
            rows = []
            for m in models:
                s, h = group.get(f"{m}\x00par-simple"), group.get(f"{m}\x00par-hard")
                if s is None and h is None:
                    continue
                rows.append([m, *[_v(s, k) for k, _ in par_cols], *[_v(h, k) for k, _ in par_cols]])
            tables.append(
                ReportTable(
                    title=f"TRAJECT-Bench parallel, pool={pool}, method={method} (layout of the paper's Table 2)",
                    columns=["Model", *[f"S-{n}" for _, n in par_cols], *[f"H-{n}" for _, n in par_cols]],
                    rows=rows,
                    note=note,
                )
            )
        if any(k.endswith("\x00seq") for k in group):
            seq_cols = [*par_cols, ("order_lcs", "order-LCS"), ("dep_sat", "dep-sat")]
            rows = [[m, *[_v(group.get(f"{m}\x00seq"), k) for k, _ in seq_cols]] for m in models if f"{m}\x00seq" in group]
            tables.append(
                ReportTable(
                    title=f"TRAJECT-Bench sequential, pool={pool}, method={method} (layout of the paper's Table 3)",
                    columns=["Model", *[n for _, n in seq_cols]],
                    rows=rows,
                    note=note,
                )
            )
    if judged and mine:
        tables.append(judge_table(mine, bench.judge_model or ""))
    domains = list(bench.ctx.breakdown_domains)
    if domains and mine:
        rows = []
        for c in mine:
            for key in ("em", "inclusion", "usage", "answer_facts"):
                vals = [_v(c, f"{key}/{d}") for d in domains]
                if any(v is not None for v in vals):
                    rows.append([c["model"], c["setting"], key, *vals])
        tables.append(ReportTable(title="TRAJECT-Bench per-domain breakdown", columns=["Model", "Setting", "Metric", *domains], rows=rows))
    lengths = list(bench.ctx.breakdown_lengths)
    if lengths and mine:
        rows = []
        for c in mine:
            for key in ("em", "inclusion"):
                vals = [_v(c, f"{key}/n={n}") for n in lengths]
                if any(v is not None for v in vals):
                    rows.append([c["model"], c["setting"], key, *vals])
        tables.append(
            ReportTable(
                title="TRAJECT-Bench by trajectory length (the paper's Figure 2 axis)",
                columns=["Model", "Setting", "Metric", *[f"n={n}" for n in lengths]],
                rows=rows,
            )
        )
    return tables


def judge_table(cells: list[dict[str, Any]], judge: str) -> ReportTable:
    """The LLM judge against the deterministic proxies, per cell (as APB's judge table does)."""
    rows = []
    for c in cells:
        agree = _v(c, "acc_agreement")
        rows.append([
            c["model"], c["setting"], c.get("n"),
            _v(c, "acc_llm"), _v(c, "answer_facts"), None if agree is None else round(100 * agree, 1),
            _v(c, "traj_satisfy_llm"), _v(c, "traj_satisfy_proxy"), _v(c, "traj_satisfy_abs_diff"),
            _v(c, "judge_unreadable"),
        ])
    return ReportTable(
        title=f"TRAJECT-Bench LLM judge ({judge}) against the deterministic proxies",
        columns=["Model", "Setting", "n", "Acc judge", "Answer-facts", "Acc agreement %", "Traj-Sat judge",
                 "Traj-Sat proxy", "mean |judge - proxy|", "unreadable / episode"],
        rows=rows,
        note="Acc agreement: share of episodes where the judge and the proxy decide Acc alike. The proxy "
             "Traj-Satisfy sees the gold trajectory; the judge, as in the paper, only the query and the prediction.",
    )
