"""No tie-break to guess (issue 56): where ToolMaze's generator chooses among equals (s* among the shortest
paths, the faulted tool among s*'s tools in a fault's group or path), the choice is a seeded draw, so
the faulted tool's rank under any ordering a model can see (name, alphabet, position in the tool list,
name and description length, parameter count) is what that draw predicts, and no tool is faulted more
often than it predicts. Before, ties went to the alphabetically first path: the faulted tool was the
first of its group in name order in 62% of C2 tasks against 30% by chance, and a policy that calls a
group's members in name order read the fault off the names."""

from __future__ import annotations

import math
from collections import defaultdict

import pytest

from toolsweep.benchmarks.toolmaze import ToolMaze

LEVELS = (1, 2, 3, 4)
# |z| beyond which a rank is not the draw's: 20 (level, ordering) tests, two-sided p < 0.001 each
Z_LIMIT = 3.3


@pytest.fixture(scope="module")
def bench() -> ToolMaze:
    return ToolMaze()


def _orderings(schemas: list[dict]) -> dict[str, dict[str, float]]:
    """Per visible ordering, each listed tool's key (smaller is earlier)."""
    fns = [s["function"] for s in schemas]
    return {
        "name": {f["name"]: i for i, f in enumerate(sorted(fns, key=lambda f: f["name"]))},
        "list position": {f["name"]: i for i, f in enumerate(fns)},
        "name length": {f["name"]: len(f["name"]) for f in fns},
        "description length": {f["name"]: len(f.get("description", "")) for f in fns},
        "parameter count": {f["name"]: len(f.get("parameters", {}).get("properties", {})) for f in fns},
    }


def _mid_ranks(key: dict[str, float], tools: list[str]) -> dict[str, float]:
    """Each tool's rank among `tools` by `key`, ties sharing their mean rank, scaled to [0, 1]."""
    values = sorted(key[t] for t in tools)
    n = len(tools)
    out = {}
    for t in tools:
        below = sum(v < key[t] for v in values)
        equal = sum(v == key[t] for v in values)
        out[t] = (below + (equal - 1) / 2) / (n - 1)
    return out


def _null(task, members: tuple[str, ...]) -> dict[str, float]:
    """P(tool is faulted) under the generator's draws: s* uniform among the shortest paths, then the
    faulted tool uniform among s*'s tools in the fault's group (C1: among s*'s tools before the Action)."""
    if task.complexity == 1:
        path = task.default_path[:-1]
        return {t: 1 / len(path) for t in path}
    shortest = min(len(s) for s in task.solutions)
    tied = [s for s in task.solutions if len(s) == shortest]
    p: dict[str, float] = defaultdict(float)
    for s in tied:
        on_path = [t for t in s if t in members]
        for t in on_path:
            p[t] += 1 / len(tied) / len(on_path)
    return dict(p)


def _faults(bench: ToolMaze, level: int):
    """(task, schemas, faulted tool, its null distribution) for every fault of the level's P1 cell."""
    setting = f"C{level}-P1-std"
    for task_id in bench.tasks(setting):
        env = bench.make_env(task_id, setting, 0)
        for rule in env.profile.rules:
            yield env.task, env.schemas, rule.victim, _null(env.task, rule.members)


@pytest.mark.parametrize("level", LEVELS)
def test_the_faulted_tools_rank_under_every_visible_ordering_is_the_seeded_draws(bench, level):
    sums = defaultdict(lambda: [0.0, 0.0, 0.0])  # ordering -> observed, expected, variance
    n = 0
    for task, schemas, victim, null in _faults(bench, level):
        assert victim in null, (task.task_id, victim)
        if len(null) < 2:
            continue
        n += 1
        for ordering, key in _orderings(schemas).items():
            u = _mid_ranks(key, sorted(null))
            mean = sum(p * u[t] for t, p in null.items())
            s = sums[ordering]
            s[0] += u[victim]
            s[1] += mean
            s[2] += sum(p * u[t] ** 2 for t, p in null.items()) - mean ** 2
    assert n >= 50, n  # enough faults with a choice to read a bias from
    z = {o: (obs - exp) / math.sqrt(var) if var > 0 else 0.0 for o, (obs, exp, var) in sums.items()}
    assert all(abs(v) < Z_LIMIT for v in z.values()), {o: round(v, 2) for o, v in z.items()}


def test_no_tool_is_faulted_more_often_than_the_draw_predicts(bench):
    """Tools recur across tasks, so some are faulted often; a uniform draw within each task predicts how
    often (a Poisson-binomial count per tool): none exceeds it by more than Bonferroni's z over all tools."""
    observed, expected, variance = defaultdict(int), defaultdict(float), defaultdict(float)
    for level in LEVELS:
        for task, _, victim, null in _faults(bench, level):
            observed[victim] += 1
            for t, p in null.items():
                expected[t] += p
                variance[t] += p * (1 - p)
    z = {t: (observed[t] - expected[t]) / math.sqrt(variance[t]) for t in expected if variance[t] > 0}
    limit = 4.0  # two-sided p ~ 6e-5 each: a family-wise 5% over the few hundred tools that can be faulted
    worst = max(z, key=z.get)
    assert z[worst] < limit, (worst, observed[worst], round(expected[worst], 1), round(z[worst], 2))
