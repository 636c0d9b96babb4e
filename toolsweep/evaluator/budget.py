"""Token budgets known before a sweep: does each (benchmark, setting) fit a model's context window?

For a sample of a setting's tasks, the first observation (system prompt, query, tool schemas) and the
oracle's whole trajectory are measured as the model would be asked them: every request's prompt
(messages and tool schemas), plus the reply budget `max_tokens`. The oracle's trajectory is a lower
bound on what a model needs (a model that explores takes more turns); the first turn is a hard floor
(a cell whose first prompt does not fit cannot produce a single reply); the oracle's growth per turn
carried to the benchmark's turn budget estimates what a model that explores until its budget runs
out would send.

Tokens are counted per request, with the model's chat template and tokenizer when the caller passes
such a counter (`models.tokens.template_counter`), otherwise estimated by `estimate_request_tokens`, an
upper bound by construction (stated as an estimate in the report): characters / 4 undercounted a
TRAJECT-Bench task in a non-Latin script 2.9x.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolsweep.evaluator.episode import run_episode
from toolsweep.evaluator.protocols import Benchmark
from toolsweep.evaluator.types import AgentReply, Message, WorkUnit

CHARS_PER_TOKEN = 4.0
Counter = Callable[[list[Message], list[dict[str, Any]]], int]
"""Prompt tokens of one request (its messages and tool schemas, as the server renders them)."""

ESTIMATE_LABEL = "estimate (upper bound)"
ASCII_CHARS_PER_TOKEN = 2.5
"""For ASCII text other than digits. Measured on the benchmarks' prompts rendered by SmolLM2's chat
template and counted by its tokenizer, the densest cell needed 2.9 characters a token (JSON schemas,
identifiers); 2.5 keeps a margin for tokenizers with smaller vocabularies."""
TEMPLATE_TOKENS_PER_MESSAGE = 8
"""Role markers and separators a chat template adds around each message (ChatML: 5)."""
TEMPLATE_TOKENS_FIXED = 64
"""The template's own text: the tool list's preamble, the generation prompt."""


def approx_tokens(text: str) -> int:
    return int(len(text) / CHARS_PER_TOKEN) + 1


def estimate_text_tokens(text: str) -> int:
    """An upper bound on the tokens of `text` for common byte-level BPE tokenizers: every digit a token
    (they split numbers digit by digit), every byte of a non-ASCII character a token (byte fallback, the
    worst case for a script the vocabulary lacks), other ASCII at ASCII_CHARS_PER_TOKEN."""
    digits = other_ascii = non_ascii_bytes = 0
    for ch in text:
        if ch.isascii():
            if ch.isdigit():
                digits += 1
            else:
                other_ascii += 1
        else:
            non_ascii_bytes += len(ch.encode("utf-8"))
    return digits + non_ascii_bytes + int(other_ascii / ASCII_CHARS_PER_TOKEN) + 1


def estimate_request_tokens(messages: list[Message], tools: list[dict[str, Any]]) -> int:
    """An upper bound on a request's prompt tokens without the model's tokenizer: the texts, the tool
    calls and the tool schemas, plus what a chat template adds per message and once."""
    return (estimate_text_tokens(request_text(messages, tools))
            + TEMPLATE_TOKENS_PER_MESSAGE * len(messages) + TEMPLATE_TOKENS_FIXED)


def request_text(messages: list[Message], tools: list[dict[str, Any]]) -> str:
    """What a request puts in the context: every message's text and tool calls, and the tool schemas."""
    parts = [m.text() for m in messages]
    parts += [json.dumps([tc.model_dump() for tc in m.tool_calls]) for m in messages if m.tool_calls]
    if tools:
        parts.append(json.dumps(tools))
    return "\n".join(parts)


class _Measured:
    """Wraps a policy and records the size of every request it is asked."""

    def __init__(self, inner: Any, count: Counter) -> None:
        self.inner, self.count, self.sizes = inner, count, []

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        self.sizes.append(self.count(messages, tools))
        return await self.inner.act(messages, tools)


@dataclass
class CellBudget:
    benchmark: str
    setting: str
    tasks: int
    first_turn: int  # the largest first prompt in the sample
    oracle_longest: int  # the largest prompt of the oracle's trajectories (a lower bound for a model)
    oracle_turns: int
    max_turns: int  # the benchmark's turn budget for the setting

    @property
    def at_turn_budget(self) -> int:
        """The prompt after the whole turn budget at the oracle's growth per turn: what a model that
        explores until its budget runs out would send (observations are about the oracle's size)."""
        if self.oracle_turns < 2:
            return self.oracle_longest
        growth = (self.oracle_longest - self.first_turn) / (self.oracle_turns - 1)
        return int(self.first_turn + growth * (self.max_turns - 1))

    def verdict(self, max_model_len: int | None, max_tokens: int) -> str:
        """fits | risky (a model that uses its whole turn budget overflows) | tight (the oracle's own path
        does not fit: a model's will not either) | cannot (the first prompt alone does not fit)."""
        if max_model_len is None:
            return "unknown"
        if self.first_turn + max_tokens > max_model_len:
            return "cannot"
        if self.oracle_longest + max_tokens > max_model_len:
            return "tight"
        if self.at_turn_budget + max_tokens > max_model_len:
            return "risky"
        return "fits"


def measure_cell(bench: Benchmark, setting: str, n_tasks: int = 5,
                 count: Counter = estimate_request_tokens) -> CellBudget:
    """Play the oracle on `n_tasks` tasks spread over the setting and measure every request; the first
    prompt is measured on ten times as many (it varies with the task's domain, e.g. its tool pool)."""
    tasks = bench.tasks(setting)
    sample = _spread(tasks, n_tasks)
    first = longest = turns = 0
    for task_id in _spread(tasks, 10 * n_tasks):
        obs = bench.make_env(task_id, setting, 0).reset()
        if obs.consult is None:
            first = max(first, count(list(obs.messages), obs.tools))

    async def play() -> None:
        nonlocal first, longest, turns
        for task_id in sample:
            env = bench.make_env(task_id, setting, 0)
            unit = WorkUnit(sweep="plan", model="oracle", benchmark=bench.name, setting=setting, task_id=task_id, seed=0)
            policy = _Measured(_oracle(bench, env, unit), count)
            await run_episode(env, policy, unit, max_turns=bench.max_turns(setting))
            if policy.sizes:
                first = max(first, policy.sizes[0])
                longest = max(longest, first, max(policy.sizes))
                turns = max(turns, len(policy.sizes))

    asyncio.run(play())
    return CellBudget(bench.name, setting, len(sample), first, longest, turns, bench.max_turns(setting))


def _spread(items: list[str], n: int) -> list[str]:
    if len(items) <= n:
        return list(items)
    return [items[int(i * len(items) / n)] for i in range(n)]


def _oracle(bench: Benchmark, env: Any, unit: WorkUnit) -> Any:
    if "oracle" in bench.scripted_policies():
        return bench.make_scripted_policy("oracle", env, unit.rng_seed)
    return _Silent()


class _Silent:
    """For a benchmark without an oracle: answers nothing, so only the first prompt is measured."""

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        return AgentReply(message=Message(role="assistant", content=""))
