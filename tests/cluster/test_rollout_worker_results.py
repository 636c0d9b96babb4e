"""How a rollout worker hands back what it played: every unit it was given comes back exactly once,
through `collect` calls that may wait side by side, even when an environment puts something in a
step's `info` that JSON cannot hold.

The worker is the plain class (its Ray actor runs the same methods on the same event loop); the
benchmark is a small one defined here."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from toolsweep.actors.rollout_worker import RolloutWorker
from toolsweep.evaluator import AgentReply, Benchmark, Message, MetricSpec, Observation, TerminationReason
from toolsweep.evaluator.encoded import pack_unit
from toolsweep.evaluator.types import WorkUnit
from toolsweep.models.config import ScriptedModelConfig

TARGET = "tests.cluster.test_rollout_worker_results:EchoBench"


class Unencodable:
    """Stands for whatever an environment might leave in `info` that has no JSON form."""


class EchoEnv:
    """Two turns; task "late-bad" leaves an unencodable value in its last step's info, "early-bad" in
    its first."""

    def __init__(self, task_id: str) -> None:
        self.task_id, self.turns = task_id, 0

    def reset(self) -> Observation:
        return Observation(messages=[Message(role="user", content="say something")])

    def step(self, reply: Message) -> Observation:
        self.turns += 1
        bad = (self.task_id == "early-bad" and self.turns == 1) or (self.task_id == "late-bad" and self.turns == 2)
        info: dict[str, Any] = {"turn": self.turns, "handle": Unencodable()} if bad else {"turn": self.turns}
        done = self.turns >= 2
        return Observation(messages=[] if done else [Message(role="user", content="again")], info=info, done=done,
                           termination=TerminationReason.ANSWERED if done else None)

    def result(self) -> dict[str, float]:
        return {"turns": float(self.turns)}


class SleepyPolicy:
    """Answers after the delay its task's name asks for ("slow" tasks take 0.4 s a turn)."""

    def __init__(self, task_id: str) -> None:
        self.delay = 0.4 if task_id.startswith("slow") else 0.0

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        await asyncio.sleep(self.delay)
        return AgentReply(message=Message(role="assistant", content="ok"))


class EchoBench(Benchmark):
    name = "echo"
    version = "1"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid")

    def settings(self) -> dict[str, dict[str, Any]]:
        return {"plain": {}}

    def tasks(self, setting: str) -> list[str]:
        return ["fast-1", "fast-2", "slow-1", "early-bad", "late-bad"]

    def make_env(self, task_id: str, setting: str, seed: int) -> EchoEnv:
        return EchoEnv(task_id)

    def metrics(self, setting: str | None = None) -> list[MetricSpec]:
        return [MetricSpec(name="turns")]

    def scripted_policies(self) -> dict[str, str]:
        return {"sleepy": "answers after a delay set by the task"}

    def make_scripted_policy(self, name: str, env: EchoEnv, seed: int) -> SleepyPolicy:
        return SleepyPolicy(env.task_id)


def _worker() -> RolloutWorker:
    models = {"m": ScriptedModelConfig(name="m", kind="scripted", policy="sleepy")}
    return RolloutWorker("w0", models, {"echo": {}}, extra_benchmarks={"echo": TARGET}, offload_env=False)


def _wires(*tasks: str) -> list[tuple]:
    return [pack_unit(WorkUnit(sweep="s", model="m", benchmark="echo", setting="plain", task_id=t, seed=0))
            for t in tasks]


def test_an_info_json_cannot_hold_ends_the_episode_as_env_error_instead_of_losing_the_unit():
    """Before: the row of "late-bad" failed to encode after the episode, the task died with the error
    and the unit never came back, so the sweep waited for it forever."""
    worker = _worker()

    async def play() -> list:
        await worker.submit(_wires("fast-1", "early-bad", "late-bad"))
        got: list = []
        for _ in range(20):
            got += await worker.collect(0.25)
            if len(got) == 3:
                break
        return got

    results = {r.unit_id: r for r in asyncio.run(play())}
    by_task = {json.loads(r.row_json)["task_id"]: r for r in results.values()}
    assert set(by_task) == {"fast-1", "early-bad", "late-bad"}
    assert by_task["fast-1"].termination is TerminationReason.ANSWERED
    for task in ("early-bad", "late-bad"):
        result = by_task[task]
        assert result.termination is TerminationReason.ENV_ERROR, task
        assert "Unencodable" in result.error, result.error
        row = json.loads(result.row_json)  # and the row itself is valid JSON the driver can record
        assert row["termination"] == "env_error" and row["task_id"] == task


def test_collect_calls_waiting_side_by_side_hand_back_every_result_once():
    """The driver keeps two `collect` calls waiting at a worker: the one that wakes first takes what
    finished; the other goes on waiting for what finishes next rather than answering empty."""
    worker = _worker()

    async def play() -> tuple[list, list, bool, list]:
        await worker.submit(_wires("fast-1", "fast-2", "slow-1"))
        first = asyncio.ensure_future(worker.collect(5.0))
        second = asyncio.ensure_future(worker.collect(5.0))
        done, _ = await asyncio.wait({first, second}, return_when=asyncio.FIRST_COMPLETED)
        early = done.pop().result()
        other = second if first.done() and first.result() is early else first
        still_waiting = not other.done()
        late = await other
        empty = await worker.collect(0.1)  # nothing left: an empty answer after the timeout
        assert worker._waiters == []  # a call that timed out leaves nothing waiting behind it
        return early, late, still_waiting, empty

    early, late, still_waiting, empty = asyncio.run(play())
    tasks = lambda rs: sorted(json.loads(r.row_json)["task_id"] for r in rs)  # noqa: E731
    assert tasks(early) == ["fast-1", "fast-2"]
    assert still_waiting, "the second call answered (empty) instead of waiting"
    assert tasks(late) == ["slow-1"]
    assert empty == []


def test_a_cancelled_collect_leaves_the_next_one_working():
    """The driver cancels the calls still waiting when a run ends; the worker must answer the next ones."""
    worker = _worker()

    async def play() -> list:
        waiting = asyncio.ensure_future(worker.collect(5.0))
        await asyncio.sleep(0.05)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        assert worker._waiters == []
        await worker.submit(_wires("fast-1"))
        return await worker.collect(5.0)

    got = asyncio.run(play())
    assert [json.loads(r.row_json)["task_id"] for r in got] == ["fast-1"]


def test_a_failure_to_encode_that_is_not_the_episodes_is_infrastructure_never_a_score(monkeypatch):
    """Only a value JSON cannot hold is the environment's; anything else failing while the row is
    encoded (memory, say) is the worker's: `infra_error`, which the scheduler retries and never scores."""
    import toolsweep.actors.rollout_worker as rollout_worker

    real, calls = rollout_worker.encode_result, []

    def failing_once(result, row=None):
        calls.append(result.termination)
        if len(calls) == 1:
            raise MemoryError("no room")
        return real(result, row)

    monkeypatch.setattr(rollout_worker, "encode_result", failing_once)
    worker = _worker()

    async def play() -> list:
        await worker.submit(_wires("fast-1"))
        return await worker.collect(5.0)

    [result] = asyncio.run(play())
    assert result.termination is TerminationReason.INFRA_ERROR
    assert "MemoryError" in result.error and calls[0] is TerminationReason.ANSWERED
