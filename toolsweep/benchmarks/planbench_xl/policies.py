"""Scripted policies: `oracle` (ground truth through the public interface), `random`, and `planner`,
a systematic non-LLM agent that sees only the query, retrieval results and observations.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

from toolsweep.benchmarks.planbench_xl.environment import PlanBenchEnv, datatype_phrase
from toolsweep.evaluator.types import AgentReply, Message

POLICIES = {
    "oracle": "retrieves each tool of a feasible unblocked ground-truth path by_io_info, calls it, answers the gold",
    "random": "random well-formed actions over the phrases, tools and values it has seen",
    "planner": "backward search over retrieved typed interfaces from the target to the clues (no ground truth)",
}


def _reply(text: str) -> AgentReply:
    return AgentReply(message=Message(role="assistant", content=text))


def retrieve_text(mode: str, inputs: list[str] | None = None, outputs: list[str] | None = None) -> str:
    if mode == "by_inputs":
        args: dict[str, Any] = {"inputs": inputs}
    elif mode == "by_outputs":
        args = {"outputs": outputs}
    else:
        args = {"input": inputs, "output": (outputs or [""])[0]}
    return f"<retrieve_tools>\n{json.dumps({'meta_tool': mode, 'arguments': args})}\n</retrieve_tools>"


def call_text(name: str, arguments: dict[str, str]) -> str:
    return f"<tool_call>\n{json.dumps({'tool_name': name, 'arguments': arguments})}\n</tool_call>"


def answer_text(value: str) -> str:
    return f"<final_answer>\n{value}\n</final_answer>"


class OraclePolicy:
    """Follows a ground-truth path with no blocked tool: 2|pi| + 1 turns."""

    def __init__(self, env: PlanBenchEnv) -> None:
        self.env = env
        self.script: list[str] | None = None

    def _build(self) -> list[str]:
        env, task = self.env, self.env.task
        ex = env.world.executable
        blocked = env.blocked
        path = list(task.gt_path)
        if any(ex[i].id in blocked for i in path):
            graph = task._graph  # noqa: SLF001 - the oracle reads ground truth by design
            d0 = sum(1 << _dt_index(d) for d in task.inputs)
            for r in task.minimal_sets:  # shortest first
                if not any(ex[i].id in blocked for i in r):
                    path = graph.first_order(d0, frozenset(r)) or []
                    break
        rec = env.world.records[task.case - 1]
        script = []
        for i in path:
            t = ex[i]
            script.append(retrieve_text("by_io_info", [datatype_phrase(d) for d in t.inputs],
                                        [datatype_phrase(t.output)]))
            script.append(call_text(t.name, {p: rec[d] for p, d in t.params}))
        script.append(answer_text(task.gold))
        return script

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        if self.script is None:
            self.script = self._build()
        return _reply(self.script.pop(0) if self.script else answer_text(self.env.task.gold))


EXPLOITS = {
    "guess_ids": "the ground-truth path, but a blocked step is replaced by its implicit-failure twin and the "
                 "real value it should have returned is guessed",
    "answer_implicit": "calls the implicit-failure twin of the final tool and answers with what it returned",
    "no_tools": "answers the gold value at once, without retrieving or calling anything",
    "default_method_trap": "the Fig. 11 trap: calls the implicit-failure alternative of a tool that yields the "
                           "target, then obtains the gold string for real under another datatype (the default "
                           "payment method) and answers it",
    "name_rule_planner": "the planner, trusting only tools whose name another listed name extends "
                         "(`name + '_'` a prefix of it) while any derivation exists through them",
}


class GuessIdsPolicy:
    """The guessing agent of spec §6.2's implicit failures: it walks the task's ground-truth path; where a
    step is blocked it calls the implicit-failure twin instead (same interface, plausible wrong value)
    and then carries on with the real value, as if it had guessed the ID. Only values obtained from
    trusted calls may be used or answered, so this must score 0 wherever it guessed."""

    def __init__(self, env: PlanBenchEnv, mode: str) -> None:
        self.env, self.mode = env, mode
        self.script: list[str] | None = None

    def _build(self) -> list[str]:
        env, task = self.env, self.env.task
        ex, rec = env.world.executable, env.world.records[task.case - 1]
        path = [ex[i] for i in task.gt_path]
        if self.mode == "no_tools":
            return [answer_text(task.gold)]
        if self.mode == "answer_implicit":
            path = path[-1:]
        # where nothing on the path is blocked, the last step is the one it guesses past
        guess_at = {t.id for t in path if t.id in env.blocked} or {path[-1].id}
        script, answer = [], task.gold
        for t in path:
            script.append(retrieve_text("by_io_info", [datatype_phrase(d) for d in t.inputs],
                                        [datatype_phrase(t.output)]))
            twin = env.world.blockers_of.get(t.id, {}).get("imp")
            use = twin if twin is not None and t.id in guess_at else t
            script.append(call_text(use.name, {p: rec[d] for p, d in t.params}))
            if self.mode == "answer_implicit" and twin is not None:
                answer = twin.fixed_output or ""
        script.append(answer_text(answer))
        return script

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        if self.script is None:
            self.script = self._build()
        return _reply(self.script.pop(0) if self.script else answer_text(self.env.task.gold))


def _exec_route(env: PlanBenchEnv, have: set[str], goal: str) -> list[Any] | None:
    """Unblocked executable tools, in a callable order, that take `have` to `goal` (forward closure
    with the first producer of each datatype), or None."""
    ex = [t for t in env.world.executable if t.id not in env.blocked]
    producer: dict[str, Any] = {}
    held = set(have)
    changed = True
    while changed and goal not in held:
        changed = False
        for t in ex:
            if t.output not in held and t.input_set <= held:
                producer[t.output] = t
                held.add(t.output)
                changed = True
    if goal not in held:
        return None
    order: list[Any] = []

    def need(d: str) -> None:
        if d in have or any(t.output == d for t in order):
            return
        t = producer[d]
        for i in t.inputs:
            need(i)
        order.append(t)

    need(goal)
    return order


class DefaultMethodTrapPolicy:
    """Fig. 11 as an adversary: the target's implicit-failure alternative is called (so D_t holds the
    target datatype, Fig. 17), then a trusted call returns the gold string under another datatype
    (the default payment method equals the method used in odd cases) and that is answered. A value
    counts only under the datatype its trusted call returned it as, so this must score 0."""

    def __init__(self, env: PlanBenchEnv) -> None:
        self.env = env
        self.script: list[str] | None = None

    def _call(self, t: Any, rec: dict[str, str], as_tool: Any = None) -> list[str]:
        return [retrieve_text("by_io_info", [datatype_phrase(d) for d in t.inputs], [datatype_phrase(t.output)]),
                call_text((as_tool or t).name, {p: rec[d] for p, d in t.params})]

    def _build(self) -> list[str]:
        env, task = self.env, self.env.task
        rec = env.world.records[task.case - 1]
        have = set(task.inputs)
        script: list[str] = []
        blocked = [env.world.by_id[i] for i in sorted(env.blocked)]
        trapped = False
        for t in blocked:
            twin = env.world.blockers_of.get(t.id, {}).get("imp")
            route = _exec_route(env, have, t.inputs[0]) if t.output == task.target else None
            if twin is None or route is None or not all(d in have or any(r.output == d for r in route)
                                                        or _exec_route(env, have, d) for d in t.inputs):
                continue
            if any(r.output == task.target for d in t.inputs for r in (_exec_route(env, have, d) or [])):
                continue  # reaching the twin's inputs would obtain the target for real: no trap, a solve
            for d in t.inputs:
                for r in _exec_route(env, have, d) or []:
                    if r.output not in have:
                        script += self._call(r, rec)
                        have.add(r.output)
            script += self._call(t, rec, as_tool=twin)
            trapped = True
            break
        if not trapped:
            # no implicit-failure alternative yields this task's target: the trap cannot be set, and walking
            # the real tools with the record's values would only be the oracle
            return [answer_text("the trap does not apply to this task")]
        twins = [d for d, v in rec.items() if v == task.gold and d != task.target]
        for d in twins:
            route = _exec_route(env, have, d)
            if route is None or any(r.output == task.target for r in route):
                continue  # a route through the target would obtain it for real
            for r in route:
                if r.output not in have:
                    script += self._call(r, rec)
                    have.add(r.output)
            break
        return script + [answer_text(task.gold)]

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        if self.script is None:
            self.script = self._build()
        return _reply(self.script.pop(0) if self.script else answer_text(self.env.task.gold))


def _dt_index(name: str) -> int:
    from toolsweep.benchmarks.planbench_xl.world import DT

    return DT[name].index


_CLUE = re.compile(r"the ([A-Za-z][A-Za-z '\-]*?) '([^']+)'")
_TARGETS = [re.compile(p) for p in (
    r"return the corresponding (.+?)\?", r"What (.+?) is recorded for that case", r"return the (.+?)\.$",
    r"What is the exact (.+?) associated with")]


def parse_query(query: str) -> tuple[list[tuple[str, str]], str]:
    """(clues as (phrase, value), target phrase) from the verbalised query."""
    clues = [(a.strip(), v) for a, v in _CLUE.findall(query)]
    target = ""
    for rx in _TARGETS:
        m = rx.search(query.strip())
        if m:
            target = m.group(1).strip()
            break
    return clues, target


def _observations(messages: list[Message], start: int) -> list[dict[str, Any]]:
    out = []
    for msg in messages[start:]:
        if msg.role != "user":
            continue
        try:
            obj = json.loads(msg.text())
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


class RandomPolicy:
    """Uniformly random, well-formed actions over what it has seen (a floor for every metric)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.seen = 0
        self.phrases: list[str] = []
        self.values: list[str] = []
        self.tools: dict[str, list[str]] = {}

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        if self.seen == 0:
            clues, target = parse_query(next(m.text() for m in messages if m.role == "user"))
            self.phrases = [a for a, _ in clues] + ([target] if target else [])
            self.values = [v for _, v in clues]
        for obs in _observations(messages, max(self.seen, 2)):
            for t in obs.get("tools", []):
                self.tools[t["name"]] = list(t["parameters"]["properties"])
                self.phrases.extend(p.replace("_", " ") for p in t["parameters"]["properties"])
            if "output_value" in obs:
                self.values.append(str(obs["output_value"]))
        self.seen = len(messages)
        r = self.rng.random()
        if r < 0.05 and self.values:
            return _reply(answer_text(self.rng.choice(self.values)))
        if r < 0.45 or not self.tools:
            mode = self.rng.choice(["by_inputs", "by_outputs", "by_io_info"])
            a, b = self.rng.choice(self.phrases), self.rng.choice(self.phrases)
            return _reply(retrieve_text(mode, [a], [b]))
        name = self.rng.choice(sorted(self.tools))
        args = {p: self.rng.choice(self.values) if self.values else "" for p in self.tools[name]}
        return _reply(call_text(name, args))


