"""Adaptive sweeps' round logic: which cells need more seeds, which seeds they get, the confidence each
round spends, and, by simulation with a known truth, that the interval reported at the round a cell
stopped in covers the truth at least as often as promised (alpha spending over rounds), where judging
every round at the nominal confidence would not be entitled to."""

from __future__ import annotations

import math

import numpy as np
import pytest

from toolsweep.evaluator.adaptive import (
    grow_seeds,
    needs_more,
    round_confidence,
    run_rounds,
)
from toolsweep.evaluator.protocols import MetricSpec
from toolsweep.evaluator.stats import Estimate, summarize_metrics

SUCCESS = MetricSpec(name="success")


def est(lo: float, hi: float) -> Estimate:
    return Estimate(value=(lo + hi) / 2, ci_low=lo, ci_high=hi, n=10)


def test_round_confidences_spend_at_most_alpha_over_any_number_of_rounds():
    assert round_confidence(0.05, 1) == pytest.approx(1 - 0.05 * 6 / math.pi ** 2)  # 0.9696
    assert round_confidence(0.05, 2) == pytest.approx(1 - 0.05 * 6 / (4 * math.pi ** 2))
    spent = sum(1 - round_confidence(0.05, r) for r in range(1, 100_001))
    assert 0.04999 < spent <= 0.05
    assert all(round_confidence(0.05, r) < round_confidence(0.05, r + 1) for r in range(1, 50))
    with pytest.raises(ValueError):
        round_confidence(0.05, 0)


def test_a_cell_needs_more_while_any_model_is_wider_than_the_target_or_undefined():
    assert not needs_more({"a": est(0.40, 0.46), "b": est(0.0, 0.0)}, 0.03)  # 0.03 exactly is met
    assert needs_more({"a": est(0.40, 0.46), "b": est(0.10, 0.17)}, 0.03)  # b is 0.035 wide
    assert needs_more({"a": est(0.40, 0.46), "b": est(math.nan, math.nan)}, 0.03)
    assert needs_more({}, 0.03)


def test_seeds_grow_by_the_next_integers_up_to_the_budget():
    assert grow_seeds([0, 1], 2, 10) == [0, 1, 2, 3]
    assert grow_seeds([5, 9], 3, 10) == [5, 9, 10, 11, 12]
    assert grow_seeds([0, 1, 2], 4, 5) == [0, 1, 2, 3, 4]
    assert grow_seeds([0, 1, 2, 3, 4], 4, 5) == [0, 1, 2, 3, 4]


def scripted_measure(widths_by_round):
    """A measure whose half-widths per (round, cell) are given: checks the loop's bookkeeping alone."""
    calls = []

    def measure(r, seeds, cells, conf):
        calls.append((r, sorted(cells), {c: list(s) for c, s in seeds.items()}, conf))
        return {c: {"m": est(0.5 - widths_by_round[r][c], 0.5 + widths_by_round[r][c])} for c in cells}

    return measure, calls


def test_rounds_grow_only_the_cells_that_need_more_and_record_where_each_stopped():
    a, b, c = ("x", "easy"), ("x", "hard"), ("x", "harder")
    widths = {1: {a: 0.01, b: 0.2, c: 0.3}, 2: {b: 0.05, c: 0.2}, 3: {c: 0.15}}
    measure, calls = scripted_measure(widths)
    out = run_rounds({a: [0, 1], b: [0, 1], c: [0, 1]}, target=0.1, max_rounds=3, max_seeds=8,
                     seeds_per_round=2, alpha=0.05, measure=measure)
    assert [call[1] for call in calls] == [[a, b, c], [b, c], [c]]
    assert calls[1][2] == {a: [0, 1], b: [0, 1, 2, 3], c: [0, 1, 2, 3]}
    assert [call[3] for call in calls] == [round_confidence(0.05, r) for r in (1, 2, 3)]
    assert out.reason == "max_rounds" and out.rounds == 3 and out.grown_per_round == [[b, c], [c]]
    rec = out.records
    assert (rec[a].rounds, rec[a].seeds, rec[a].met) == (1, 2, True)
    assert (rec[b].rounds, rec[b].seeds, rec[b].met) == (2, 4, True)
    assert (rec[c].rounds, rec[c].seeds, rec[c].met) == (3, 6, False)
    assert rec[b].confidence == round_confidence(0.05, 2)


