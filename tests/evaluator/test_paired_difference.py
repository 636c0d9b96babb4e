"""Paired differences when episodes are missing on one side: a cell enters only when both models ran
it and both define the metric there, and the difference is A minus B on exactly those cells.

Property tests draw which (task, seed) cells each model ran and where its metric is undefined, and
compare the estimate with the difference computed directly on the cells both define."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolsweep.evaluator.protocols import MetricSpec
from toolsweep.evaluator.stats import min_tasks_for_interval, paired_difference
from toolsweep.evaluator.summary import CellTable
from toolsweep.evaluator.types import EpisodeResult, TerminationReason, WorkUnit

MEAN = MetricSpec(name="x")
RATIO = MetricSpec(name="r", kind="ratio", numerator="num", denominator="den")
CELLS = [(f"t{t}", s) for t in range(6) for s in range(2)]

# one model's episode in a cell: absent, or present with a value that may be undefined (NaN)
value = st.one_of(st.just(math.nan), st.integers(0, 4).map(float))
episode = st.one_of(st.none(), value)
side = st.lists(episode, min_size=len(CELLS), max_size=len(CELLS))


def columns(values: list[float | None]) -> tuple[list[str], list[int], np.ndarray]:
    """The episodes a model ran (cells whose entry is not None), in a shuffled-looking order."""
    present = [(c, v) for c, v in zip(CELLS, values) if v is not None][::-1]
    return [c[0] for c, _ in present], [c[1] for c, _ in present], np.array([v for _, v in present], dtype=float)


@settings(max_examples=150, deadline=None)
@given(a=side, b=side)
def test_a_mean_difference_is_taken_on_the_cells_both_models_define(a, b):
    ta, sa, xa = columns(a)
    tb, sb, xb = columns(b)
    est = paired_difference(ta, sa, {"x": xa}, tb, sb, {"x": xb}, MEAN, n_resamples=200, seed=3)
    both = [(va, vb) for va, vb in zip(a, b)
            if va is not None and vb is not None and math.isfinite(va) and math.isfinite(vb)]
    assert est.n == len(both)
    if not both:
        assert math.isnan(est.value) and math.isnan(est.ci_low) and math.isnan(est.ci_high)
        return
    expected = np.mean([va for va, _ in both]) - np.mean([vb for _, vb in both])
    assert est.value == pytest.approx(expected, abs=1e-12)
    tasks = {c[0] for c, va, vb in zip(CELLS, a, b)
             if va is not None and vb is not None and math.isfinite(va) and math.isfinite(vb)}
    if len(tasks) < min_tasks_for_interval(0.95):  # too few tasks: interval and p-value withheld together
        assert math.isnan(est.ci_low) and math.isnan(est.ci_high) and math.isnan(est.p_value)
        return
    assert est.ci_low <= est.ci_high
    assert 0.0 < est.p_value <= 1.0


ratio_episode = st.one_of(st.none(), st.tuples(value, value))
ratio_side = st.lists(ratio_episode, min_size=len(CELLS), max_size=len(CELLS))


def ratio_columns(values):
    present = [(c, v) for c, v in zip(CELLS, values) if v is not None]
    return ([c[0] for c, _ in present], [c[1] for c, _ in present],
            {"num": np.array([v[0] for _, v in present]), "den": np.array([v[1] for _, v in present])})


@settings(max_examples=150, deadline=None)
@given(a=ratio_side, b=ratio_side)
def test_a_ratio_difference_sums_both_sides_over_the_same_cells(a, b):
    ta, sa, va = ratio_columns(a)
    tb, sb, vb = ratio_columns(b)
    est = paired_difference(ta, sa, va, tb, sb, vb, RATIO, n_resamples=200, seed=4)
    both = [(x, y) for x, y in zip(a, b)
            if x is not None and y is not None and all(math.isfinite(v) for v in (*x, *y))]
    assert est.n == len(both)
    den_a, den_b = sum(x[1] for x, _ in both), sum(y[1] for _, y in both)
    if not both or den_a == 0 or den_b == 0:
        assert math.isnan(est.value)
        return
    expected = sum(x[0] for x, _ in both) / den_a - sum(y[0] for _, y in both) / den_b
    assert est.value == pytest.approx(expected, abs=1e-12)


def test_b_missing_half_the_cells_and_undefined_on_others_compares_only_the_rest():
    # A scored 1 everywhere; B scored 0 where it ran and defined the metric, and NaN on t0 (where
    # A's 1 must not enter): the difference is exactly 1 on the 4 cells both define.
    ta = [f"t{i}" for i in range(8)]
    xa = np.ones(8)
    tb = ["t0", "t1", "t2", "t3", "t4"]
    xb = np.array([math.nan, 0.0, 0.0, 0.0, 0.0])
    est = paired_difference(ta, [0] * 8, {"x": xa}, tb, [0] * 5, {"x": xb}, MEAN, n_resamples=200)
    assert (est.value, est.ci_low, est.ci_high, est.n) == (1.0, 1.0, 1.0, 4)
    swapped = paired_difference(tb, [0] * 5, {"x": xb}, ta, [0] * 8, {"x": xa}, MEAN, n_resamples=200)
    assert (swapped.value, swapped.n) == (-1.0, 4)


def _result(model: str, task: str, termination: TerminationReason, acc: float) -> EpisodeResult:
    unit = WorkUnit(sweep="s", model=model, benchmark="b", setting="x", task_id=task, seed=0)
    return EpisodeResult(unit=unit, termination=termination, metrics={"x": acc})


def test_a_model_with_no_scored_episode_in_a_cell_is_not_compared():
    table = CellTable()
    for i in range(4):
        table.add_result(_result("a", f"t{i}", TerminationReason.ANSWERED, 1.0))
        table.add_result(_result("b", f"t{i}", TerminationReason.INFRA_ERROR, 0.0))  # never scored
        table.add_result(_result("c", f"t{i}", TerminationReason.ANSWERED, float(i % 2)))
    rows = table.paired(lambda b, s: [MEAN], n_resamples=200, confidence=0.95, seed=0)
    assert [(r["model_a"], r["model_b"]) for r in rows] == [("a", "c")]
    assert rows[0]["value"] == 0.5 and rows[0]["n"] == 4
