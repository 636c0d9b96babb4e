"""APB refusal and parsing read as an adversary would: one refusal definition across settings, a parser
that neither recurses nor goes quadratic on hostile replies, negated refusal words that refuse nothing."""

from __future__ import annotations

import json

import pytest

from toolsweep.benchmarks.apb import APB
from toolsweep.benchmarks.apb.grader import extract_json, text_refuses


@pytest.fixture(scope="module")
def bench() -> APB:
    return APB()


def env_of(bench: APB, setting: str, i: int = 0):
    return bench.make_env(bench.tasks(setting)[i], setting, 0)


def string_chain(env) -> str:
    names = [n["tool"] for n in env.base["reference"]["nodes"]]
    return json.dumps({"plan": "use these", "tool_chain": names})


def test_a_chain_of_tool_name_strings_is_one_thing_in_every_setting(bench):
    # A list of bare names is a (malformed) chain: never a refusal, so no pass on unsolvable cases, no
    # false refusal on holistic ones and "not refused" on the control, consistently.
    for u in ("conflict", "info", "tool", "visual"):
        env = env_of(bench, f"unsolvable_{u}")
        assert env.grader.unsolvable(string_chain(env), u, env.task["blocking_terms"]) == (False, False)
    env = env_of(bench, "holistic")
    res = env.grader.holistic(string_chain(env))
    assert not res.refused and not res.false_refusal and "E3" in res.flags and not res.correct
    env = env_of(bench, "unsolvable_control")
    assert env.grader.refused(string_chain(env)) is False


def test_refusal_is_the_same_decision_for_holistic_control_and_unsolvable(bench):
    replies = ['{"status": "REJECT", "reason": "no tool"}', '{"plan": "none", "tool_chain": []}',
               "I cannot complete this because the image is missing.", string_chain(env_of(bench, "holistic"))]
    hol, ctrl, uns = env_of(bench, "holistic"), env_of(bench, "unsolvable_control"), env_of(bench, "unsolvable_tool")
    for text in replies:
        refused = ctrl.grader.refused(text)
        assert hol.grader.holistic(text).false_refusal == refused
        # J8 passes an unsolvable case only on an explicit refusal: an empty chain that says nothing
        # declines a solvable case (it does no step) but refuses nothing in words or status
        explicit = refused and text != '{"plan": "none", "tool_chain": []}'
        assert uns.grader.unsolvable(text, "tool", [])[0] == explicit


def test_a_plain_text_reply_is_one_decision_for_the_unsolvable_pass_and_refused(bench):
    """Every plain-text reply of the refusal corpora (both classes, every round) and the replies on which the two
    readings once disagreed (10 of 47 plain-text replies): the Unsolvable pass read the rules alone while
    `refused` and the false-refusal count read the blended verdict."""
    from tests.verdicts.corpus import load_all
    from toolsweep.benchmarks.apb.grader import extract_with_prose

    uns, ctrl = env_of(bench, "unsolvable_tool"), env_of(bench, "unsolvable_control")
    texts = [e.text for e in load_all("refusal")] + [
        "Without the video, there is nothing I can plan here.",  # passed no Unsolvable setting
        "I refuse to overcomplicate this. Here is the plan: search the listings, then book the cheapest.",
    ]
    plain = [t for t in texts if not extract_with_prose(t)[1]]
    assert len(plain) > 300
    for text in plain:
        refused, asks, _ = uns.grader.stated_refusal(None, False, text, "")
        assert (refused or asks) == ctrl.grader.refused(text) == text_refuses(text), text
        assert uns.grader.unsolvable(text, "tool", [])[0] == (refused and text_refuses(text)), text
    assert uns.grader.unsolvable(texts[-2], "visual", [])[0] and ctrl.grader.refused(texts[-2])
    assert not uns.grader.unsolvable(texts[-1], "tool", [])[0] and not ctrl.grader.refused(texts[-1])


def test_deeply_nested_json_does_not_crash_the_grader(bench):
    env = env_of(bench, "holistic")
    for text in ('{"a":' * 6000, "[" * 6000 + "]" * 6000, '{"plan": "x", "tool_chain": ' + "[" * 5000 + "]" * 5000 + "}"):
        res = env.grader.holistic(text)  # raised RecursionError before (the episode became env_error)
        assert not res.correct


def _parse_work(text: str) -> int:
    """The work `extract_json` does on `text`, counted rather than timed (so it reads the same on a
    loaded machine): the grader's Python lines executed plus the characters handed to the JSON
    decoder (from the start index to the end, as `raw_decode` may scan them all)."""
    import sys

    from toolsweep.benchmarks.apb import grader

    work = 0
    original = json.JSONDecoder.raw_decode

    def counted(self, s, idx=0):
        nonlocal work
        work += len(s) - idx
        return original(self, s, idx)

    def tracer(frame, event, arg):
        nonlocal work
        if frame.f_code.co_filename != grader.__file__:
            return None
        if event == "line":
            work += 1
        return tracer

    json.JSONDecoder.raw_decode = counted
    sys.settrace(tracer)
    try:
        assert extract_json(text)[1] is False
    finally:
        sys.settrace(None)
        json.JSONDecoder.raw_decode = original
    return work


def test_parsing_is_linear_on_stray_braces():
    # Was ~0.45 s per 60 KB reply and quadratic: each stray brace started a decode to the end.
    small, large = _parse_work('{"x' * 2000), _parse_work('{"x' * 20000)
    assert large <= 12 * small  # ten times the input: ~10x the work, where quadratic would be ~100x
    assert _parse_work("[" * 20000 + "x") <= 12 * _parse_work("[" * 2000 + "x")


def test_parser_still_finds_the_answer_inside_prose_and_broken_wrappers():
    assert extract_json('Sure! {"plan": "p", "tool_chain": []} hope it helps')[:2] == ({"plan": "p", "tool_chain": []}, True)
    assert extract_json('{oops {"a": 1} }')[:2] == ({"a": 1}, True)
    assert extract_json('He said "hi" {"a": "}"}')[:2] == ({"a": "}"}, True)
    assert extract_json("{" * 3000 + '{"ok": 1}')[:2] == ({"ok": 1}, True)


def test_negated_refusal_words_refuse_nothing():
    assert not text_refuses("Nothing is missing, here is my plan: step 1 call Search.")
    assert not text_refuses("Nothing is missing and it is not impossible.")
    assert not text_refuses("1) Search the web\n2) Summarise")
    assert text_refuses("No, I cannot do that: the verification code is missing.")
    assert text_refuses("The required tool is unavailable.")


def test_negated_missing_does_not_pass_an_unsolvable_case(bench):
    env = env_of(bench, "unsolvable_info")
    text = "Nothing is missing, here is my plan: step 1 call the first tool, step 2 report."
    assert env.grader.unsolvable(text, "info", env.task["blocking_terms"]) == (False, False)


def test_a_plain_text_refusal_in_broken_is_refuse_not_other(bench):
    env = env_of(bench, "broken")
    t = env.task
    cls = env.grader.broken("I am unable to complete this task because the tool is broken.", env.done_nodes,
                            t["broken_node"], t["broken_tool"], t["replacement_tool"]["name"], env.context)
    assert cls == "refuse"
    cls = env.grader.broken("Let me think about the weather.", env.done_nodes, t["broken_node"], t["broken_tool"],
                            t["replacement_tool"]["name"], env.context)
    assert cls == "other"
