"""Per-episode numbers and their aggregations (spec §6): the seven main metrics, the §6.3 auxiliary
metrics and the §6.4 error analysis as indicators, so the core aggregates all of them with CIs.

Conventions: a `mean` metric is NaN for episodes outside its population (e.g. EGT precision when
no trusted executable call succeeded: the mean is then over Q'); a `ratio` metric stores its
numerator and denominator under separate keys and is a ratio of global totals.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from toolsweep.benchmarks.planbench_xl.world import norm_value
from toolsweep.evaluator.protocols import MetricSpec

if TYPE_CHECKING:
    from toolsweep.benchmarks.planbench_xl.environment import PlanBenchEnv

NAN = math.nan
LSTAR_GROUPS = {"5": (5, 5), "6": (6, 6), "7": (7, 7), "8plus": (8, 99)}
# The paper's categories (§6.1, Fig. 6) and endings (§6.3); "other" holds what fits none of them,
# reported as such rather than folded into a paper category.
CATEGORIES = ["format_error", "no_traction", "irrecoverable_drift", "weak_recovery", "other"]
ENDINGS = ["surrender", "wrong_tool_value", "search_exhaustion", "other"]
FAILURES = ["correct", "final_answer_wrong", "target_datatype_not_reached", "exceeded_max_steps",
            "exceeded_max_tool_call_errors", "interrupted"]

_SURRENDER = re.compile(
    r"\b(cannot|can't|can ?not|unable to|not able to|could not|couldn't|impossible to|no way to)\b.{0,60}"
    r"\b(determine|verify|provide|find|obtain|identify|retrieve|answer|locate|complete)\b"
    r"|unsolvable|insufficient information",
    re.I | re.S,
)


def is_surrender(answer: str) -> bool:
    return bool(_SURRENDER.search(answer or ""))


def explored_closure(env: PlanBenchEnv) -> set[str]:
    """D_exp: D_0 ∪ D_exec closed under the declared signatures of every retrieved tool."""
    st = env.state
    have = set(env.task.inputs) | st.executed
    tools = list(st.retrieved.values())
    changed = True
    while changed:
        changed = False
        for t in tools:
            if t.output not in have and t.input_set <= have:
                have.add(t.output)
                changed = True
    return have


def category(env: PlanBenchEnv) -> str | None:
    """§6.4 trajectory category of a failed episode (None for a correct one)."""
    st = env.state
    if st.correct:
        return None
    if st.failure == "exceeded_max_tool_call_errors" or (st.turns and st.format_errors / st.turns >= 0.5):
        return "format_error"
    calls = [r for r in st.log if r.get("action") == "tool_call" and r.get("outcome") == "ok"]
    progress = [bool(r.get("progress")) for r in calls]
    if not any(progress):
        return "no_traction"
    first = progress.index(True)
    after = progress[first + 1:]
    if all(after):
        return "other"  # progress calls only, yet failed: none of the paper's three patterns
    first_np = after.index(False)
    return "weak_recovery" if any(after[first_np + 1:]) else "irrecoverable_drift"


def ending(env: PlanBenchEnv, cat: str | None) -> str | None:
    """§6.3 ending type of a non-interaction failure (failures other than Format Error).

    Surrender: the answer says it cannot answer. Wrong tool value: a non-surrender answer that
    carries a value some tool returned in this episode (the paper's name: the agent trusted the
    wrong tool output). Search exhaustion: the step budget ran out while the agent kept retrieving
    (at least 2 retrievals) after its last progress call, or without any. A fabricated answer that
    no tool returned, or a budget spent on calls rather than search, is "other"."""
    st = env.state
    if cat is None or cat == "format_error":
        return None
    if st.failure in ("final_answer_wrong", "target_datatype_not_reached"):
        last = st.answers[-1] if st.answers else ""
        if is_surrender(last):
            return "surrender"
        norm = norm_value(last)
        returned = {norm_value(r["output_value"]) for r in st.log
                    if r.get("action") == "tool_call" and r.get("outcome") == "ok" and r.get("output_value")}
        return "wrong_tool_value" if any(v and v in norm for v in returned) else "other"
    if st.failure == "exceeded_max_steps":
        last_progress = max((i for i, r in enumerate(st.log) if r.get("progress")), default=-1)
        searches = sum(1 for r in st.log[last_progress + 1:] if r.get("action") == "retrieve")
        return "search_exhaustion" if searches >= 2 else "other"
    return "other"


def episode_metrics(env: PlanBenchEnv) -> dict[str, float]:
    st, task = env.state, env.task
    failure = st.failure or "interrupted"
    failed = not st.correct
    m: dict[str, float] = {}
    # Main metrics (spec §6.1).
    m["accuracy"] = 1.0 if st.correct else 0.0
    ex = st.executed
    m["egt_precision"] = len(ex & task.d_gt) / len(ex) if ex else NAN
    m["turns"] = float(st.turns)
    m["edt"] = float(len(explored_closure(env) - set(task.inputs)))
    m["retrievals"] = float(st.retrievals)
    m["tool_calls"] = float(st.tool_calls)
    m["invalid_calls"] = float(st.invalid_calls)
    m["untrusted_rejections"] = float(st.untrusted)
    m["lstar"] = float(task.lstar)
    for g, (lo, hi) in LSTAR_GROUPS.items():
        m[f"accuracy_lstar_{g}"] = m["accuracy"] if lo <= task.lstar <= hi else NAN
    # Auxiliary (spec §6.3).
    modes = [r.get("mode") for r in st.log if r.get("action") == "retrieve"]
    m["n_by_inputs"] = float(modes.count("by_inputs"))
    m["n_by_outputs"] = float(modes.count("by_outputs"))
    m["n_by_io_info"] = float(modes.count("by_io_info"))
    m["retrievals_failed"] = float(st.retrievals) if failed else 0.0
    m["tool_calls_failed"] = float(st.tool_calls) if failed else 0.0
    if task.single_step:
        gt = {env.world.executable[i].id for i in task.gt_path}
        seen = {tid for r in st.log if r.get("action") == "retrieve" for tid in r.get("returned", [])}
        m["gt_tool_retrieved"] = 1.0 if gt & seen else 0.0
    else:
        m["gt_tool_retrieved"] = NAN
    m["blocked_retrievals"] = float(sum(1 for r in st.log if r.get("blocked_replaced")))
    # Failure reasons (all episodes) and the error taxonomy (failed episodes only).
    for f in FAILURES:
        m[f"failure_{f}"] = 1.0 if failure == f else 0.0
    cat = category(env)
    for c in CATEGORIES:
        m[f"category_{c}"] = NAN if cat is None else (1.0 if cat == c else 0.0)
    end = ending(env, cat)
    for e in ENDINGS:
        m[f"ending_{e}"] = NAN if end is None else (1.0 if end == e else 0.0)
    # Case-study labels (failed episodes).
    n_progress = sum(1 for r in st.log if r.get("progress"))
    last = st.answers[-1] if st.answers else ""
    if failed:
        m["premature_answering"] = 1.0 if (st.answers and task.target not in st.have and n_progress
                                             and not is_surrender(last)) else 0.0
        m["unresolved_execution"] = 1.0 if failure == "exceeded_max_steps" and n_progress else 0.0
        m["noisy_response_adoption"] = 1.0 if last and any(
            v and len(v) >= 2 and v in last for v in st.untrusted_vals) else 0.0
    else:
        m["premature_answering"] = m["unresolved_execution"] = m["noisy_response_adoption"] = NAN
    # Drift diagnostics (Takeaway 9) as ratio numerators/denominators over failed runs.
    nonprog = [r for r in st.log if r.get("action") == "tool_call" and r.get("outcome") == "ok"
               and not r.get("progress")]
    fr = nonprog if failed else []
    m["drift_nonprogress_calls"] = float(len(fr))
    m["drift_capable_before"] = float(sum(1 for r in fr if r.get("capable_before")))
    m["drift_recent_window"] = float(sum(1 for r in fr if (r.get("tool_age") or 99) <= 2))
    m["drift_capable_stale"] = float(sum(1 for r in fr if r.get("capable_before")
                                         and (r.get("capable_min_age") or 0) > 2))
    m["drift_reappeared"] = (1.0 if st.reappeared_after_drift else 0.0) if (failed and st.drift_started) else NAN
    # Blocked-alternative follow-up (spec §6.4, Figs. 7-8).
    _blocked_followup(env, m)
    return m


def _blocked_followup(env: PlanBenchEnv, m: dict[str, float]) -> None:
    log = env.state.log
    counts = {f"blk_{k}": 0.0 for k in ("exp", "imp", "sem", "value_reused", "search_reused", "unused")}
    for i, r in enumerate(log):
        kind = r.get("kind", "")
        if r.get("action") != "tool_call" or r.get("outcome") != "ok" or not kind.startswith("blocker:"):
            continue
        counts[f"blk_{kind.split(':')[1]}"] += 1
        value, dtype = r.get("output_value", ""), r.get("output_datatype")
        later = log[i + 1:]
        if any(value in q.get("args", {}).values() for q in later if q.get("action") == "tool_call"):
            counts["blk_value_reused"] += 1
        elif any(dtype in q.get("resolved_inputs", []) for q in later if q.get("action") == "retrieve"):
            counts["blk_search_reused"] += 1
        else:
            counts["blk_unused"] += 1
    counts["blk_invoked"] = counts["blk_exp"] + counts["blk_imp"] + counts["blk_sem"]
    m.update(counts)


def _ratio(name: str, num: str, den: str, desc: str, *, higher: bool | None = True, scale: float = 1.0) -> MetricSpec:
    return MetricSpec(name=name, kind="ratio", numerator=num, denominator=den, higher_is_better=higher,
                      description=desc, scale=scale)


MAIN_METRICS = [
    MetricSpec(name="accuracy", description="Grounded accuracy (gold substring and target datatype reached)",
               scale=100.0),
    MetricSpec(name="egt_precision", description="EGT precision over Q' (episodes with a trusted execution)",
               scale=100.0),
    # Tab. 3 marks Acc and EGT with an up arrow, ITCR and UIRR with a down arrow, and leaves turns, EDT and
    # S/C unmarked: descriptive (the oracle takes 2|pi| + 1 turns; exploring more is neither good nor bad)
    MetricSpec(name="turns", higher_is_better=None, description="Average turns per query"),
    MetricSpec(name="edt", higher_is_better=None, description="Mean explored datatypes beyond the inputs"),
    _ratio("s_c_ratio", "retrievals", "tool_calls", "Retrieval turns / tool-call turns (global totals)",
           higher=None),
    _ratio("itcr", "invalid_calls", "tool_calls", "Invalid tool-call rate (global totals)", higher=False,
           scale=100.0),
    _ratio("uirr", "untrusted_rejections", "tool_calls", "Untrusted-input rejection rate (global totals)",
           higher=False, scale=100.0),
]
MAIN_NAMES = [s.name for s in MAIN_METRICS]


def all_metrics() -> list[MetricSpec]:
    out = list(MAIN_METRICS)
    out += [MetricSpec(name=f"accuracy_lstar_{g}", description=f"Accuracy on tasks with L* = {g}", scale=100.0)
            for g in LSTAR_GROUPS]
    out += [
        _ratio("fb_ratio", "n_by_inputs", "n_by_outputs", "Input- over output-conditioned retrievals"),
        _ratio("output_conditioned_freq", "n_by_outputs", "retrievals", "Share of output-conditioned retrievals"),
        _ratio("s_c_ratio_failed", "retrievals_failed", "tool_calls_failed", "S/C ratio on failed queries"),
        MetricSpec(name="gt_tool_retrieved", description="Single-step: GT tool appeared in a retrieval",
                   scale=100.0),
        MetricSpec(name="blocked_retrievals", higher_is_better=False,
                   description="Retrievals per episode in which a blocked tool was replaced"),
    ]
    out += [MetricSpec(name=f"failure_{f}", higher_is_better=(f == "correct"),
                       description=f"Share of episodes ending as {f}", scale=100.0) for f in FAILURES]
    out += [MetricSpec(name=f"category_{c}", higher_is_better=False,
                       description=f"Share of failed episodes in category {c}", scale=100.0) for c in CATEGORIES]
    out += [MetricSpec(name=f"ending_{e}", higher_is_better=False,
                       description=f"Share of non-interaction failures ending by {e}", scale=100.0) for e in ENDINGS]
    out += [MetricSpec(name=n, higher_is_better=False, description=d, scale=100.0) for n, d in (
        ("premature_answering", "Failed: answered before reaching the target after progress"),
        ("unresolved_execution", "Failed: step budget exhausted after progress"),
        ("noisy_response_adoption", "Failed: final answer contains an untrusted value"),
        ("drift_reappeared", "Failed with drift: a progress-capable tool re-appeared in a later retrieval"),
    )]
    out += [
        _ratio("drift_capable_before_rate", "drift_capable_before", "drift_nonprogress_calls",
               "Failed runs: non-progress calls with a progress-capable tool already retrieved", higher=False,
               scale=100.0),
        _ratio("drift_recent_window_rate", "drift_recent_window", "drift_nonprogress_calls",
               "Failed runs: non-progress calls using a tool from the last 2 retrieval windows", scale=100.0),
        _ratio("drift_capable_stale_rate", "drift_capable_stale", "drift_capable_before",
               "Of those: the progress-capable tool is older than 2 windows", scale=100.0),
        _ratio("blocked_value_reused", "blk_value_reused", "blk_invoked",
               "Invoked blocker alternatives whose value is reused later", higher=False, scale=100.0),
        _ratio("blocked_search_reused", "blk_search_reused", "blk_invoked",
               "Invoked blocker alternatives whose datatype is searched as an input later", scale=100.0),
        _ratio("blocked_unused", "blk_unused", "blk_invoked", "Invoked blocker alternatives not followed up",
               scale=100.0),
        _ratio("blocked_share_exp", "blk_exp", "blk_invoked", "Invoked alternatives that fail explicitly",
               scale=100.0),
        _ratio("blocked_share_imp", "blk_imp", "blk_invoked", "Invoked alternatives that fail implicitly",
               scale=100.0),
        _ratio("blocked_share_sem", "blk_sem", "blk_invoked", "Invoked alternatives that mislead", scale=100.0),
    ]
    return out
