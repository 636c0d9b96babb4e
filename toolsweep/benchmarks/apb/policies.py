"""Scripted APB policies: `oracle` (the reference answer, refusing exactly the unsolvable cases),
`always_refuse` (the calibration baseline of §12.16), `random` (§12.22), and the exploit policies
that try to score without planning (their bounds are in `APB.exploit_policies`)."""

from __future__ import annotations

import json
import random
from typing import Any

from toolsweep.benchmarks.apb.environment import APBEnv
from toolsweep.benchmarks.apb.tools import FINISH
from toolsweep.evaluator.types import AgentReply, Message

POLICIES = {
    "oracle": "emits the reference plan / next steps / recovery, and refuses exactly the unsolvable cases",
    "always_refuse": 'always answers {"status": "REJECT"} (calibration 0.5)',
    "random": "uniform-random tools in the right JSON format",
}

EXPLOITS = {
    "string_chain": "a tool_chain of bare tool-name strings (the reference tools, no objects, no arguments)",
    "prose_refusal": "a plain-text refusal, no JSON",
    "negated_refusal": "prose that uses refusal words in negation and then lists tools as a plan",
    "empty_chain": 'answers without tools: {"plan": ..., "tool_chain": []}',
    "deep_nesting": "about 30 KB of nested {\"a\": (a parser that recurses crashes on it)",
    "stray_braces": "about 60 KB of unbalanced braces and quotes (a parser that retries at every brace is quadratic)",
    "all_tools": "a maximal chain: every visible tool once, with empty arguments",
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


class _Exploit(_Scripted):
    """An exploit policy: a fixed kind of answer that does not plan."""

    kind = ""

    def _names(self) -> list[str]:
        return [x["name"] for x in self.env.tools if x["name"] != FINISH]

    def _reference_names(self) -> list[str]:
        names = [n["tool"] for n in self.env.base["reference"]["nodes"]]
        return [n for n in names if n in set(self._names())] or self._names()[:3]

    def answer(self) -> str:
        return getattr(self, f"_{self.kind}")()

    def _string_chain(self) -> str:
        return json.dumps({"plan": "Use the listed tools in order.", "tool_chain": self._reference_names()})

    def _prose_refusal(self) -> str:
        return "I cannot complete this task: the required information is missing and the tool is unavailable."

    def _negated_refusal(self) -> str:
        steps = "; ".join(f"step {i + 1}: call {n}" for i, n in enumerate(self._reference_names()))
        return f"Nothing is missing and nothing is unavailable, so this is possible. Here is my plan: {steps}."

    def _empty_chain(self) -> str:
        return json.dumps({"plan": "The answer is straightforward; no tools are needed.", "tool_chain": []})

    def _deep_nesting(self) -> str:
        return '{"a":' * 6000

    def _stray_braces(self) -> str:
        return '{"x' * 20000

    def _all_tools(self) -> str:
        chain = [{"name": n, "parameter_description": {}, "reason": "cover everything"} for n in self._names()]
        return json.dumps({"plan": "Call every tool.", "tool_chain": chain})


def make_policy(name: str, env: APBEnv, seed: int) -> _Scripted:
    if name in EXPLOITS:
        policy = _Exploit(env, seed)
        policy.kind = name
        return policy
    classes = {"oracle": OraclePolicy, "always_refuse": AlwaysRefusePolicy, "random": RandomPolicy}
    if name not in classes:
        raise KeyError(f"APB has no scripted policy {name!r}; available: {sorted(classes) + sorted(EXPLOITS)}")
    return classes[name](env, seed)
