"""PlanBench-XL's adversary search (issues 42 and 56): per setting, the strongest policy composed from the
space's primitives (which listed tool to prefer by a visible feature, whom to trust, repetition, the
closing text), picked on the setting's tuning half, is the floor beside models where it beats the planner
there; the figure reported is its accuracy on the held-out half, which the table (bounds.SEARCHED) holds
exactly: replayed on one seeded setting in the default tier and on every one under `slow`, where the
search is also run again on the tuning half of one."""

from __future__ import annotations

import asyncio
import random

import pytest

from toolsweep.benchmarks.planbench_xl import PlanBenchXL
from toolsweep.benchmarks.planbench_xl.bounds import SEARCHED
from toolsweep.benchmarks.planbench_xl.search import (
    SPACE,
    floor_policy_of,
    held_out_score,
    parse_policy,
    policy_name,
    rank_list,
    search_setting,
    setting_halves,
)
from toolsweep.evaluator.exploits import aggregate, play

BUDGET = 16  # what bench/planbench_xl_search.py measured the table with, on each setting's tuning half
PRINTED = 5e-4 + 1e-9  # the table holds the bench's three printed decimals (.3125 rounds to .312)
SETTINGS = sorted(SEARCHED)
# a search on a tuning half is 16 policies on ~163 tasks (about a minute): one setting under `slow`; the
# held-out replay (two policies on ~164 tasks, a few seconds) runs on one setting by default, all under slow
_SAMPLED = random.Random("planbench-search-sample").sample(SETTINGS, 2)
DEFAULT_SETTINGS, SEARCHED_AGAIN = sorted(_SAMPLED[:1]), sorted(_SAMPLED[1:])


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


def _check_held_out(bench, setting: str) -> None:
    row = SEARCHED[setting]["accuracy"]
    _, held = setting_halves(bench, setting)
    for declared, spec in ((row["held_out"], SPACE.spec(parse_policy(row["policy"]))), (row["held_out_planner"], SPACE.baseline)):
        got = held_out_score(bench, spec, setting, held)
        assert got[3] == declared[3] and got[:3] == pytest.approx(declared[:3], abs=PRINTED), (setting, got, declared)


@pytest.mark.parametrize("setting", DEFAULT_SETTINGS)
def test_the_declared_held_out_floor_replays_on_a_sample_of_settings(bench, setting):
    _check_held_out(bench, setting)


@pytest.mark.slow
@pytest.mark.parametrize("setting", SETTINGS)
def test_the_declared_held_out_floor_replays_on_every_setting(bench, setting):
    _check_held_out(bench, setting)


@pytest.mark.slow
@pytest.mark.parametrize("setting", SEARCHED_AGAIN)
def test_no_searched_policy_beats_the_declared_floor_on_the_tuning_half(bench, setting):
    tuning, _ = setting_halves(bench, setting)
    result = search_setting(bench, setting, budget=BUDGET, task_ids=tuning)
    spec, value = result.best["accuracy"]
    assert value <= SEARCHED[setting]["accuracy"]["searched"] + PRINTED, policy_name(spec)
    assert result.scores[SPACE.baseline]["accuracy"] == pytest.approx(SEARCHED[setting]["accuracy"]["planner"],
                                                                      abs=PRINTED)


def test_the_halves_split_each_setting_and_differ_by_seed(bench):
    tuning, held = setting_halves(bench, "ratio_0.8")
    assert not set(tuning) & set(held) and sorted(tuning + held) == sorted(bench.tasks("ratio_0.8"))
    assert abs(len(tuning) - len(held)) <= 1 and setting_halves(bench, "ratio_0.8", seed=1) != (tuning, held)


def test_the_floor_is_the_searched_policy_and_plays_the_tables_choice(bench):
    assert bench.baseline_policy() == "searched_floor" and "searched_floor" in bench.scripted_policies()
    for setting in SETTINGS:
        row = SEARCHED[setting]["accuracy"]
        expected = row["policy"] if row["searched"] > row["planner"] else policy_name(SPACE.baseline)
        assert floor_policy_of(setting) == expected
    assert floor_policy_of("single_step") == policy_name(SPACE.baseline)  # not searched: the planner
    # where the search beat the planner on the tuning half, the floor plays the searched policy: its
    # accuracy on the held-out half is the table's
    setting = next(s for s in SETTINGS if SEARCHED[s]["accuracy"]["searched"] > SEARCHED[s]["accuracy"]["planner"])
    row = SEARCHED[setting]["accuracy"]
    assert floor_policy_of(setting) == row["policy"]
    _, held = setting_halves(bench, setting)
    floor = aggregate(bench.metrics(setting), asyncio.run(play(bench, "searched_floor", setting, held, seed=42)))
    assert floor["accuracy"] == pytest.approx(row["held_out"][0], abs=PRINTED)
