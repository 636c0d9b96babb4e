"""Does any ordering a model can see point at a hidden role? (issue 56: no tie-break to guess.)

A generator that breaks ties by name or list position hands a policy with no language model the answer:
ToolMaze's faulted tool was the first of its group by name in 100 of 100 C2 tasks because s* went to the
alphabetically first of equal-length paths. This module tests a hidden role (the faulted tool, the
replacement among look-alikes, ...) against what the generator's own draws predict: per case, the tools
the role could have fallen on and each one's probability (the null), and the tool it did fall on. Under
every visible ordering (name, list position, name and description length, parameter count) the role's
mid-rank among those tools is compared with its expectation under the null, summed over cases into one
z per ordering; and each tool's count as the role against its Poisson-binomial expectation (no tool
recurs more often than the draws predict). Pure logic: the benchmark supplies the cases."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ORDERINGS = ("name", "list position", "name length", "description length", "parameter count")


@dataclass(frozen=True)
class RoleCase:
    """One case: the tool schemas as the model sees them (OpenAI's form, in listed order), the tool that
    holds the hidden role, and the null: P(role falls on tool) under the generator's seeded draws."""

    schemas: Sequence[Mapping[str, Any]]
    holder: str
    null: Mapping[str, float]


def visible_keys(schemas: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Per visible ordering, each listed tool's sort key (smaller comes first)."""
    fns = [s.get("function", s) for s in schemas]
    keys = {
        "name": {f["name"]: i for i, f in enumerate(sorted(fns, key=lambda f: f["name"]))},
        "list position": {f["name"]: i for i, f in enumerate(fns)},
        "name length": {f["name"]: len(f["name"]) for f in fns},
        "description length": {f["name"]: len(f.get("description", "")) for f in fns},
        "parameter count": {f["name"]: len((f.get("parameters") or {}).get("properties", {})) for f in fns},
    }
    return {ordering: keys[ordering] for ordering in ORDERINGS}


def mid_ranks(key: Mapping[str, float], tools: Sequence[str]) -> dict[str, float]:
    """Each tool's rank among `tools` by `key`, ties sharing their mean rank, scaled to [0, 1]."""
    from scipy.stats import rankdata

    ranks = rankdata([key[t] for t in tools], method="average")
    return {t: float(r - 1) / (len(tools) - 1) for t, r in zip(tools, ranks)}


def rank_z(cases: Iterable[RoleCase]) -> dict[str, float]:
    """Per visible ordering, z of the role's summed mid-rank against the null (0 where no case varies)."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])  # observed, expected, variance
    for case in cases:
        if case.holder not in case.null:
            raise ValueError(f"the role's tool {case.holder!r} has no probability under the case's null")
        if len(case.null) < 2:
            continue
        tools = sorted(case.null)
        for ordering, key in visible_keys(case.schemas).items():
            u = mid_ranks(key, tools)
            mean = sum(p * u[t] for t, p in case.null.items())
            s = sums[ordering]
            s[0] += u[case.holder]
            s[1] += mean
            s[2] += sum(p * u[t] ** 2 for t, p in case.null.items()) - mean ** 2
    return {o: (obs - exp) / math.sqrt(var) if var > 1e-12 else 0.0 for o, (obs, exp, var) in sums.items()}


def recurrence_z(cases: Iterable[RoleCase]) -> dict[str, tuple[int, float, float]]:
    """Per tool that could hold the role: (times it did, times the draws predict, z)."""
    observed: dict[str, int] = defaultdict(int)
    expected: dict[str, float] = defaultdict(float)
    variance: dict[str, float] = defaultdict(float)
    for case in cases:
        observed[case.holder] += 1
        for tool, p in case.null.items():
            expected[tool] += p
            variance[tool] += p * (1 - p)
    return {t: (observed[t], expected[t], (observed[t] - expected[t]) / math.sqrt(variance[t]))
            for t in expected if variance[t] > 0}
