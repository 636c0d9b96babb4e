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

Adversaries and positive controls of the exploit suite (bounds per cell in bounds.py; the paper
passages behind what they may and must score in docs/toolmaze.md):
- greedy_binder (the baseline): binds parameters from the query's Details list and earlier outputs
  by name or described type, calls every visible tool that binds, never checks or retries.
- call_all_members: follows the path and calls every member of every alternative group.
- abort_first_error / acknowledged_abort: stops at the first error and says the task cannot be done.
- retry_then_switch: retries a failing call 3 times, then switches to an alternative path.

Agents emit one tool call per step (OpenAI function-calling format) and read the environment's
call log for what came back (oracle-type agents also read the ground-truth perturbation flags).
"""

from __future__ import annotations

import json
import random
import re
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
    "greedy_binder": "binds parameters from the query's Details and earlier outputs by name or type, "
                     "calls every visible tool that binds, never checks or retries, answers 'Done.'",
    "call_all_members": "follows the task's path with valid arguments and calls every member of every "
                        "alternative group, never reacting to a fault",
    "abort_first_error": "follows the task's path; on the first error stops and says the task cannot be done",
    "retry_then_switch": "follows the task's path; retries a failing call 3 times, then switches to an "
                         "alternative path (positive control)",
    "acknowledged_abort": "follows the task's path; on the first error stops and says the task cannot be "
                          "done (positive control on C1-P2; the same agent as abort_first_error)",
    "junk_recovery": "calls every tool of the task and every alternative twice with junk arguments, then answers",
    "no_tools": "answers at once without calling a tool",
    "lookalike_first": "follows s*; before each alternative group's s* member calls its look-alikes, "
                       "never reading a response (binds from whatever came back last)",
    "blind_repeat": "follows s* and calls every tool twice in a row, never reading a response",
    "greedy_repeat": "the greedy binder, calling every tool it binds twice in a row",
    "searched_floor": "per cell, the strongest policy ToolMaze's adversary search found (search.py; "
                      "bounds.SEARCHED), where it beats the greedy binder; the benchmark's floor",
}
_PLACEHOLDER = "unavailable"



def bound_args(task: Any, outputs: dict[str, Any], path_index: int, tool: str) -> dict[str, Any]:
    """A tool's arguments on a solution path: the user's slots, and earlier outputs where the path binds
    them (a placeholder where that output is missing)."""
    args = {}
    for pname, b in task.bindings[path_index][tool].items():
        if b[0] == "user":
            args[pname] = task.slots[b[1]]
            continue
        v = get_path(outputs.get(b[1]), b[2]) if b[1] in outputs else None
        if v is None:
            v = _PLACEHOLDER
        args[pname] = render(v) if b[0] == "free" else v
    return args

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
                if permanent and s in ("oracle", "never_stop"):  # ground truth: every bound victim fails
                    self.avoid |= {r.victim for r in self.env.profile.rules if r.victim is not None}
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
        """Permanent faults in a group not yet activated (`first_call` binding only: a fault bound to
        its tool when the task is made cannot be moved): the first member called is lost for good.
        If losing the planned member costs more than losing another one, call that one first
        (the optimal strategy c* assumes, spec §6.2)."""
        if self.strategy not in ("oracle", "never_stop") or not self.env.profile.permanent:
            return None
        for r in self.env.profile.rules:
            if r.victim is not None or nxt not in r.members or self.env.engine.assigned[r.rule_id] is not None:
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
        return bound_args(self.task, self.outputs, path_index, tool)

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


class BlindPathAgent:
    """Follows s* with the arguments its bindings name, filled from whatever each tool answered last
    (an error or a corruption included): it never reads a response to decide anything.

    - lookalike_first: at an alternative group, first calls the members that are not on s*, then s*'s.
      Under a fault bound to whichever member is called first, that sacrifice looks like a reroute.
    - blind_repeat: calls every tool twice in a row. Under a transient fault the second call looks
      like a retry, though it would have been made whatever the first call answered.
    """

    def __init__(self, env: ToolMazeEnv, mode: str) -> None:
        self.env = env
        self.task = env.task
        self.outputs: dict[str, Any] = {}
        self.seen = 0
        self.n = 0
        task = self.task
        queue: list[tuple[str, int]] = []
        sacrificed: set[str] = set()  # group ids whose look-alikes are queued
        for tool in task.default_path:
            for pos in task.groups:
                if mode != "lookalike_first" or tool not in pos.tools or pos.group_id in sacrificed:
                    continue
                sacrificed.add(pos.group_id)
                for alt in (t for t in pos.tools if t not in task.default_path):
                    queue.append((alt, next(i for i, sol in enumerate(task.solutions) if alt in sol)))
            queue += [(tool, task.default_index)] * (2 if mode == "blind_repeat" else 1)
        self.queue = queue

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        for rec in self.env.calls[self.seen:]:
            self.outputs[rec.tool] = rec.response
        self.seen = len(self.env.calls)
        if not self.queue:
            return AgentReply(message=Message(role="assistant", content="Done."))
        tool, path = self.queue.pop(0)
        args = bound_args(self.task, self.outputs, path, tool)
        self.n += 1
        tc = ToolCall(id=f"b{self.n}", function=FunctionCall(name=tool, arguments=json.dumps(args)))
        return AgentReply(message=Message(role="assistant", content=None, tool_calls=[tc]))


def make_policy(name: str, env: ToolMazeEnv, seed: int, bench=None):
    if name.startswith("search:") or name == "searched_floor":
        from toolsweep.benchmarks.toolmaze.search import make_floor_policy, make_searched_policy
        return make_floor_policy(env, bench) if name == "searched_floor" else make_searched_policy(name, env)
    if name in ("lookalike_first", "blind_repeat"):
        return BlindPathAgent(env, name)
    if name == "random":
        return RandomAgent(env, seed)
    if name == "junk_recovery":
        return JunkRecoveryAgent(env)
    if name == "no_tools":
        return NoToolsAgent()
    if name in ("greedy_binder", "greedy_repeat"):
        return GreedyBinderAgent(env, repeat=name == "greedy_repeat")
    if name in ("call_all_members", "abort_first_error", "retry_then_switch"):
        return PathAgent(env, name)
    if name == "acknowledged_abort":
        return PathAgent(env, "abort_first_error")
    if name not in POLICIES:
        raise KeyError(f"toolmaze has no scripted policy {name!r}; available: {sorted(POLICIES) + sorted(EXPLOITS)}")
    return ScriptedAgent(env, name, seed)




# ------------------------------------------------------------------------------------------------
# Adversaries and positive controls of the exploit suite (issue: PRR must credit what the paper
# credits, both ways). Adversaries read only what an agent reads (the query, the tool schemas, the
# responses), except call_all_members, which knows the task's groups as an adversary who read the
# graph would. Controls follow the task's path with valid arguments and react only to the errors
# they see.

_DETAILS = re.compile(r"Details - (.*?)\.\s+[A-Z][^.]*[.!?]?\s*$", re.DOTALL)
_RETURNS = re.compile(r"Returns JSON with (.*)\.$", re.DOTALL)


def query_details(query: str) -> dict[str, str]:
    """The query's "Details - label: value; label: value." list as {label: value}."""
    m = _DETAILS.search(query)
    if not m:
        return {}
    out = {}
    for item in m.group(1).split("; "):
        label, sep, value = item.partition(": ")
        if sep:
            out[label.strip().lower()] = value.strip()
    return out


