"""TRAJECT-Bench's adversary search (issue 42): per setting, the strongest policy composed from the space's
primitives (which tools, argument binding, optional parameters, order, a second binding) is the floor
beside models where it beats call-everything; the declared table (bounds.SEARCHED) is replayed on a
seeded sample of settings in the default tier and searched again on every setting under `slow`."""

from __future__ import annotations

import random

import pytest

from toolsweep.benchmarks.traject_bench import TrajectBench
from toolsweep.benchmarks.traject_bench.bounds import SEARCHED, cell_sample
from toolsweep.benchmarks.traject_bench.policies import _tokens, name_match_ranking
from toolsweep.benchmarks.traject_bench.search import (
    LEADING,
    SPACE,
    _by_shape,
    floor_policy_of,
    parse_policy,
    policy_name,
    score_setting,
    search_setting,
)
from traject_data import require_data

DATA = require_data()
TASKS, BUDGET = 12, 24  # what bench/traject_search.py measured the table with
PRINTED = 5e-4  # the table holds three decimals
SETTINGS = sorted(SEARCHED)
DEFAULT_SETTINGS = sorted(random.Random("traject-search-sample").sample(SETTINGS, 2))


@pytest.fixture(scope="module")
def bench() -> TrajectBench:
    return TrajectBench(data_dir=str(DATA))


def _spec(name: str):
    return tuple(parse_policy(name).items())


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


def test_shape_binding_copies_the_query_value_shaped_like_the_example():
    sentence = "Verify support@company.org for validity, then look at 47.6062,-122.3321 on 2021-03-04."
    assert _by_shape(sentence, "example@gmail.com") == "support@company.org"
    assert _by_shape(sentence, "40.1,-73.9") == "47.6062,-122.3321"
    assert _by_shape(sentence, "2020-01-01") == "2021-03-04"
    assert _by_shape("Get 7 random words", "5") == "7"
    assert _by_shape("see how people define 'lucky seven'", "yeet") == "lucky seven"
    assert _by_shape("no value here", "") is None


def test_the_table_covers_the_searched_settings_and_names_policies_of_the_space():
    pools = {s.split("/")[1] for s in SETTINGS}
    assert {s.split("/")[0] for s in SETTINGS} == {"par-simple", "par-hard", "seq"}
    assert pools == {"domain", "retrieval", "retrieval-all", "fixed-k"}
    for setting, metrics in SEARCHED.items():
        assert set(metrics) == {"inclusion", "usage", "traj_satisfy_proxy"}
        for row in metrics.values():
            parse_policy(row["policy"])  # raises on a policy outside the space
            assert row["searched"] >= row["all_tools"]  # call-everything is in the search
    with pytest.raises(KeyError, match="no option"):
        parse_policy("search:tools=everything")


def _check_declared(bench, setting: str) -> None:
    """The table's Usage row replays: its policy and call-everything score what it says on the sample."""
    ids = cell_sample(bench.tasks(setting), TASKS, setting)
    row = SEARCHED[setting][LEADING]
    best = score_setting(bench, _spec(row["policy"]), setting, ids)
    assert best[LEADING] == pytest.approx(row["searched"], abs=PRINTED), setting


@pytest.mark.parametrize("setting", DEFAULT_SETTINGS)
def test_the_declared_searched_floor_replays_on_a_sample_of_settings(bench, setting):
    _check_declared(bench, setting)


@pytest.mark.slow
@pytest.mark.parametrize("setting", SETTINGS)
def test_no_searched_policy_beats_the_declared_floor_on_any_setting(bench, setting):
    result = search_setting(bench, setting, TASKS, budget=BUDGET)
    for metric, (spec, value) in result.best.items():
        declared = SEARCHED[setting][metric]["searched"]
        assert value <= declared + PRINTED, f"{setting}: {policy_name(spec)} reaches {metric} {value:.3f} > {declared}"
    base = result.scores[SPACE.baseline]
    assert base["usage"] == pytest.approx(SEARCHED[setting]["usage"]["all_tools"], abs=PRINTED)


def test_the_floor_plays_the_searched_policy_where_it_beats_call_everything(bench):
    assert bench.baseline_policy() == "searched_floor"
    setting = "seq/domain/direct"
    row = SEARCHED[setting][LEADING]
    assert row["searched"] > row["all_tools"] and floor_policy_of(setting) == row["policy"]
    # another method of the same split and pool plays the direct row; an unsearched pool plays all_tools
    assert floor_policy_of("seq/domain/native") == row["policy"]
    assert floor_policy_of("seq/all/direct") == policy_name(SPACE.baseline)
    ids = cell_sample(bench.tasks(setting), TASKS, setting)
    import asyncio

    from toolsweep.evaluator.exploits import aggregate, play

    floor = aggregate(bench.metrics(setting), asyncio.run(play(bench, "searched_floor", setting, ids)))
    assert floor[LEADING] == pytest.approx(row["searched"], abs=PRINTED)
    everything = score_setting(bench, SPACE.baseline, setting, ids)
    assert everything[LEADING] == pytest.approx(row["all_tools"], abs=PRINTED)
    assert floor[LEADING] > everything[LEADING]
