"""A benchmark that is another benchmark's first turn, for `engine_saturation.py`: each episode sends
the inner benchmark's real first prompt (its messages and tool schemas), lets the environment parse
the reply, and ends. Run through `run_sweep` like any benchmark, so the measured path is the sweep's
own (scheduler, rollout workers, client, model server actor), with a fixed amount of generation per
episode to compare against an offline batch of the same prompts.

Registered for a sweep as `first_turn=first_turn:FirstTurn` (bench/ on PYTHONPATH).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from toolsweep.evaluator import Benchmark, Message, MetricSpec, Observation, TerminationReason
from toolsweep.evaluator.registry import benchmark_class


class OneTurnEnv:
    """A benchmark episode cut to its first turn: the real reset prompt, the real reply parsing."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.replied = 0.0

    def reset(self) -> Observation:
        return self.env.reset()

    def step(self, reply: Message) -> Observation:
        self.env.step(reply)
        self.replied = 1.0
        return Observation(done=True, termination=TerminationReason.ANSWERED)

    def result(self) -> dict[str, float]:
        return {"replied": self.replied}


class FirstTurn(Benchmark):
    name = "first_turn"
    version = "1"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid")
        inner: str = "toolmaze"
        inner_options: dict[str, Any] = Field(default_factory=dict)
        inner_setting: str = "C1-P0-std"
        episodes: int = 32

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        # its own instance: get_benchmark holds the registry's lock while this constructor runs
        self.inner = benchmark_class(self.options.inner)(**self.options.inner_options)
        self.inner_tasks = self.inner.tasks(self.options.inner_setting)

    def settings(self) -> dict[str, dict[str, Any]]:
        return {"first_turn": {"inner": self.options.inner, "inner_setting": self.options.inner_setting}}

    def tasks(self, setting: str) -> list[str]:
        """Episode i is the inner benchmark's task i (cycling when there are fewer tasks)."""
        return [f"{i:06d}:{self.inner_tasks[i % len(self.inner_tasks)]}" for i in range(self.options.episodes)]

    def make_env(self, task_id: str, setting: str, seed: int) -> OneTurnEnv:
        return OneTurnEnv(self.inner.make_env(task_id.split(":", 1)[1], self.options.inner_setting, seed))

    def metrics(self, setting: str | None = None) -> list[MetricSpec]:
        return [MetricSpec(name="replied", description="the model's first reply came back")]

    def max_turns(self, setting: str) -> int:
        return 1

    def fingerprint(self) -> dict[str, Any]:
        return {"version": self.version, "inner": self.inner.fingerprint(), "options": self.options.model_dump()}
