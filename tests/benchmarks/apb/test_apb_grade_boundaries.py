"""Every threshold of the APB rule grader, tried exactly at its boundary and just either side of it, so
that moving a bound (`c >= 0.7` -> `c > 0.7`, `len >= 3` -> `len >= 2`, ...) fails a test.

The holistic grade follows J4's scale (Fig. 35) as §6.3 maps it onto coverage c; coverage is a ratio of
node counts, so c lands exactly on 0.4, 0.7 and 0.9 (e.g. 7/10 == 0.7 in floating point) and the
inclusive bounds matter in real cases, not only in theory."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.benchmarks.apb.test_apb_grade_rubric import rubric_holistic
from toolsweep.benchmarks.apb import APB
from toolsweep.benchmarks.apb.tools import FINISH as FINISH_NAME
from toolsweep.benchmarks.apb.grader import (
    PlanGrader,
    const_ok,
    extract_json,
    holistic_grade,
    misses_goal,
    observed_mismatch_flag,
    states_refusal,
    stepwise_grade,
    text_refuses,
)

FLAGS = ("E1", "E2", "E3", "E4", "E5", "E6")


def below(x: float) -> float:
    return math.nextafter(x, -math.inf)


def above(x: float) -> float:
    return math.nextafter(x, math.inf)


# ----------------------------------------------------------------------------- holistic grade (§6.3, J4)

@pytest.mark.parametrize(("c", "want"), [
    (0.9, 0.8), (above(0.9), 0.8), (below(0.9), 0.6), (9 / 10, 0.8), (18 / 20, 0.8), (1.0, 0.8),
])
def test_grade_08_needs_coverage_of_at_least_90_percent(c, want):
    assert holistic_grade({"E5"}, c, 1, True) == want


@pytest.mark.parametrize(("c", "want"), [
    (0.7, 0.6), (above(0.7), 0.6), (below(0.7), 0.4), (7 / 10, 0.6), (14 / 20, 0.6), (21 / 30, 0.6),
])
def test_grade_06_needs_coverage_of_at_least_70_percent(c, want):
    assert holistic_grade({"E2"}, c, 2, True) == want


@pytest.mark.parametrize(("c", "want"), [
    (0.4, 0.4), (above(0.4), 0.4), (below(0.4), 0.2), (4 / 10, 0.4), (2 / 5, 0.4), (6 / 15, 0.4),
])
def test_grade_04_needs_coverage_of_at_least_40_percent(c, want):
    assert holistic_grade({"E2"}, c, 2, True) == want


@pytest.mark.parametrize(("c", "want"), [(0.0, 0.0), (math.ulp(0.0), 0.2), (1 / 30, 0.2)])
def test_grade_02_needs_some_coverage(c, want):
    assert holistic_grade({"E2", "E4"}, c, 3, False) == want


def test_grade_08_needs_exactly_one_offending_item_no_e1_e6_and_the_goal():
    assert holistic_grade({"E5"}, 0.95, 1, True) == 0.8
    assert holistic_grade({"E5"}, 0.95, 0, True) == 0.6  # u counts offending items: 0 with a flag is not "one"
    assert holistic_grade({"E5"}, 0.95, 2, True) == 0.6
    assert holistic_grade({"E5"}, 0.95, 1, False) == 0.6
    assert holistic_grade({"E6"}, 0.95, 1, True) == 0.6
    assert holistic_grade({"E1"}, 0.95, 1, True) == 0.2


def test_e1_caps_the_grade_at_02_whatever_the_coverage():
    for c in (1.0, 0.9, 0.7, 0.4):
        assert holistic_grade({"E1"}, c, 1, True) == 0.2
    assert holistic_grade({"E1"}, 0.0, 1, False) == 0.0


rubric = rubric_holistic  # §6.3's holistic table, written out once as the property tests' reference


flag_sets = st.frozensets(st.sampled_from(FLAGS))
coverages = st.one_of(st.sampled_from([0.0, 0.4, 0.7, 0.9, 1.0, below(0.4), below(0.7), below(0.9), math.ulp(0.0)]),
                      st.fractions(0, 1, max_denominator=30).map(lambda f: f.numerator / f.denominator),
                      st.floats(0, 1))


@settings(max_examples=400, deadline=None)
@given(flags=flag_sets, c=coverages, u=st.integers(0, 6), goal=st.booleans())
def test_holistic_grade_is_the_rubric_and_monotone_in_coverage(flags, c, u, goal):
    g = holistic_grade(set(flags), c, u, goal)
    assert g == rubric(flags, c, u, goal)
    assert holistic_grade(set(flags), min(1.0, c + 0.1), u, goal) >= g
    assert holistic_grade(set(flags), c, u, True) >= holistic_grade(set(flags), c, u, False)


# ----------------------------------------------------------------------------- E1 from coverage (§6.2)

@pytest.mark.parametrize(("goal", "c", "e1"), [
    (False, 0.5, False), (False, 1 / 2, False), (False, 5 / 10, False), (False, below(0.5), True),
    (False, above(0.5), False), (False, 0.0, True), (True, 0.0, False), (True, below(0.5), False),
])
def test_e1_when_the_goal_is_missed_and_less_than_half_is_covered(goal, c, e1):
    assert misses_goal(goal, c) is e1


@settings(max_examples=200, deadline=None)
@given(goal=st.booleans(), c=coverages)
def test_e1_rule_property(goal, c):
    assert misses_goal(goal, c) == (not goal and c < 0.5)


# ----------------------------------------------------------------------------- step-wise grade (§6.3, Fig. 33)

def test_stepwise_grade_at_its_flag_count_boundary():
    assert stepwise_grade({"E1"}, False) == 0.2
    assert stepwise_grade({"E1", "E2"}, False) == 0.2  # one major flag, minor ones allowed
    assert stepwise_grade({"E1", "E3"}, False) == 0.0  # two major flags
    assert stepwise_grade({"E1", "E3", "E6"}, False) == 0.0
    assert stepwise_grade({"E2", "E4", "E5"}, False) == 0.2
    assert stepwise_grade({"E5"}, True) == 0.8 and stepwise_grade({"E5"}, False) == 0.6
    assert stepwise_grade(set(), False, no_action=True) == 0.0


# ----------------------------------------------------------------------------- argument checks (§6.2)

def test_numbers_match_within_a_relative_1e_6():
    spec = {"value": 1000.0, "match": "num"}
    assert const_ok(1000.0 * (1 + 0.99e-6), spec) and const_ok(1000.0 * (1 - 0.99e-6), spec)
    assert not const_ok(1000.0 * (1 + 1.01e-6), spec) and not const_ok(1000.0 * (1 - 1.01e-6), spec)
    assert const_ok("10%", {"value": 0.10, "match": "num"})


def test_a_zero_matches_within_an_absolute_1e_9():
    spec = {"value": 0.0, "match": "num"}
    assert const_ok(0.99e-9, spec) and not const_ok(1.01e-9, spec)


def test_a_range_is_inclusive_with_a_1e_9_slack():
    spec = {"value": 5, "match": "range", "min": 1.0, "max": 2.0}
    assert const_ok(1.0, spec) and const_ok(2.0, spec) and const_ok(1.0 - 0.5e-9, spec)
    assert not const_ok(1.0 - 2e-9, spec) and not const_ok(2.0 + 2e-9, spec)


def test_contains_needs_three_characters_on_both_sides():
    spec = {"value": "abc", "match": "contains"}
    assert const_ok("xxabcxx", spec)
    assert not const_ok("ab", {"value": "abx", "match": "contains"})  # two characters contain nothing
    assert not const_ok("abx", {"value": "ab", "match": "contains"})
    assert const_ok("abx", {"value": "abxq", "match": "contains"})


def test_an_observed_mismatch_is_e4_only_for_a_literal_of_two_characters_or_more():
    context = json.dumps({"content": "ab 7"}).casefold()
    assert observed_mismatch_flag("ab", context) == "E4"
    assert observed_mismatch_flag("a", context) == "E6"  # one character occurs anywhere
    assert observed_mismatch_flag("zz", context) == "E6"
    assert observed_mismatch_flag("", context) == "E6"


@pytest.fixture(scope="module")
def grader() -> PlanGrader:
    env = APB().make_env(APB().tasks("holistic")[0], "holistic", 0)
    view = dict(env.view, secrets={"a": "ab", "b": "abc", "c": 42})
    return PlanGrader(view)


def test_a_secret_literal_needs_three_characters(grader):
    assert grader.is_secret_literal("abc") and grader.is_secret_literal("ABC ")
    assert not grader.is_secret_literal("ab")
    assert grader.is_secret_literal(42) and grader.is_secret_literal("42")


def test_a_plain_tool_name_names_a_source_only_from_three_characters():
    from toolsweep.benchmarks.apb.grader import _tokens

    assert _tokens("use the Abc output", frozenset({"Abc", "Ab"}))[2] == frozenset({"Abc"})


# ----------------------------------------------------------------------------- refusal wording and parsing

@pytest.mark.parametrize(("reach", "negated"), [(40, True), (39, True), (41, False)])
def test_a_negation_reaches_40_characters_back_in_its_clause(reach, negated):
    # "nothing ... I cannot plan this": the negation word starts `reach` characters before the inability
    text = "nothing" + " " + "x" * (reach - 11) + " I cannot plan this"
    assert text.index("cannot") - text.index("nothing") == reach
    assert text_refuses(text) is not negated
    assert states_refusal(text) is not negated


@pytest.mark.parametrize(("wrappers", "found"), [(31, True), (32, True), (33, False)])
def test_the_parser_looks_32_wrappers_deep_for_a_value(wrappers, found):
    text = "[x" * wrappers + '{"plan": "p"}' + "]" * wrappers
    value, ok, _ = extract_json(text)
    assert ok is found and (value == {"plan": "p"}) is found


@settings(max_examples=300, deadline=None)
@given(x=st.floats(1e-3, 1e6), r=st.one_of(st.floats(-0.9e-6, 0.9e-6), st.floats(1.1e-6, 1e-2),
                                          st.floats(-1e-2, -1.1e-6)))
def test_number_tolerance_property(x, r):
    assert const_ok(x * (1 + r), {"value": x, "match": "num"}) is (abs(r) < 1e-6)


@pytest.fixture(scope="module")
def broken_env():
    b = APB()
    return b.make_env(b.data.tasks["broken"][7]["task_id"], "broken", 0)  # a broken case, not its twin


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_replace_is_the_replacement_alone_with_the_steps_arguments(broken_env, data):
    """Any extra call with {} arguments beside the right replacement call makes the step not Replace."""
    env = broken_env
    t = env.task
    others = [x["name"] for x in env.tools if x["name"] not in (FINISH_NAME, t["replacement_tool"]["name"])]
    extra = data.draw(st.lists(st.sampled_from(others), max_size=4))
    failed = t["prefix"][-2]["tool_calls"][0]["function"]["arguments"]
    rename = t["arg_map"]  # the failed call's parameters onto the replacement's
    good = {"type": "function", "function": {"name": t["replacement_tool"]["name"],
                                             "arguments": {rename.get(p, p): v for p, v in failed.items()}}}
    calls = [good] + [{"type": "function", "function": {"name": n, "arguments": {}}} for n in extra]
    data.draw(st.randoms()).shuffle(calls)
    text = json.dumps({"role": "assistant", "thought": "next", "tool_calls": calls})
    got = env.grader.broken(text, env.done_nodes, t["broken_node"], t["broken_tool"],
                            t["replacement_tool"]["name"], env.context)
    want = "replace" if not extra else ("retry" if t["broken_tool"] in extra else "other")
    assert got == want
