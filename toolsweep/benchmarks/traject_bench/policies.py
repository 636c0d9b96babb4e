"""Scripted policies: `oracle` replays the gold trajectory and answers with the gold final answer;
`random` calls random visible tools with their example arguments."""

from __future__ import annotations

import ast
import functools
import json
import math
import random
import re
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

    def __init__(self, env: TrajectEnv, groups: list[list[dict[str, Any]]], answer: str, thought: str,
                 answer_fn: Any = None):
        self.env = env
        self.groups = groups
        self.answer = answer
        self.thought = thought
        self.sent = 0
        # answer_fn(env) -> str: an answer written from what the episode's calls returned, when it is due
        self.answer_fn = answer_fn

    def _answer(self) -> str:
        return self.answer_fn(self.env) if self.answer_fn is not None else self.answer

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        env, method = self.env, self.env.spec.method
        if method in TEXT_METHODS:
            if env.phase == "answer":
                return AgentReply(message=Message(role="assistant", content=self._answer()))
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
                return AgentReply(message=Message(role="assistant", content=self._answer()))
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
            text = f"Thought {n}: I have what I need.\nAction {n}: Finish[{self._answer()}]"
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


def _default_call(env: TrajectEnv, name: str) -> dict[str, Any]:
    """A call of a visible tool with its example arguments, named as the tool list spells it."""
    t = env.ctx.dataset.tool_def(name, env.task.domain)
    return {"tool name": t.shown_name,
            "required_parameters": [{"name": p.name, "value": p.default} for p in t.required],
            "optional_parameters": []}


def _groups(env: TrajectEnv, calls: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    method = env.spec.method
    return [calls] if method in TEXT_METHODS or method == "native" else _chunks(calls, _turn_budget(env))


def prose_of_executed(env: TrajectEnv) -> str:
    """Every output the episode's calls returned (errors and missing recordings left out), as prose:
    the best answer a policy that cannot read can write."""
    parts = [prose_of_output(out) for _, _, out, status in env.executed if status == "recorded"]
    return " ".join(p for p in parts if p) or RANDOM_ANSWER


def all_tools_policy(env: TrajectEnv) -> _Scripted:
    """Call everything: every visible tool once with its example arguments (maximal Inclusion), then
    every output it got back restated as prose."""
    calls = [_default_call(env, name) for name in env.pool]
    return _Scripted(env, _groups(env, calls), RANDOM_ANSWER, "Call everything.", answer_fn=prose_of_executed)


KEYWORD_K = 6  # about the release's mean trajectory length (6.5): more calls buy Inclusion, cost EM


def keyword_policy(env: TrajectEnv, k: int = KEYWORD_K) -> _Scripted:
    """Keyword retriever: the k visible tools whose descriptions best match the query (BM25), each
    once with its example arguments, in ranking order; then their outputs restated as prose. Reads
    only what an agent sees."""
    names = env.ctx.retriever.retrieve(env.task.query, tuple(env.pool), k, env.task.domain)
    calls = [_default_call(env, n) for n in names]
    return _Scripted(env, _groups(env, calls), RANDOM_ANSWER, "Match the query's words.",
                     answer_fn=prose_of_executed)


_STOP = frozenset("a an and are as at be by can could do does for from get give how i in is it me my of on or "
                  "please show tell that the their them then this to use want what when where which who with "
                  "would you your".split())


def _tokens(text: str) -> set[str]:
    """Lower-case word stems of a text or a tool name (camelCase and snake_case split; a trailing s
    dropped), without stop words."""
    words = re.findall(r"[a-z]+", re.sub(r"([a-z])([A-Z])", r"\1 \2", text).lower())
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words if len(w) > 2 and w not in _STOP}


def name_match_ranking(env: TrajectEnv) -> list[str]:
    """Visible tools ranked by how many of the query's words their names contain (ties in list order);
    tools whose names share no word with the query are left out."""
    query = _tokens(env.task.query)
    scored = []
    for i, name in enumerate(env.pool):
        shown = env.ctx.dataset.tool_def(name, env.task.domain).shown_name
        hits = len(_tokens(shown) & query)
        if hits:
            scored.append((-hits, i, name))
    return [name for _, _, name in sorted(scored)]


