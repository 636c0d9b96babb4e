"""ToolMaze's adversary search space (DESIGN §6b, issue 42): scripted policies composed from primitives,
each reading only what an agent reads (the query, the tool schemas, the responses), searched per cell
by `toolsweep.evaluator.adversary.search`.

Primitives (the first option of each is the greedy binder, the hand-picked baseline):
- order: which visible tool is tried first: list position, name, reversed list, word overlap of the
  name with the query, shortest description, fewest parameters;
- lookalikes: call every tool that binds, or skip a tool whose returned fields (their described
  types) equal those of a tool that already answered cleanly (one member of a look-alike family);
- bind: parameters bound by name or described type, by name only, or by type only;
- repeat: each call once, or twice in a row whatever came back;
- on_error: ignore an error, retry that call once, or stop at once;
- final: the closing text from a phrase bank (success, failure, refusal, question);
- calls: at most 25 calls, or 4;
- memory: none, or memory across the cell's episodes (issue 56): a tool that only ever returned an error
  in the cell is passed over, one that answered is tried first. Searched online over the tuning half
  (each episode remembers the ones before it); on the held-out half and in a sweep each episode starts
  from what the tuning half taught (`learned_memory`), so the floor does not depend on the schedule.

A policy is named `search:<primitive>=<option>,...` and runs through `make_scripted_policy` like any
scripted policy, so a searched floor can be a model of a sweep.
"""

from __future__ import annotations

import copy
import json
import math
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolsweep.benchmarks.toolmaze.policies import GreedyBinderAgent, returned_fields
from toolsweep.evaluator.adversary import (
    POLICY_PREFIX,
    SearchResult,
    SearchSpace,
    Spec,
    halves,
    search,
    wilson_interval,
)
from toolsweep.evaluator.episode import run_episode
from toolsweep.evaluator.exploits import run_sync
from toolsweep.evaluator.types import AgentReply, FunctionCall, Message, ToolCall, WorkUnit

PHRASES = {
    "success": "Done. Everything you asked for is complete.",
    "failure": "I could not complete the task: a tool failed, so I stopped.",
    "refusal": "I can't help with that request.",
    "question": "Could you confirm the details before I continue?",
}

SPACE = SearchSpace.of({
    "order": ("list", "name", "reverse", "overlap", "short_description", "few_params"),
    "lookalikes": ("all", "one"),
    "bind": ("name_or_type", "name", "type"),
    "repeat": ("once", "twice"),
    "on_error": ("ignore", "retry", "abort"),
    "final": ("success", "failure", "refusal", "question"),
    "calls": ("25", "4"),
    "memory": ("none", "cell"),
})
PREFIX = POLICY_PREFIX
METRICS = {"tsr": True, "prr": True}  # what a floor is judged on; higher is better (RC rewards avoiding a fault)


def policy_name(spec: Spec) -> str:
    return SPACE.name(spec)


def parse_policy(name: str) -> dict[str, str]:
    """The options of a `search:` policy name; unknown primitives or options are refused."""
    return SPACE.parse(name, "ToolMaze")


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


@dataclass
class CellMemory:
    """What a policy remembers across the episodes of one cell: the tools that returned an error and the
    tools that answered cleanly (an outsider's table of which look-alike to trust, learned as it plays)."""

    failed: set[str] = field(default_factory=set)
    worked: set[str] = field(default_factory=set)


