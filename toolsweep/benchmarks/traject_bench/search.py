"""TRAJECT-Bench's adversary search space (DESIGN §6b): scripted policies composed from primitives that
read only what an agent reads (the query and the visible tool list), searched per setting by
`toolsweep.evaluator.adversary.search`. None reads the gold or uses a model.

Primitives (the first option of each is `all_tools`, the former documented floor):
- tools: which visible tools to call: every one; the top k by BM25 over descriptions (`keyword-k`);
  the top k, or every one, by query words in tool names (`name-k`, `name-every`); the top k by query
  words in parameter names (`params-k`); those whose API name is spelled out in the query (`mentioned`);
- bind: arguments by the tool's example values (`example`); by `name=value` spans of the query, the
  one after the tool's mention first (`query`); or those, then the query's numbers and quoted strings by
  parameter type in order of appearance (`query_type`); or, from the query's sentence that shares most
  words with the tool's name and description, the first value shaped like the example value (an email
  for an email, a date for a date, a number for a number, a quoted phrase for a word: `shape`);
- optional: optional parameters left out, or those the binding found in the query added;
- order: the retriever's ranking, the tool list's order, or the order of first mention in the query;
- variants: each tool once, or also once more with its example arguments when they differ (a second
  binding a multiset pairing may pick).
Every policy then restates the outputs it got back as prose.

A policy is named `search:<primitive>=<option>,...`; `searched_floor` plays, per setting, the table in
bounds.SEARCHED (bench/traject_search.py wrote it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from toolsweep.benchmarks.traject_bench.environment import TrajectEnv
from toolsweep.benchmarks.traject_bench.policies import (
    RANDOM_ANSWER,
    _groups,
    _Scripted,
    _tokens,
    name_match_ranking,
    prose_of_executed,
)
from toolsweep.evaluator.adversary import POLICY_PREFIX, SearchSpace, Spec

PREFIX = POLICY_PREFIX
FLOOR = "searched_floor"
SPACE = SearchSpace.of({
    "tools": ("all", "keyword-3", "keyword-6", "keyword-10", "name-3", "name-6", "name-10", "name-every", "params-6",
              "mentioned"),
    "bind": ("example", "query", "query_type", "shape"),
    "optional": ("none", "query"),
    "order": ("rank", "list", "query"),
    "variants": ("one", "plus_example"),
})
METRICS = {"inclusion": True, "usage": True, "traj_satisfy_proxy": True}
LEADING = "usage"  # the floor plays each setting's best on Usage (where all_tools is weakest)


def policy_name(spec: Spec) -> str:
    return SPACE.name(spec)


def parse_policy(name: str) -> dict[str, str]:
    """The options of a `search:` policy name (missing primitives take the baseline's option)."""
    return SPACE.parse(name, "TRAJECT-Bench")


_KV = re.compile(r"([A-Za-z_][\w\-]*)\s*[=:]\s*('[^']*'|\"[^\"]*\"|[^,;)\s][^,;)]*)")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_QUOTED = re.compile(r"['\"“‘]([^'\"”’]{1,80})['\"”’]")


def _api_part(shown: str) -> str:
    return shown.split(":", 1)[-1].strip()


def _mention(query: str, shown: str) -> int:
    """Where the tool's full or API name is spelled out in the query (-1: nowhere)."""
    q = query.lower()
    at = q.find(shown.lower())
    if at < 0 and len(_api_part(shown)) > 3:
        at = q.find(_api_part(shown).lower())
    return at


def _query_pairs(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in _KV.findall(text):
        out.setdefault(k, v.strip().strip("'\""))
    return out


def _ranked(env: TrajectEnv, choice: str) -> list[str]:
    ds, domain, pool = env.ctx.dataset, env.task.domain, list(env.pool)
    if choice == "all":
        return pool
    kind, _, k = choice.partition("-")
    if kind == "mentioned":
        hits = [(at, i, n) for i, n in enumerate(pool)
                if (at := _mention(env.task.query, ds.tool_def(n, domain).shown_name)) >= 0]
        return [n for _, _, n in sorted(hits)]
    if kind == "keyword":
        return list(env.ctx.retriever.retrieve(env.task.query, tuple(pool), int(k), domain))
    if kind == "name":
        ranked = name_match_ranking(env)
        return ranked if k == "every" else ranked[:int(k)]
    query = _tokens(env.task.query)  # params-k: query words in parameter names
    scored = []
    for i, n in enumerate(pool):
        t = ds.tool_def(n, domain)
        hits = len(query & {w for p in (*t.required, *t.optional) for w in _tokens(p.name)})
        if hits:
            scored.append((-hits, i, n))
    return [n for _, _, n in sorted(scored)][:int(k)]


def _ordered(env: TrajectEnv, names: list[str], order: str) -> list[str]:
    if order == "list":
        index = {n: i for i, n in enumerate(env.pool)}
        return sorted(names, key=lambda n: index.get(n, len(index)))
    if order == "query":
        ds, q = env.ctx.dataset, env.task.query.lower()

        def first(n: str) -> int:
            at = _mention(env.task.query, ds.tool_def(n, env.task.domain).shown_name)
            if at >= 0:
                return at
            words = [q.find(w) for w in _tokens(ds.tool_def(n, env.task.domain).shown_name) if w in q]
            return min(words) if words else len(q)
        return sorted(names, key=first)  # stable: ties keep the ranking
    return names


_SHAPES = [  # (shape of an example value, the same shape in a query), most specific first
    (re.compile(r"^\S+@\S+\.\w+$"), re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")),
    (re.compile(r"^https?://"), re.compile(r"https?://[^\s,;)'\"]+")),
    (re.compile(r"^\d{4}-\d{2}-\d{2}"), re.compile(r"\d{4}-\d{2}-\d{2}")),
    (re.compile(r"^-?\d+\.\d+\s*,\s*-?\d+\.\d+$"), re.compile(r"-?\d+\.\d+\s*,\s*-?\d+\.\d+")),
    (re.compile(r"^-?\d+\.\d+$"), re.compile(r"-?\d+\.\d+")),
    (re.compile(r"^-?\d+$"), re.compile(r"(?<![\w.])-?\d+(?![\w.])")),
    (re.compile(r"^[a-z0-9-]+(?:\.[a-z0-9-]+)+$", re.I), re.compile(r"\b[a-z0-9-]+(?:\.[a-z]{2,})+\b", re.I)),
    (re.compile(r"^[A-Z]{1,5}$"), re.compile(r"\b[A-Z]{2,5}\b")),
    (re.compile(r"."), _QUOTED),
]
_SENTENCES = re.compile(r"(?<=[.;?!])\s+")


def _sentence_for(env: TrajectEnv, name: str) -> str:
    """The query's sentence sharing the most words with a tool's name and description (the query when none)."""
    t = env.ctx.dataset.tool_def(name, env.task.domain)
    words = _tokens(f"{t.shown_name} {t.description}")
    best, score = env.task.query, 0
    for s in _SENTENCES.split(env.task.query):
        hits = len(_tokens(s) & words)
        if hits > score:
            best, score = s, hits
    return best


def _by_shape(text: str, example: Any) -> str | None:
    """The first value of `text` shaped like `example` (None: no shape, or no such value)."""
    ex = "" if example is None else str(example).strip()
    if not ex:
        return None
    for shape, found in _SHAPES:
        if shape.search(ex):
            m = found.search(text)
            if m is None:
                return None
            return m.group(1) if m.groups() else m.group(0)
    return None


class _Values:
    """The query's values a `query_type` binding hands out by type, each once, in order of appearance."""

    def __init__(self, query: str) -> None:
        self.numbers = _NUMBER.findall(query)
        self.strings = _QUOTED.findall(query)

    def take(self, ptype: str) -> str | None:
        pool = self.numbers if ptype.upper() in ("NUMBER", "INTEGER", "FLOAT") else self.strings
        return pool.pop(0) if pool else None


def _call(env: TrajectEnv, name: str, options: Mapping[str, str], values: _Values | None,
          pairs: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(bound call, example call) of one visible tool."""
    t = env.ctx.dataset.tool_def(name, env.task.domain)
    example = {"tool name": t.shown_name,
               "required_parameters": [{"name": p.name, "value": p.default} for p in t.required],
               "optional_parameters": []}
    if options["bind"] == "example":
        return example, example
    at = _mention(env.task.query, t.shown_name)
    near = _query_pairs(env.task.query[at:]) if at >= 0 else {}
    sentence = _sentence_for(env, name) if options["bind"] == "shape" else ""

    def value(p, required: bool) -> Any:
        if p.name in near:
            return near[p.name]
        if p.name in pairs:
            return pairs[p.name]
        if sentence and (got := _by_shape(sentence, p.default)) is not None:
            return got
        if values is not None and required:
            got = values.take(p.type)
            if got is not None:
                return got
        return p.default if required else None
    req = [{"name": p.name, "value": value(p, True)} for p in t.required]
    opt = []
    if options["optional"] == "query":
        opt = [{"name": p.name, "value": v} for p in t.optional if (v := value(p, False)) is not None]
    return {"tool name": t.shown_name, "required_parameters": req, "optional_parameters": opt}, example


def composed_policy(env: TrajectEnv, options: Mapping[str, str]) -> _Scripted:
    """One searched policy on one episode: pick, order and bind the visible tools, then restate outputs."""
    names = _ordered(env, _ranked(env, options["tools"]), options["order"])
    pairs = _query_pairs(env.task.query)
    values = _Values(env.task.query) if options["bind"] == "query_type" else None
    calls = []
    for n in names:
        bound, example = _call(env, n, options, values, pairs)
        calls.append(bound)
        if options["variants"] == "plus_example" and bound != example:
            calls.append(example)
    return _Scripted(env, _groups(env, calls), RANDOM_ANSWER, "Match the query to the tool list.",
                     answer_fn=prose_of_executed)


def floor_policy_of(setting: str) -> str:
    """The policy the floor plays on a setting: the table's best on Usage where it beats all_tools
    there, else all_tools. A setting outside the table (another method) takes its split and pool's
    direct row: the methods change how calls are written, not which are made."""
    from toolsweep.benchmarks.traject_bench.bounds import SEARCHED

    split, pool, _ = setting.split("/")
    row = SEARCHED.get(setting) or SEARCHED.get(f"{split}/{pool}/direct") or {}
    best = row.get(LEADING)
    if best is None or best["searched"] <= best["all_tools"]:
        return policy_name(SPACE.baseline)
    return best["policy"]


def make_searched_policy(env: TrajectEnv, name: str) -> _Scripted:
    if name == FLOOR:
        name = floor_policy_of(env.spec.name)
    return composed_policy(env, parse_policy(name))


def score_setting(bench, spec: Spec, setting: str, task_ids: list[str]) -> dict[str, float]:
    """Each metric of one searched policy, pooled as the report pools it, on tasks of a setting."""
    from toolsweep.evaluator.exploits import aggregate, play, run_sync

    return aggregate(bench.metrics(setting), run_sync(play(bench, policy_name(spec), setting, task_ids)))


def search_setting(bench, setting: str, n_tasks: int = 12, budget: int = 24, seed: int = 0):
    """The strongest searched policies of one setting (per metric), on its seeded sample of tasks."""
    from toolsweep.benchmarks.traject_bench.bounds import cell_sample
    from toolsweep.evaluator.adversary import search

    ids = cell_sample(bench.tasks(setting), n_tasks, setting)
    return search(SPACE, lambda spec: score_setting(bench, spec, setting, ids), METRICS, budget=budget, seed=seed)
