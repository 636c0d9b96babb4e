"""Hierarchical bootstrap: agreement with scipy, exact moments, ratio metrics, pairing, edge cases."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.stats

from toolsweep.evaluator import stats
from toolsweep.evaluator.protocols import MetricSpec
from toolsweep.evaluator.stats import (
    Estimate,
    cell_summary,
    paired_difference,
    summarize_metrics,
)
from toolsweep.evaluator.types import TerminationReason

MEAN = MetricSpec(name="x")


def _ragged(n_tasks: int, sizes: list[int], rng: np.random.Generator):
    """Task ids, seeds and a clustered value per episode (task effect + seed noise)."""
    task_ids, seeds, values = [], [], []
    for t in range(n_tasks):
        effect = rng.normal(0.0, 2.0)
        for s in range(sizes[t % len(sizes)]):
            task_ids.append(f"task-{t:03d}")
            seeds.append(100 + s)
            values.append(effect + rng.normal(0.0, 0.5))
    return task_ids, seeds, np.asarray(values)


def _exact_moments(task_ids, x):
    """Mean and variance of the resampled total of x under the two-stage bootstrap.

    A resample sums T independent task copies Z; a copy picks task t uniformly and sums s_t
    draws from its values, so E[Z|t] = s_t m_t and Var[Z|t] = s_t v_t (v_t with ddof=0)."""
    groups: dict[str, list[float]] = {}
    for t, v in zip(task_ids, x):
        groups.setdefault(t, []).append(float(v))
    cond_mean = np.array([len(g) * np.mean(g) for g in groups.values()])
    cond_var = np.array([len(g) * np.var(g) for g in groups.values()])
    n_tasks = len(groups)
    var_z = cond_var.mean() + cond_mean.var()
    return n_tasks * cond_mean.mean(), n_tasks * var_z


@pytest.mark.parametrize(
    ("sizes", "method"),
    [
        ([1], "index"),  # one seed per task
        ([3], "index"),  # balanced: task and seeds from one integer draw
        ([8], "index"),  # balanced, too many seeds for the digit table
        ([1, 2, 3], "index"),  # ragged: task groups by seed count
        ([1, 1, 1, 1, 1, 1, 1, 1, 1, 30], "index"),  # very ragged
        (list(range(1, 16)), "index"),  # many seed counts: flat draws + reduceat
        ([2, 3], "type"),
    ],
)
def test_resampled_totals_have_the_exact_bootstrap_moments(sizes, method):
    rng = np.random.default_rng(7)
    task_ids, seeds, x = _ragged(40, sizes, rng)
    if method == "type":  # few distinct values, so the by-type draw applies
        x = np.round(x)
    layout = stats._layout(task_ids, seeds)
    col = x[layout.order][:, None]
    totals, drawn = stats._resampled_totals(
        layout, col, 20_000, np.random.default_rng(3), method=method
    )
    mean, var = _exact_moments(task_ids, x)
    sd = math.sqrt(var)
    # 20,000 resamples: the mean is within 4 standard errors, the variance within ~5 of them.
    assert abs(totals[:, 0].mean() - mean) < 4 * sd / math.sqrt(20_000)
    assert totals[:, 0].var() == pytest.approx(var, rel=0.05)
    sizes_per_task = np.bincount(np.unique(task_ids, return_inverse=True)[1])
    assert drawn.mean() == pytest.approx(sizes_per_task.sum(), rel=0.01)
    if len(set(sizes)) == 1:
        assert np.all(drawn == len(task_ids))


@pytest.mark.parametrize("interval,method", [("bca", "BCa"), ("percentile", "percentile")])
def test_plain_mean_interval_agrees_with_scipy_bootstrap(interval, method):
    rng = np.random.default_rng(11)
    x = rng.gamma(2.0, 1.5, size=60)  # skewed, continuous: the index path
    task_ids = [f"t{i}" for i in range(x.size)]
    est = summarize_metrics(task_ids, [0] * x.size, {"x": x}, [MEAN], seed=5, interval=interval)["x"]
    ref = scipy.stats.bootstrap(
        (x,), np.mean, method=method, n_resamples=10_000, rng=np.random.default_rng(5)
    ).confidence_interval
    se = x.std(ddof=1) / math.sqrt(x.size)
    assert est.value == pytest.approx(x.mean(), rel=1e-12)
    assert est.n == x.size
    # Each endpoint carries ~0.03 se of Monte Carlo error at 10,000 resamples.
    assert est.ci_low == pytest.approx(ref.low, abs=0.15 * se)
    assert est.ci_high == pytest.approx(ref.high, abs=0.15 * se)
    assert est.ci_low < est.value < est.ci_high


@pytest.mark.parametrize("interval,method", [("bca", "BCa"), ("percentile", "percentile")])
def test_binary_metric_interval_agrees_with_scipy_bootstrap(interval, method):
    # Success flags take the by-type path (multinomial counts), which must give the same answer.
    rng = np.random.default_rng(12)
    x = (rng.random(80) < 0.3).astype(float)
    est = summarize_metrics([f"t{i}" for i in range(80)], [0] * 80, {"x": x}, [MEAN], interval=interval)["x"]
    ref = scipy.stats.bootstrap(
        (x,), np.mean, method=method, n_resamples=10_000, rng=np.random.default_rng(0)
    ).confidence_interval
    assert est.ci_low == pytest.approx(ref.low, abs=0.0126)  # one success in 80 = 0.0125
    assert est.ci_high == pytest.approx(ref.high, abs=0.0126)


def test_ratio_metric_is_a_ratio_of_resampled_sums_not_a_mean_of_ratios():
    spec = MetricSpec(name="prec", kind="ratio", numerator="hit", denominator="calls")
    hit = np.array([1.0, 0.0, 3.0, 2.0, 0.0, 5.0])
    calls = np.array([1.0, 9.0, 4.0, 2.0, 8.0, 5.0])
    task_ids = [f"t{i}" for i in range(6)]
    est = summarize_metrics(task_ids, [0] * 6, {"hit": hit, "calls": calls}, [spec], seed=1, interval="percentile")
    est = est["prec"]
    assert est.value == pytest.approx(hit.sum() / calls.sum())  # 11 / 29
    assert abs(est.value - np.mean(hit / calls)) > 0.2  # the mean of ratios is 0.583
    # The interval is that of the ratio of sums over the same resamples, computed directly.
    layout = stats._layout(task_ids, [0] * 6)
    cols = np.stack([hit, calls], axis=1)[layout.order]
    totals, _ = stats._resampled_totals(layout, cols, 10_000, np.random.default_rng(1))
    direct = np.percentile(totals[:, 0] / totals[:, 1], [2.5, 97.5])
    assert (est.ci_low, est.ci_high) == pytest.approx(tuple(direct))


def test_hierarchical_interval_is_wider_than_iid_on_clustered_data():
    rng = np.random.default_rng(2)
    task_ids, seeds, x = _ragged(12, [6], rng)  # strong task effects, little seed noise
    hier = summarize_metrics(task_ids, seeds, {"x": x}, [MEAN])["x"]
    iid_ids = [f"{t}/{s}" for t, s in zip(task_ids, seeds)]  # every episode its own task
    iid = summarize_metrics(iid_ids, seeds, {"x": x}, [MEAN])["x"]
    assert hier.value == pytest.approx(iid.value)
    assert (hier.ci_high - hier.ci_low) > 1.8 * (iid.ci_high - iid.ci_low)


def test_fixed_seed_is_deterministic_and_row_order_does_not_matter():
    rng = np.random.default_rng(4)
    task_ids, seeds, x = _ragged(30, [1, 2, 3], rng)
    specs = [MEAN, MetricSpec(name="r", kind="ratio", numerator="x", denominator="d")]
    d = rng.random(x.size) + 0.5
    first = summarize_metrics(task_ids, seeds, {"x": x, "d": d}, specs, seed=9)
    again = summarize_metrics(task_ids, seeds, {"x": x, "d": d}, specs, seed=9)
    perm = rng.permutation(x.size)
    shuffled = summarize_metrics(
        [task_ids[i] for i in perm],
        [seeds[i] for i in perm],
        {"x": x[perm], "d": d[perm]},
        specs,
        seed=9,
    )
    other = summarize_metrics(task_ids, seeds, {"x": x, "d": d}, specs, seed=10)
    assert first == again
    for name in ("x", "r"):
        assert shuffled[name].ci_low == pytest.approx(first[name].ci_low, rel=1e-12)
        assert shuffled[name].ci_high == pytest.approx(first[name].ci_high, rel=1e-12)
    assert other["x"].ci_low != first["x"].ci_low


def test_nan_values_are_left_out_of_a_mean():
    x = np.array([1.0, np.nan, 0.0, 1.0, np.nan, 1.0])
    est = summarize_metrics([f"t{i}" for i in range(6)], [0] * 6, {"x": x}, [MEAN])["x"]
    assert est.n == 4
    assert est.value == pytest.approx(0.75)
    assert 0.0 <= est.ci_low <= est.value <= est.ci_high <= 1.0


def test_paired_difference_of_identical_models_is_exactly_zero():
    rng = np.random.default_rng(5)
    task_ids, seeds, x = _ragged(25, [1, 3], rng)
    for spec, values in [
        (MEAN, {"x": x}),
        (MetricSpec(name="r", kind="ratio", numerator="x", denominator="d"), {"x": x, "d": x**2}),
    ]:
        est = paired_difference(task_ids, seeds, values, task_ids, seeds, values, spec)
        assert (est.value, est.ci_low, est.ci_high) == (0.0, 0.0, 0.0)
        assert est.n == len(task_ids)


def test_paired_difference_uses_only_shared_cells_and_pairs_them():
    rng = np.random.default_rng(6)
    task_ids, seeds, x = _ragged(30, [2], rng)
    y = x - 0.25 + rng.normal(0.0, 0.01, size=x.size)  # B tracks A closely: pairing matters
    keep = np.arange(x.size) % 5 != 0  # B lacks some cells, and has one A never ran
    ids_b = [t for t, k in zip(task_ids, keep) if k] + ["extra"]
    seeds_b = [s for s, k in zip(seeds, keep) if k] + [0]
    y_b = np.append(y[keep], 1000.0)
    est = paired_difference(task_ids, seeds, {"x": x}, ids_b, seeds_b, {"x": y_b}, MEAN)
    assert est.n == int(keep.sum())
    assert est.value == pytest.approx(np.mean(x[keep] - y[keep]))
    assert est.ci_low < est.value < est.ci_high
    assert est.ci_high - est.ci_low < 0.02  # unpaired, task effects (sd 2) would dominate
    with pytest.raises(ValueError, match="two episodes for task"):
        paired_difference(task_ids * 2, seeds * 2, {"x": np.tile(x, 2)}, ids_b, seeds_b, {"x": y_b}, MEAN)


def test_degenerate_inputs_give_nan_or_point_intervals_without_warnings():
    ratio = MetricSpec(name="r", kind="ratio", numerator="a", denominator="b")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        empty = summarize_metrics([], [], {"x": np.array([]), "a": [], "b": []}, [MEAN, ratio])
        for est in empty.values():
            assert est.n == 0 and all(math.isnan(v) for v in (est.value, est.ci_low, est.ci_high))

        all_nan = summarize_metrics(["t"] * 3, [0, 1, 2], {"x": np.full(3, np.nan)}, [MEAN])["x"]
        assert all_nan.n == 0 and math.isnan(all_nan.value) and math.isnan(all_nan.ci_low)

        # One task: the cluster bootstrap (the default) draws that task every time, so the interval
        # is the point (nothing is known about the spread between tasks); the two-stage draw resamples
        # its seeds, so it shows their spread.
        x4 = {"x": [0.0, 1.0, 1.0, 1.0]}
        one_task = summarize_metrics(["t"] * 4, [0, 1, 2, 3], x4, [MEAN])["x"]
        assert (one_task.value, one_task.ci_low, one_task.ci_high) == (0.75, 0.75, 0.75)
        two_stage = summarize_metrics(["t"] * 4, [0, 1, 2, 3], x4, [MEAN], resample="tasks_then_seeds")["x"]
        assert two_stage.value == 0.75 and two_stage.ci_low < 0.75

        constant = summarize_metrics(["a", "b", "c"], [0, 0, 0], {"x": [0.5, 0.5, 0.5]}, [MEAN])
        assert (constant["x"].ci_low, constant["x"].ci_high) == (0.5, 0.5)

        zero_den = summarize_metrics(["a", "b"], [0, 0], {"a": [0.0, 0.0], "b": [0.0, 0.0]}, [ratio])
        assert zero_den["r"].n == 2 and math.isnan(zero_den["r"].value)

        # Some resamples draw only zero denominators: those resamples are left out of the interval.
        rare = summarize_metrics(
            [f"t{i}" for i in range(4)], [0] * 4, {"a": [1.0, 0, 0, 0], "b": [2.0, 0, 0, 0]}, [ratio]
        )["r"]
        assert (rare.value, rare.ci_low, rare.ci_high) == (0.5, 0.5, 0.5)


def test_bad_inputs_say_what_is_wrong():
    with pytest.raises(ValueError, match="needs the per-episode key 'calls'"):
        summarize_metrics(
            ["a"], [0], {"hits": [1.0]}, [MetricSpec(name="p", kind="ratio", numerator="hits", denominator="calls")]
        )
    with pytest.raises(ValueError, match="2 entries but there are 3 episodes"):
        summarize_metrics(["a", "b", "c"], [0, 0, 0], {"x": [1.0, 2.0]}, [MEAN])
    with pytest.raises(ValueError, match="equal length"):
        summarize_metrics(["a", "b"], [0], {"x": [1.0, 2.0]}, [MEAN])
    with pytest.raises(ValueError, match="confidence"):
        summarize_metrics(["a"], [0], {"x": [1.0]}, [MEAN], confidence=95)
    with pytest.raises(ValueError, match="n_resamples"):
        summarize_metrics(["a"], [0], {"x": [1.0]}, [MEAN], n_resamples=0)


def test_metrics_on_different_paths_match_their_single_metric_estimates():
    # A discrete metric (by type) next to a continuous one (by index): each equals what it would
    # be summarised alone.
    rng = np.random.default_rng(8)
    task_ids, seeds, x = _ragged(50, [2], rng)
    ok = (x > 0).astype(float)
    specs = [MetricSpec(name="ok"), MEAN]
    both = summarize_metrics(task_ids, seeds, {"ok": ok, "x": x}, specs, n_resamples=2000)
    for spec in specs:
        alone = summarize_metrics(task_ids, seeds, {"ok": ok, "x": x}, [spec], n_resamples=2000)
        assert both[spec.name] == alone[spec.name]


def test_cell_summary_has_the_cell_format():
    reasons = [TerminationReason.ANSWERED] * 3 + [TerminationReason.ENV_ERROR]
    cell = cell_summary(
        "oracle",
        "toolmaze",
        "default",
        ["a", "b", "c", "d"],
        [0, 0, 0, 0],
        {"x": [1.0, 1.0, 0.0, np.nan]},
        reasons,
        [MEAN],
        n_resamples=500,
    )
    assert set(cell) == {"model", "benchmark", "setting", "n", "terminations", "metrics", "variance", "pass_k"}
    assert (cell["model"], cell["benchmark"], cell["setting"], cell["n"]) == (
        "oracle",
        "toolmaze",
        "default",
        4,
    )
    assert cell["terminations"] == {"answered": 3, "env_error": 1}
    assert set(cell["metrics"]["x"]) == {"value", "ci_low", "ci_high"}
    assert cell["metrics"]["x"]["value"] == pytest.approx(2 / 3)
    counted = cell_summary("m", "b", "s", ["a"], [0], {"x": [1.0]}, {"answered": 1}, [MEAN])
    assert counted["terminations"] == {"answered": 1}
    assert isinstance(summarize_metrics(["a"], [0], {"x": [1.0]}, [MEAN])["x"], Estimate)


def test_a_ratio_metrics_bca_interval_agrees_with_scipy_on_resampled_sums():
    # scipy's BCa jackknifes observations: with one seed per task these are the tasks the cluster
    # bootstrap leaves out, so both read the same ratio of sums with the same bias and acceleration
    rng = np.random.default_rng(21)
    calls = rng.integers(1, 12, 50).astype(float)
    hit = rng.binomial(calls.astype(int), rng.beta(0.6, 2.0, 50)).astype(float)  # skewed per-task rates
    spec = MetricSpec(name="prec", kind="ratio", numerator="hit", denominator="calls")
    est = summarize_metrics([f"t{i}" for i in range(50)], [0] * 50, {"hit": hit, "calls": calls}, [spec], seed=3,
                            interval="bca")["prec"]
    ref = scipy.stats.bootstrap((hit, calls), lambda h, c, axis=-1: h.sum(axis=axis) / c.sum(axis=axis),
                                paired=True, vectorized=True, method="BCa", n_resamples=10_000,
                                rng=np.random.default_rng(3)).confidence_interval
    pct = summarize_metrics([f"t{i}" for i in range(50)], [0] * 50, {"hit": hit, "calls": calls}, [spec], seed=3,
                            interval="percentile")["prec"]
    se = (est.ci_high - est.ci_low) / 3.92
    assert est.ci_low == pytest.approx(ref.low, abs=0.1 * se)
    assert est.ci_high == pytest.approx(ref.high, abs=0.1 * se)
    # the correction is not nothing here: BCa moves both ends the same way, away from the percentile ones
    assert abs(est.ci_high - pct.ci_high) > 0.1 * se
