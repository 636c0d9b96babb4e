"""Scripted APB policies: `oracle` (the reference answer, refusing exactly the unsolvable cases),
`always_refuse` (the calibration baseline of §12.16) and `random` (§12.22)."""

from __future__ import annotations

import json
import random
from typing import Any

from toolsweep.benchmarks.apb.environment import APBEnv
from toolsweep.evaluator.types import AgentReply, Message

POLICIES = {
    "oracle": "emits the reference plan / next steps / recovery, and refuses exactly the unsolvable cases",
    "always_refuse": 'always answers {"status": "REJECT"} (calibration 0.5)',
    "random": "uniform-random tools in the right JSON format",
}


class _Scripted:
    def __init__(self, env: APBEnv, seed: int) -> None:
        self.env = env
        self.rng = random.Random(f"apb-policy|{seed}|{env.task['task_id']}")

    def answer(self) -> str:
        raise NotImplementedError

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        return AgentReply(message=Message(role="assistant", content=self.answer()))


class OraclePolicy(_Scripted):
    def answer(self) -> str:
        return self.env.reference_answer()


class AlwaysRefusePolicy(_Scripted):
    def answer(self) -> str:
        return json.dumps({"status": "REJECT", "reason": "I cannot complete this task with what is available."})


class RandomPolicy(_Scripted):
    def answer(self) -> str:
        return self.env.random_answer(self.rng)


def make_policy(name: str, env: APBEnv, seed: int) -> _Scripted:
    classes = {"oracle": OraclePolicy, "always_refuse": AlwaysRefusePolicy, "random": RandomPolicy}
    if name not in classes:
        raise KeyError(f"APB has no scripted policy {name!r}; available: {sorted(classes)}")
    return classes[name](env, seed)
