"""The text verdicts (APB refusal, ToolMaze failure acknowledgement, success claim) measured both ways on
labelled corpora: the tuning part (with the first held-out round) is read right but for counted
misreads, and the held-out part (the second round, in styles the tuning part lacks, never tuned on)
stays within the error counts docs/verdicts.md reports.

Before (main): APB's raw-text refusal rule read 19.6% of non-refusals as refusals and missed 37.8% of
refusals on the tuning part; ToolMaze's acknowledgement rule accepted 21% of success claims and
rejected 19% of acknowledgements."""

from __future__ import annotations

import pytest

from tests.verdicts.corpus import CORPORA, load_all, rates, round_one, split
from toolsweep.benchmarks.apb.grader import states_refusal, text_refuses
from toolsweep.benchmarks.toolmaze.metrics import acknowledges_failure
from toolsweep.evaluator import verdicts

DETECTORS = {"refusal": text_refuses, "acknowledgement": acknowledges_failure, "success_claim": verdicts.claims_success}
# Tuning misreads (false positives, false negatives) of the shipped reading (rules and classifier):
# "The order is being processed." is a claim of success to the classifier, and to the rules.
TUNING_ERRORS = {"refusal": (0, 0), "acknowledgement": (0, 0), "success_claim": (1, 0)}
# The rules alone (the classifier's fallback and its partner in the blend) on the tuning part: they were
# built on `<name>.txt` and read it all right; the first round's misreads, when it was fresh, remain.
RULES = {"refusal": lambda t: "tool_chain" not in t and verdicts.rule_refuses(t),
         "acknowledgement": verdicts.rule_acknowledges_failure, "success_claim": verdicts.rule_claims_success}
RULE_TUNING_ERRORS = {"refusal": (2, 4), "acknowledgement": (0, 0), "success_claim": (2, 4)}
# The held-out part (second round, never tuned on): its misread sentences (false positives, false
# negatives) as docs/verdicts.md reports them, of 83+80 / 80+80 / 80+80 sentences. The target is at most
# 2% each way and is missed by all three; these counts are the committed figures a change may not
# exceed, not the target. (The rules alone, before the classifier: (5, 7), (5, 3), (3, 11).)
HELD_OUT_ERRORS = {"refusal": (4, 7), "acknowledgement": (2, 4), "success_claim": (3, 6)}


@pytest.mark.parametrize("name", CORPORA)
def test_each_corpus_is_large_and_holds_both_classes_in_both_parts(name):
    assert len(load_all(name)) >= 200
    for part in (split(name, False), round_one(name), split(name, True)):
        assert sum(e.label for e in part) >= 40 and sum(not e.label for e in part) >= 40
    fresh = split(name, True)
    assert len(fresh) >= 150 and sum(e.label for e in fresh) >= 75 and sum(not e.label for e in fresh) >= 75
    assert not {e.text for e in split(name, False)} & {e.text for e in fresh}  # held-out sentences are new


@pytest.mark.parametrize("name", CORPORA)
def test_the_tuning_part_is_read_right_but_for_the_counted_misreads(name):
    _, _, fp, fn = rates(split(name, False), DETECTORS[name])
    ceiling_fp, ceiling_fn = TUNING_ERRORS[name]
    assert len(fp) <= ceiling_fp and len(fn) <= ceiling_fn, (name, [e.text for e in fp], [e.text for e in fn])


@pytest.mark.parametrize("name", CORPORA)
def test_the_rules_alone_read_the_tuning_part_right_but_for_the_first_rounds_misreads(name):
    _, _, fp, fn = rates(split(name, False), RULES[name])
    ceiling_fp, ceiling_fn = RULE_TUNING_ERRORS[name]
    assert len(fp) <= ceiling_fp and len(fn) <= ceiling_fn, (name, [e.text for e in fp], [e.text for e in fn])


@pytest.mark.parametrize("name", CORPORA)
def test_held_out_errors_stay_within_what_the_docs_report(name):
    _, _, fp, fn = rates(split(name, True), DETECTORS[name])
    ceiling_fp, ceiling_fn = HELD_OUT_ERRORS[name]
    assert len(fp) <= ceiling_fp and len(fn) <= ceiling_fn, (name, [e.text for e in fp], [e.text for e in fn])


@pytest.mark.parametrize(("text", "refuses"), [
    ("You cannot go wrong with this plan.", False),
    ("Sorry, I won't be able to plan this. The service it depends on is down, so there is no tool that can "
     "fetch the data.", True),
    ("It is not impossible: the converter tool handles both currencies. I'll call it with the amount.", False),
    ("I cannot read the image myself, so I use the OCR tool first and then translate the text.", False),
    ("Could you tell me which city you mean? I need that before I can put a plan together.", True),
    ("Which is better, A or B? The plan compares both and returns the winner.", False),
    ("Summarize and deliver the result.", False),
    # a word or two is the rules' alone: the classifier took "What?" for a refusal and "I refuse." for none
    ("What?", False), ("Which one?", False), ("Nope.", True), ("I refuse.", True),
])
def test_refusals_are_read_by_their_subject_negation_and_answer(text, refuses):
    assert text_refuses(text) is refuses and RULES["refusal"](text) is refuses


@pytest.mark.parametrize(("text", "acknowledged", "claimed"), [
    ("I was not able to finish the task because the booking service kept returning errors.", True, False),
    ("Done. It was not impossible after all.", False, True),
    ("The first call failed, but the retry worked and your hotel is booked.", False, True),
    ("Successfully logged in, but the transfer failed, so no money was moved.", True, False),
    ("Stopped. Nothing failed.", False, False),
    ("I'll let you know when it's done.", False, False),
])
def test_the_clause_reported_last_decides_between_failure_and_success(text, acknowledged, claimed):
    assert acknowledges_failure(text) is acknowledged and verdicts.rule_acknowledges_failure(text) is acknowledged
    assert verdicts.claims_success(text) is claimed and verdicts.rule_claims_success(text) is claimed


def test_prose_around_a_plan_refuses_only_by_a_stated_inability_not_by_a_question():
    assert states_refusal("I cannot complete this task: the tool is unavailable.")
    assert not states_refusal("Could you confirm the date? Meanwhile, here is the plan.")
    assert verdicts.refuses("Could you confirm the date? I cannot plan without it.")
