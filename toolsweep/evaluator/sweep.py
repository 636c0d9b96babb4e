"""Sweep expansion: (model × benchmark × setting × task × seed) into work units."""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolsweep.evaluator.types import Sampling, WorkUnit, canonical_json


@dataclass(frozen=True)
class BenchmarkPlan:
    """One benchmark's share of a sweep, already resolved against the benchmark itself."""

    benchmark: str
    tasks_by_setting: dict[str, list[str]]
    seeds: list[int]


def expand_units(
    sweep: str, models: Sequence[str], plans: Iterable[BenchmarkPlan], sampling: Sampling,
    contexts: Mapping[tuple[str, str], str] | None = None,
) -> UnitSpace:
    """Every unit of the sweep, ordered by unit_id (see `UnitSpace`)."""
    return UnitSpace(sweep, models, plans, sampling, contexts)


@dataclass(frozen=True)
class _Group:
    """The units of one (model, benchmark, setting): every task with every seed."""

    model: str
    benchmark: str
    setting: str
    task_ids: list[str]
    seeds: list[int]
    context: str

    @property
    def size(self) -> int:
        return len(self.task_ids) * len(self.seeds)


def _j(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


class UnitSpace(Sequence[WorkUnit]):
    """Every unit of a sweep, ordered by unit_id, without holding a WorkUnit per unit.

    Ordering by the sha256 id is a deterministic shuffle: every cell fills at the same pace, so the
    live confidence intervals of all cells narrow together instead of one cell at a time. A unit is
    its id (a string) and its place in the grid (an integer); the WorkUnit is built when it is
    leased, so a million-unit sweep costs the driver about 120 bytes per unit, not kilobytes. Ids are
    hashed from the same canonical JSON as `WorkUnit.unit_id` (checked on the first unit of every
    cell), so resumed run directories keep their ids.
    """

    def __init__(self, sweep: str, models: Sequence[str], plans: Iterable[BenchmarkPlan], sampling: Sampling,
                 contexts: Mapping[tuple[str, str], str] | None = None) -> None:
        self.sweep, self.sampling = sweep, sampling
        self._groups = [
            _Group(model, plan.benchmark, setting, list(task_ids), list(plan.seeds),
                   (contexts or {}).get((model, plan.benchmark), ""))
            for plan in plans for setting, task_ids in plan.tasks_by_setting.items() for model in models
        ]
        self._offsets = list(itertools.accumulate((g.size for g in self._groups), initial=0))
        ids = self._hash_all()
        order = sorted(range(len(ids)), key=ids.__getitem__)
        self.ids: list[str] = [ids[i] for i in order]
        del ids
        self._flat = array("q", order)
        for a, b in zip(self.ids, self.ids[1:]):
            if a == b:
                raise ValueError("the sweep expands to duplicate units: a model, setting or task is listed twice")

    def _hash_all(self) -> list[str]:
        sampling = canonical_json(self.sampling.model_dump(mode="json"))
        out: list[str] = []
        for g in self._groups:
            head = (f'{{"benchmark":{_j(g.benchmark)},"context":{_j(g.context)},"model":{_j(g.model)},'
                    f'"sampling":{sampling},"seed":')
            mid = f',"setting":{_j(g.setting)},"sweep":{_j(self.sweep)},"task_id":'
            first = len(out)
            out.extend(hashlib.sha256(f"{head}{seed}{mid}{_j(task)}}}".encode()).hexdigest()
                       for task in g.task_ids for seed in g.seeds)
            if len(out) > first and out[first] != self._build(g, 0).unit_id:
                raise RuntimeError("unit ids no longer match WorkUnit.unit_id; UnitSpace._hash_all is out of date")
        return out

    def _build(self, g: _Group, r: int) -> WorkUnit:
        task, seed = divmod(r, len(g.seeds))
        return WorkUnit(sweep=self.sweep, model=g.model, benchmark=g.benchmark, setting=g.setting,
                        task_id=g.task_ids[task], seed=g.seeds[seed], sampling=self.sampling, context=g.context)

    def _group_of(self, flat: int) -> tuple[_Group, int]:
        k = bisect.bisect_right(self._offsets, flat) - 1
        return self._groups[k], flat - self._offsets[k]

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> WorkUnit:  # type: ignore[override]
        if isinstance(i, slice):
            raise TypeError("a UnitSpace is indexed one unit at a time")
        g, r = self._group_of(self._flat[i])
        unit = self._build(g, r)
        unit.__dict__["unit_id"] = self.ids[i if i >= 0 else len(self.ids) + i]  # the cached_property's slot
        return unit

    def __iter__(self) -> Iterator[WorkUnit]:
        return (self[i] for i in range(len(self.ids)))

    def id_set(self) -> set[str]:
        return set(self.ids)

    def cells(self) -> set[tuple[str, str, str]]:
        return {(g.model, g.benchmark, g.setting) for g in self._groups if g.size}

    def select(self, skip: set[str] | frozenset[str] = frozenset()) -> UnitSelection:
        """The units whose ids are not in `skip`, in id order, still unbuilt."""
        return UnitSelection(self, array("q", (i for i, uid in enumerate(self.ids) if uid not in skip)))


class UnitSelection:
    """Some units of a `UnitSpace` (positions in id order): what a run still has to do."""

    def __init__(self, space: UnitSpace, positions: array) -> None:
        self.space, self.positions = space, positions

    def __len__(self) -> int:
        return len(self.positions)

    def __bool__(self) -> bool:
        return len(self.positions) > 0

    def __iter__(self) -> Iterator[WorkUnit]:
        return (self.space[i] for i in self.positions)

    def without(self, skip: set[str]) -> UnitSelection:
        ids = self.space.ids
        return UnitSelection(self.space, array("q", (i for i in self.positions if ids[i] not in skip)))

    def settings_by_benchmark(self) -> dict[str, list[str]]:
        """The settings that still have units, per benchmark (what the workers build)."""
        seen: set[int] = set()
        for i in self.positions:
            seen.add(bisect.bisect_right(self.space._offsets, self.space._flat[i]) - 1)
            if len(seen) == len(self.space._groups):
                break
        out: dict[str, set[str]] = {}
        for k in seen:
            g = self.space._groups[k]
            out.setdefault(g.benchmark, set()).add(g.setting)
        return {b: sorted(s) for b, s in out.items()}
