"""Faults are bound to a tool when the task is made (paper §3.4: a profile "specifies which tool on the
preferred path s* should fail"; §1: "injected at pre-specified tool nodes"), so the order in which an
agent calls a group's members cannot move them (issue 42). Under the paper's literal activation rule
(`fault_binding: first_call`) a look-alike called first and never read took the fault, and the default
path called next was recorded as a reroute: PRR and TSR 1.000 on every C2-C4 perturbed cell."""

from __future__ import annotations

import asyncio
import json
import math
import random

import pytest

from toolsweep.benchmarks.toolmaze import ToolMaze
from toolsweep.benchmarks.toolmaze.perturbation import clean_call
from toolsweep.evaluator.episode import run_episode
from toolsweep.evaluator.types import WorkUnit

CELLS = [f"C{c}-{p}" for c in (2, 3, 4) for p in ("P1", "P2", "P3", "P4")]
SAMPLE = 12


@pytest.fixture(scope="module")
def bench():
    return ToolMaze()


def play(bench, policy: str, setting: str, task_ids: list[str]) -> list:
    async def go():
        out = []
        for tid in task_ids:
            env = bench.make_env(tid, setting, 0)
            unit = WorkUnit(sweep="t", model=policy, benchmark="toolmaze", setting=setting, task_id=tid, seed=0)
            pol = bench.make_scripted_policy(policy, env, unit.rng_seed)
            out.append(await run_episode(env, pol, unit, max_turns=bench.max_turns(setting)))
        return out
    return asyncio.run(go())


def mean(results, metric: str) -> float:
    xs = [r.metrics[metric] for r in results if math.isfinite(r.metrics.get(metric, math.nan))]
    return sum(xs) / len(xs) if xs else math.nan


def sample(bench, cell: str, k: int = SAMPLE) -> list[str]:
    return sorted(random.Random(f"binding/{cell}").sample(bench.tasks(f"{cell}-std"), k))


@pytest.mark.parametrize("cell", CELLS)
def test_calling_a_lookalike_first_earns_no_reroute(bench, cell):
    results = play(bench, "lookalike_first", f"{cell}-std", sample(bench, cell))
    assert all(r.metrics["exposed"] == 1.0 for r in results)  # s* holds the fault: every one meets it
    assert mean(results, "prr") == 0.0, f"{cell}: a sacrificed look-alike was credited as a reroute"
    # success only where the look-alike was itself the last step (a group at the Action): that path
    # was complete, every call of it clean, before the fault came; never through the faulted tool
    for r in results:
        if r.metrics["tsr"] == 1.0:
            task = bench.data.task(r.unit.task_id)
            assert any(pos.tools and task.default_path[-1] in pos.tools for pos in task.groups), r.unit.task_id
    assert mean(results, "tsr") < 0.5


def test_the_first_call_binding_keeps_the_papers_literal_rule(bench):
    """The option that reproduces the old numbers: the member called first takes the fault."""
    literal = ToolMaze(fault_binding="first_call")
    results = play(literal, "lookalike_first", "C2-P2-std", sample(bench, "C2-P2", 6))
    assert mean(results, "prr") == 1.0


def _call(env, tool: str):
    return env.execute(f"c{len(env.calls)}", tool, json.dumps(clean_call(env.task, tool)[0]))


@pytest.mark.parametrize("tid", ["C2_task_084", "C3_task_040", "C2_task_011", "C3_task_077", "C4_task_090"])
def test_call_order_cannot_move_a_fault(bench, tid):
    task = bench.data.task(tid)
    level = task.complexity
    for p in ("P1", "P2", "P3", "P4"):
        profile = bench.profile(tid, p)
        for rule in profile.rules:
            assert rule.victim in task.default_path and rule.victim in rule.members
        for order in (sorted, lambda ts: sorted(ts, reverse=True)):
            env = bench.make_env(tid, f"C{level}-{p}-std", 0)
            for pos in task.groups:
                hits = {t: _call(env, t).perturbed is not None for t in order(pos.tools)}
                victims = {r.victim for r in profile.rules if set(r.members) == set(pos.tools)}
                assert {t for t, hit in hits.items() if hit} == victims, (tid, p, hits)
