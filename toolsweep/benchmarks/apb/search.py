"""APB's adversary search space (DESIGN §6b): the no-LLM heuristic (baseline.py) with its choices made by
primitives that read only what a model reads (the query, the files manifest, the tool list, the
trajectory so far), searched per setting by `toolsweep.evaluator.adversary.search`. None reads the
reference.

Primitives (the first option of each is the heuristic, the hand-picked baseline):
- pick: which tool a clause of the query gets: most words shared with name and description, with the
  name only, with the description only, or the next listed tool (list position);
- order: the clauses' calls in the query's order, or reversed;
- bind: arguments as the heuristic binds them (literals from the clause, data from the previous step),
  every argument the previous step's output, every argument the clause's text, or none;
- refuse: when a prompt allows refusing: on the heuristic's visible cues, never, always, or whenever
  the query holds a phrase of a fixed bank (modal and negative words: "cannot", "only", "must", ...);
- broken: after a tool error, the tool with the broken one's parameter count whose description is
  nearest (the heuristic), whose name is nearest, whose description is longest, or the first listed.

A policy is named `search:<primitive>=<option>,...`; APB's baseline `heuristic` plays, per setting, the
table in bounds.SEARCHED (bench/apb_search.py wrote it) where it names a stronger policy.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from toolsweep.benchmarks.apb import baseline
from toolsweep.benchmarks.apb.policies import _Scripted
from toolsweep.benchmarks.apb.tools import FINISH
from toolsweep.evaluator.adversary import POLICY_PREFIX, SearchSpace, Spec

PREFIX = POLICY_PREFIX
FLOOR = "searched_floor"
SPACE = SearchSpace.of({
    "pick": ("name_and_description", "name", "description", "position"),
    "order": ("query", "reversed"),
    "bind": ("heuristic", "previous", "clause", "none"),
    "refuse": ("cues", "never", "always", "phrase_bank"),
    "broken": ("description", "name", "longest", "first"),
})
METRICS = {"correct": True}  # every setting has it (grade only the graded halves)
PHRASE_BANK = re.compile(r"\b(?:cannot|can't|unable|only|must|without|not available|no longer|missing|"
                         r"private|prohibited|offline|unavailable|never)\b", re.I)
REASON = "This cannot be completed with the tools, files and information available."


def policy_name(spec: Spec) -> str:
    return SPACE.name(spec)


def parse_policy(name: str) -> dict[str, str]:
    """The options of a `search:` policy name (missing primitives take the heuristic's option)."""
    return SPACE.parse(name, "APB")


def _pick(clause: str, tools: list[dict[str, Any]], how: str, i: int) -> dict[str, Any] | None:
    if how == "name_and_description":
        return baseline._pick_tool(clause, tools)  # noqa: SLF001 - the heuristic's own rule
    if how == "position":
        return tools[i % len(tools)] if tools else None
    cw = baseline._words(clause)  # noqa: SLF001
    best, score = None, 0
    for t in tools:
        text = t["name"] if how == "name" else t.get("description", "").split("Parameters:")[0]
        s = len(cw & baseline._words(text))  # noqa: SLF001
        if s > score:
            best, score = t, s
    return best


def _arguments(tool: dict[str, Any], clause: str, previous: dict[str, Any] | None, how: str) -> dict[str, Any]:
    if how == "heuristic":
        return baseline._arguments(tool, clause, previous)  # noqa: SLF001
    props = tool.get("parameters", {}).get("properties", {})
    if how == "none":
        return {}
    if how == "clause":
        return {p: clause for p in props}
    ref = f"${previous['name']}.{baseline._returns(previous)}" if previous else clause  # noqa: SLF001
    return {p: ref for p in props}


def plan_calls(query: str, tools: list[dict[str, Any]], options: Mapping[str, str]) -> list[tuple[dict, dict]]:
    usable = [t for t in tools if t["name"] != FINISH]
    out, previous = [], None
    for i, clause in enumerate(baseline._clauses(query)):  # noqa: SLF001
        tool = _pick(clause, usable, options["pick"], i)
        if tool is None:
            continue
        out.append((tool, _arguments(tool, clause, previous, options["bind"])))
        previous = tool
    return list(reversed(out)) if options["order"] == "reversed" else out


def _broken(prefix: list[dict[str, Any]], tools: list[dict[str, Any]], how: str) -> str | None:
    if how == "description":
        return baseline.broken_answer(prefix, tools)
    if len(prefix) < 2 or prefix[-1].get("role") != "tool" or "error" not in str(prefix[-1].get("content", "")).lower():
        return None
    failed = prefix[-2]["tool_calls"][0]["function"]
    broken = next((t for t in tools if t["name"] == failed["name"]), None)
    if broken is None:
        return None
    bprops = list(broken.get("parameters", {}).get("properties", {}))
    same = [t for t in tools if t["name"] not in (broken["name"], FINISH)
            and len(t.get("parameters", {}).get("properties", {})) == len(bprops)]
    if not same:
        return None
    if how == "name":
        bw = baseline._words(broken["name"])  # noqa: SLF001
        best = max(same, key=lambda t: len(bw & baseline._words(t["name"])))  # noqa: SLF001
    elif how == "longest":
        best = max(same, key=lambda t: len(t.get("description", "")))
    else:
        best = same[0]
    props = list(best["parameters"]["properties"])
    args = {props[i]: failed["arguments"][p] for i, p in enumerate(bprops) if p in failed["arguments"]}
    return json.dumps({"role": "assistant", "thought": f"{broken['name']} is broken; {best['name']} does the same job.",
                       "tool_calls": [{"type": "function", "function": {"name": best["name"], "arguments": args}}]})


def _stepwise(query: str, tools: list[dict[str, Any]], prefix: list[dict[str, Any]], k: int,
              options: Mapping[str, str]) -> str:
    calls = plan_calls(query, tools, options)
    made = sum(1 for m in prefix if m.get("role") == "assistant" and m.get("tool_calls"))
    observed: dict[str, Any] = {}  # a reference to an earlier step takes the value the trajectory shows
    for m in prefix:
        if m.get("role") == "tool":
            try:
                content = json.loads(m.get("content", ""))
            except (TypeError, ValueError):
                continue
            if isinstance(content, dict):
                observed.update({f"${m['name']}.{f}": v for f, v in content.items()})
    steps = []
    for t, a in calls[made:made + k]:
        bound = {p: observed.get(v, v) if isinstance(v, str) else v for p, v in a.items()}
        steps.append({"role": "assistant", "thought": "The next step of the query.",
                      "tool_calls": [{"type": "function", "function": {"name": t["name"], "arguments": bound}}]})
    while len(steps) < k:
        steps.append({"role": "assistant", "thought": "Done.", "tool_calls": [
            {"type": "function", "function": {"name": FINISH, "arguments": {"mode": "give_answer"}}}]})
    return json.dumps(steps[0] if k == 1 else steps)


class ComposedPolicy(_Scripted):
    """The heuristic with its choices made by the primitives of one searched policy."""

    def __init__(self, env, seed: int, options: Mapping[str, str]) -> None:
        super().__init__(env, seed)
        self.options = dict(options)

    def _refusal(self, visible: list[dict[str, Any]]) -> str | None:
        """The REJECT's reason when this policy refuses the case, else None."""
        how, env = self.options["refuse"], self.env
        if how == "never":
            return None
        if how == "always":
            return REASON
        if how == "phrase_bank":
            return REASON if PHRASE_BANK.search(env.query.split("\nFiles:")[0]) else None
        why = baseline.rejects(env.query, env.files, visible)
        return None if why is None else f"This cannot be completed: {why}."

    def answer(self) -> str:
        env = self.env
        visible = [{"name": t["name"], "description": t["description"], "parameters": t["parameters"]}
                   for t in env.tools]
        if env.kind == "refine" and env.turn == 1 and not env.task["mode"].startswith("critic"):
            return "The answer follows the query's steps in order."
        if env.half == "stepwise":
            recovery = _broken(env.prefix, visible, self.options["broken"])
            if recovery is not None:
                return recovery
            return _stepwise(env.query, visible, env.prefix, env.k, self.options)
        reason = self._refusal(visible) if env.kind in ("unsolvable", "control") else None
        if reason is not None:
            return json.dumps({"status": "REJECT", "reason": reason})
        chain = [{"name": t["name"], "parameter_description": a, "reason": "matches the query's clause"}
                 for t, a in plan_calls(env.query, visible, self.options)]
        return json.dumps({"plan": "Follow the query's steps in order with the matching tools.", "tool_chain": chain})


def floor_policy_of(setting: str) -> str:
    """The policy the floor plays on a setting: the table's best on `correct` where it beats the
    heuristic there, else the heuristic."""
    from toolsweep.benchmarks.apb.bounds import SEARCHED

    best = SEARCHED.get(setting, {}).get("correct")
    if best is None or best["searched"] <= best["heuristic"]:
        return policy_name(SPACE.baseline)
    return best["policy"]


def make_searched_policy(name: str, env, seed: int) -> ComposedPolicy:
    if name == FLOOR:
        name = floor_policy_of(env.setting)
    return ComposedPolicy(env, seed, parse_policy(name))


def score_setting(bench, spec: Spec, setting: str, task_ids: list[str]) -> dict[str, float]:
    """`correct` and `grade` of one searched policy on tasks of a setting."""
    from toolsweep.evaluator.exploits import aggregate, play, run_sync

    return aggregate(bench.metrics(setting), run_sync(play(bench, policy_name(spec), setting, task_ids)))


def setting_sample(bench, setting: str, n: int, seed: int = 0) -> list[str]:
    """The seeded draw of a setting's tasks the table was searched on (all of them when n <= 0)."""
    import random

    from toolsweep.benchmarks.apb.metrics import base_key

    ids = bench.tasks(setting)
    if n <= 0 or n >= len(ids):
        return ids
    rng = random.Random(f"search/{setting}/{seed}")
    by_base: dict[str, list[str]] = {}
    for i in ids:
        by_base.setdefault(base_key(i), []).append(i)
    if len(by_base) == len(ids):
        return sorted(rng.sample(ids, n))
    # an Unsolvable setting with its twins: whole pairs, so the sample holds as many twins as cases
    keys = rng.sample(sorted(by_base), max(1, n // 2))
    return sorted(i for k in keys for i in by_base[k])


def search_setting(bench, setting: str, n_tasks: int = 40, budget: int = 40, seed: int = 0):
    from toolsweep.evaluator.adversary import search

    ids = setting_sample(bench, setting, n_tasks, seed)
    return search(SPACE, lambda spec: score_setting(bench, spec, setting, ids), METRICS, budget=budget, seed=seed)


UNSOLVABLE = ("unsolvable_conflict", "unsolvable_info", "unsolvable_tool", "unsolvable_visual")
CONTROL = "unsolvable_control"


def refusal_calibration(bench, refuse: str, n_tasks: int = 20, seed: int = 0) -> dict[str, Any]:
    """§7.5's calibration of one refusal option (the heuristic's other choices) across settings: TRR
    per Unsolvable kind and FRR on the solvable controls, each on its setting's seeded sample. A
    per-setting search cannot score it: refusing never wins the controls, always wins the Unsolvable
    cases, and the floor's refusal must be one rule for both."""
    from toolsweep.benchmarks.apb.metrics import calibration

    spec = tuple({**dict(SPACE.baseline), "refuse": refuse}.items())
    trr = {k: score_setting(bench, spec, k, setting_sample(bench, k, n_tasks, seed))["pass"] for k in UNSOLVABLE}
    frr = score_setting(bench, spec, CONTROL, setting_sample(bench, CONTROL, n_tasks, seed))["refused"]
    return {"by_kind": trr, **calibration(trr, frr)}
