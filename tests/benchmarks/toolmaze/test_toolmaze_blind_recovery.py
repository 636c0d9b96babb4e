"""Recovery is credited only as a response to the fault (issue 42). A retry counts once the agent has
received the transient error (a later agent step), and not in a trajectory that also repeats calls
that had succeeded: such an agent repeats whatever comes back. Blind repetition (every tool twice,
never reading a response) had PRR and TSR 1.000 on all 8 transient cells; the greedy binder plus
repetition had PRR .608 on C1-P1, whose declared ceiling is 0. The positive controls keep their credit."""

from __future__ import annotations

import math
import random

import pytest

from toolsweep.benchmarks.toolmaze import ToolMaze
from toolsweep.benchmarks.toolmaze.bounds import CEILINGS

from test_toolmaze_exploits import _expected_args, _replay
from test_toolmaze_fault_binding import mean, play

TRANSIENT = [f"C{c}-{p}" for c in (1, 2, 3, 4) for p in ("P1", "P3")]


@pytest.fixture(scope="module")
def bench():
    return ToolMaze()


def _sample(bench, cell: str, k: int = 12) -> list[str]:
    return sorted(random.Random(f"blind/{cell}").sample(bench.tasks(f"{cell}-std"), k))


@pytest.mark.parametrize("cell", TRANSIENT)
def test_blind_repetition_earns_no_recovery(bench, cell):
    results = play(bench, "blind_repeat", f"{cell}-std", _sample(bench, cell))
    assert all(r.metrics["exposed"] == 1.0 for r in results)
    assert mean(results, "prr") == 0.0, f"{cell}: calling every tool twice was credited as a retry"
    # its final Action runs twice (a second booking, a second email): success only where the fault
    # sat on that Action (its first call never ran) or the tool itself refused the second booking
    assert mean(results, "tsr") < 0.5


def test_greedy_binder_with_repetition_stays_at_the_c1_p1_ceiling(bench):
    assert CEILINGS["greedy_binder"]["C1-P1"]["prr"] == 0.0
    results = play(bench, "greedy_repeat", "C1-P1-std", _sample(bench, "C1-P1", 25))
    assert sum(r.metrics["exposed"] for r in results) >= 5
    assert mean(results, "prr") == 0.0


def _c1_case(bench, setting: str):
    tid = bench.tasks(setting)[3]
    task = bench.data.task(tid)
    return tid, task, task.default_path.index(task.victim)


@pytest.mark.parametrize("setting", ["C1-P1-std", "C1-P3-std"])
def test_a_retry_after_the_error_is_credited_and_the_same_retry_among_blind_repeats_is_not(bench, setting):
    tid, task, v = _c1_case(bench, setting)
    steps = [[(t, _expected_args(task, t))] for t in task.default_path]
    retry = steps[: v + 1] + [steps[v]] + steps[v + 1:]
    env = _replay(bench, setting, tid, retry, final="Done: the first call failed, the retry worked.")
    assert env.result()["prr"] == 1.0 and env.result()["tsr"] == 1.0
    # the same trajectory, plus one repeat of a call that had succeeded (the step before the victim's,
    # or the one after it when the victim comes first)
    k = v - 1 if v > 0 else v + 1
    blind = retry[: k + 1] + [steps[k]] + retry[k + 1:]
    env = _replay(bench, setting, tid, blind, final="Done.")
    assert env.result()["prr"] == 0.0


def test_the_same_action_twice_is_a_wrong_side_effect(bench):
    tid = bench.tasks("C1-P0-std")[0]
    task = bench.data.task(tid)
    steps = [[(t, _expected_args(task, t))] for t in task.default_path]
    assert _replay(bench, "C1-P0-std", tid, steps).result()["tsr"] == 1.0
    assert _replay(bench, "C1-P0-std", tid, steps + [steps[-1]]).result()["tsr"] == 0.0


@pytest.mark.parametrize(("policy", "cells"), [("retry", ["C1-P1", "C2-P1", "C3-P1", "C4-P1"]),
                                               ("retry_then_switch", ["C2-P2", "C3-P2", "C4-P2"]),
                                               ("acknowledged_abort", ["C1-P2"])])
def test_positive_controls_keep_their_credit(bench, policy, cells):
    for cell in cells:
        results = play(bench, policy, f"{cell}-std", _sample(bench, cell, 8))
        assert mean(results, "prr") == 1.0 and mean(results, "tsr") == 1.0, (policy, cell)
        assert not math.isnan(mean(results, "prr"))
