"""Scripted ToolMaze agents (no model): the rows of spec §11's expected-metric table.

- oracle: follows s*, knows the faults (ground truth): transient -> retry once; permanent ->
  the cheapest alternative path (C2-C4) or an immediate graceful stop (C1).
- naive: follows s*, binds from the responses it actually got, never retries; stops with a final
  message on an explicit error; passes implicit corruptions on.
- retry: like naive, but retries an explicitly failing tool up to 3 times before stopping.
- never_stop: the oracle, except that on a C1 permanent fault it calls the downstream tools anyway.
- reroute: on any (ground-truth) perturbation switches to the cheapest alternative and never
  retries; stops when no alternative exists.
- random: calls random visible tools with plausible or junk arguments, sometimes malformed.

Agents emit one tool call per step (OpenAI function-calling format) and read the environment's
call log for what came back (oracle-type agents also read the ground-truth perturbation flags).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

from toolsweep.benchmarks.toolmaze.environment import ToolMazeEnv
from toolsweep.benchmarks.toolmaze.tools import get_path, render
from toolsweep.evaluator.types import AgentReply, FunctionCall, Message, ToolCall

POLICIES = {
    "oracle": "knows the faults: retries transient ones, reroutes permanent ones, stops gracefully on C1",
    "naive": "follows the minimal path, never retries or reroutes, stops on an explicit error",
    "retry": "retries explicit errors up to 3 times, never reroutes, no anomaly checks",
    "never_stop": "the oracle, but keeps calling downstream tools after a C1 permanent fault",
    "reroute": "switches to the cheapest alternative on any fault, never retries",
    "random": "random tool calls with plausible or junk arguments",
}
EXPLOITS = {
    "junk_recovery": "calls every tool of the task and every alternative twice with junk arguments, then answers",
    "no_tools": "answers at once without calling a tool",
}
_PLACEHOLDER = "unavailable"


class ScriptedAgent:
    def __init__(self, env: ToolMazeEnv, strategy: str, seed: int = 0) -> None:
        if strategy not in POLICIES or strategy == "random":
            raise ValueError(f"unknown strategy {strategy!r}")
        self.env = env
        self.strategy = strategy
        self.task = env.task
        self.plan = self.task.default_index
        self.outputs: dict[str, Any] = {}
        self.done: set[str] = set()
        self.retries: Counter = Counter()
        self.avoid: set[str] = set()
        self.stop_reason: str | None = None
        self.seen = 0
        self.n = 0
        self.force_continue = False

    # ------------------------------------------------------------------------------------------
    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        self._observe()
        if self.stop_reason is not None:
            return self._final(self.stop_reason)
        path = self.task.solutions[self.plan]
        pending = [t for t in path if t not in self.done]
        if not pending:
            return self._final("All requested steps are done.")
        nxt = pending[0]
        sacrifice = self._sacrifice(nxt)
        if sacrifice is not None:
            return self._call(sacrifice[0], sacrifice[1])
        return self._call(nxt, self._args(self.plan, nxt))

    # ------------------------------------------------------------------------------------------
    def _observe(self) -> None:
        for rec in self.env.calls[self.seen:]:
            self._handle(rec)
        self.seen = len(self.env.calls)

    def _handle(self, rec) -> None:
        resp = rec.response
        is_err = isinstance(resp, dict) and "error" in resp
        s = self.strategy
        if s in ("naive", "retry"):
            if is_err:
                if s == "retry" and self.retries[rec.tool] < 3:
                    self.retries[rec.tool] += 1
                    return
                self.stop_reason = f"The {rec.tool} service returned an error; I could not finish."
                return
            self._accept(rec)
            return
        if self.force_continue:
            self._accept(rec)
            return
        if rec.perturbed:
            permanent = self.env.profile.permanent
            if s == "reroute" or permanent:
                self.avoid.add(rec.tool)
                new = self._best_path()
                if new is None:
                    if s == "never_stop":
                        self.force_continue = True
                        self._accept(rec)
                        return
                    self.stop_reason = (f"{rec.tool} keeps failing and no alternative exists, so I stopped "
                                        "without calling the dependent steps.")
                    return
                self.plan = new
            return  # transient: the next step retries the same tool
        if is_err:
            self.stop_reason = f"The {rec.tool} call failed unexpectedly: {resp['error'].get('message')}"
            return
        self._accept(rec)

    def _accept(self, rec) -> None:
        self.outputs[rec.tool] = rec.response
        self.done.add(rec.tool)

    def _best_path(self) -> int | None:
        sols = self.task.solutions
        ok = [i for i, s in enumerate(sols) if not (set(s) & self.avoid)]
        if not ok:
            return None
        return min(ok, key=lambda i: (sum(1 for t in sols[i] if t not in self.done), tuple(sorted(sols[i]))))

    def _sacrifice(self, nxt: str) -> tuple[str, dict] | None:
        """Permanent faults in a group not yet activated: the first member called is lost for good.
        If losing the planned member costs more than losing another one, call that one first
        (the optimal strategy c* assumes, spec §6.2)."""
        if self.strategy not in ("oracle", "never_stop") or not self.env.profile.permanent:
            return None
        for r in self.env.profile.rules:
            if nxt not in r.members or self.env.engine.assigned[r.rule_id] is not None:
                continue
            sols = self.task.solutions
            def cost(exclude: str) -> float:
                ok = [s for s in sols if exclude not in s and not (set(s) & self.avoid)]
                return min((sum(1 for t in s if t not in self.done) for s in ok), default=float("inf"))
            if cost(nxt) <= min(cost(m) for m in r.members):
                return None
            plan = sols[self.plan]
            for m in sorted(r.members):
                if m in plan or cost(m) > sum(1 for t in plan if t not in self.done):
                    continue
                i = next(i for i, s in enumerate(sols) if m in s)
                return m, self._args(i, m)
        return None

    def _args(self, path_index: int, tool: str) -> dict[str, Any]:
        args = {}
        for pname, b in self.task.bindings[path_index][tool].items():
            if b[0] == "user":
                args[pname] = self.task.slots[b[1]]
                continue
            v = get_path(self.outputs.get(b[1]), b[2]) if b[1] in self.outputs else None
            if v is None:
                v = _PLACEHOLDER
            args[pname] = render(v) if b[0] == "free" else v
        return args

    def _call(self, tool: str, args: dict[str, Any]) -> AgentReply:
        self.n += 1
        tc = ToolCall(id=f"call_{self.n}", function=FunctionCall(name=tool, arguments=json.dumps(args)))
        return AgentReply(message=Message(role="assistant", content=None, tool_calls=[tc]))

    def _final(self, text: str) -> AgentReply:
        return AgentReply(message=Message(role="assistant", content=text))


class RandomAgent:
    """Random calls over the visible tools: plausible values (slots and seen outputs of the right
    type) mixed with junk, some malformed JSON and unknown tools; answers at random."""

    def __init__(self, env: ToolMazeEnv, seed: int) -> None:
        self.env = env
        self.rng = random.Random(seed)
        self.n = 0

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        rng = self.rng
        if self.n >= 3 and rng.random() < 0.15:
            return AgentReply(message=Message(role="assistant", content="Here is what I found."))
        calls = []
        for _ in range(rng.choice((1, 1, 2))):
            self.n += 1
            roll = rng.random()
            if roll < 0.04:
                calls.append(ToolCall(id=f"r{self.n}", function=FunctionCall(name="no_such_tool", arguments="{}")))
                continue
            fn = rng.choice(tools)["function"]
            if roll < 0.08:
                calls.append(ToolCall(id=f"r{self.n}", function=FunctionCall(name=fn["name"], arguments="{bad json")))
                continue
            args = {name: self._value(spec) for name, spec in fn["parameters"]["properties"].items()
                    if name in fn["parameters"]["required"] or rng.random() < 0.2}
            calls.append(ToolCall(id=f"r{self.n}", function=FunctionCall(name=fn["name"], arguments=json.dumps(args))))
        return AgentReply(message=Message(role="assistant", content=None, tool_calls=calls))

    def _value(self, spec: dict[str, Any]) -> Any:
        rng = self.rng
        pool: list[Any] = list(self.env.task.slots.values())
        for c in self.env.calls:
            if isinstance(c.response, dict) and "error" not in c.response:
                pool += [v for v in _flat(c.response)]
        typed = [v for v in pool if _json_type(v) == spec.get("type")]
        if "enum" in spec:
            typed = list(spec["enum"])
        if typed and rng.random() < 0.8:
            return rng.choice(typed)
        return rng.choice(("", "???", -1, 3.5, None, ["x"]))


def _flat(obj: Any) -> list[Any]:
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _flat(v)]
    return [obj] if not isinstance(obj, list) else []


def _json_type(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    return "string" if isinstance(v, str) else "other"


class JunkRecoveryAgent:
    """Fishes for recovery credit: after every call, calls the same tool again, then every member of
    every alternative group, always with junk arguments (it reads the task's structure, as an adversary
    who knows the graph would). A recovery must satisfy the faulted node's slot, so this earns none."""

    def __init__(self, env: ToolMazeEnv) -> None:
        task = env.task
        tools = list(task.default_path)
        for pos in task.groups:
            tools += [t for t in pos.tools if t not in tools]
        self.queue = [t for t in tools for _ in range(2)]
        self.env = env
        self.n = 0

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        visible = {t["function"]["name"]: t["function"] for t in tools}
        while self.queue:
            name = self.queue.pop(0)
            if name in visible:
                self.n += 1
                args = {p: "junk" for p in visible[name]["parameters"].get("properties", {})}
                call = ToolCall(id=f"j{self.n}", function=FunctionCall(name=name, arguments=json.dumps(args)))
                return AgentReply(message=Message(role="assistant", content=None, tool_calls=[call]))
        return AgentReply(message=Message(role="assistant", content="Done: everything was retried."))


class NoToolsAgent:
    """Answers at once, without calling a tool."""

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        return AgentReply(message=Message(role="assistant", content="The task is complete."))


def make_policy(name: str, env: ToolMazeEnv, seed: int):
    if name == "random":
        return RandomAgent(env, seed)
    if name == "junk_recovery":
        return JunkRecoveryAgent(env)
    if name == "no_tools":
        return NoToolsAgent()
    if name not in POLICIES:
        raise KeyError(f"toolmaze has no scripted policy {name!r}; available: {sorted(POLICIES) + sorted(EXPLOITS)}")
    return ScriptedAgent(env, name, seed)


