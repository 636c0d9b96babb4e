"""A benchmark plugin for measuring the scheduler itself: every episode is exactly `turns` agent
turns, and the scripted `fixed_latency` policy answers each turn after `latency_s` of waiting, like
a model endpoint with fixed latency. Registered by bench/scheduler.py only."""

from __future__ import annotations

import asyncio
import time
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, ConfigDict

from toolsweep.evaluator import AgentReply, Benchmark, Message, MetricSpec, Observation, TerminationReason


_START = Observation(messages=[Message(role="user", content="count with me")])
_REPLY = AgentReply(message=Message(role="assistant", content="next"))


@lru_cache(maxsize=None)
def _observations(turns: int) -> tuple[Observation, ...]:
    """What the environment shows after each turn, built once: the stand-ins cost next to nothing,
    so what the bench measures is the harness, not pydantic constructing the stand-ins' messages."""
    return tuple(
        Observation(messages=[Message(role="user", content=str(i))], done=i >= turns,
                    termination=TerminationReason.ANSWERED if i >= turns else None)
        for i in range(1, turns + 1)
    )


class ChainEnv:
    """Stamps (epoch seconds) when it was reset, took its last step and was scored, so the bench can
    say where an episode's time beyond the ideal went: waiting to start, reaching its last step, or after."""

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self.done_turns = 0
        self._after = _observations(turns)
        self.reset_at = self.last_step_at = float("nan")

    def reset(self) -> Observation:
        self.reset_at = time.time()
        return _START

    def step(self, reply: Message) -> Observation:
        self.done_turns += 1
        self.last_step_at = time.time()
        return self._after[min(self.done_turns, self.turns) - 1]

    def result(self) -> dict[str, float]:
        return {"turns": float(self.done_turns), "reset_at": self.reset_at,
                "last_step_at": self.last_step_at, "scored_at": time.time()}


class FixedLatencyPolicy:
    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        return _REPLY


class LatencyBench(Benchmark):
    name = "latency"
    version = "1"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid")
        n_tasks: int = 256
        turns: int = 5
        latency_s: float = 0.1

    def settings(self) -> dict[str, dict[str, Any]]:
        return {"chain": {}}

    def tasks(self, setting: str) -> list[str]:
        return [f"e{i}" for i in range(self.options.n_tasks)]

    def make_env(self, task_id: str, setting: str, seed: int) -> ChainEnv:
        return ChainEnv(self.options.turns)

    def metrics(self, setting: str | None = None) -> list[MetricSpec]:
        return [MetricSpec(name="turns")]  # the stamps ride along in each row's metrics, unsummarised

    def scripted_policies(self) -> dict[str, str]:
        return {"fixed_latency": "answers every turn after a fixed delay"}

    def make_scripted_policy(self, name: str, env: Any, seed: int) -> FixedLatencyPolicy:
        return FixedLatencyPolicy(self.options.latency_s)
