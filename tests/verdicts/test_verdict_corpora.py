"""The text verdicts (APB refusal, ToolMaze failure acknowledgement, success claim) measured both ways on
labelled corpora: every tuning sentence is read right, and the held-out parts stay within the error
counts docs/verdicts.md reports (round 1, written after the detectors were frozen and read since; round 2,
written later in styles the other parts lack and never tuned on).

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
# Round 1 held-out ceilings (false positive rate, false negative rate), measured when it was fresh.
ROUND_ONE_CEILING = {"refusal": (0.04, 0.08), "acknowledgement": (0.02, 0.02), "success_claim": (0.04, 0.08)}
# Round 2 held-out (the unseen part): the misread sentences counted as docs/verdicts.md reports them,
# (false positives, false negatives). The target is at most 2% each way; these counts are the committed
# figures a change may not exceed, not the target.
HELD_OUT_ERRORS = {"refusal": (5, 7), "acknowledgement": (6, 4), "success_claim": (3, 11)}

@pytest.mark.parametrize("name", CORPORA)
def test_each_corpus_is_large_and_holds_both_classes_in_both_parts(name):
    assert len(load_all(name)) >= 200
    for part in (split(name, False), round_one(name), split(name, True)):
        assert sum(e.label for e in part) >= 40 and sum(not e.label for e in part) >= 40
    fresh = split(name, True)
    assert len(fresh) >= 150 and sum(e.label for e in fresh) >= 75 and sum(not e.label for e in fresh) >= 75
    seen = {e.text for e in split(name, False) + round_one(name)}
    assert not seen & {e.text for e in fresh}  # held-out sentences are new


@pytest.mark.parametrize("name", CORPORA)
def test_every_tuning_sentence_is_read_right(name):
    fpr, fnr, fp, fn = rates(split(name, False), DETECTORS[name])
    assert (fp, fn) == ([], []), (name, [e.text for e in fp], [e.text for e in fn])


@pytest.mark.parametrize("name", CORPORA)
def test_held_out_errors_stay_within_what_the_docs_report(name):
    _, _, fp, fn = rates(split(name, True), DETECTORS[name])
    ceiling_fp, ceiling_fn = HELD_OUT_ERRORS[name]
    assert len(fp) <= ceiling_fp and len(fn) <= ceiling_fn, (name, [e.text for e in fp], [e.text for e in fn])


@pytest.mark.parametrize("name", CORPORA)
def test_round_one_error_rates_stay_within_what_was_measured_fresh(name):
    fpr, fnr, fp, fn = rates(round_one(name), DETECTORS[name])
    ceiling_fp, ceiling_fn = ROUND_ONE_CEILING[name]
    assert fpr <= ceiling_fp and fnr <= ceiling_fn, (name, fpr, fnr, [e.text for e in fp], [e.text for e in fn])


@pytest.mark.parametrize(("text", "refuses"), [
    ("You cannot go wrong with this plan.", False),
    ("Sorry, I won't be able to plan this. The service it depends on is down, so there is no tool that can "
     "fetch the data.", True),
    ("It is not impossible: the converter tool handles both currencies. I'll call it with the amount.", False),
    ("I cannot read the image myself, so I use the OCR tool first and then translate the text.", False),
    ("Could you tell me which city you mean? I need that before I can put a plan together.", True),
    ("Which is better, A or B? The plan compares both and returns the winner.", False),
    ("Summarize and deliver the result.", False),
])
def test_refusals_are_read_by_their_subject_negation_and_answer(text, refuses):
    assert text_refuses(text) is refuses


@pytest.mark.parametrize(("text", "acknowledged", "claimed"), [
    ("I was not able to finish the task because the booking service kept returning errors.", True, False),
    ("Done. It was not impossible after all.", False, True),
    ("The first call failed, but the retry worked and your hotel is booked.", False, True),
    ("Successfully logged in, but the transfer failed, so no money was moved.", True, False),
    ("Stopped. Nothing failed.", False, False),
    ("I'll let you know when it's done.", False, False),
])
def test_the_clause_reported_last_decides_between_failure_and_success(text, acknowledged, claimed):
    assert acknowledges_failure(text) is acknowledged
    assert verdicts.claims_success(text) is claimed


def test_prose_around_a_plan_refuses_only_by_a_stated_inability_not_by_a_question():
    assert states_refusal("I cannot complete this task: the tool is unavailable.")
    assert not states_refusal("Could you confirm the date? Meanwhile, here is the plan.")
    assert verdicts.refuses("Could you confirm the date? I cannot plan without it.")
