"""A benchmark whose episodes say when they ran: each stamps (epoch seconds) its reset and its score,
so a test can count how many episodes of a model, or on a worker, ran at once. A task's name sets how
long its turns take ("slow..." 1.5 s, "mid..." 0.05 s, any other 0.01 s), and "broken..." tasks fail
as a dead model replica would (`InfraError`); every episode is 2 turns.
Registered as "stamps" by the tests that use it (tests/fakes is importable in Ray workers)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pydantic import BaseModel, ConfigDict

from toolsweep.evaluator import AgentReply, Benchmark, Message, MetricSpec, Observation, TerminationReason
from toolsweep.evaluator.protocols import InfraError

TURNS = 2


def turn_seconds(task_id: str) -> float:
    return 1.5 if task_id.startswith("slow") else 0.05 if task_id.startswith("mid") else 0.01


class StampEnv:
    def __init__(self) -> None:
        self.turns = 0
        self.reset_at = float("nan")

    def reset(self) -> Observation:
        self.reset_at = time.time()
        return Observation(messages=[Message(role="user", content="go")])

    def step(self, reply: Message) -> Observation:
        self.turns += 1
        done = self.turns >= TURNS
        return Observation(messages=[] if done else [Message(role="user", content="again")], done=done,
                           termination=TerminationReason.ANSWERED if done else None)

    def result(self) -> dict[str, float]:
        return {"turns": float(self.turns), "reset_at": self.reset_at, "scored_at": time.time()}


class WaitingPolicy:
    def __init__(self, seconds: float, broken: bool = False) -> None:
        self.seconds, self.broken = seconds, broken

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        await asyncio.sleep(self.seconds)
        if self.broken:
            raise InfraError("connection refused (a stand-in for a dead replica)")
        return AgentReply(message=Message(role="assistant", content="ok"))


class StampBench(Benchmark):
    name = "stamps"
    version = "1"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid")
        tasks: list[str] = ["t0"]

    def settings(self) -> dict[str, dict[str, Any]]:
        return {"plain": {}}

    def tasks(self, setting: str) -> list[str]:
        return list(self.options.tasks)

    def make_env(self, task_id: str, setting: str, seed: int) -> StampEnv:
        env = StampEnv()
        env.task_id = task_id
        return env

    def metrics(self, setting: str | None = None) -> list[MetricSpec]:
        return [MetricSpec(name="turns")]

    def scripted_policies(self) -> dict[str, str]:
        return {"waiting": "answers each turn after the time its task's name sets"}

    def make_scripted_policy(self, name: str, env: StampEnv, seed: int) -> WaitingPolicy:
        return WaitingPolicy(turn_seconds(env.task_id), broken=env.task_id.startswith("broken"))
