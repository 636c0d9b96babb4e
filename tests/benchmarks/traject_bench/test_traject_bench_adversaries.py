"""TRAJECT-Bench adversaries, bounded per cell under `paper_compat: exact` (the authors' scoring):
call-everything (the benchmark's baseline_policy), the keyword retriever, the prose echoes, pasted
outputs and no tools, each against its split's bounds in bounds.py. Positive control: the oracle
keeps its credit in the same cells.

By default a seeded sample of every cell; `-m slow` plays every task of the main settings."""

from __future__ import annotations

import asyncio
import math

import pytest

from toolsweep.benchmarks.traject_bench import TrajectBench
from toolsweep.benchmarks.traject_bench.bounds import ADVERSARY_CEILINGS, ceilings_for, cell_sample
from toolsweep.evaluator.exploits import aggregate, bound_violations, play
from toolsweep.evaluator.protocols import ExploitPolicy

from traject_data import require_data

DATA = require_data()
SAMPLE = 8  # tasks per cell by default (call-everything replays 80-260 calls an episode)
ANSWER_SAMPLE = 60  # the answer adversaries are cheap: a larger sample, a tighter per-cell bound
CELLS = ["par-simple/domain/direct", "par-hard/domain/direct", "seq/domain/direct", "par-simple/domain/native",
         "par-hard/retrieval/direct", "seq/retrieval/react-static"]  # fmt: skip


@pytest.fixture(scope="module")
def bench() -> TrajectBench:
    return TrajectBench(data_dir=str(DATA), paper_compat="exact")


def _sample(bench: TrajectBench, setting: str, n: int) -> list[str]:
    return cell_sample(bench.tasks(setting), n, setting)


def _cell(bench: TrajectBench, policy: str, setting: str, n: int) -> dict[str, float]:
    results = asyncio.run(play(bench, policy, setting, _sample(bench, setting, n)))
    assert not [r for r in results if r.termination == "env_error"], f"{policy} crashed the environment"
    return aggregate(bench.metrics(setting), results)


def _check(bench: TrajectBench, policy: str, setting: str, n: int) -> None:
    values = _cell(bench, policy, setting, n)
    bounds = ceilings_for(policy, setting)
    bad = bound_violations(ExploitPolicy(name=policy, description="", ceilings=bounds), values)
    assert not bad, f"{policy} in {setting}: {bad}"
    assert any(math.isfinite(values.get(k, math.nan)) for k in bounds), "no bounded metric was defined"


@pytest.mark.parametrize("setting", CELLS)
@pytest.mark.parametrize("policy", sorted(ADVERSARY_CEILINGS))
def test_adversary_stays_within_its_cell_bounds(bench, policy, setting):
    _check(bench, policy, setting, SAMPLE if policy in ("all_tools", "keyword") else ANSWER_SAMPLE)


@pytest.mark.slow
@pytest.mark.parametrize("setting", ["par-simple/domain/direct", "par-hard/domain/direct", "seq/domain/direct"])
@pytest.mark.parametrize("policy", ["keyword", "prose_echo", "prose_echo_query", "echo_outputs", "all_tools"])
def test_adversary_stays_within_its_cell_bounds_on_every_task(bench, policy, setting):
    _check(bench, policy, setting, 0)


def test_call_everything_gets_the_inclusion_the_paper_gives_it(bench):
    assert bench.baseline_policy() == "searched_floor" and "all_tools" in bench.scripted_policies()
    v = _cell(bench, "all_tools", "par-simple/domain/direct", SAMPLE)
    assert v["inclusion"] > 0.9 and v["em"] == 0.0  # the paper's Inclusion rewards it: read against this floor
    kw = _cell(bench, "keyword", "par-simple/domain/direct", SAMPLE)
    # the strongest no-model policy on selection (Usage is a share of each policy's own pairs)
    assert v["inclusion"] > kw["inclusion"] and v["traj_satisfy_proxy"] > kw["traj_satisfy_proxy"]


@pytest.mark.parametrize("setting", ["par-simple/domain/direct", "seq/domain/direct"])
def test_the_oracle_keeps_its_credit_where_the_prose_echo_loses_it(bench, setting):
    oracle = _cell(bench, "oracle", setting, SAMPLE)
    echo = _cell(bench, "prose_echo", setting, SAMPLE)
    assert oracle["answer_facts"] == 1.0 and oracle["em"] == 1.0 and oracle["usage"] == 1.0
    assert echo["em"] == 1.0 and echo["answer_facts"] < oracle["answer_facts"]


def test_the_prose_echo_restates_every_value_without_json_markers(bench):
    from toolsweep.benchmarks.traject_bench.metrics import fact_recall, is_raw_output
    from toolsweep.benchmarks.traject_bench.policies import prose_echo_policy

    tasks = [bench.dataset.task_by_id[t] for t in _sample(bench, "par-simple/domain/direct", 30)]
    answers = [(t, prose_echo_policy(bench.make_env(t.task_id, "par-simple/domain/direct", 0)).answer) for t in tasks]
    assert all(not is_raw_output(t, a) for t, a in answers)
    assert sum(fact_recall(t, a) >= 0.8 for t, a in answers) >= 0.9 * len(answers)  # it carries the facts