def name_match_policy(env: TrajectEnv, k: int = KEYWORD_K) -> _Scripted:
    """Name retriever: the k visible tools whose names share the most words with the query, each once
    with its example arguments; then their outputs restated as prose. No gold, no model."""
    calls = [_default_call(env, n) for n in name_match_ranking(env)[:k]]
    return _Scripted(env, _groups(env, calls), RANDOM_ANSWER, "Match the query's nouns to tool names.",
                     answer_fn=prose_of_executed)


SEARCH_PREFIX = "search:"


def searched_policy(env: TrajectEnv, name: str) -> _Scripted:
    """A policy of the adversary search space by name (`search:tools=name-3,bind=query`), or
    `searched_floor` (each setting's strongest on Usage); search.py has the space."""
    from toolsweep.benchmarks.traject_bench.search import make_searched_policy

    return make_searched_policy(env, name)


EXPLOITS = {
    "echo_outputs": "the gold calls, then the raw tool outputs pasted as the answer",
    "no_tools": "answers without calling a tool, restating the query",
    "all_tools": "call everything: every visible tool once with example arguments, then its outputs as prose",
    "keyword": f"keyword retriever: the top-{KEYWORD_K} visible tools by BM25 against the query, example "
               "arguments, then their outputs as prose (no ground truth, no model)",
    "name_match": f"name retriever: the top-{KEYWORD_K} visible tools whose names share the most words with the "
                  "query, example arguments, then their outputs as prose (no ground truth, no model)",
    "prose_echo": "the gold calls, then every gold output restated as 'The key is value.' sentences",
    "prose_echo_query": "prose_echo with every number of the query appended",
}

SCRIPTED = {
    "searched_floor": "per setting, the strongest policy TRAJECT-Bench's adversary search found on Usage "
                      "(search.py, bounds.SEARCHED); no gold, no model",
    "oracle": "replays the gold trajectory (gold tools, arguments and order) and answers with the gold final answer",
    "random": "calls 3-10 random visible tools with their example arguments and gives a fixed answer",
}


# --------------------------------------------------------------------------------------------------
# Adversaries of the answer proxy: the gold calls, then their outputs rewritten as prose.

_KEY_VALUE = re.compile(r"""[,{\s]*['"]([^'"{}]{1,40})['"]\s*:\s*""")
_PROSE_LIMIT = 400  # sentences per answer: long enough to carry every value of the release's outputs


def _prose(value: Any, key: str, out: list[str]) -> None:
    if len(out) >= _PROSE_LIMIT:
        return
    if isinstance(value, dict):
        for k, v in value.items():
            _prose(v, str(k).replace("_", " "), out)
    elif isinstance(value, list):
        for v in value:
            _prose(v, key, out)
    elif isinstance(value, str) and _KEY_VALUE.search(value):  # a truncated dump: reword its pairs
        text = _KEY_VALUE.sub(lambda m: f". The {m.group(1).replace('_', ' ')} is ", value)
        out.append(re.sub(r"""[{}\[\]"']""", "", text).strip(" .,") + ".")
    elif value not in (None, ""):
        out.append(f"The {key or 'result'} is {value}.")


@functools.lru_cache(maxsize=1024)
def prose_of_output(text: str) -> str:
    """A tool output as "The key is value." sentences: every value it holds, no JSON markers. (Kept per
    output: a task's outputs are restated in every setting and by every policy that echoes them.)"""
    value: Any = text
    for _ in range(2):  # outputs are JSON or Python reprs, sometimes serialised inside a string
        if not isinstance(value, str):
            break
        try:
            value = json.loads(value)
        except (json.JSONDecodeError, TypeError):
            try:
                value = ast.literal_eval(value.strip())
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                break
    out: list[str] = []
    _prose(value, "", out)
    return " ".join(out)


_QUERY_NUMBER = re.compile(r"\d[\d,.:-]*\d|\d")


def prose_echo_policy(env: TrajectEnv, *, with_query_numbers: bool = False) -> _Scripted:
    """The gold calls, then every gold output restated as prose sentences (optionally followed by
    every number of the query): an answer that restates what the tools said without answering."""
    oracle = oracle_policy(env)
    text = " ".join(prose_of_output(c.output) for c in env.task.calls)
    if with_query_numbers:
        text += " Your request mentioned " + ", ".join(_QUERY_NUMBER.findall(env.task.query)) + "."
    oracle.answer = text
    return oracle