def _noun(description: str) -> str:
    """The type a description names: the text before any "(constraints)" or ", echoes"."""
    return re.split(r" \(|, echoes", description, maxsplit=1)[0].strip().lower()


def returned_fields(schema: dict[str, Any]) -> dict[str, str]:
    """{output path: type noun} read from a tool description's "Returns JSON with ..." clause."""
    m = _RETURNS.search(schema["description"])
    out = {}
    if m:
        for part in re.split(r"; (?=[\w.]+: )", m.group(1)):
            path, sep, desc = part.partition(": ")
            if sep:
                out[path.strip()] = _noun(desc)
    return out


class GreedyBinderAgent:
    """Binds each visible tool's parameters from the query's Details list (label = parameter name or
    the parameter's described type) and from earlier clean outputs (same field name, or same described
    type; free text from the latest text output), calls every tool whose parameters all bind, one
    call per step, each tool once, never checks a value, never retries; then answers "Done."."""

    def __init__(self, env: ToolMazeEnv, repeat: bool = False) -> None:
        self.env = env
        self.details = query_details(env.task.query)
        self.called: set[str] = set()
        self.n = 0
        self.repeat = repeat
        self.again: ToolCall | None = None

    def _bind(self, fn: dict[str, Any], fields: dict[str, dict[str, str]]) -> dict[str, Any] | None:
        args: dict[str, Any] = {}
        props = fn["parameters"].get("properties", {})
        for pname in fn["parameters"].get("required", list(props)):
            spec = props.get(pname, {})
            noun = _noun(spec.get("description", ""))
            value: Any = None
            if pname.lower() in self.details:
                value = self.details[pname.lower()]
            elif noun in self.details:
                value = self.details[noun]
            else:
                for c in reversed(self.env.calls):  # latest output first
                    if not isinstance(c.response, dict) or "error" in c.response:
                        continue
                    for path, fnoun in fields.get(c.tool, {}).items():
                        v = get_path(c.response, path)
                        if v is None:
                            continue
                        if path.split(".")[-1] == pname or (noun and fnoun == noun) or \
                                (noun == "free text." and isinstance(v, str) and fnoun == "text"):
                            value = v
                            break
                    if value is not None:
                        break
            if value is None:
                return None
            if spec.get("type") in ("number", "integer") and isinstance(value, str):
                try:
                    value = float(value) if spec["type"] == "number" else int(float(value))
                except ValueError:
                    return None
            args[pname] = value
        return args

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        if self.again is not None:  # greedy_repeat: the same call once more, whatever came back
            call, self.again = self.again, None
            self.n += 1
            call = ToolCall(id=f"g{self.n}", function=call.function)
            return AgentReply(message=Message(role="assistant", content=None, tool_calls=[call]))
        fields = {t["function"]["name"]: returned_fields(t["function"]) for t in tools}
        for t in tools:
            fn = t["function"]
            if fn["name"] in self.called:
                continue
            args = self._bind(fn, fields)
            if args is None:
                continue
            self.called.add(fn["name"])
            self.n += 1
            call = ToolCall(id=f"g{self.n}", function=FunctionCall(name=fn["name"], arguments=json.dumps(args)))
            if self.repeat:
                self.again = call
            return AgentReply(message=Message(role="assistant", content=None, tool_calls=[call]))
        return AgentReply(message=Message(role="assistant", content="Done."))


