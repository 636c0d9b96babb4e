"""Composite intervals across cells (stats.composite_estimate): stratified and paired bootstraps."""

from __future__ import annotations

import math

import numpy as np

from toolsweep.evaluator.stats import Stratum, composite_estimate


def _binary(n: int, p: float, seed: int) -> list[float]:
    return list((np.random.default_rng(seed).random(n) < p).astype(float))


def test_stratified_half_and_half_mean_matches_the_normal_theory_width():
    a = Stratum([f"a{i}" for i in range(400)], _binary(400, 0.7, 1))
    b = Stratum([f"b{i}" for i in range(300)], _binary(300, 0.4, 2))
    est = composite_estimate([a, b], lambda m: 0.5 * m[0] + 0.5 * m[1], n_resamples=4000, seed=3)
    pa, pb = np.mean(a.values), np.mean(b.values)
    assert math.isclose(est.value, 0.5 * pa + 0.5 * pb)
    assert est.ci_low < est.value < est.ci_high and est.n == 700
    se = math.sqrt(0.25 * pa * (1 - pa) / 400 + 0.25 * pb * (1 - pb) / 300)
    assert abs((est.ci_high - est.ci_low) / (2 * 1.96 * se) - 1) < 0.12


def test_paired_difference_is_much_tighter_on_correlated_settings():
    keys = [f"base{i}" for i in range(200)]
    before = _binary(200, 0.6, 4)
    flips = np.random.default_rng(5).random(200) < 0.1
    after = [1.0 - v if f else v for v, f in zip(before, flips)]
    strata = [Stratum(keys, before), Stratum(keys, after)]
    diff = lambda m: m[1] - m[0]  # noqa: E731
    paired = composite_estimate(strata, diff, paired=True, n_resamples=3000, seed=1)
    unpaired = composite_estimate(strata, diff, paired=False, n_resamples=3000, seed=1)
    assert math.isclose(paired.value, np.mean(after) - np.mean(before))
    assert paired.value == unpaired.value
    assert (paired.ci_high - paired.ci_low) < 0.6 * (unpaired.ci_high - unpaired.ci_low)


def test_a_keys_episodes_move_together_and_nan_is_left_out():
    keys = [f"t{i}" for i in range(50)]
    values = _binary(50, 0.5, 6)
    once = composite_estimate([Stratum(keys, values)], lambda m: m[0], n_resamples=1000, seed=9)
    # every task twice (two seeds with the same outcome) plus undefined episodes: same estimate
    twice = Stratum(keys + keys + ["t0", "t1"], values + values + [math.nan, math.nan])
    again = composite_estimate([twice], lambda m: m[0], n_resamples=1000, seed=9)
    assert (again.value, again.ci_low, again.ci_high) == (once.value, once.ci_low, once.ci_high)
    assert again.n == 100


def test_undefined_composite_is_nan_and_seed_fixes_the_interval():
    empty = composite_estimate([Stratum(["a"], [math.nan])], lambda m: m[0], n_resamples=100)
    assert math.isnan(empty.value) and math.isnan(empty.ci_low)
    s = Stratum([f"k{i}" for i in range(30)], _binary(30, 0.3, 7))
    assert composite_estimate([s], lambda m: m[0], seed=4) == composite_estimate([s], lambda m: m[0], seed=4)
