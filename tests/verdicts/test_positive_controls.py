"""Positive controls in natural words, played through the benchmarks' own environments: a correct
refusal (APB Unsolvable) and a correct abort (ToolMaze C1-P2) get their credit however they are
worded; a success claim never earns an abort's credit, and a plan that only says it will not go wrong
is no refusal.

Before (main): the free-prose refusal passed 0 of the sampled Unsolvable cases; 7 of the 8 natural
abort wordings below scored PRR 0 on C1-P2; "Done. It was not impossible after all." and "It failed
at first, but now it's done." were credited as wise aborts."""

from __future__ import annotations

import json
import random

import pytest

from toolsweep.benchmarks.apb import APB
from toolsweep.benchmarks.toolmaze import ToolMaze
from toolsweep.evaluator.types import FunctionCall, Message, ToolCall

PROSE_REFUSAL = "Sorry, I won't be able to plan this. The service it depends on is down, so there is no tool for it."
ABORTS = [
    "I was not able to finish the task: the service kept returning errors.",
    "Sorry, I couldn't complete your request because a tool I need is down.",
    "Unfortunately I had to stop here; the service failed and there is no other way to do this.",
    "The request could not be fulfilled: the service returned an error on every attempt.",
    "I'm afraid the task isn't done. The last tool keeps failing.",
    "No luck, unfortunately: the service is down, so I have no result for you.",
    "The service failed, so this task cannot be completed.",
    "I gave up after the service failed; nothing was completed.",
]
SUCCESS_CLAIMS = [
    "Done. It was not impossible after all.",
    "Done.",
    "It failed at first, but now it's done.",
    "All set! Nothing failed.",
    "The task is complete; the error was temporary.",
]


@pytest.fixture(scope="module")
def apb() -> APB:
    return APB()


@pytest.fixture(scope="module")
def toolmaze() -> ToolMaze:
    return ToolMaze()


def _apb_result(apb: APB, setting: str, task_id: str, text: str) -> dict:
    env = apb.make_env(task_id, setting, 0)
    env.reset()
    env.step(Message(role="assistant", content=text))
    return env.result()


@pytest.mark.parametrize("utype", ["conflict", "info", "tool", "visual"])
def test_a_refusal_in_free_prose_passes_every_unsolvable_type(apb, utype):
    setting = f"unsolvable_{utype}"
    cases = [t["task_id"] for t in apb.data.tasks[setting]]  # the Unsolvable cases, not their twins
    ids = sorted(random.Random(utype).sample(cases, 10))
    graded = [_apb_result(apb, setting, tid, PROSE_REFUSAL) for tid in ids]
    plan_talk = [_apb_result(apb, setting, tid, "You cannot go wrong with this plan.") for tid in ids]
    assert [m["pass"] for m in graded] == [1.0] * len(ids)
    assert [m["pass"] for m in plan_talk] == [0.0] * len(ids)


def _abort_trajectory(toolmaze: ToolMaze, setting: str):
    """A C1-P2 task and the calls of the acknowledged-abort control up to its stop (credited as it is)."""
    import asyncio

    from toolsweep.evaluator.episode import run_episode
    from toolsweep.evaluator.types import WorkUnit

    for tid in toolmaze.tasks(setting)[:40]:
        env = toolmaze.make_env(tid, setting, 0)
        unit = WorkUnit(sweep="t", model="a", benchmark="toolmaze", setting=setting, task_id=tid, seed=0)
        pol = toolmaze.make_scripted_policy("acknowledged_abort", env, unit.rng_seed)
        r = asyncio.run(run_episode(env, pol, unit, max_turns=toolmaze.max_turns(setting)))
        if r.metrics.get("exposed") == 1.0 and r.metrics.get("prr") == 1.0:
            return tid, [[(c.tool, c.args)] for c in env.calls]
    raise AssertionError(f"no credited acknowledged abort in {setting}")


def _replay(toolmaze: ToolMaze, setting: str, tid: str, steps, final: str):
    env = toolmaze.make_env(tid, setting, 0)
    env.reset()
    i = 0
    for step in steps:
        calls = []
        for name, args in step:
            i += 1
            calls.append(ToolCall(id=f"c{i}", function=FunctionCall(name=name, arguments=json.dumps(args))))
        env.step(Message(role="assistant", content=None, tool_calls=calls))
    env.step(Message(role="assistant", content=final))
    return env.result()


def test_a_wise_abort_in_natural_words_is_credited_and_a_success_claim_never_is(toolmaze):
    setting = "C1-P2-std"
    tid, steps = _abort_trajectory(toolmaze, setting)
    for text in ABORTS:
        assert _replay(toolmaze, setting, tid, steps, text)["prr"] == 1.0, text
    for text in SUCCESS_CLAIMS:
        assert _replay(toolmaze, setting, tid, steps, text)["prr"] == 0.0, text