class PathAgent:
    """Follows the task's paths with valid arguments (bound from the responses it actually got) and
    reacts only to explicit errors it sees; never checks values for plausibility.

    - call_all_members: never reacts; at each alternative group calls every member, then goes on.
    - abort_first_error: on the first error, stops and says the task cannot be completed.
    - retry_then_switch: retries a failing call up to 3 times, then switches to the cheapest path
      that avoids the failing tool; with none left, stops and says so.
    """

    def __init__(self, env: ToolMazeEnv, mode: str) -> None:
        self.env = env
        self.task = env.task
        self.mode = mode
        self.plan = self.task.default_index
        self.outputs: dict[str, Any] = {}
        self.done: set[str] = set()
        self.failures: Counter = Counter()
        self.avoid: set[str] = set()
        self.stop: str | None = None
        self.seen = 0
        self.n = 0
        self.queue: list[str] = []
        if mode == "call_all_members":
            for pos in self.task.positions:
                for member in pos.members:
                    self.queue += [t for t in member if t not in self.queue]

    def _observe(self) -> None:
        for rec in self.env.calls[self.seen:]:
            if isinstance(rec.response, dict) and "error" in rec.response:
                self.failures[rec.tool] += 1
                if self.mode == "abort_first_error":
                    self.stop = (f"The {rec.tool} service failed ({rec.response['error'].get('message')}), "
                                 "so I cannot complete this task.")
                elif self.mode == "retry_then_switch" and self.failures[rec.tool] > 3:
                    self.avoid.add(rec.tool)
                    sols = self.task.solutions
                    ok = [i for i, s in enumerate(sols) if not set(s) & self.avoid]
                    if not ok:
                        self.stop = (f"{rec.tool} kept failing after 3 retries and no alternative exists, "
                                     "so the task cannot be completed.")
                    else:
                        self.plan = min(ok, key=lambda i: (sum(t not in self.done for t in sols[i]),
                                                           tuple(sorted(sols[i]))))
                continue
            self.outputs[rec.tool] = rec.response
            self.done.add(rec.tool)
        self.seen = len(self.env.calls)

    def _path_of(self, tool: str) -> int:
        """The path to bind `tool` on: the planned one, unless another path's predecessors of `tool`
        answered and the planned one's did not (call_all_members binds from whichever member worked)."""
        sols = self.task.solutions
        cands = [i for i, s in enumerate(sols) if tool in s]
        cands.sort(key=lambda i: i != self.plan)

        def bound(i: int) -> bool:
            return all(b[0] == "user" or b[1] in self.outputs for b in self.task.bindings[i][tool].values())
        return next((i for i in cands if bound(i)), cands[0])

    def _args(self, path_index: int, tool: str) -> dict[str, Any]:
        return bound_args(self.task, self.outputs, path_index, tool)

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        self._observe()
        if self.stop is not None:
            return AgentReply(message=Message(role="assistant", content=self.stop))
        if self.mode == "call_all_members":
            if not self.queue:
                return AgentReply(message=Message(role="assistant", content="Done."))
            tool = self.queue.pop(0)
            return self._call(tool, self._args(self._path_of(tool), tool))
        pending = [t for t in self.task.solutions[self.plan] if t not in self.done]
        if not pending:
            return AgentReply(message=Message(role="assistant", content="All requested steps are done."))
        return self._call(pending[0], self._args(self.plan, pending[0]))

    def _call(self, tool: str, args: dict[str, Any]) -> AgentReply:
        self.n += 1
        tc = ToolCall(id=f"p{self.n}", function=FunctionCall(name=tool, arguments=json.dumps(args)))
        return AgentReply(message=Message(role="assistant", content=None, tool_calls=[tc]))
