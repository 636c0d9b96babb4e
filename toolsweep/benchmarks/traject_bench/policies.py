"""Scripted policies: `oracle` replays the gold trajectory and answers with the gold final answer;
`random` calls random visible tools with their example arguments."""

from __future__ import annotations

import json
import math
import random
from typing import Any

from toolsweep.benchmarks.traject_bench.data import canon_name
from toolsweep.benchmarks.traject_bench.environment import REACT_METHODS, TEXT_METHODS, TrajectEnv
from toolsweep.evaluator.types import AgentReply, FunctionCall, Message, ToolCall

RANDOM_ANSWER = "I could not find the requested information."


def _chunks(items: list[Any], turns: int) -> list[list[Any]]:
    """Split items over at most `turns` turns, one per turn when they fit (ReAct's turn cap is
    the paper's 8, so long gold trajectories are batched to stay reachable)."""
    if not items:
        return []
    size = max(1, math.ceil(len(items) / max(1, turns)))
    return [items[i : i + size] for i in range(0, len(items), size)]


class _Scripted:
    """Plans a list of call groups, then says the answer, in the format of the env's method."""

    def __init__(self, env: TrajectEnv, groups: list[list[dict[str, Any]]], answer: str, thought: str):
        self.env = env
        self.groups = groups
        self.answer = answer
        self.thought = thought
        self.sent = 0

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        env, method = self.env, self.env.spec.method
        if method in TEXT_METHODS:
            if env.phase == "answer":
                return AgentReply(message=Message(role="assistant", content=self.answer))
            calls = [c for g in self.groups for c in g]
            body: dict[str, Any] = {"tool list": calls}
            if method == "cot":
                body = {"thought": self.thought, "tool list": calls}
            text = "```json\n" + json.dumps(body, ensure_ascii=False) + "\n```"
            return AgentReply(message=Message(role="assistant", content=text))
        i = self.sent
        self.sent += 1
        if method == "native":
            if i >= len(self.groups):
                return AgentReply(message=Message(role="assistant", content=self.answer))
            tcs = []
            for j, c in enumerate(self.groups[i]):
                args = {p["name"]: p["value"] for p in c["required_parameters"] + c["optional_parameters"]}
                tcs.append(
                    ToolCall(
                        id=f"call_{i}_{j}",
                        function=FunctionCall(
                            name=env.aliases.to_alias[canon_name(c["tool name"])],
                            arguments=json.dumps(args, ensure_ascii=False),
                        ),
                    )
                )
            return AgentReply(message=Message(role="assistant", content=None, tool_calls=tcs))
        n = i + 1
        if i >= len(self.groups):
            text = f"Thought {n}: I have what I need.\nAction {n}: Finish[{self.answer}]"
        else:
            g = self.groups[i]
            payload = g[0] if len(g) == 1 else g
            names = ", ".join(c["tool name"] for c in g)
            text = (
                f"Thought {n}: {self.thought if i == 0 else 'Next I call ' + names + '.'}\n"
                f"Action {n}: Tool[{json.dumps(payload, ensure_ascii=False)}]"
            )
        return AgentReply(message=Message(role="assistant", content=text))


def _turn_budget(env: TrajectEnv) -> int:
    # Leave the last turn for the answer.
    return max(1, env.turn_cap - 1)


def oracle_policy(env: TrajectEnv) -> _Scripted:
    calls = [c.as_call() for c in env.task.calls]
    method = env.spec.method
    if method in TEXT_METHODS:
        groups = [calls]
    elif method == "native" and not env.task.sequential:
        groups = [calls]  # independent calls: all in one turn
    else:
        groups = _chunks(calls, _turn_budget(env))
    names = ", ".join(c["tool name"] for c in calls)
    thought = f"The query needs these tools: {names}."
    return _Scripted(env, groups, env.task.final_answer, thought)


def random_policy(env: TrajectEnv, seed: int) -> _Scripted:
    rng = random.Random(seed)
    pool = list(env.pool)
    n = rng.randint(3, 10)
    picks = [rng.choice(pool) for _ in range(n)] if pool else []
    cat = env.ctx.dataset.catalog
    calls = []
    for name in picks:
        t = cat[name]
        calls.append(
            {
                "tool name": name,
                "required_parameters": [{"name": p.name, "value": p.default} for p in t.required],
                "optional_parameters": [],
            }
        )
    method = env.spec.method
    if method in TEXT_METHODS:
        groups = [calls]
    elif method in REACT_METHODS or method == "native":
        groups = _chunks(calls, _turn_budget(env))
    else:  # pragma: no cover - every method is listed above
        groups = [calls]
    return _Scripted(env, groups, RANDOM_ANSWER, "Let me try some tools.")


def echo_outputs_policy(env: TrajectEnv) -> _Scripted:
    """The gold calls, then the raw recorded outputs pasted as the final answer."""
    oracle = oracle_policy(env)
    oracle.answer = "\n".join(c.output for c in env.task.calls)
    return oracle


def no_tools_policy(env: TrajectEnv) -> _Scripted:
    """No tool call; the query restated as the answer."""
    return _Scripted(env, [], f"Here is the answer to your request: {env.task.query}", "No tools needed.")


def all_tools_policy(env: TrajectEnv) -> _Scripted:
    """Every visible tool once, with its example arguments (maximal length), then a fixed answer."""
    cat = env.ctx.dataset.catalog
    calls = [{"tool name": name, "required_parameters": [{"name": p.name, "value": p.default} for p in cat[name].required],
              "optional_parameters": []} for name in env.pool]
    method = env.spec.method
    groups = [calls] if method in TEXT_METHODS or method == "native" else _chunks(calls, _turn_budget(env))
    return _Scripted(env, groups, RANDOM_ANSWER, "Call everything.")


EXPLOITS = {
    "echo_outputs": "the gold calls, then the raw tool outputs pasted as the answer",
    "no_tools": "answers without calling a tool, restating the query",
    "all_tools": "calls every visible tool once with example arguments",
}

SCRIPTED = {
    "oracle": "replays the gold trajectory (gold tools, arguments and order) and answers with the gold final answer",
    "random": "calls 3-10 random visible tools with their example arguments and gives a fixed answer",
}
