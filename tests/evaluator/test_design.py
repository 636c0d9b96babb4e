"""The design statistics, checked by simulation with a known truth: the variance components recover the
simulated ones, the 95% intervals cover the true value 93-97% of the time, the power analysis predicts
the interval width reached on held-out seeds within 15%, Holm holds the family-wise error and
Benjamini-Hochberg the false discovery rate, and pass^k is the probability it names.

Sweeps are simulated as the benchmarks produce them: tasks of varying difficulty (a task's success
probability drawn from a Beta), seeds as repeated episodes within a task."""

from __future__ import annotations

import math

import numpy as np
import pytest

from toolsweep.evaluator.design import (
    benjamini_hochberg,
    cell_variance,
    detectable_difference,
    half_width,
    holm,
    paired_p_value,
    pass_hat_k,
    pass_k_curve,
    seeds_needed,
    tasks_needed,
    variance_components,
)
from toolsweep.evaluator.protocols import MetricSpec
from toolsweep.evaluator.stats import summarize_metrics

SUCCESS = MetricSpec(name="success")


def sweep(rng: np.random.Generator, tasks: int, seeds: int, a: float = 2.0, b: float = 2.0,
          p: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(task ids, seeds, successes): each task's success probability from Beta(a, b)."""
    p = rng.beta(a, b, tasks) if p is None else p
    ids = np.repeat([f"t{i:04d}" for i in range(tasks)], seeds)
    seed = np.tile(np.arange(seeds), tasks)
    y = (rng.random(tasks * seeds) < np.repeat(p, seeds)).astype(float)
    return ids, seed, y


def test_components_recover_the_simulated_ones():
    rng = np.random.default_rng(1)
    # Beta(2, 2): var of p = 1/20; within-task (Bernoulli) variance E[p(1-p)] = 0.2
    est = [variance_components(*sweep(rng, 400, 4)[::2]) for _ in range(20)]
    assert np.mean([e.var_task for e in est]) == pytest.approx(0.05, rel=0.15)
    assert np.mean([e.var_within for e in est]) == pytest.approx(0.20, rel=0.05)
    one = variance_components(*sweep(rng, 50, 1)[::2])
    assert one.var_within is None and one.icc is None  # one episode per task: not identifiable
    vc = variance_components(["a", "a", "b", "b"], np.array([1.0, 1.0, 0.0, 0.0]))
    assert vc.var_within == 0 and vc.icc == 1.0 and vc.effective_n == pytest.approx(2.0)


def test_a_metric_every_episode_scores_alike_has_no_intra_class_correlation():
    # A degenerate cell (a drift that never reappears under a random policy: 0 on every episode) has no
    # variance to split between tasks and seeds: its ICC, design effect and effective n are undefined
    # (null, shown as a dash), not 0, 1 and every episode.
    import json

    from toolsweep.evaluator.design import cell_variance
    from toolsweep.evaluator.rundir import strict_json

    vc = variance_components(["a", "a", "b", "b", "c", "c"], np.zeros(6))
    assert vc.var_task == 0 and vc.var_within == 0
    assert vc.icc is None and vc.design_effect is None and vc.effective_n is None
    written = json.loads(strict_json(cell_variance(["a", "a", "b", "b"], {"m": np.ones(4)}, [MetricSpec(name="m")])))
    assert written["m"]["icc"] is None and written["m"]["effective_n"] is None and written["m"]["var_task"] == 0


def test_ratio_metrics_are_linearised():
    spec = MetricSpec(name="prec", kind="ratio", numerator="hit", denominator="tried")
    values = {"hit": np.array([1.0, 0, 2, 2]), "tried": np.array([1.0, 1, 2, 4])}
    out = cell_variance(["a", "a", "b", "b"], values, [spec])["prec"]
    assert out["n_tasks"] == 2 and out["var_within"] > 0


def coverage(rng, n_sims: int, tasks: int, seeds: int) -> float:
    hits = 0
    for i in range(n_sims):
        p = rng.beta(2, 2, tasks)
        truth = 0.5  # the population mean of Beta(2, 2): tasks are a sample from it
        ids, seed, y = sweep(rng, tasks, seeds, p=p)
        est = summarize_metrics(ids, seed, {"success": y}, [SUCCESS], n_resamples=1000, seed=i)["success"]
        hits += est.ci_low <= truth <= est.ci_high
    return hits / n_sims


def test_95_percent_intervals_cover_the_truth_93_to_97_percent_of_the_time():
    # one seed per task: drawing tasks is drawing episodes
    rate = coverage(np.random.default_rng(7), 1000, tasks=60, seeds=1)
    assert 0.93 <= rate <= 0.97, rate


def test_with_several_seeds_the_default_bootstrap_covers_93_to_97_percent():
    # The cluster bootstrap (tasks drawn with all their seeds): the two-stage draw covered 97.7% here,
    # its within-task variance counted twice (tests/evaluator/test_coverage.py has the full table).
    rate = coverage(np.random.default_rng(7), 1000, tasks=60, seeds=3)
    assert 0.93 <= rate <= 0.97, rate


def test_intervals_cover_in_a_quick_sample():
    # the default tier's cheap version of the slow test: 200 sweeps, the binomial band of 95% at n=200
    rate = coverage(np.random.default_rng(3), 200, tasks=60, seeds=3)
    assert 0.90 <= rate <= 0.99, rate


def test_power_predicts_the_width_reached_on_held_out_seeds():
    rng = np.random.default_rng(11)
    errors = []
    for trial in range(12):
        p = rng.beta(1.5, 1.5, 80)
        pilot_ids, _, pilot_y = sweep(rng, 80, 2, p=p)
        vc = variance_components(pilot_ids, pilot_y)
        predicted = half_width(vc, 80, 6)
        ids, seed, y = sweep(rng, 80, 6, p=p)  # the same tasks, six new seeds
        est = summarize_metrics(ids, seed, {"success": y}, [SUCCESS], n_resamples=2000, seed=trial)["success"]
        errors.append(abs(predicted - (est.ci_high - est.ci_low) / 2) / ((est.ci_high - est.ci_low) / 2))
    assert float(np.median(errors)) <= 0.15, errors


@pytest.mark.parametrize("resample", ["tasks", "tasks_then_seeds"])
def test_power_predicts_the_width_of_either_bootstrap_scheme(resample):
    # the plan follows bootstrap.resample: the two-stage draw's intervals are wider with several seeds
    # (its within-task term counted (2S - 1) / S times), and the plan must say so, not promise the
    # cluster bootstrap's width
    rng = np.random.default_rng(29)
    errors, ratios = [], []
    for trial in range(12):
        p = rng.beta(2, 2, 80)
        pilot_ids, _, pilot_y = sweep(rng, 80, 2, p=p)
        vc = variance_components(pilot_ids, pilot_y)
        predicted = half_width(vc, 80, 4, resample=resample)
        ids, seed, y = sweep(rng, 80, 4, p=p)
        est = summarize_metrics(ids, seed, {"success": y}, [SUCCESS], n_resamples=2000, seed=trial,
                                resample=resample)["success"]
        reached = (est.ci_high - est.ci_low) / 2
        errors.append(abs(predicted - reached) / reached)
        ratios.append(predicted / half_width(vc, 80, 4))
    assert float(np.median(errors)) <= 0.15, errors
    if resample == "tasks_then_seeds":
        assert seeds_needed(vc, 0.06, 80, resample=resample) > seeds_needed(vc, 0.06, 80)
        assert min(ratios) > 1.1  # 1 + within (S - 1) / S / (var_task S + within): ~1.17 here
    else:
        assert ratios == [1.0] * len(ratios)


def test_planning_solves_the_width_formula():
    vc = variance_components(*sweep(np.random.default_rng(5), 200, 3)[::2])
    t = tasks_needed(vc, 0.03, seeds=3)
    assert half_width(vc, t, 3) <= 0.03 < half_width(vc, t - 1, 3)
    s = seeds_needed(vc, 0.05, tasks=200)
    assert s is not None and half_width(vc, 200, s) <= 0.05 and (s == 1 or half_width(vc, 200, s - 1) > 0.05)
    assert seeds_needed(vc, 0.001, tasks=10) is None  # tasks vary too much: no number of seeds suffices
    assert detectable_difference(vc, 200, 3) == pytest.approx((1.959964 + 0.841621) * half_width(vc, 200, 3) / 1.959964,
                                                             rel=1e-4)


def null_and_real_p_values(rng, m_null: int, m_real: int, effect: float) -> tuple[list[float], list[bool]]:
    ps, real = [], []
    for j in range(m_null + m_real):
        p = rng.beta(2, 2, 40)
        ids, _, ya = sweep(rng, 40, 2, p=p)
        shift = effect if j >= m_null else 0.0
        _, _, yb = sweep(rng, 40, 2, p=np.clip(p + shift, 0, 1))
        ps.append(paired_p_value(ids, yb - ya))
        real.append(j >= m_null)
    return ps, real


@pytest.mark.slow
def test_holm_holds_the_family_wise_error_and_bh_the_false_discovery_rate():
    rng = np.random.default_rng(13)
    fwe = fdr_sum = 0.0
    sims = 1000
    for _ in range(sims):
        ps, real = null_and_real_p_values(rng, 16, 4, 0.25)
        h = holm(ps)
        fwe += any(r and not t for r, t in zip(h, real))
        bh = benjamini_hochberg(ps)
        false = sum(r and not t for r, t in zip(bh, real))
        fdr_sum += false / max(sum(bh), 1)
    assert fwe / sims <= 0.065 and fdr_sum / sims <= 0.065, (fwe / sims, fdr_sum / sims)


def test_multiplicity_rules_on_known_p_values():
    ps = [0.001, 0.011, 0.02, 0.04, 0.3]
    assert holm(ps) == [True, True, False, False, False]  # 0.011 <= 0.05 / 4, then 0.02 > 0.05 / 3
    assert benjamini_hochberg(ps) == [True, True, True, True, False]  # 0.04 <= 0.05 * 4/5; 0.3 > 0.05
    assert holm([0.01, 0.04]) == [True, True] and holm([0.04, 0.01]) == [True, True]
    # unadjusted, about 5% of null tests reject; the p-value is calibrated
    rng = np.random.default_rng(2)
    ps, _ = null_and_real_p_values(rng, 300, 0, 0.0)
    assert 0.02 <= np.mean(np.array(ps) <= 0.05) <= 0.09


def test_pass_hat_k_is_the_chance_that_k_seeds_all_succeed():
    rng = np.random.default_rng(17)
    p = rng.beta(2, 2, 3000)
    ids, _, y = sweep(rng, 3000, 5, p=p)
    for k in (1, 2, 3):
        assert pass_hat_k(ids, y, k) == pytest.approx(float(np.mean(p ** k)), abs=0.015)
    assert pass_hat_k(["a", "a", "a"], np.array([1.0, 1.0, 0.0]), 2) == pytest.approx(1 / 3)  # C(2,2)/C(3,2)
    assert pass_hat_k(["a"], np.array([1.0]), 2) is None
    curve = pass_k_curve(ids[:10], {"success": y[:10], "turns": np.arange(10.0)},
                         [SUCCESS, MetricSpec(name="turns")])
    assert set(curve) == {"success"} and list(curve["success"]) == ["1", "2", "3", "4", "5"]
    assert curve["success"]["1"] >= curve["success"]["5"] and math.isfinite(curve["success"]["3"])


def test_the_summary_carries_the_design_and_the_adjusted_decisions():
    from toolsweep.evaluator.design import adjust_paired, paired_test
    from toolsweep.evaluator.stats import cell_summary

    rng = np.random.default_rng(23)
    p = rng.beta(2, 2, 80)
    ids, seed, ya = sweep(rng, 80, 3, p=p)
    _, _, yb = sweep(rng, 80, 3, p=np.clip(p + 0.3, 0, 1))
    cell = cell_summary("a", "b", "s", ids, seed, {"success": ya}, ["answered"] * len(ids), [SUCCESS],
                        n_resamples=200)
    vc = cell["variance"]["success"]
    assert vc["n_tasks"] == 80 and 0 < vc["icc"] < 1 and vc["effective_n"] < len(ids)
    assert set(cell["pass_k"]["success"]) == {"1", "2", "3"}
    real = paired_test(ids, seed, {"success": yb}, ids, seed, {"success": ya}, SUCCESS)
    null = paired_test(ids, seed, {"success": ya}, ids, seed, {"success": ya}, SUCCESS)
    assert real < 0.001 and null == 1.0
    rows = [{"benchmark": "b", "metric": "success", "p_value": pv} for pv in (real, 0.04, 0.5)]
    rows.append({"benchmark": "other", "metric": "success", "p_value": 0.04})
    adjust_paired(rows)
    assert [r["holm"] for r in rows] == [True, False, False, True]  # its own family of one: 0.04 <= 0.05
    assert [r["family"] for r in rows] == [3, 3, 3, 1]


def test_one_tasks_spread_between_tasks_is_undefined_never_zero():
    """A cell of one task (a degenerate cell: every other task left the metric undefined) has no spread
    between tasks to read: NaN, written as null and shown as n/a, not 0.0 (which reads as "the tasks
    agree"), and no intra-class correlation; a power plan from such a pilot says why it assumes the most."""
    import json

    from toolsweep.cluster.power import guarded
    from toolsweep.evaluator.design import cell_variance
    from toolsweep.evaluator.rundir import strict_json

    vc = variance_components(["t1", "t1", "t1"], np.array([1.0, 0.0, 1.0]))
    assert vc.n_tasks == 1 and math.isnan(vc.var_task) and vc.var_within == pytest.approx(1 / 3)
    assert vc.icc is None and vc.design_effect is None and vc.effective_n is None
    single = variance_components(["t1"], np.array([1.0]))
    assert math.isnan(single.var_task) and single.var_within is None and single.icc is None
    written = json.loads(strict_json(cell_variance(["t1", "t2"], {"m": np.array([1.0, math.nan])},
                                                   [MetricSpec(name="m")])))
    assert written["m"]["var_task"] is None and written["m"]["icc"] is None and written["m"]["n_tasks"] == 1
    planned, note = guarded(vc)
    assert planned.var_task == pytest.approx(0.25) and "one task" in note
    assert guarded(variance_components(["a", "b"], np.array([0.0, 1.0])))[1] == ""  # a spread to plan with
