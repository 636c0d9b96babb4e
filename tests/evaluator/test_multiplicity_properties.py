"""Holm and Benjamini-Hochberg against their textbook definitions, on random p-value vectors that put
values exactly on, just under and just over each threshold, with ties: the order in which a procedure
steps (Holm stops at its first non-rejection; BH steps up past non-rejections) only shows there."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from toolsweep.evaluator.design import benjamini_hochberg, holm

ALPHAS = (0.05, 0.1, 0.01)


def holm_by_definition(ps: list[float], alpha: float) -> list[bool]:
    """Holm (1979): with p(1) <= ... <= p(m), let k be the first j with p(j) > alpha / (m - j + 1);
    reject H(1) .. H(k-1) and nothing after, whatever the later p-values."""
    m = len(ps)
    ordered = sorted(ps)
    k = next((j for j in range(m) if ordered[j] > alpha / (m - j)), m)
    if k == 0:
        return [False] * m
    last = ordered[k - 1]  # ties with a rejected p-value before the stop are rejected with it
    return [p <= last for p in ps]


def bh_by_definition(ps: list[float], alpha: float) -> list[bool]:
    """Benjamini-Hochberg (1995), step-up: k = the largest j with p(j) <= j alpha / m; reject every
    hypothesis with p <= p(k), including those above a threshold they miss on their own."""
    m = len(ps)
    ordered = sorted(ps)
    qualifying = [j for j in range(1, m + 1) if ordered[j - 1] <= alpha * j / m]
    if not qualifying:
        return [False] * m
    return [p <= ordered[max(qualifying) - 1] for p in ps]


@st.composite
def p_vectors(draw) -> tuple[list[float], float]:
    """p-values drawn from the thresholds of both procedures for this m (on, just below, just above),
    from plain uniform values, and repeated (ties)."""
    alpha = draw(st.sampled_from(ALPHAS))
    m = draw(st.integers(1, 8))
    thresholds = [alpha * j / m for j in range(1, m + 1)] + [alpha / (m - j) for j in range(m)]
    near = [v for t in thresholds for v in (t, math.nextafter(t, 0.0), math.nextafter(t, 1.0), t * 0.9, t * 1.1)]
    pool = st.one_of(st.sampled_from(near), st.floats(0.0, 1.0), st.sampled_from([0.0, 1.0]))
    ps = draw(st.lists(pool, min_size=m, max_size=m))
    if m > 1 and draw(st.booleans()):  # a tie: one value copied onto another position
        i, j = draw(st.integers(0, m - 1)), draw(st.integers(0, m - 1))
        ps[j] = ps[i]
    return [min(1.0, p) for p in ps], alpha


@settings(max_examples=300, deadline=None)
@given(p_vectors())
def test_holm_is_the_step_down_procedure(case):
    ps, alpha = case
    assert holm(ps, alpha) == holm_by_definition(ps, alpha), (ps, alpha)


@settings(max_examples=300, deadline=None)
@given(p_vectors())
def test_benjamini_hochberg_is_the_step_up_procedure(case):
    ps, alpha = case
    assert benjamini_hochberg(ps, alpha) == bh_by_definition(ps, alpha), (ps, alpha)


@settings(max_examples=300, deadline=None)
@given(p_vectors(), st.randoms(use_true_random=False))
def test_both_procedures_follow_their_hypotheses_through_any_order(case, rnd):
    ps, alpha = case
    order = list(range(len(ps)))
    rnd.shuffle(order)
    shuffled = [ps[i] for i in order]
    for procedure in (holm, benjamini_hochberg):
        assert procedure(shuffled, alpha) == [procedure(ps, alpha)[i] for i in order]


@settings(max_examples=300, deadline=None)
@given(p_vectors())
def test_holm_never_rejects_more_than_bh_and_each_rejection_is_a_smallest_p(case):
    ps, alpha = case
    h, b = holm(ps, alpha), benjamini_hochberg(ps, alpha)
    assert all(b_i or not h_i for h_i, b_i in zip(h, b))  # BH's rule is weaker than Holm's
    for rejected in (h, b):
        kept = [p for p, r in zip(ps, rejected) if not r]
        assert not kept or all(p < min(kept) for p, r in zip(ps, rejected) if r)


def test_the_order_of_the_steps_decides_these_vectors():
    # Holm stops at its first non-rejection: 0.03 > 0.05 / 2, so 0.04 (<= 0.05 / 1) is not rejected either
    assert holm([0.03, 0.04]) == [False, False]
    assert holm([0.04, 0.03]) == [False, False]
    # BH steps up: 0.045 <= 3 x 0.05 / 3 carries 0.04 (> 2 x 0.05 / 3) with it
    assert benjamini_hochberg([0.01, 0.04, 0.045]) == [True, True, True]
    assert benjamini_hochberg([0.045, 0.01, 0.04]) == [True, True, True]
    assert benjamini_hochberg([0.01, 0.04, 0.06]) == [True, False, False]
