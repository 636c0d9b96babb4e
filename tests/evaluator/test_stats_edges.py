"""The bootstrap's options at their bounds: a confidence level is a probability strictly between 0 and
1 (0 and 1 would be intervals of nothing and of everything) for every entry point."""

from __future__ import annotations

import math

import numpy as np
import pytest

from toolsweep.evaluator.protocols import MetricSpec
from toolsweep.evaluator.stats import Stratum, composite_estimate, paired_difference, summarize_metrics

MEAN = MetricSpec(name="x")
TASKS = [f"t{i}" for i in range(8)]
X = {"x": np.array([0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0])}


def entry_points(confidence: float):
    yield lambda: summarize_metrics(TASKS, [0] * 8, X, [MEAN], n_resamples=50, confidence=confidence)
    yield lambda: paired_difference(TASKS, [0] * 8, X, TASKS, [0] * 8, X, MEAN, n_resamples=50, confidence=confidence)
    yield lambda: composite_estimate([Stratum(TASKS, list(X["x"]))], lambda m: m[0], n_resamples=50,
                                     confidence=confidence)


@pytest.mark.parametrize("confidence", [0.0, 1.0, -0.1, 1.5, math.nan])
def test_a_confidence_outside_the_open_unit_interval_is_refused(confidence):
    for run in entry_points(confidence):
        with pytest.raises(ValueError, match="confidence must lie strictly between 0 and 1"):
            run()


@pytest.mark.parametrize("confidence", [1e-9, 0.5, 0.95, 1 - 1e-9])
def test_a_confidence_inside_it_is_accepted(confidence):
    for run in entry_points(confidence):
        run()


@pytest.mark.parametrize("n", [0, -1, 2.5])
def test_a_resample_count_must_be_a_positive_integer(n):
    with pytest.raises(ValueError, match="n_resamples must be a positive integer"):
        summarize_metrics(TASKS, [0] * 8, X, [MEAN], n_resamples=n)


def test_a_composite_leaves_out_the_resamples_that_draw_no_defined_episode():
    """Three of four tasks have no defined value: a resample that draws none of the fourth has no mean,
    and is left out of the percentile interval rather than making it undefined."""

    stratum = Stratum(keys=["t0", "t1", "t2", "t3"], values=[0.5, math.nan, math.nan, math.nan])
    est = composite_estimate([stratum], lambda means: means[0], n_resamples=500)
    assert (est.value, est.ci_low, est.ci_high) == (0.5, 0.5, 0.5)
