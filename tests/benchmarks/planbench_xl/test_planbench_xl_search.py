"""PlanBench-XL's adversary search (issue 42): per setting, the strongest policy composed from the space's
primitives (which listed tool to prefer by a visible feature, whom to trust, repetition, the closing
text) is the floor beside models where it beats the planner; the declared table (bounds.SEARCHED) is
replayed on a seeded sample of settings in the default tier and searched again on every one under `slow`."""

from __future__ import annotations

import asyncio
import random

import pytest

from toolsweep.benchmarks.planbench_xl import PlanBenchXL
from toolsweep.benchmarks.planbench_xl.bounds import SEARCHED
from toolsweep.benchmarks.planbench_xl.search import (
    SPACE,
    floor_policy_of,
    parse_policy,
    policy_name,
    rank_list,
    score_setting,
    search_setting,
    setting_sample,
)
from toolsweep.evaluator.exploits import aggregate, play

TASKS, BUDGET = 12, 16  # what bench/planbench_xl_search.py measured the table with
PRINTED = 5e-4
SETTINGS = sorted(SEARCHED)
DEFAULT_SETTINGS = sorted(random.Random("planbench-search-sample").sample(SETTINGS, 1))


@pytest.fixture(scope="module")
def bench() -> PlanBenchXL:
    return PlanBenchXL()


def _tool(name: str, description: str, params: int = 1) -> dict:
    return {"name": name, "description": description,
            "parameters": {"properties": {f"p{i}": {} for i in range(params)}}}


def test_each_preference_orders_a_list_by_its_visible_feature():
    a = _tool("lookup_order", "Returns the order status of a case", 2)
    b = _tool("lookup_order_v2", "Returns the order status", 1)
    c = _tool("find_status", "Returns the order status of a case given its id and the shop.", 3)
    tools = [a, b, c]
    names = lambda ts: [t["name"] for t in ts]  # noqa: E731
    assert names(rank_list(tools, "list", "")) == ["lookup_order", "lookup_order_v2", "find_status"]
    assert names(rank_list(tools, "reverse", "")) == ["find_status", "lookup_order_v2", "lookup_order"]
    assert names(rank_list(tools, "short_description", "")) == ["lookup_order_v2", "lookup_order", "find_status"]
    assert names(rank_list(tools, "long_description", ""))[0] == "find_status"
    assert names(rank_list(tools, "few_params", "")) == ["lookup_order_v2", "lookup_order", "find_status"]
    assert names(rank_list(tools, "name_extended", ""))[0] == "lookup_order"  # another name extends it
    assert names(rank_list(tools, "goal_overlap", "shop id"))[0] == "find_status"
    # b's description is contained in a's and c's; a's in c's: only c is contained in none
    assert names(rank_list(tools, "not_contained", ""))[0] == "find_status"


def test_the_table_covers_the_blocking_settings_and_names_policies_of_the_space():
    assert {"default", "ratio_0.8", "one_path_mixed", "keep_longest"} <= set(SETTINGS)
    for metrics in SEARCHED.values():
        row = metrics["accuracy"]
        parse_policy(row["policy"])
        assert row["searched"] >= row["planner"]  # the planner is in the search
    with pytest.raises(KeyError, match="no option"):
        parse_policy("search:prefer=alphabet")


@pytest.mark.parametrize("setting", DEFAULT_SETTINGS)
def test_the_declared_searched_floor_replays_on_a_sample_of_settings(bench, setting):
    row = SEARCHED[setting]["accuracy"]
    ids = setting_sample(bench, setting, TASKS)
    got = score_setting(bench, tuple(parse_policy(row["policy"]).items()), setting, ids)
    assert got["accuracy"] == pytest.approx(row["searched"], abs=PRINTED)


@pytest.mark.slow
@pytest.mark.parametrize("setting", SETTINGS)
def test_no_searched_policy_beats_the_declared_floor_on_any_setting(bench, setting):
    result = search_setting(bench, setting, TASKS, budget=BUDGET)
    spec, value = result.best["accuracy"]
    assert value <= SEARCHED[setting]["accuracy"]["searched"] + PRINTED, policy_name(spec)
    assert result.scores[SPACE.baseline]["accuracy"] == pytest.approx(SEARCHED[setting]["accuracy"]["planner"],
                                                                      abs=PRINTED)


def test_the_floor_is_the_searched_policy_and_plays_the_tables_choice(bench):
    assert bench.baseline_policy() == "searched_floor" and "searched_floor" in bench.scripted_policies()
    for setting in SETTINGS:
        row = SEARCHED[setting]["accuracy"]
        expected = row["policy"] if row["searched"] > row["planner"] else policy_name(SPACE.baseline)
        assert floor_policy_of(setting) == expected
    assert floor_policy_of("single_step") == policy_name(SPACE.baseline)  # not searched: the planner
    setting = "ratio_0.8"  # where the search beat the planner: the floor plays the searched policy
    row = SEARCHED[setting]["accuracy"]
    assert row["searched"] > row["planner"] and floor_policy_of(setting) == row["policy"]
    ids = setting_sample(bench, setting, TASKS)
    floor = aggregate(bench.metrics(setting), asyncio.run(play(bench, "searched_floor", setting, ids, seed=42)))
    assert floor["accuracy"] == pytest.approx(row["searched"], abs=PRINTED)
    planner = score_setting(bench, SPACE.baseline, setting, ids)
    assert planner["accuracy"] == pytest.approx(row["planner"], abs=PRINTED)
    assert planner["accuracy"] < floor["accuracy"]
