"""APB's adversary search (issue 42): per setting, the strongest policy composed from the space's
primitives (which tool a clause gets, order, argument binding, when to refuse, which tool replaces a
broken one) is the floor beside models where it beats the heuristic; the declared table
(bounds.SEARCHED) is replayed on a seeded sample of settings in the default tier and searched again on
every one under `slow`."""

from __future__ import annotations

import asyncio
import json
import random

import pytest

from toolsweep.benchmarks.apb import APB
from toolsweep.benchmarks.apb.bounds import CALIBRATION, SEARCHED, SEARCHED_ON
from toolsweep.benchmarks.apb.generator import GENERATOR_VERSION
from toolsweep.benchmarks.apb.policies import HeuristicPolicy
from toolsweep.benchmarks.apb.search import (
    PHRASE_BANK,
    SPACE,
    ComposedPolicy,
    floor_policy_of,
    parse_policy,
    policy_name,
    refusal_calibration,
    score_setting,
    search_setting,
    setting_sample,
)
from toolsweep.evaluator.exploits import aggregate, play

TASKS, BUDGET = 20, 24  # what bench/apb_search.py measured the table with
PRINTED = 5e-4
SETTINGS = sorted(SEARCHED)
DEFAULT_SETTINGS = sorted(random.Random("apb-search-sample").sample(SETTINGS, 2))


@pytest.fixture(scope="module")
def bench() -> APB:
    return APB()


def test_the_table_covers_every_case_kind_and_names_policies_of_the_space():
    assert {"holistic", "stepwise_k1", "broken", "unsolvable_conflict", "unsolvable_control",
            "extraneous_holistic_n4", "efficiency"} <= set(SETTINGS)
    for metrics in SEARCHED.values():
        row = metrics["correct"]
        parse_policy(row["policy"])
        assert row["searched"] >= row["heuristic"]  # the heuristic is in the search
    with pytest.raises(KeyError, match="no option"):
        parse_policy("search:refuse=sometimes")


def test_the_baseline_option_of_every_primitive_is_the_heuristic(bench):
    """The search starts from the former floor: the space's baseline answers as `heuristic` does."""
    for setting in ("holistic", "broken", "unsolvable_info", "stepwise_k2"):
        for tid in setting_sample(bench, setting, 3):
            env = bench.make_env(tid, setting, 0)
            ours = ComposedPolicy(env, 0, dict(SPACE.baseline)).answer()
            theirs = HeuristicPolicy(bench.make_env(tid, setting, 0), 0).answer()  # the hand-written rules
            assert json.loads(ours) == json.loads(theirs), (setting, tid)


def test_refusal_options_change_only_what_the_prompt_allows(bench):
    setting = "unsolvable_control"
    tid = setting_sample(bench, setting, 1)[0]
    env = bench.make_env(tid, setting, 0)
    always = json.loads(ComposedPolicy(env, 0, {**dict(SPACE.baseline), "refuse": "always"}).answer())
    never = json.loads(ComposedPolicy(env, 0, {**dict(SPACE.baseline), "refuse": "never"}).answer())
    assert always["status"] == "REJECT" and "status" not in never and never["tool_chain"]
    assert PHRASE_BANK.search("This cannot be done offline") and not PHRASE_BANK.search("Compute the mean.")


def test_the_table_was_searched_on_the_cases_the_generator_makes():
    """A table searched on an older generator's cases is another benchmark's floor: search again
    (bench/apb_search.py) and update bounds.py when the generator version changes."""
    assert SEARCHED_ON == GENERATOR_VERSION


def test_no_refusal_option_is_better_calibrated_than_the_floors(bench):
    """The refusal decision spans settings (TRR on the Unsolvable kinds, FRR on their solvable
    controls); since apb-gen-5 the controls read their Unsolvable case's requirement, so the
    heuristic's cues refuse most of them. The declared figures replay, and the floor's option is best."""
    floor = parse_policy(floor_policy_of("unsolvable_control"))["refuse"]
    assert {floor} == {parse_policy(floor_policy_of(k))["refuse"] for k in SETTINGS if k.startswith("unsolvable_")}
    for option, declared in CALIBRATION.items():
        got = refusal_calibration(bench, option, TASKS)
        for key in ("TRR", "FRR", "Calibration"):
            assert got[key] == pytest.approx(declared[key], abs=PRINTED), (option, key)
    assert set(CALIBRATION) == set(dict(SPACE.primitives)["refuse"])
    assert max(CALIBRATION.values(), key=lambda r: r["Calibration"]) is CALIBRATION[floor]
    assert CALIBRATION[floor]["FRR"] > 0.5  # what a model's calibration is read against


@pytest.mark.parametrize("setting", DEFAULT_SETTINGS)
def test_the_declared_searched_floor_replays_on_a_sample_of_settings(bench, setting):
    row = SEARCHED[setting]["correct"]
    ids = setting_sample(bench, setting, TASKS)
    got = score_setting(bench, tuple(parse_policy(row["policy"]).items()), setting, ids)
    assert got["correct"] == pytest.approx(row["searched"], abs=PRINTED)


@pytest.mark.slow
@pytest.mark.parametrize("setting", SETTINGS)
def test_no_searched_policy_beats_the_declared_floor_on_any_setting(bench, setting):
    result = search_setting(bench, setting, TASKS, budget=BUDGET)
    spec, value = result.best["correct"]
    assert value <= SEARCHED[setting]["correct"]["searched"] + PRINTED, policy_name(spec)
    assert result.scores[SPACE.baseline]["correct"] == pytest.approx(SEARCHED[setting]["correct"]["heuristic"],
                                                                     abs=PRINTED)


def test_the_floor_is_the_searched_policy_and_plays_the_tables_choice(bench, monkeypatch):
    assert bench.baseline_policy() == "heuristic"  # the heuristic plays the table where it names a stronger one
    for setting in SETTINGS:
        row = SEARCHED[setting]["correct"]
        expected = row["policy"] if row["searched"] > row["heuristic"] else policy_name(SPACE.baseline)
        assert floor_policy_of(setting) == expected
    setting = "unsolvable_control"
    ids = setting_sample(bench, setting, 6)
    floor = aggregate(bench.metrics(setting), asyncio.run(play(bench, "heuristic", setting, ids)))
    chosen = score_setting(bench, tuple(parse_policy(floor_policy_of(setting)).items()), setting, ids)
    assert floor["correct"] == chosen["correct"]
    # a table naming a stronger policy: the floor plays it (here: refuse nothing, the solvable twins' answer)
    stronger = policy_name(tuple({**dict(SPACE.baseline), "refuse": "never"}.items()))
    monkeypatch.setitem(SEARCHED, setting, {"correct": {"searched": 1.0, "heuristic": 0.0, "policy": stronger}})
    env = bench.make_env(ids[0], setting, 0)
    answer = json.loads(bench.make_scripted_policy("heuristic", env, 0).answer())
    assert "status" not in answer and answer["tool_chain"]
