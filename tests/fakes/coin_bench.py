"""A benchmark whose cells differ in variance, for adaptive sweeps (registered as "coin" in tests).

An episode succeeds with the setting's probability (`certain`: 1, `even`: 0.5 around task effects,
`tasky`: 0.95 on half the tasks and 0.05 on the others, so the between-task variance dominates), decided
by the environment from (task, setting, seed), so every model's outcome is reproducible; the `oracle`
policy always succeeds, `never` always fails. A `certain` cell's interval is a point, an `even` cell's is
wide, a `tasky` cell's narrows with more tasks, hardly with more seeds.
"""

from __future__ import annotations

import random
from typing import Any

from pydantic import BaseModel, ConfigDict

from toolsweep.evaluator import (
    AgentReply, Benchmark, Message, MetricSpec, Observation, TerminationReason, stable_seed,
)


class CoinEnv:
    def __init__(self, p: float, u: float) -> None:
        self.p, self.u, self.success = p, u, 0.0

    def reset(self) -> Observation:
        return Observation(messages=[Message(role="user", content="Flip.")], tools=[])

    def step(self, reply: Message) -> Observation:
        said = reply.text().strip()
        self.success = 0.0 if said == "never" else 1.0 if said == "oracle" or self.u < self.p else 0.0
        return Observation(done=True, termination=TerminationReason.ANSWERED)

    def result(self) -> dict[str, float]:
        return {"success": self.success}


class SayPolicy:
    def __init__(self, text: str) -> None:
        self.text = text

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        return AgentReply(message=Message(role="assistant", content=self.text))


class CoinBench(Benchmark):
    name = "coin"
    version = "1"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid")
        n_tasks: int = 10

    def settings(self) -> dict[str, dict[str, Any]]:
        return {"certain": {"p": 1.0}, "even": {"p": 0.5}, "tasky": {"p": "by task"}}

    def tasks(self, setting: str) -> list[str]:
        return [f"t{i}" for i in range(self.options.n_tasks)]

    def make_env(self, task_id: str, setting: str, seed: int) -> CoinEnv:
        p = self.settings()[setting]["p"]
        if p == "by task":  # easy or hard by the task alone: seeds cannot average it out
            p = 0.95 if random.Random(stable_seed("tasky", task_id)).random() < 0.5 else 0.05
        elif 0 < p < 1:  # task effects: some tasks are easier than others
            p = min(0.95, max(0.05, p + (random.Random(stable_seed(task_id)).random() - 0.5) * 0.4))
        return CoinEnv(p, random.Random(stable_seed(task_id, setting, seed)).random())

    def metrics(self, setting: str | None = None) -> list[MetricSpec]:
        return [MetricSpec(name="success", scale=100)]

    def scripted_policies(self) -> dict[str, str]:
        return {"oracle": "always succeeds", "coin": "succeeds as the setting's coin falls", "never": "always fails"}

    def baseline_policy(self) -> str | None:
        return "coin"

    def make_scripted_policy(self, name: str, env: CoinEnv, seed: int):
        if name in ("oracle", "coin", "never"):
            return SayPolicy(name)
        return super().make_scripted_policy(name, env, seed)