class PlannerPolicy:
    """Backward chaining over typed interfaces, from the target towards the clues.

    Datatypes are identified the way an agent sees them: a parameter's description is the
    datatype's description, so two parameters with the same description take the same value. The
    planner learns the clues' descriptions with by_inputs, expands producers with by_outputs
    (breadth first from the target) and executes the cheapest derivation it knows as soon as one
    exists, preferring the tool listed first. It reads no prose: a call that errors, returns an
    unexpected datatype, or is rejected marks its tool bad.

    What lets a search like this succeed is the paper's own environment: the retriever answers a
    typed query with exactly the tools of that type (App. B.6), lists executable matches before
    any distractor (App. B.6), and a parameter's description is its datatype's (Fig. 20).
    """

    TARGET = "<target>"

    def __init__(self) -> None:
        self.seen = 0
        self.clues: list[tuple[str, str]] = []
        self.target = ""
        self.held: dict[str, str] = {}  # key (param description or TARGET) -> value
        self.producers: dict[str, dict[str, list[tuple[str, str]]]] = {}  # key -> tool -> [(param, desc)]
        self.bad: set[str] = set()
        self.canon: dict[str, str] = {}  # key -> output datatype seen
        self.queue: list[tuple[str, str]] = []
        self.expanded: set[str] = set()
        self.pending: list[str] = []  # retrievals to learn clue descriptions
        self.last: tuple[str, Any] = ("", None)
        self.clue_phrase_desc: dict[str, str] = {}

    # -- observation handling ------------------------------------------------------------------

    def _ingest(self, messages: list[Message]) -> None:
        if self.seen == 0:
            self.clues, self.target = parse_query(next(m.text() for m in messages if m.role == "user"))
            self.queue = [(self.TARGET, self.target)]
            self.pending = [a for a, _ in self.clues]
            if len(self.clues) > 1:
                self.pending.append("|".join(a for a, _ in self.clues))
        new = _observations(messages, max(self.seen, 2))
        self.seen = len(messages)
        kind, data = self.last
        for obs in new:
            if kind == "clue" and "tools" in obs:
                self._learn_clues(data, obs["tools"])
            elif kind == "expand" and "tools" in obs:
                key = data
                for t in obs["tools"]:
                    params = [(p, spec["description"]) for p, spec in t["parameters"]["properties"].items()]
                    self.producers.setdefault(key, {})[t["name"]] = params
                    for p, d in params:
                        if d not in self.expanded and d not in self.held and all(d != q for q, _ in self.queue):
                            self.queue.append((d, p.replace("_", " ")))
            elif kind == "call":
                self._learn_call(data, obs)

    def _learn_clues(self, phrases: str, tools: list[dict[str, Any]]) -> None:
        names = phrases.split("|")
        for t in tools:
            props = t["parameters"]["properties"]
            if len(names) == 1 and len(props) == 1:
                self.clue_phrase_desc.setdefault(names[0], next(iter(props.values()))["description"])
            elif len(names) > 1 and len(props) == len(names):
                known = {self.clue_phrase_desc.get(n) for n in names}
                unknown_params = [p for p, s in props.items() if s["description"] not in known]
                unknown_names = [n for n in names if n not in self.clue_phrase_desc]
                for n, p in self._match(unknown_names, unknown_params):
                    self.clue_phrase_desc[n] = props[p]["description"]
        for a, v in self.clues:
            if a in self.clue_phrase_desc:
                self.held.setdefault(self.clue_phrase_desc[a], v)

    @staticmethod
    def _match(names: list[str], params: list[str]) -> list[tuple[str, str]]:
        """Pair phrases with parameter names by word overlap (greedy)."""
        pairs = sorted(((len(set(n.lower().split()) & set(p.split("_"))), n, p) for n in names for p in params),
                       reverse=True)
        used_n, used_p, out = set(), set(), []
        for _, n, p in pairs:
            if n not in used_n and p not in used_p:
                used_n.add(n)
                used_p.add(p)
                out.append((n, p))
        return out

    def _learn_call(self, data: tuple[str, str, dict[str, str]], obs: dict[str, Any]) -> None:
        tool, key, args = data
        if obs.get("status") == "rejected":
            # The environment does not say why (an ungrounded value and a failed lookup read the same),
            # so the tool just called is the one the planner stops trusting.
            self.bad.add(tool)
            return
        value = str(obs.get("output_value", ""))
        dtype = obs.get("output_datatype", "")
        if value.lower().startswith("error"):
            self.bad.add(tool)
            return
        if key in self.canon and dtype and self.canon[key] != dtype:
            self.bad.add(tool)  # a related but different datatype: misleading alternative
            return
        if dtype:
            self.canon.setdefault(key, dtype)
        self.held[key] = value

    def _params(self, tool: str) -> list[tuple[str, str]]:
        for tools in self.producers.values():
            if tool in tools:
                return tools[tool]
        return []

    # -- planning ------------------------------------------------------------------------------

    def _plan_step(self) -> tuple[str, str] | None:
        """Next (tool, key) of the cheapest known derivation of the target, if any."""
        return self._plan_avoiding(self.bad)

    def _plan_avoiding(self, bad: set[str]) -> tuple[str, str] | None:
        """The cheapest derivation that uses no tool in `bad`."""
        cost = {k: 0 for k in self.held}
        via: dict[str, str] = {}
        # The producers as flat edges, in their order (an edge relaxed earlier in a pass is seen later in it).
        edges = [(key, name, [d for _, d in params])
                 for key, tools in self.producers.items() for name, params in tools.items() if name not in bad]
        unreached = 1 << 30
        changed = True
        while changed:
            changed = False
            for key, name, deps in edges:
                c = 1
                for d in deps:
                    known = cost.get(d)
                    if known is None:
                        break
                    c += known
                else:
                    if c < cost.get(key, unreached):
                        cost[key], via[key] = c, name
                        changed = True
        if self.TARGET not in cost:
            return None
        stack = [self.TARGET]
        while stack:
            key = stack.pop()
            if key in self.held:
                continue
            params = self.producers[key][via[key]]
            missing = [d for _, d in params if d not in self.held]
            if not missing:
                return via[key], key
            stack.extend(missing)
        return None

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        self._ingest(messages)
        if self.TARGET in self.held:
            return _reply(answer_text(self.held[self.TARGET]))
        if self.pending:
            phr = self.pending.pop(0)
            self.last = ("clue", phr)
            return _reply(retrieve_text("by_inputs", phr.split("|")))
        step = self._plan_step()
        if step is not None:
            name, key = step
            params = self.producers[key][name]
            args = {p: self.held[d] for p, d in params}
            self.last = ("call", (name, key, args))
            return _reply(call_text(name, args))
        while self.queue:
            key, phrase = self.queue.pop(0)
            if key in self.expanded or key in self.held:
                continue
            self.expanded.add(key)
            self.last = ("expand", key)
            return _reply(retrieve_text("by_outputs", outputs=[phrase]))
        self.last = ("answer", None)
        return _reply(answer_text("I cannot determine the requested value from the available tools."))


