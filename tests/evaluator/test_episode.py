"""run_episode with the fake benchmark: no Ray, no model."""

import asyncio
import math

from fake_bench import FakeBench

from toolsweep.evaluator import AgentReply, Message, TerminationReason, WorkUnit, run_episode
from toolsweep.evaluator.protocols import ContextExceeded, InfraError

import pytest


def _unit(task="t1", setting="small", seed=0, model="oracle"):
    return WorkUnit(sweep="s", model=model, benchmark="fake", setting=setting, task_id=task, seed=seed)


def _play(bench, unit, policy_name="oracle", **kw):
    env = bench.make_env(unit.task_id, unit.setting, unit.seed)
    policy = bench.make_scripted_policy(policy_name, env, unit.rng_seed)
    return asyncio.run(run_episode(env, policy, unit, **kw))


def test_oracle_answers_and_trajectory_is_recorded():
    bench = FakeBench()
    result = _play(bench, _unit())
    assert result.termination == TerminationReason.ANSWERED
    assert result.metrics["accuracy"] == 1.0
    assert result.num_turns == 2
    roles = [m.role for m in result.trajectory.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]


def test_env_exception_is_env_error_not_a_crash():
    bench = FakeBench(fail_tasks=["t1"])
    result = _play(bench, _unit())
    assert result.termination == TerminationReason.ENV_ERROR
    assert "simulated environment failure" in result.error


class _Looping:
    async def act(self, messages, tools):
        from toolsweep.evaluator import FunctionCall, ToolCall

        call = ToolCall(id="x", function=FunctionCall(name="add", arguments='{"a": 1, "b": 1}'))
        return AgentReply(message=Message(role="assistant", tool_calls=[call]))


def test_hard_turn_cap_applies_on_top_of_env_budget():
    bench = FakeBench()
    unit = _unit()
    env = bench.make_env(unit.task_id, unit.setting, unit.seed)
    result = asyncio.run(run_episode(env, _Looping(), unit, max_turns=3))
    assert result.termination == TerminationReason.MAX_TURNS
    assert result.num_turns == 3
    assert result.metrics["accuracy"] == 0.0


class _Raising:
    def __init__(self, exc):
        self.exc = exc

    async def act(self, messages, tools):
        raise self.exc


def test_context_exceeded_and_infra_error():
    bench = FakeBench()
    unit = _unit()
    env = bench.make_env(unit.task_id, unit.setting, unit.seed)
    result = asyncio.run(run_episode(env, _Raising(ContextExceeded("too long")), unit))
    assert result.termination == TerminationReason.CONTEXT_EXCEEDED
    env = bench.make_env(unit.task_id, unit.setting, unit.seed)
    with pytest.raises(InfraError):
        asyncio.run(run_episode(env, _Raising(InfraError("server down")), unit))


class _Slow:
    async def act(self, messages, tools):
        await asyncio.sleep(5)


def test_timeout_is_a_scored_result():
    bench = FakeBench()
    unit = _unit()
    env = bench.make_env(unit.task_id, unit.setting, unit.seed)
    result = asyncio.run(run_episode(env, _Slow(), unit, timeout_s=0.2))
    assert result.termination == TerminationReason.TIMEOUT
    assert result.metrics["accuracy"] == 0.0  # the guard ended it: the policy itself would have answered nothing


class _Queued:
    """Waits `queued_s` in a queue (the deadline paused), then works `work_s`, then answers."""

    def __init__(self, queued_s, work_s):
        self.queued_s, self.work_s = queued_s, work_s

    async def act(self, messages, tools):
        from toolsweep.evaluator.episode import deadline_paused

        with deadline_paused():
            await asyncio.sleep(self.queued_s)
        await asyncio.sleep(self.work_s)
        return AgentReply(message=Message(role="assistant", content="3"))


def test_a_paused_wait_never_expires_the_episode_and_the_rest_of_the_budget_still_applies():
    bench = FakeBench()
    unit = _unit()
    # A queue twice as long as the whole budget: the episode finishes, and took longer than the budget.
    env = bench.make_env(unit.task_id, unit.setting, unit.seed)
    result = asyncio.run(run_episode(env, _Queued(queued_s=0.6, work_s=0.0), unit, timeout_s=0.3))
    assert result.termination == TerminationReason.ANSWERED, result.error
    # What was left of the budget before the wait still bounds the work after it.
    env = bench.make_env(unit.task_id, unit.setting, unit.seed)
    result = asyncio.run(run_episode(env, _Queued(queued_s=0.1, work_s=5.0), unit, timeout_s=0.3))
    assert result.termination == TerminationReason.TIMEOUT


def test_unit_identity_is_stable_and_seeds_differ():
    a, b = _unit(seed=0), _unit(seed=1)
    assert a.unit_id == _unit(seed=0).unit_id
    assert a.unit_id != b.unit_id and a.rng_seed != b.rng_seed
    assert len(a.unit_id) == 64 and not math.isnan(a.rng_seed)
    # Known value: sha256 of the canonical JSON, never Python's salted hash().
    import hashlib, json
    canon = json.dumps(a.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    assert a.unit_id == hashlib.sha256(canon.encode()).hexdigest()


def test_on_turn_sees_the_trajectory_before_every_agent_call():
    """A worker encodes the trajectory in `on_turn`, while the episode waits for its model: it must be
    called before each call with everything added so far, so the end has only the last turn left."""
    bench = FakeBench()
    unit = _unit()
    env = bench.make_env(unit.task_id, unit.setting, unit.seed)
    oracle = bench.make_scripted_policy("oracle", env, unit.rng_seed)
    seen, asked = [], []

    class Recording:
        async def act(self, messages, tools):
            asked.append(len(messages))
            return await oracle.act(messages, tools)

    result = asyncio.run(run_episode(env, Recording(), unit,
                                     on_turn=lambda t: seen.append((len(t.messages), len(t.steps)))))
    assert result.termination == TerminationReason.ANSWERED and result.num_turns == 2
    assert [m for m, _ in seen] == asked == [2, 4]  # before each call, the messages the agent is shown
    assert [s for _, s in seen] == [0, 1]
