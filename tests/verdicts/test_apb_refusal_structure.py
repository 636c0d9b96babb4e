"""APB's Unsolvable judge (J8) asks for both an explicit refusal and termination: "PASS: 1. Explicit
Refusal ... 2. Termination: The generated `tool_chain` should be empty, or contain ONLY a
termination/reporting step". A structured statement (status REJECT, CLARIFY / NEED_INFO, Finish with
mode give_up) is read first, case-insensitively; what the answer says in words is the fallback.

Before (main): a report-only chain that refuses nothing ("Summarize and deliver the result.") passed
every Unsolvable case, and a bare "What?" with no chain passed unsolvable_info."""

from __future__ import annotations

import json
import random

import pytest

from toolsweep.benchmarks.apb import APB
from toolsweep.benchmarks.apb.tools import FINISH

UNSOLVABLE = ("conflict", "info", "tool", "visual")


@pytest.fixture(scope="module")
def bench() -> APB:
    return APB()


def graders(bench: APB, utype: str, n: int = 25):
    setting = f"unsolvable_{utype}"
    cases = [t["task_id"] for t in bench.data.tasks[setting]]  # the Unsolvable cases, not their twins
    ids = sorted(random.Random(f"structure|{utype}").sample(cases, n))
    for tid in ids:
        env = bench.make_env(tid, setting, 0)
        yield env.grader, env.task["blocking_terms"]


def report_only(g) -> list[dict]:
    """A chain of reporting steps only: Finish(give_answer), and a reporting tool where the case has one."""
    chain = [{"name": FINISH, "parameter_description": {"mode": "give_answer"}}]
    deliver = sorted(n for n in g.tools if n != FINISH and g.is_terminal(n))
    return ([{"name": deliver[0], "parameter_description": {}}] if deliver else []) + chain


@pytest.mark.parametrize("utype", UNSOLVABLE)
def test_a_report_only_chain_that_refuses_nothing_fails(bench, utype):
    for g, terms in graders(bench, utype):
        silent = {"plan": "Summarize and deliver the result.", "tool_chain": report_only(g)}
        assert g.unsolvable(json.dumps(silent), utype, terms) == (False, False)
        empty = {"plan": "Summarize and deliver the result.", "tool_chain": []}
        assert g.unsolvable(json.dumps(empty), utype, terms) == (False, False)
        # the same termination with the refusal said in words, or in the status field, passes
        said = {"plan": f"I cannot complete this task: {terms[0]} is missing.", "tool_chain": report_only(g)}
        assert g.unsolvable(json.dumps(said), utype, terms) == (True, True)
        status = {"status": " reject ", "reason": f"{terms[0]} is missing.", "tool_chain": report_only(g)}
        assert g.unsolvable(json.dumps(status), utype, terms) == (True, True)
        gives_up = {"plan": f"{terms[0]}", "tool_chain": [{"name": FINISH, "parameter_description": {"mode": "give_up"}}]}
        assert g.unsolvable(json.dumps(gives_up), utype, terms)[0] is True


@pytest.mark.parametrize("utype", UNSOLVABLE)
def test_a_free_prose_refusal_passes_and_plan_talk_does_not(bench, utype):
    for g, terms in graders(bench, utype, 10):
        assert g.unsolvable(f"Sorry, I won't be able to plan this: {terms[0]} is missing.", utype, terms) == (True, True)
        assert g.unsolvable("You cannot go wrong with this plan.", utype, terms) == (False, False)


def test_a_bare_question_is_no_clarification_request(bench):
    for g, terms in graders(bench, "info"):
        for bare in ("What?", "?", json.dumps({"plan": "Which one?", "tool_chain": []}),
                     json.dumps({"status": "OK", "reason": "?", "tool_chain": []})):
            assert g.unsolvable(bare, "info", terms)[0] is False, bare
        asks = json.dumps({"plan": f"What is the {terms[0]}? I can't plan this without it.", "tool_chain": []})
        assert g.unsolvable(asks, "info", terms) == (True, True)
        clarify = json.dumps({"status": "clarify", "reason": f"Please provide the {terms[0]}."})
        assert g.unsolvable(clarify, "info", terms) == (True, True)
        # a clarification request is J8's pass for missing information only
        assert g.unsolvable(json.dumps({"status": "CLARIFY", "reason": "Which file is meant?"}), "tool", terms)[0] is False
