"""APB's structured refusal status in any case (§6.4, J5, J8): "reject", "REJECT" and "Reject" are the
same refusal, on the answer and on any of its steps, in every setting that reads refusals; a status that
is no refusal, in any case, refuses nothing."""

from __future__ import annotations

import itertools
import json

import pytest

from toolsweep.benchmarks.apb import APB


def casings(word: str) -> list[str]:
    """Every upper/lower-case spelling of `word` (64 for "reject")."""
    return ["".join(c) for c in itertools.product(*[(ch.lower(), ch.upper()) for ch in word])]


REFUSALS = casings("reject") + ["clarify", "Clarify", "need_info", "Need_Info"]


@pytest.fixture(scope="module")
def envs():
    bench = APB()
    return {s: bench.make_env(bench.tasks(s)[0], s, 0) for s in ("holistic", "unsolvable_control", "unsolvable_tool")}


def test_a_refusal_status_counts_in_every_case(envs):
    control, holistic, unsolvable = envs["unsolvable_control"], envs["holistic"], envs["unsolvable_tool"]
    for status in REFUSALS:
        answer = json.dumps({"status": status, "reason": "see the query"})
        assert control.grader.refused(answer), status
        assert holistic.grader.holistic(answer).false_refusal, status  # a solvable case refused
        utype = "tool" if status.upper() == "REJECT" else "info"  # J8: a clarification passes where info is missing
        assert unsolvable.grader.unsolvable(answer, utype, [])[0], status  # an unsolvable case refused
        steps = json.dumps([{"step": 1, "tool": "Finish", "status": status}])
        assert control.grader.refused(steps), status  # on a step of a step-wise answer


def test_a_status_that_is_no_refusal_refuses_nothing_in_any_case(envs):
    control = envs["unsolvable_control"]
    names = [n["tool"] for n in control.base["reference"]["nodes"]]
    chain = [{"name": n, "arguments": {}} for n in names]
    for status in casings("ok") + ["success", "Done", "REJECTS", "rejecting"]:
        answer = json.dumps({"status": status, "plan": "use these", "tool_chain": chain})
        assert not control.grader.refused(answer), status
