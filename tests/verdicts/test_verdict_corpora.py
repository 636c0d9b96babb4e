"""The text verdicts (APB refusal, ToolMaze failure acknowledgement, success claim) measured both ways on
labelled corpora: every tuning sentence is read right, and the held-out part (written after the
detectors were frozen) stays within the rates docs/verdicts.md reports.

Before (main): APB's raw-text refusal rule read 19.6% of non-refusals as refusals and missed 37.8% of
refusals on the tuning part; ToolMaze's acknowledgement rule accepted 21% of success claims and
rejected 19% of acknowledgements."""

from __future__ import annotations

import pytest

from tests.verdicts.corpus import CORPORA, load_all, rates, split
from toolsweep.benchmarks.apb.grader import states_refusal, text_refuses
from toolsweep.benchmarks.toolmaze.metrics import acknowledges_failure
from toolsweep.evaluator import verdicts

DETECTORS = {"refusal": text_refuses, "acknowledgement": acknowledges_failure, "success_claim": verdicts.claims_success}
# Held-out ceilings (false positive rate, false negative rate), as measured and reported in docs/verdicts.md.
# The target is 2% each way: the acknowledgement rule reaches it; the refusal and success-claim rules do
# not (4% / 8% on 50 + 50 fresh sentences each), which is why a configured judge decides them by default.
HELD_OUT_CEILING = {"refusal": (0.04, 0.08), "acknowledgement": (0.02, 0.02), "success_claim": (0.04, 0.08)}


@pytest.mark.parametrize("name", CORPORA)
def test_each_corpus_is_large_and_holds_both_classes_in_both_parts(name):
    assert len(load_all(name)) >= 200
    for held_out in (False, True):
        part = split(name, held_out)
        assert sum(e.label for e in part) >= 40 and sum(not e.label for e in part) >= 40
    tuning = {e.text for e in split(name, False)}
    assert not tuning & {e.text for e in split(name, True)}  # held-out sentences are new


@pytest.mark.parametrize("name", CORPORA)
def test_every_tuning_sentence_is_read_right(name):
    fpr, fnr, fp, fn = rates(split(name, False), DETECTORS[name])
    assert (fp, fn) == ([], []), (name, [e.text for e in fp], [e.text for e in fn])


@pytest.mark.parametrize("name", CORPORA)
def test_held_out_error_rates_stay_within_what_the_docs_report(name):
    fpr, fnr, fp, fn = rates(split(name, True), DETECTORS[name])
    ceiling_fp, ceiling_fn = HELD_OUT_CEILING[name]
    assert fpr <= ceiling_fp and fnr <= ceiling_fn, (name, fpr, fnr, [e.text for e in fp], [e.text for e in fn])


def test_the_acknowledgement_meets_the_two_percent_target_on_held_out_text():
    fpr, fnr, _, _ = rates(split("acknowledgement", True), acknowledges_failure)
    assert fpr <= 0.02 and fnr <= 0.02


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
