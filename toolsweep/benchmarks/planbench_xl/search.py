"""PlanBench-XL's adversary search space (DESIGN §6b): the planner's backward search with its choices made
by primitives that read only what an agent reads (the query, the retrieval lists, the observations),
searched per setting by `toolsweep.evaluator.adversary.search`. None reads the ground truth or a model.

Primitives (the first option of each is the planner, the hand-picked baseline):
- prefer: which listed tool of a retrieval list the planner tries first: list position, the reversed
  list, shortest or longest description, most description words shared with the goal phrase, fewest
  parameters, a name another listed name extends (`name + "_"`), a description no other listed
  description contains;
- trust: every listed tool, or only the preferred one of each list (the others used only once the
  search is exhausted);
- repeat: each call once, or every call twice in a row;
- final: what the answer says when the target was not reached: a refusal, the last value a call
  returned, or the first clue's value.

A policy is named `search:<primitive>=<option>,...`; `searched_floor` plays, per setting, the table in
bounds SEARCHED (bench/planbench_xl_search.py wrote it): the policy picked on the setting's tuning half,
reported on its held-out half (`setting_halves`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from toolsweep.benchmarks.planbench_xl.policies import (
    PlannerPolicy,
    _observations,
    _reply,
    answer_text,
    name_rule,
)
from toolsweep.evaluator.adversary import POLICY_PREFIX, SearchSpace, Spec
from toolsweep.evaluator.types import AgentReply, Message

PREFIX = POLICY_PREFIX
FLOOR = "searched_floor"
SPACE = SearchSpace.of({
    "prefer": ("list", "reverse", "short_description", "long_description", "goal_overlap", "few_params",
               "name_extended", "not_contained"),
    "trust": ("all", "preferred"),
    "repeat": ("once", "twice"),
    "final": ("refusal", "last_output", "first_clue"),
})
METRICS = {"accuracy": True}
REFUSAL = "I cannot determine the requested value from the available tools."


def policy_name(spec: Spec) -> str:
    return SPACE.name(spec)


def parse_policy(name: str) -> dict[str, str]:
    """The options of a `search:` policy name (missing primitives take the planner's option)."""
    return SPACE.parse(name, "PlanBench-XL")


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def rank_list(tools: list[dict[str, Any]], prefer: str, goal: str) -> list[dict[str, Any]]:
    """One retrieval list in the order a `prefer` option tries it (stable: ties keep list order)."""
    def desc(t: dict[str, Any]) -> str:
        return str(t.get("description", ""))
    if prefer == "reverse":
        return list(reversed(tools))
    if prefer == "short_description":
        return sorted(tools, key=lambda t: len(desc(t)))
    if prefer == "long_description":
        return sorted(tools, key=lambda t: -len(desc(t)))
    if prefer == "goal_overlap":
        g = _words(goal)
        return sorted(tools, key=lambda t: -len(_words(desc(t)) & g))
    if prefer == "few_params":
        return sorted(tools, key=lambda t: len(t.get("parameters", {}).get("properties", {})))
    if prefer == "name_extended":
        picked = name_rule([t["name"] for t in tools])
        return sorted(tools, key=lambda t: t["name"] not in picked)
    if prefer == "not_contained":
        ds = [desc(t).lower() for t in tools]
        return sorted(tools, key=lambda t: any(o != desc(t).lower() and desc(t).lower() in o for o in ds))
    return list(tools)


class ComposedPlanner(PlannerPolicy):
    """The planner with its tool preference, trust, repetition and closing text set by one searched policy."""

    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__()
        self.options = dict(options)
        self.suspect: set[str] = set()
        self.preferred: set[str] = set()
        self.outputs: list[str] = []
        self.again: str | None = None

    def _ingest(self, messages: list[Message]) -> None:
        start = max(self.seen, 2) if self.seen else 2
        fresh = _observations(messages, start) if self.seen else []
        super()._ingest(messages)
        for obs in fresh:
            if "output_value" in obs:
                self.outputs.append(str(obs["output_value"]))
        if self.last[0] == "expand" and self.last[1] in self.producers:
            # reorder the producers just learned so the planner's "listed first" tie-break follows `prefer`
            key = self.last[1]
            tools = [{"name": n, "description": self.descriptions.get(n, ""),
                      "parameters": {"properties": dict(ps)}} for n, ps in self.producers[key].items()]
            ranked = rank_list(tools, self.options["prefer"], self.target)
            self.producers[key] = {t["name"]: self.producers[key][t["name"]] for t in ranked}
            if ranked:
                self.preferred.add(ranked[0]["name"])
                self.suspect |= {t["name"] for t in ranked[1:]}

    @property
    def descriptions(self) -> dict[str, str]:
        return getattr(self, "_descriptions", {})

    def _remember_descriptions(self, messages: list[Message]) -> None:
        d = self.__dict__.setdefault("_descriptions", {})
        for obs in _observations(messages, max(self.seen, 2) if self.seen else 2):
            for t in obs.get("tools", []):
                d[t["name"]] = str(t.get("description", ""))

    def _plan_step(self) -> tuple[str, str] | None:
        if self.options["trust"] == "all":
            return super()._plan_step()
        step = self._plan_avoiding(self.bad | (self.suspect - self.preferred))
        searching = any(k not in self.expanded and k not in self.held for k, _ in self.queue)
        if step is None and not searching:
            step = self._plan_avoiding(self.bad)
        return step

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        if self.again is not None:
            text, self.again = self.again, None
            return _reply(text)
        self._remember_descriptions(messages)
        reply = await super().act(messages, tools)
        text = reply.message.text()
        if self.options["repeat"] == "twice" and "<tool_call>" in text:
            self.again = text
        if "<final_answer>" in text and REFUSAL in text and self.options["final"] != "refusal":
            value = (self.outputs[-1] if self.options["final"] == "last_output" and self.outputs
                     else self.clues[0][1] if self.clues else "")
            if value:
                return _reply(answer_text(value))
        return reply


def floor_policy_of(setting: str) -> str:
    """The policy the floor plays on a setting: the table's best on accuracy where it beats the planner
    there, else the planner."""
    from toolsweep.benchmarks.planbench_xl.bounds import SEARCHED

    best = SEARCHED.get(setting, {}).get("accuracy")
    if best is None or best["searched"] <= best["planner"]:
        return policy_name(SPACE.baseline)
    return best["policy"]


def make_searched_policy(name: str, setting: str) -> ComposedPlanner:
    if name == FLOOR:
        name = floor_policy_of(setting)
    return ComposedPlanner(parse_policy(name))


def score_setting(bench, spec: Spec, setting: str, task_ids: list[str], seed: int = 42) -> dict[str, float]:
    """Accuracy of one searched policy on tasks of a setting."""
    from toolsweep.evaluator.exploits import aggregate, play, run_sync

    return aggregate(bench.metrics(setting), run_sync(play(bench, policy_name(spec), setting, task_ids,
                                                                 seed=seed)))


def setting_sample(bench, setting: str, n: int, seed: int = 0) -> list[str]:
    """The seeded draw of a setting's tasks the table was searched on (all of them when n <= 0)."""
    import random

    ids = bench.tasks(setting)
    return ids if n <= 0 or n >= len(ids) else sorted(random.Random(f"search/{setting}/{seed}").sample(ids, n))


def setting_halves(bench, setting: str, seed: int = 0) -> tuple[list[str], list[str]]:
    """The setting's tuning half (the search sees only it) and held-out half (`adversary.halves`)."""
    from toolsweep.evaluator.adversary import halves

    return halves(bench.tasks(setting), setting, seed)


def held_out_score(bench, spec: Spec, setting: str, task_ids: list[str], seed: int = 42
                   ) -> tuple[float, float, float, int]:
    """(accuracy, 95% Wilson low, high, episodes) of one policy on held-out tasks of a setting."""
    from toolsweep.evaluator.adversary import wilson_interval
    from toolsweep.evaluator.exploits import play, run_sync

    results = run_sync(play(bench, policy_name(spec), setting, task_ids, seed=seed))
    return wilson_interval([r.metrics.get("accuracy", math.nan) for r in results])


def search_setting(bench, setting: str, n_tasks: int = 24, budget: int = 24, seed: int = 0,
                   task_ids: list[str] | None = None):
    """The strongest policies of one setting, searched on `task_ids` (else a seeded draw of n_tasks)."""
    from toolsweep.evaluator.adversary import search

    ids = task_ids if task_ids is not None else setting_sample(bench, setting, n_tasks, seed)
    return search(SPACE, lambda spec: score_setting(bench, spec, setting, ids), METRICS, budget=budget, seed=seed)