def test_a_cell_at_max_seeds_stops_growing_and_the_loop_ends():
    a = ("x", "s")
    measure, calls = scripted_measure({r: {a: 0.5} for r in range(1, 10)})
    out = run_rounds({a: [0, 1, 2]}, target=0.1, max_rounds=9, max_seeds=5, seeds_per_round=2, alpha=0.05,
                     measure=measure)
    assert out.reason == "max_seeds" and out.seeds[a] == [0, 1, 2, 3, 4] and len(calls) == 2
    assert not out.records[a].met and out.records[a].seeds == 5


def test_a_round_that_did_not_finish_stops_the_loop():
    a = ("x", "s")
    out = run_rounds({a: [0]}, target=0.1, max_rounds=5, max_seeds=5, seeds_per_round=1, alpha=0.05,
                     measure=lambda r, s, c, conf: None)
    assert out.reason == "stopped" and out.records == {}


# ----------------------------------------------------------------------------- coverage by simulation

MODELS = {"a": (10.0, 10.0), "b": (12.0, 4.0)}  # Beta(a, b) of the tasks' success probabilities
TASKS, MAX_SEEDS = 30, 10


def simulated_sweep(rng: np.random.Generator, i: int, *, target: float, spend: bool, n_resamples: int = 2000):
    """One adaptive sweep of one cell with two models on the same tasks (tasks drawn from the Beta
    population, episodes Bernoulli), through `run_rounds`; returns ((model, truth, record), ...)."""
    ys = {}
    for m, (a, b) in MODELS.items():
        p = rng.beta(a, b, TASKS)
        ys[m] = (rng.random((TASKS, MAX_SEEDS)) < p[:, None]).astype(float)
    cell = ("sim", "s")

    def measure(r, seeds, cells, conf):
        s = len(seeds[cell])
        ids = np.repeat(np.arange(TASKS), s)
        seed = np.tile(np.arange(s), TASKS)
        level = conf if spend else 0.95
        return {cell: {m: summarize_metrics(ids, seed, {"success": y[:, :s].ravel()}, [SUCCESS],
                                            n_resamples=n_resamples, confidence=level, seed=i)["success"]
                       for m, y in ys.items()}}

    out = run_rounds({cell: [0, 1]}, target=target, max_rounds=5, max_seeds=MAX_SEEDS, seeds_per_round=2,
                     alpha=0.05, measure=measure)
    rec = out.records[cell]
    return [(m, a / (a + b), rec) for m, (a, b) in MODELS.items()]


def adaptive_coverage(n_sims: int, *, spend: bool, target: float = 0.16, seed: int = 11):
    rng = np.random.default_rng(seed)
    hits = total = 0
    rounds = []
    for i in range(n_sims):
        for m, truth, rec in simulated_sweep(rng, i, target=target, spend=spend):
            e = rec.estimates[m]
            hits += e.ci_low <= truth <= e.ci_high
            total += 1
        rounds.append(rec.rounds)
    return hits / total, np.bincount(rounds)


@pytest.mark.slow
def test_spent_confidence_intervals_cover_at_least_95_percent_over_1000_adaptive_sweeps():
    # The union bound promises >= 95%; it is conservative twice over (the rounds' intervals share their
    # data, and the nested bootstrap adds the within-task variance a second time, see test_design), so
    # the measured coverage is above 97% (99.4% with this seed): the honest band is [95%, 100%], with
    # the binomial margin of 1,000 sweeps x 2 models below.
    rate, rounds = adaptive_coverage(1000, spend=True)
    assert rate >= 0.95 - 2 * math.sqrt(0.05 * 0.95 / 2000), (rate, rounds)
    # the simulation is adaptive: sweeps stopped at different rounds, most after round 1
    assert (rounds[1:] > 0).sum() >= 3 and rounds[1] < rounds.sum() / 2, rounds


def test_spent_confidence_intervals_cover_in_a_quick_sample():
    rate, rounds = adaptive_coverage(150, spend=True, seed=5)
    assert rate >= 0.93, (rate, rounds)