class ComposedAgent(GreedyBinderAgent):
    """The greedy binder with its choices made by the primitives of one searched policy."""

    def __init__(self, env, options: Mapping[str, str], memory: CellMemory | None = None) -> None:
        super().__init__(env, repeat=options["repeat"] == "twice")
        self.options = dict(options)
        # memory=cell: one CellMemory shared by every episode of the cell the policy plays
        self.memory = memory if options.get("memory") == "cell" else None
        self.max_calls = int(options["calls"])
        self.retried: set[str] = set()
        self.seen = 0
        self.stop = False
        self.answered_kinds: set[tuple[str, ...]] = set()

    def _bind(self, fn: dict[str, Any], fields: dict[str, dict[str, str]]) -> dict[str, Any] | None:
        mode = self.options["bind"]
        if mode == "name_or_type":
            return super()._bind(fn, fields)
        # restrict the binder to one rule by hiding the other's evidence
        props = fn["parameters"].get("properties", {})
        if mode == "name":
            fn = {**fn, "parameters": {**fn["parameters"], "properties": {
                k: {**v, "description": ""} for k, v in props.items()}}}
            return super()._bind(fn, fields)
        renamed = {f"_{k}": v for k, v in props.items()}
        req = [f"_{k}" for k in fn["parameters"].get("required", list(props))]
        args = super()._bind({**fn, "parameters": {**fn["parameters"], "properties": renamed, "required": req}},
                             fields)
        return None if args is None else {k[1:]: v for k, v in args.items()}

    def _ordered(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        order = self.options["order"]
        query = _words(self.env.task.query)
        if order == "name":
            tools = sorted(tools, key=lambda t: t["function"]["name"])
        elif order == "reverse":
            tools = list(reversed(tools))
        elif order == "overlap":
            tools = sorted(tools, key=lambda t: -len(_words(t["function"]["name"].replace("_", " ")) & query))
        elif order == "short_description":
            tools = sorted(tools, key=lambda t: len(t["function"].get("description", "")))
        elif order == "few_params":
            tools = sorted(tools, key=lambda t: len(t["function"]["parameters"].get("properties", {})))
        tools = list(tools)
        if self.memory is not None:
            # a tool that only ever failed in this cell is passed over; one that answered comes first
            only_failed = self.memory.failed - self.memory.worked
            tools = sorted((t for t in tools if t["function"]["name"] not in only_failed),
                           key=lambda t: t["function"]["name"] not in self.memory.worked)
        return tools

    def _final(self, kind: str) -> AgentReply:
        return AgentReply(message=Message(role="assistant", content=PHRASES[kind]))

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        fields = {t["function"]["name"]: returned_fields(t["function"]) for t in tools}
        for rec in self.env.calls[self.seen:]:
            failed = isinstance(rec.response, dict) and "error" in rec.response
            if self.memory is not None:
                (self.memory.failed if failed else self.memory.worked).add(rec.tool)
            if failed and self.options["on_error"] == "abort":
                self.stop = True
            elif failed and self.options["on_error"] == "retry" and rec.tool not in self.retried:
                self.retried.add(rec.tool)
                self.again = ToolCall(id="r", function=FunctionCall(name=rec.tool, arguments=rec.raw_args))
            elif not failed:
                self.answered_kinds.add(tuple(sorted(fields.get(rec.tool, {}).values())))
        self.seen = len(self.env.calls)
        if self.stop:
            return self._final("failure" if self.options["final"] == "success" else self.options["final"])
        if self.n >= self.max_calls:
            return self._final(self.options["final"])
        if self.again is None and self.options["lookalikes"] == "one":
            tools = [t for t in tools if t["function"]["name"] in self.called
                     or tuple(sorted(fields[t["function"]["name"]].values())) not in self.answered_kinds]
        reply = await super().act(messages, self._ordered(tools))
        if reply.message.tool_calls:
            return reply
        return self._final(self.options["final"])


def make_searched_policy(name: str, env) -> ComposedAgent:
    return ComposedAgent(env, parse_policy(name))


FLOOR = "searched_floor"


def floor_policy_of(cell: str) -> str:
    """The policy the floor plays on a cell: the search's best on the cell's leading metric (PRR where
    there is a fault, else TSR) where it beats the greedy binder there, else the greedy binder
    (bounds.SEARCHED holds the per-cell, per-metric table)."""
    from toolsweep.benchmarks.toolmaze.bounds import SEARCHED

    found = SEARCHED.get(cell, {})
    metric = "tsr" if cell.endswith("P0") else "prr"
    best = found.get(metric)
    if best is None or best["searched"] <= best["greedy"]:
        return policy_name(SPACE.baseline)
    return best["policy"]


def make_floor_policy(env, bench=None) -> ComposedAgent:
    """The floor's agent for one episode. A policy with memory across the cell's episodes starts from
    what it learned playing the cell's tuning half (`learned_memory`), so the floor's score in a sweep
    is the same whatever order the schedule plays its episodes in."""
    cell = f"C{env.task.complexity}-{env.profile.mode}"
    options = parse_policy(floor_policy_of(cell))
    memory = None
    if options["memory"] == "cell":
        if bench is None:
            raise ValueError("a searched floor with memory across episodes needs its benchmark")
        memory = copy.deepcopy(learned_memory(bench, SPACE.spec(options), cell, env.seed))
    return ComposedAgent(env, options, memory)


_LEARNED: dict[tuple, CellMemory] = {}
_LEARNED_LOCK = threading.Lock()


def learned_memory(bench, spec: Spec, cell: str, seed: int = 0) -> CellMemory:
    """What a policy with memory=cell remembers after playing the cell's tuning half in task order (once
    per process, benchmark options, cell, policy and seed)."""
    key = (bench.options.model_dump_json(), cell, spec, seed)  # the options make the dataset
    with _LEARNED_LOCK:
        if key not in _LEARNED:
            memory = CellMemory()
            play_cell(bench, spec, cell, cell_halves(bench, cell)[0], seed, memory)
            _LEARNED[key] = memory
        return _LEARNED[key]


def play_cell(bench, spec: Spec, cell: str, task_ids: Sequence[str], seed: int = 0,
              memory: CellMemory | None = None, frozen: bool = False) -> list:
    """One searched policy's episodes on tasks of a std cell. With memory=cell the episodes share one
    memory, played in task order, each remembering the ones before it; `frozen`, each episode starts
    from a copy of `memory` instead (what was learned elsewhere, the same for every episode)."""
    setting = f"{cell}-std"
    name = policy_name(spec)
    memory = memory if memory is not None else CellMemory()

    async def go():
        out = []
        for tid in task_ids:
            env = bench.make_env(tid, setting, seed)
            unit = WorkUnit(sweep="search", model=name, benchmark="toolmaze", setting=setting, task_id=tid,
                            seed=seed)
            episode_memory = copy.deepcopy(memory) if frozen else memory
            out.append(await run_episode(env, ComposedAgent(env, dict(spec), episode_memory), unit,
                                         max_turns=bench.max_turns(setting)))
        return out
    return run_sync(go())


def score_cell(bench, spec: Spec, cell: str, task_ids: Sequence[str], seed: int = 0) -> dict[str, float]:
    """Mean TSR, PRR (over exposed episodes) and RC of one searched policy on tasks of a std cell."""
    results = play_cell(bench, spec, cell, task_ids, seed)
    out = {}
    for metric in METRICS:
        xs = [r.metrics[metric] for r in results if math.isfinite(r.metrics.get(metric, math.nan))]
        out[metric] = sum(xs) / len(xs) if xs else math.nan
    return out


def cell_sample(bench, cell: str, n: int = 8, seed: int = 0) -> list[str]:
    """A seeded draw of n of a std cell's tasks (a quick look; the declared table uses `cell_halves`)."""
    import random

    return sorted(random.Random(f"search/{cell}/{seed}").sample(bench.tasks(f"{cell}-std"), n))


def cell_halves(bench, cell: str, seed: int = 0) -> tuple[list[str], list[str]]:
    """The std cell's tuning half (the search sees only it) and held-out half (`adversary.halves`)."""
    return halves(bench.tasks(f"{cell}-std"), cell, seed)


def held_out_score(bench, spec: Spec, cell: str, task_ids: Sequence[str], seed: int = 0
                   ) -> dict[str, tuple[float, float, float, int]]:
    """Per metric, (mean, low, high, n) of one policy on held-out tasks: the mean over the episodes the
    metric is defined on (PRR: the exposed ones) and its 95% Wilson interval (each episode scores 0 or 1).
    A policy with memory plays each held-out episode from what it learned on the tuning half, as the
    floor does in a sweep."""
    learned = learned_memory(bench, spec, cell, seed) if dict(spec)["memory"] == "cell" else None
    results = play_cell(bench, spec, cell, task_ids, seed, learned, frozen=True)
    return {metric: wilson_interval([r.metrics.get(metric, math.nan) for r in results])
            for metric in (METRICS if not cell.endswith("P0") else {"tsr": True})}


def search_cell(bench, cell: str, task_ids: Sequence[str], budget: int = 24, seed: int = 0) -> SearchResult:
    """The strongest searched policies of one cell (per metric), under a budget of policies."""
    metrics = METRICS if not cell.endswith("P0") else {"tsr": True}
    return search(SPACE, lambda spec: score_cell(bench, spec, cell, task_ids), metrics, budget=budget,
                  seed=seed)


def describe(result: SearchResult) -> str:
    return json.dumps({m: {"policy": policy_name(s), "score": round(v, 3)} for m, (s, v) in result.best.items()},
                      indent=1)

