"""TRAJECT-Bench's adversary search space (issue 42): the name retriever (query words in tool names; no
gold, no model) is one of its primitives, and on a seeded sample it beats call-everything on Usage in
the sequential split, where the former documented floor was call-everything."""

from __future__ import annotations

import asyncio

import pytest

from toolsweep.benchmarks.traject_bench import TrajectBench
from toolsweep.benchmarks.traject_bench.bounds import cell_sample
from toolsweep.benchmarks.traject_bench.policies import (
    SEARCH_PREFIX,
    TOOL_CHOICES,
    _tokens,
    name_match_ranking,
    search_space,
)
from toolsweep.evaluator.adversary import search
from toolsweep.evaluator.exploits import aggregate, play

from traject_data import require_data

DATA = require_data()


@pytest.fixture(scope="module")
def bench() -> TrajectBench:
    return TrajectBench(data_dir=str(DATA))


def test_tokens_split_names_and_drop_stop_words():
    assert _tokens("getStockPrices for the ticker") == {"stock", "price", "ticker"}  # "get" is a stop word
    assert "the" not in _tokens("the_weather_forecast") and "weather" in _tokens("the_weather_forecast")


def test_the_name_ranking_puts_tools_named_after_the_query_first(bench):
    setting = "seq/domain/direct"
    tid = cell_sample(bench.tasks(setting), 1, setting)[0]
    env = bench.make_env(tid, setting, 0)
    ranked = name_match_ranking(env)
    query = _tokens(env.task.query)
    hits = [len(_tokens(env.ctx.dataset.tool_def(n, env.task.domain).shown_name) & query) for n in ranked]
    assert ranked and all(h > 0 for h in hits) and hits == sorted(hits, reverse=True)


def test_the_search_finds_a_floor_above_call_everything_on_usage(bench):
    setting = "seq/domain/direct"
    ids = cell_sample(bench.tasks(setting), 10, setting)
    space = search_space()
    assert space.size == len(TOOL_CHOICES)

    def score(spec):
        name = SEARCH_PREFIX + ",".join(f"{k}={v}" for k, v in spec)
        return aggregate(bench.metrics(setting), asyncio.run(play(bench, name, setting, ids)))
    result = search(space, score, {"usage": True, "inclusion": True}, budget=space.size)
    base = result.scores[space.baseline]  # call everything
    best_spec, best_usage = result.best["usage"]
    assert dict(best_spec)["tools"].startswith("name-") and best_usage > base["usage"]
    assert result.best["inclusion"][0] == space.baseline  # everything still wins on Inclusion
