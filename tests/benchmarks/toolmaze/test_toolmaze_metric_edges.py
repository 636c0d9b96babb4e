"""ToolMaze's judge at its edges, through replayed episodes: an oracle's own trajectory, altered by
one step. A clean Action call that does no node's job is a wrong side effect and fails the task
(spec §6.2 "no wrong side effect"); a recovery counts on the last call of its window and not one
call later; an unexposed episode has no recovery rate; the recovery cost counts the faulted call."""

from __future__ import annotations

import asyncio
import json
import math

import pytest

from toolsweep.benchmarks.toolmaze import ToolMaze
from toolsweep.benchmarks.toolmaze.tools import ACTION
from toolsweep.evaluator.episode import run_episode
from toolsweep.evaluator.types import AgentReply, FunctionCall, Message, ToolCall, WorkUnit


@pytest.fixture(scope="module")
def bench() -> ToolMaze:
    return ToolMaze()


class Recorder:
    """Wraps a policy and keeps every reply it gave."""

    def __init__(self, inner) -> None:
        self.inner, self.replies = inner, []

    async def act(self, messages, tools):
        reply = await self.inner.act(messages, tools)
        self.replies.append(reply.message)
        return reply


class Script:
    """Replays the given assistant messages, then answers."""

    def __init__(self, messages) -> None:
        self.messages = list(messages)

    async def act(self, messages, tools):
        if self.messages:
            return AgentReply(message=self.messages.pop(0))
        return AgentReply(message=Message(role="assistant", content="done"))


def call(name: str, args: dict | str, i: str = "x") -> Message:
    raw = args if isinstance(args, str) else json.dumps(args)
    return Message(role="assistant", tool_calls=[ToolCall(id=i, function=FunctionCall(name=name, arguments=raw))])


def play(bench, setting, task_id, policy):
    env = bench.make_env(task_id, setting, 0)
    if isinstance(policy, str):
        policy = Recorder(bench.make_scripted_policy(policy, env, 0))
    unit = WorkUnit(sweep="t", model="m", benchmark="toolmaze", setting=setting, task_id=task_id, seed=0)
    result = asyncio.run(run_episode(env, policy, unit, max_turns=bench.max_turns(setting)))
    return env, result, policy


def test_a_junk_action_call_on_top_of_the_oracle_path_fails_the_task(bench):
    # The oracle's path, then one more call of an Action tool it used, with junk text arguments the
    # simulator accepts (an email sent to nobody in the task), then the oracle's answer.
    judged = 0
    for c in (1, 2, 3, 4):
        setting = f"C{c}-P0-std"
        for task_id in bench.tasks(setting)[::10]:
            env, result, oracle = play(bench, setting, task_id, "oracle")
            assert result.metrics["tsr"] == 1.0  # the positive control: the path alone succeeds
            actions = [x for x in env.calls if x.clean and env.ts.corpus.tools[x.tool].category == ACTION]
            last = actions[-1]
            if not any(isinstance(v, str) for v in last.args.values()):
                continue  # nothing to make junk of
            junk = {k: "zzz unrelated value" if isinstance(v, str) else v for k, v in last.args.items()}
            replay = oracle.replies[:-1] + [call(last.tool, junk)] + oracle.replies[-1:]
            env2, result2, _ = play(bench, setting, task_id, Script(replay))
            if not env2.calls[-1].clean:
                continue  # the simulator rejected it (e.g. a malformed slot): no side effect happened
            assert result2.metrics["tsr"] == 0.0, (setting, task_id, last.tool)
            judged += 1
    assert judged >= 25  # of 40 tasks


def test_a_recovery_counts_at_any_later_point_and_its_cost_counts_every_call_from_the_fault(bench):
    # Transient faults: the oracle retries right after the fault. Pushing the retry back with calls of
    # an unknown tool (no effect on the world, each in a step of its own) delays it: the recovery still
    # counts (the paper credits the retry whenever it comes; RC charges the detour), and the recovery
    # cost grows by exactly the calls added.
    setting, checked = "C1-P1-std", 0
    for task_id in bench.tasks(setting)[:12]:
        env, result, oracle = play(bench, setting, task_id, "oracle")
        if result.metrics["exposed"] != 1.0:
            continue
        k = next(x.idx for x in env.calls if x.perturbed)
        outcomes = {}
        for delay in range(5):
            replay, seen = [], 0
            for m in oracle.replies:
                replay.append(m)
                seen += len(m.tool_calls or [])
                if seen == k + 1:
                    replay += [call("no_such_tool", {}, f"f{i}") for i in range(delay)]
            env2, r2, _ = play(bench, setting, task_id, Script(replay))
            outcomes[delay] = (r2.metrics["prr"], r2.metrics["tsr"], r2.metrics["c"])
        assert all(o[0] == 1.0 and o[1] == 1.0 for o in outcomes.values()), (task_id, outcomes)
        # the recovery cost counts every call from the faulted one (included) on
        assert [o[2] for o in outcomes.values()] == [len(env.calls) - k + d for d in outcomes]
        checked += 1
    assert checked >= 4


def test_an_unexposed_episode_has_no_recovery_rate_and_no_cost(bench):
    for task_id in bench.tasks("C2-P0-std")[:5]:
        _, result, _ = play(bench, "C2-P0-std", task_id, "oracle")
        assert result.metrics["exposed"] == 0.0 and result.metrics["tsr"] == 1.0
        assert math.isnan(result.metrics["prr"]) and math.isnan(result.metrics["c_rec"])
        assert result.metrics["rc"] == 0.0


def test_passing_a_corrupted_value_on_fails_the_task_even_when_the_path_completes(bench):
    # Implicit faults return a plausible wrong value. The oracle notices and retries (a success);
    # the same trajectory with one extra lookup that carries the corrupted value on is a propagation,
    # and the task fails although every node is then done right.
    from toolsweep.benchmarks.toolmaze.metrics import corrupted_values

    judged = 0
    for setting in ("C1-P3-std", "C2-P3-std", "C3-P3-std"):
        for task_id in bench.tasks(setting)[:6]:
            env, result, oracle = play(bench, setting, task_id, "oracle")
            bad = corrupted_values(env.task, env.profile, env.calls)
            if result.metrics["exposed"] != 1.0 or not bad:
                continue
            assert (result.metrics["tsr"], result.metrics["propagated"]) == (1.0, 0.0)  # the positive control
            k, _, value = bad[0]
            faulty = env.engine.faulty_tools()
            lookup = next(t for t in sorted(env.visible)
                          if t not in faulty and env.ts.corpus.tools[t].category != ACTION)
            replay, seen = [], 0
            for m in oracle.replies:
                replay.append(m)
                seen += len(m.tool_calls or [])
                if seen == k + 1:
                    replay.append(call(lookup, {"query": value}, "carry"))
            _, r2, _ = play(bench, setting, task_id, Script(replay))
            assert (r2.metrics["propagated"], r2.metrics["tsr"]) == (1.0, 0.0), (setting, task_id)
            judged += 1
    assert judged >= 12
