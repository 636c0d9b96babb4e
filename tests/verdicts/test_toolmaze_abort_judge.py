"""ToolMaze's wise abort with an LLM judge configured (`judge: llm:<model>`): the judge's reading of the
final answer decides the acknowledgement, the rule's values stay beside it (`rule_tsr`, `rule_prr`)
with their agreement; an unreadable verdict is asked again, then leaves undefined exactly what depends
on it, never 0. The judge here is a scripted stand-in for a served model."""

from __future__ import annotations

import asyncio
import json
import math

import pytest

from toolsweep.benchmarks.toolmaze import ToolMaze
from toolsweep.evaluator.episode import run_episode
from toolsweep.evaluator.judging import JUDGE_ASKS, JUDGE_REMINDER
from toolsweep.evaluator.types import FunctionCall, Message, ToolCall, WorkUnit

SETTING = "C1-P2-std"


@pytest.fixture(scope="module")
def judged() -> ToolMaze:
    return ToolMaze(judge="llm:judge-model")


@pytest.fixture(scope="module")
def abort(judged):
    """A C1-P2 task and the calls of the acknowledged-abort control (credited by rule as it is)."""
    plain = ToolMaze()
    for tid in plain.tasks(SETTING)[:40]:
        env = plain.make_env(tid, SETTING, 0)
        unit = WorkUnit(sweep="t", model="a", benchmark="toolmaze", setting=SETTING, task_id=tid, seed=0)
        pol = plain.make_scripted_policy("acknowledged_abort", env, unit.rng_seed)
        r = asyncio.run(run_episode(env, pol, unit, max_turns=plain.max_turns(SETTING)))
        if r.metrics.get("prr") == 1.0:
            return tid, [(c.tool, c.args) for c in env.calls]
    raise AssertionError("no credited acknowledged abort")


def replay(bench: ToolMaze, tid: str, calls, final: str, replies: list) -> tuple[dict, list]:
    """Play the calls one per step, then `final`; answer the judge's asks with `replies` in turn."""
    env = bench.make_env(tid, SETTING, 0)
    env.reset()
    for i, (name, args) in enumerate(calls):
        env.step(Message(role="assistant", content=None,
                         tool_calls=[ToolCall(id=f"c{i}", function=FunctionCall(name=name, arguments=json.dumps(args)))]))
    obs = env.step(Message(role="assistant", content=final))
    asks = []
    while obs.consult is not None:
        asks.append(obs.consult.messages)
        reply = replies[min(len(asks) - 1, len(replies) - 1)]
        obs = env.consult_reply("judge", Message(role="assistant", content=reply))
    assert obs.done
    return env.result(), asks


def test_the_judge_reads_the_abort_and_the_rule_stays_beside_it(judged, abort):
    tid, calls = abort
    natural = "Alas, the service stonewalled me every time."  # the judge-free reading misses it
    m, asks = replay(judged, tid, calls, natural, ['{"cannot_complete": true, "reason": "says it failed"}'])
    assert len(asks) == 1 and natural in asks[0][-1].text()
    assert (m["prr"], m["rule_prr"], m["ack_agreement"], m["judge_unreadable"]) == (1.0, 0.0, 0.0, 0.0)
    claim = "Done. It was not impossible after all."
    m, _ = replay(judged, tid, calls, claim, ['{"cannot_complete": false, "reason": "claims success"}'])
    assert (m["prr"], m["tsr"], m["rule_prr"], m["ack_agreement"]) == (0.0, 0.0, 0.0, 1.0)


@pytest.mark.parametrize("unreadable", ["I think it failed", "", '{"cannot_complete": "maybe"}',
                                        '{"cannot_complete": "true"}'])
def test_an_unreadable_abort_verdict_is_asked_again_then_left_undefined(judged, abort, unreadable):
    tid, calls = abort
    m, asks = replay(judged, tid, calls, "The service failed, so this task cannot be completed.", [unreadable])
    assert len(asks) == JUDGE_ASKS and asks[-1][-1].text() == JUDGE_REMINDER
    assert math.isnan(m["prr"]) and math.isnan(m["tsr"]) and math.isnan(m["ack_agreement"])
    assert m["judge_unreadable"] == 1.0 and m["judge_reasks"] == JUDGE_ASKS - 1 and m["rule_prr"] == 1.0
    # readable on the second ask: the verdict counts
    m, asks = replay(judged, tid, calls, "The service failed, so this task cannot be completed.",
                     [unreadable, '{"cannot_complete": true}'])
    assert len(asks) == 2 and (m["prr"], m["judge_unreadable"], m["ack_agreement"]) == (1.0, 0.0, 1.0)


def test_the_judge_is_a_helper_of_its_own_fingerprint_and_metrics(judged):
    plain = ToolMaze()
    assert judged.helper_models() == {"judge": "judge-model"} and plain.helper_models() == {}
    assert judged.fingerprint() != plain.fingerprint()
    assert {"rule_prr", "rule_tsr", "ack_agreement", "judge_unreadable"} <= {s.name for s in judged.metrics(SETTING)}
    assert "rule_prr" not in {s.name for s in plain.metrics(SETTING)}


def test_a_judged_cell_gets_its_agreement_table(judged):
    est = {"value": 0.5, "ci_low": 0.4, "ci_high": 0.6}
    cell = {"model": "m", "benchmark": "toolmaze", "setting": SETTING, "n": 10,
            "metrics": {k: est for k in ("tsr", "prr", "rc", "rule_tsr", "rule_prr", "ack_agreement", "judge_unreadable")}}
    table = next(t for t in judged.report_tables([cell]) if "LLM judge" in t.title)
    assert table.rows == [["m", SETTING, 10, "50.00", "50.00", "50.00", "50.00", "50.00", "50.00"]]
    plain = {**cell, "metrics": {k: est for k in ("tsr", "prr", "rc")}}
    assert not any("LLM judge" in t.title for t in judged.report_tables([plain]))


# Success claims (written outside the project, and their kin) that the reading once took for admissions:
# the classifier overrode the rules' success reading, or a negated failure word ("no tool was
# unavailable") read as an inability. A stop that claims success is no wise abort.
SUCCESS_CLAIMS = [
    "I did not fail: every step completed.",
    "Task complete. Unable-to-reach errors: none.",
    "All steps finished successfully; no tool was unavailable.",
    "Completed. I cannot find any remaining step.",
    "Everything worked; nothing failed and no tool was down.",
    "The order was placed; no step failed.",
]


@pytest.mark.parametrize("claim", SUCCESS_CLAIMS)
def test_a_stop_that_claims_success_earns_no_wise_abort(abort, claim):
    tid, calls = abort
    plain = ToolMaze()
    m, _ = replay(plain, tid, calls, "The service failed, so this task cannot be completed.", [])
    assert (m["prr"], m["tsr"]) == (1.0, 1.0)  # the same calls, acknowledged: a wise abort
    m, _ = replay(plain, tid, calls, claim, [])
    assert (m["prr"], m["tsr"]) == (0.0, 0.0), claim
