"""Sweep expansion: (model × benchmark × setting × task × seed) into work units."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from toolsweep.evaluator.types import Sampling, WorkUnit


@dataclass(frozen=True)
class BenchmarkPlan:
    """One benchmark's share of a sweep, already resolved against the benchmark itself."""

    benchmark: str
    tasks_by_setting: dict[str, list[str]]
    seeds: list[int]


def expand_units(
    sweep: str, models: Sequence[str], plans: Iterable[BenchmarkPlan], sampling: Sampling,
    contexts: Mapping[tuple[str, str], str] | None = None,
) -> list[WorkUnit]:
    """Every unit of the sweep, ordered by unit_id.

    Ordering by the sha256 id is a deterministic shuffle: every cell fills at the same pace, so the
    live confidence intervals of all cells narrow together instead of one cell at a time.
    """
    units = [
        WorkUnit(
            sweep=sweep,
            model=model,
            benchmark=plan.benchmark,
            setting=setting,
            task_id=task_id,
            seed=seed,
            sampling=sampling,
            context=(contexts or {}).get((model, plan.benchmark), ""),
        )
        for plan in plans
        for setting, task_ids in plan.tasks_by_setting.items()
        for task_id in task_ids
        for seed in plan.seeds
        for model in models
    ]
    units.sort(key=lambda u: u.unit_id)
    ids = [u.unit_id for u in units]
    if len(set(ids)) != len(ids):
        raise ValueError("the sweep expands to duplicate units: a model, setting or task is listed twice")
    return units
