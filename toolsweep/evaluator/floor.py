"""The no-LLM floor beside every model: each cell's floor value and whether the model is above it.

A benchmark's floor is its `baseline_policy()` (the strongest scripted policy that reads only what a model
reads) run as a model of the sweep (`floor: true`, or a model with `policy: baseline`). A model's score
means something only above it, and "above" is judged on the same (task, seed) cells by the paired
difference model − floor and its bootstrap interval (`stats.paired_difference`, the rows of
`CellTable.paired`), not by comparing two separate intervals: two overlapping intervals can still hide a
difference the pairing sees, and the pairing removes the task effects both share.

The judgement follows the metric's direction: "above" means better than the floor (for a metric where
lower is better, an interval of model − floor wholly below 0), "below" worse, and "not distinguishable"
when the interval covers 0 (the floor's own policy under another name lands here: its difference is 0
on every cell). The interval is the raw paired one at the sweep's confidence; the multiplicity-adjusted
decisions of the same rows (`holm`, `bh`) are in summary.json's `paired`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from toolsweep.evaluator.protocols import MetricSpec

ABOVE = "above"
BELOW = "below"
NOT_DISTINGUISHABLE = "not distinguishable"

JUDGEMENT_SIGN = {ABOVE: 1.0, NOT_DISTINGUISHABLE: 0.0, BELOW: -1.0}
"""A judgement as a number (MLflow metrics are numbers): +1 above, 0 not distinguishable, -1 below."""


def finite(x: Any) -> float | None:
    """`x` as a float, or None when it is missing, not a number, NaN or infinite."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def judge(ci_low: Any, ci_high: Any, higher_is_better: bool | None = True) -> str | None:
    """Above, below or not distinguishable from the floor, from the interval of model − floor; None when
    the interval is undefined (no (task, seed) cell where both have the metric) or the metric is descriptive
    (no better direction: being above the floor would mean nothing)."""
    lo, hi = finite(ci_low), finite(ci_high)
    if lo is None or hi is None or higher_is_better is None:
        return None
    if lo > 0:
        return ABOVE if higher_is_better else BELOW
    if hi < 0:
        return BELOW if higher_is_better else ABOVE
    return NOT_DISTINGUISHABLE


def _difference(row: Mapping[str, Any], model: str) -> dict[str, Any]:
    """A paired row as `model` − floor: the row is A − B with the two models in name order, so a row
    with the floor as A is negated (its interval's ends swap)."""
    value, lo, hi = row.get("value"), row.get("ci_low"), row.get("ci_high")
    if row.get("model_a") != model:
        value, lo, hi = (None if v is None else 0.0 - float(v) for v in (value, hi, lo))  # 0.0 - 0.0 is 0.0, not -0.0
    out = {"value": value, "ci_low": lo, "ci_high": hi, "n": row.get("n"), "tasks": row.get("tasks")}
    # the row's task-clustered p-value and its multiplicity decisions (`design.adjust_paired`), for the record
    out.update({k: row[k] for k in ("p_value", "holm", "bh") if k in row})
    return out


def attach_floors(
    cells: Sequence[dict[str, Any]],
    paired: Sequence[Mapping[str, Any]],
    floor_model: str | None,
    specs_for: Callable[[str, str], Sequence[MetricSpec]],
    policies: Mapping[str, str | None] | None = None,
) -> None:
    """Mark the floor's cells (`is_floor`) and give every other cell with a floor cell on the same
    (benchmark, setting) a `floor` section, in place:
    `{"model", "policy", "metrics": {name: {"floor": {value, ci_low, ci_high}, "difference": {value, ci_low,
    ci_high, n}, "judgement"}}}`. `policies`: each benchmark's baseline policy name, for the label."""
    if floor_model is None:
        return
    floors = {(c["benchmark"], c["setting"]): c for c in cells if c["model"] == floor_model}
    rows: dict[tuple[str, str, str, str], Mapping[str, Any]] = {}
    for p in paired:
        if floor_model in (p.get("model_a"), p.get("model_b")):
            other = p["model_b"] if p.get("model_a") == floor_model else p["model_a"]
            rows[(p["benchmark"], p["setting"], other, p["metric"])] = p
    for c in cells:
        key = (c["benchmark"], c["setting"])
        policy = (policies or {}).get(c["benchmark"])
        if c["model"] == floor_model:
            c["is_floor"] = True
            c["floor"] = {"model": floor_model, "policy": policy}
            continue
        floor = floors.get(key)
        if floor is None:
            continue
        directions = {s.name: s.higher_is_better for s in specs_for(*key)}
        metrics: dict[str, Any] = {}
        for name in c.get("metrics") or {}:
            f = (floor.get("metrics") or {}).get(name)
            row = rows.get((*key, c["model"], name))
            if f is None and row is None:
                continue
            diff = _difference(row, c["model"]) if row is not None else None
            metrics[name] = {
                "floor": None if f is None else {k: f.get(k) for k in ("value", "ci_low", "ci_high")},
                "difference": diff,
                "judgement": judge(diff["ci_low"], diff["ci_high"], directions.get(name, True)) if diff else None,
            }
        c["floor"] = {"model": floor_model, "policy": policy, "metrics": metrics}


def floor_of(cell: Mapping[str, Any], metric: str) -> Mapping[str, Any] | None:
    """A cell's floor reading of one metric ({floor, difference, judgement}), or None."""
    section = cell.get("floor")
    if not isinstance(section, Mapping):
        return None
    return (section.get("metrics") or {}).get(metric)


def floor_label(floor_model: str, policy: str | None) -> str:
    """How the floor is named in tables: `floor (greedy_binder)`, or the model's own name when it
    already says it (`floor`), with the benchmark's policy."""
    if policy and policy != floor_model:
        return f"{floor_model} (no-LLM floor: {policy})" if floor_model != "floor" else f"floor ({policy})"
    return floor_model if floor_model == "floor" else f"{floor_model} (no-LLM floor)"