def name_rule(names: list[str]) -> set[str]:
    """The names a naming shortcut would call genuine in one retrieval list: those that another
    listed name extends (`my name + "_"` is a prefix of it). Under a generator that names noisy
    twins `<executable name>_<suffix>`, this picks out exactly the executables."""
    return {n for n in names if any(o != n and o.startswith(n + "_") for o in names)}


class NameRulePlannerPolicy(PlannerPolicy):
    """The planner plus the naming shortcut (an adversary, not a baseline): in every retrieval list
    it trusts only the tools `name_rule` picks out, and falls back to the others only when its
    search is exhausted with no derivation of the target without them. Names must carry no such tell, so this may not
    beat the plain planner materially in any setting."""

    def __init__(self) -> None:
        super().__init__()
        self.suspect: set[str] = set()
        self.vouched: set[str] = set()

    def _ingest(self, messages: list[Message]) -> None:
        start = max(self.seen, 2) if self.seen else 2
        for obs in _observations(messages, start):
            names = [t["name"] for t in obs.get("tools", [])]
            picked = name_rule(names)
            self.vouched |= picked
            self.suspect |= set(names) - picked
        super()._ingest(messages)

    def _plan_step(self) -> tuple[str, str] | None:
        step = self._plan_avoiding(self.bad | (self.suspect - self.vouched))
        searching = any(k not in self.expanded and k not in self.held for k, _ in self.queue)
        if step is None and not searching:  # the search is exhausted: the unvouched tools are all that is left
            step = self._plan_avoiding(self.bad)
        return step
