"""PlanBench-XL against non-LLM adversaries, per cell: the Fig. 11 trap, the naming shortcut and the
shape of fake values (issue #31). Each test names the measurement it was written against."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections import defaultdict

import pytest

from toolsweep.benchmarks.planbench_xl import PlanBenchXL
from toolsweep.benchmarks.planbench_xl.policies import answer_text, call_text, name_rule, retrieve_text
from toolsweep.benchmarks.planbench_xl.world import DT
from toolsweep.evaluator.episode import run_episode
from toolsweep.evaluator.registry import get_benchmark, register_benchmark
from toolsweep.evaluator.types import AgentReply, Message, WorkUnit

register_benchmark("planbench_xl", "toolsweep.benchmarks.planbench_xl:PlanBenchXL")


def bench() -> PlanBenchXL:
    return get_benchmark("planbench_xl")  # type: ignore[return-value]


def play(b: PlanBenchXL, policy: str, setting: str, task_id: str, seed: int = 42):
    env = b.make_env(task_id, setting, seed)
    pol = b.make_scripted_policy(policy, env, 7)
    unit = WorkUnit(sweep="t", model=policy, benchmark="planbench_xl", setting=setting, task_id=task_id, seed=seed)
    return env, asyncio.run(run_episode(env, pol, unit, max_turns=b.max_turns(setting)))


class Script:
    def __init__(self, replies: list[str]) -> None:
        self.replies = list(replies)

    async def act(self, messages, tools) -> AgentReply:
        return AgentReply(message=Message(role="assistant", content=self.replies.pop(0) if self.replies else "x"))


# ------------------------------------------------------------------------------------ Fig. 11 trap

def test_fig11_trap_of_the_issue_is_graded_incorrect():
    """retail_task_0275 in ratio_0.8: the implicit-failure alternative for the payment method, then the
    default payment method obtained for real (the same string in odd cases), answered. Graded correct
    before: a value counts only under the datatype its trusted call returned it as (spec check 8)."""
    b = bench()
    env, res = play(b, "default_method_trap", "ratio_0.8", "retail_task_0275")
    task = env.task
    calls = [x for x in env.state.log if x.get("action") == "tool_call"]
    # the trap really happened: the target came only from an implicit failure, the gold string for real
    assert any(c.get("kind") == "blocker:imp" and c["output_datatype"] == task.target for c in calls)
    assert not any(c.get("trusted") and c["output_datatype"] == task.target for c in calls)
    assert any(c.get("trusted") and c["output_value"] == task.gold and c["output_datatype"] != task.target
               for c in calls)
    assert env.state.answers == [task.gold] and task.target in env.state.have  # D_t has it (Fig. 17)
    assert res.metrics["accuracy"] == 0.0
    assert env.state.failure == "final_answer_wrong"


def test_the_payment_method_obtained_for_real_is_still_correct():
    """Positive control: the same task answered after a trusted call returned the target gets credit."""
    b = bench()
    env, res = play(b, "oracle", "ratio_0.8", "retail_task_0275")
    assert res.metrics["accuracy"] == 1.0


def test_a_default_method_value_is_no_payment_method_argument_even_with_the_datatype_in_d_t():
    """Fig. 14 after an implicit failure put payment_method_id in D_t: the default method's ID (the
    same string) passed as a payment method is refused, and nothing downstream becomes trusted."""
    b = bench()
    env = b.make_env("retail_task_0275", "ratio_0.8", 42)
    env.reset()
    w, rec = env.world, env.world.records[env.task.case - 1]
    assert rec["default_payment_method_id"] == rec["payment_method_id"]  # an odd case
    from toolsweep.benchmarks.planbench_xl.policies import DefaultMethodTrapPolicy

    script = DefaultMethodTrapPolicy(env)._build()[:-1]  # up to the default method, no answer
    pm_user = next(t for t in w.executable if t.inputs == ("payment_method_id",) and t.output == "user_id")
    script += [retrieve_text("by_io_info", ["payment method id"], ["user id"]),
               call_text(pm_user.name, {pm_user.params[0][0]: rec["default_payment_method_id"]})]
    for text in script:
        env.step(Message(role="assistant", content=text))
    last = env.state.log[-1]
    assert last["action"] == "tool_call" and last.get("outcome") == "ungrounded"
    assert "payment_method_id" in env.state.have


def test_the_trap_adversary_is_bounded_at_zero_in_every_setting_with_implicit_failures():
    b = bench()
    spec = next(e for e in b.exploit_policies() if e.name == "default_method_trap")
    assert spec.ceilings == {"accuracy": 0.0} and "ratio_0.8" in (spec.settings or [])
