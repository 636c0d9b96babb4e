"""APB's plan grades (spec §6.3, the paper's Figs. 33 and 35) tried exactly at and around every
boundary: the rubric's words, written out here as the list of rules they are, against the grader's
functions for every flag set, offending-item count, goal state and a coverage drawn at, just under and
just over each threshold (and anywhere in [0, 1])."""

from __future__ import annotations

import itertools
import math

from hypothesis import example, given, settings
from hypothesis import strategies as st

from toolsweep.benchmarks.apb.grader import holistic_grade, stepwise_grade

FLAGS = ("E1", "E2", "E3", "E4", "E5", "E6")
FLAG_SETS = [frozenset(s) for r in range(len(FLAGS) + 1) for s in itertools.combinations(FLAGS, r)]
THRESHOLDS = (0.0, 0.4, 0.7, 0.9)


def rubric_holistic(flags: frozenset[str], c: float, u: int, goal: bool) -> float:
    """Fig. 35 as §6.3 words it, first rule that holds."""
    if not flags:
        return 1.0
    if "E1" not in flags and "E6" not in flags and u == 1 and c >= 0.9 and goal:
        return 0.8
    if "E1" not in flags and c >= 0.7:
        return 0.6
    if "E1" not in flags and c >= 0.4:
        return 0.4
    if c > 0:
        return 0.2
    return 0.0


def near(t: float) -> st.SearchStrategy[float]:
    """A threshold itself, the floats on either side of it, and points a little further off."""
    return st.sampled_from([t, math.nextafter(t, -1), math.nextafter(t, 2), t - 1e-6, t + 1e-6, t - 0.01, t + 0.01])


coverage = st.one_of(*[near(t) for t in THRESHOLDS], st.floats(0.0, 1.0)).map(lambda c: min(max(c, 0.0), 1.0))


@settings(max_examples=600, deadline=None)
@given(flags=st.sampled_from(FLAG_SETS), c=coverage, u=st.integers(0, 3), goal=st.booleans())
@example(flags=frozenset({"E2"}), c=0.7, u=1, goal=True)
@example(flags=frozenset({"E2"}), c=0.9, u=1, goal=True)
@example(flags=frozenset({"E2"}), c=0.4, u=2, goal=False)
@example(flags=frozenset({"E1"}), c=0.0, u=1, goal=False)
def test_holistic_grade_follows_the_rubric_at_and_around_every_threshold(flags, c, u, goal):
    assert holistic_grade(set(flags), c, u, goal) == rubric_holistic(flags, c, u, goal)


def test_holistic_grade_at_each_threshold_is_the_higher_grade():
    # "c >= 0.7" includes 0.7 itself (the paper's "at least 70% of the core logic"), and so on.
    e2 = {"E2"}
    assert [holistic_grade(e2, c, 1, True) for c in (0.9, math.nextafter(0.9, 0))] == [0.8, 0.6]
    assert [holistic_grade(e2, c, 2, True) for c in (0.7, math.nextafter(0.7, 0))] == [0.6, 0.4]
    assert [holistic_grade(e2, c, 2, True) for c in (0.4, math.nextafter(0.4, 0))] == [0.4, 0.2]
    assert [holistic_grade(e2, c, 2, True) for c in (math.nextafter(0.0, 1), 0.0)] == [0.2, 0.0]
    assert holistic_grade({"E2"}, 0.7, 2, True) == 0.6  # 7 of 10 required nodes covered
    assert holistic_grade({"E2"}, 7 / 10, 2, True) == 0.6


def test_holistic_0_8_needs_exactly_one_offending_item_no_e1_or_e6_and_the_goal():
    assert holistic_grade({"E5"}, 0.95, 1, True) == 0.8
    assert holistic_grade({"E5"}, 0.95, 0, True) == 0.6
    assert holistic_grade({"E5"}, 0.95, 2, True) == 0.6
    assert holistic_grade({"E5"}, 0.95, 1, False) == 0.6
    assert holistic_grade({"E5", "E6"}, 0.95, 1, True) == 0.6
    assert holistic_grade({"E1"}, 0.95, 1, True) == 0.2


def rubric_stepwise(flags: frozenset[str], trivial_only: bool, no_action: bool) -> float:
    """Fig. 33 as §6.3 words it."""
    if no_action:
        return 0.0
    if not flags:
        return 1.0
    if flags == {"E5"} and trivial_only:
        return 0.8
    if flags in ({"E4"}, {"E5"}):
        return 0.6
    if flags in ({"E4", "E5"}, {"E2"}):
        return 0.4
    if len(flags & {"E1", "E3", "E6"}) >= 2:
        return 0.0
    return 0.2


def test_stepwise_grade_follows_the_rubric_for_every_flag_set():
    for flags in FLAG_SETS:
        for trivial, no_action in itertools.product((False, True), repeat=2):
            assert stepwise_grade(set(flags), trivial, no_action) == rubric_stepwise(flags, trivial, no_action), flags
    assert stepwise_grade({"E1", "E3"}, False) == 0.0  # two majors
    assert stepwise_grade({"E1", "E2", "E4"}, False) == 0.2  # one major, minor flags allowed
    assert stepwise_grade({"E5"}, True) == 0.8 and stepwise_grade({"E5"}, False) == 0.6
