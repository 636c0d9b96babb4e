"""TRAJECT-Bench's LLM-judged Acc and Traj-Satisfy (option `judge: llm:<model>`): what the judge is
shown, how its verdicts are read, what is decided without it, the agreement with the proxies, and
the paper-layout tables switching to the judged values. The judge here is a scripted stand-in for
a served model that keeps what it was asked."""

from __future__ import annotations

import asyncio
import json
import math
import re

import pytest
from traject_data import require_data

from toolsweep.benchmarks.traject_bench import TrajectBench
from toolsweep.benchmarks.traject_bench.judge import DESCRIPTION_CHARS, parse_acc_verdict, parse_traj_score
from toolsweep.evaluator import AgentReply, Message, WorkUnit, run_episode
from toolsweep.evaluator.judging import JUDGE_ASKS
from toolsweep.evaluator.protocols import InfraError

DATA = require_data()
SETTING = "par-simple/domain/native"


class Judge:
    """Answers the Acc question with `acc` and the Traj-Satisfy question with `traj`."""

    def __init__(self, acc: str | dict, traj: str | dict) -> None:
        self.acc = acc if isinstance(acc, str) else json.dumps(acc)
        self.traj = traj if isinstance(traj, str) else json.dumps(traj)
        self.asked: list[str] = []

    async def act(self, messages, tools):
        text = messages[-1].text()
        self.asked.append(text)
        reply = self.acc if "Ground-truth answer:" in text else self.traj
        return AgentReply(message=Message(role="assistant", content=reply))


@pytest.fixture(scope="module")
def judged() -> TrajectBench:
    return TrajectBench(data_dir=str(DATA), judge="llm:judge-model")


@pytest.fixture(scope="module")
def plain() -> TrajectBench:
    return TrajectBench(data_dir=str(DATA))


def play(bench: TrajectBench, policy: str, helpers: dict, index: int = 0):
    task = bench.tasks(SETTING)[index]
    env = bench.make_env(task, SETTING, 0)
    unit = WorkUnit(sweep="s", model=policy, benchmark="traject_bench", setting=SETTING, task_id=task, seed=0)
    agent = bench.make_scripted_policy(policy, env, unit.rng_seed)
    return asyncio.run(run_episode(env, agent, unit, max_turns=bench.max_turns(SETTING), helpers=helpers)), env


def test_verdicts_are_read_from_prose_and_fences_and_bounded():
    assert parse_acc_verdict('Sure.\n```json\n{"match": true, "reason": "same"}\n```') is True
    assert parse_acc_verdict('{"match": false, "reason": "x"}') is False
    assert parse_acc_verdict("they match") is None and parse_acc_verdict('{"match": 1}') is None
    # the protocol asks for a boolean: a string is no verdict (it was read as one before)
    assert parse_acc_verdict('{"match": "true"}') is None and parse_acc_verdict('{"match": "false"}') is None
    assert parse_traj_score('{"score": 7, "reason": "ok"}') == 7.0
    assert parse_traj_score('{"score": 0}') == 0.0 and parse_traj_score('{"score": 10}') == 10.0
    # off the 0-10 scale, or not a number: unreadable, never clamped (42 was read as 10 before)
    assert parse_traj_score('{"score": 42}') is None and parse_traj_score('{"score": -2}') is None
    assert parse_traj_score('{"score": 10.5}') is None and parse_traj_score('{"score": "9"}') is None
    assert parse_traj_score('{"score": true}') is None and parse_traj_score("nine") is None


def test_the_judge_sees_the_query_gold_answer_and_prediction_and_its_verdict_counts(judged):
    judge = Judge({"match": True, "reason": "same facts"}, {"score": 8, "reason": "strong"})
    result, env = play(judged, "oracle", {"judge": judge})
    m = result.metrics
    assert (m["acc_llm"], m["traj_satisfy_llm"], m["judge_unreadable"]) == (1.0, 8.0, 0.0)
    assert m["acc_agreement"] == float(m["answer_facts"] == 1.0)
    assert m["traj_satisfy_abs_diff"] == pytest.approx(abs(8.0 - m["traj_satisfy_proxy"]))
    acc_q, traj_q = judge.asked
    assert env.task.query in acc_q and env.task.final_answer.strip() in acc_q and env.final_answer.strip() in acc_q
    # Traj-Satisfy, as in the paper, without gold: the predicted tools with short descriptions only
    assert env.task.final_answer.strip() not in traj_q and "Ground-truth" not in traj_q
    listed = re.findall(r"^\d+\. (.+?) — (.*)$", traj_q, flags=re.M)
    assert [n for n, _ in listed] == [c.name for c in env.pred]
    assert all(len(d) <= DESCRIPTION_CHARS for _, d in listed)
    assert [c.role for c in result.trajectory.consults] == ["judge", "judge"]


def test_a_lenient_judge_shows_up_as_disagreement_with_the_proxy(judged):
    yes = Judge({"match": True}, {"score": 10})
    result, _ = play(judged, "echo_outputs", {"judge": yes})
    m = result.metrics
    assert m["answer_facts"] == 0.0 and m["acc_llm"] == 1.0 and m["acc_agreement"] == 0.0


def test_nothing_to_judge_is_decided_without_the_judge(judged):
    judge = Judge({"match": True}, {"score": 10})
    result, env = play(judged, "no_tools", {"judge": judge})
    m = result.metrics
    # no tool call: Traj-Satisfy 0; an answer is judged only if there is one
    assert m["traj_satisfy_llm"] == 0.0 and not any("trajectory" in q for q in judge.asked)
    if not env.final_answer.strip():
        assert judge.asked == [] and m["acc_llm"] == float(not env.task.final_answer.strip())


class FlakyJudge:
    """Answers each question with its replies in turn (the last one repeated); an exception is raised."""

    def __init__(self, acc: list, traj: list) -> None:
        self.replies = {"acc": list(acc), "traj": list(traj)}
        self.asked = {"acc": 0, "traj": 0}

    async def act(self, messages, tools):
        kind = "acc" if "Ground-truth answer:" in messages[1].text() else "traj"
        replies = self.replies[kind]
        reply = replies[min(self.asked[kind], len(replies) - 1)]
        self.asked[kind] += 1
        if isinstance(reply, BaseException):
            raise reply
        return AgentReply(message=Message(role="assistant", content=reply if isinstance(reply, str) else json.dumps(reply)))


@pytest.mark.parametrize("unreadable", ["I think so", "", '{"match": "maybe", "score": "high"}', RuntimeError("judge crashed")])
def test_an_unreadable_verdict_is_asked_again_then_left_undefined_never_zero(judged, unreadable):
    # before: acc_llm 0 and traj_satisfy_llm 0 in the mean, asked once
    judge = FlakyJudge([unreadable], [unreadable])
    result, _ = play(judged, "oracle", {"judge": judge})
    m = result.metrics
    assert judge.asked == {"acc": JUDGE_ASKS, "traj": JUDGE_ASKS}
    assert math.isnan(m["acc_llm"]) and math.isnan(m["traj_satisfy_llm"]) and math.isnan(m["acc_agreement"])
    assert m["judge_unreadable"] == 2.0 and m["judge_reasks"] == 2.0 * (JUDGE_ASKS - 1)


def test_a_verdict_readable_on_a_later_ask_counts(judged):
    judge = FlakyJudge(["", {"match": True, "reason": "same"}], [RuntimeError("timeout"), "no idea", {"score": 7}])
    result, _ = play(judged, "oracle", {"judge": judge})
    m = result.metrics
    assert (m["acc_llm"], m["traj_satisfy_llm"], m["judge_unreadable"], m["judge_reasks"]) == (1.0, 7.0, 0.0, 3.0)


def test_a_judge_endpoint_that_stays_down_is_an_outage_not_a_score(judged):
    judge = FlakyJudge([InfraError("judge endpoint unreachable")], [{"score": 7}])
    with pytest.raises(InfraError):
        play(judged, "oracle", {"judge": judge})


def test_the_judge_is_a_helper_of_its_own_setting_fingerprint_and_tables(judged, plain):
    assert judged.helper_models() == {"judge": "judge-model"} and plain.helper_models() == {}
    assert judged.fingerprint() != plain.fingerprint()  # judged units never reuse proxy-only ones
    names = {s.name for s in judged.metrics(SETTING)}
    assert {"acc_llm", "traj_satisfy_llm", "acc_agreement"} <= names
    assert "acc_llm" not in {s.name for s in plain.metrics(SETTING)}
    est = {"value": 0.5, "ci_low": 0.4, "ci_high": 0.6}
    cell = {"model": "m", "benchmark": "traject_bench", "setting": SETTING, "n": 10,
            "metrics": {k: est for k in ("em", "inclusion", "usage", "answer_facts", "acc_llm", "traj_satisfy_llm",
                                         "traj_satisfy_proxy", "acc_agreement", "traj_satisfy_abs_diff",
                                         "judge_unreadable")}}
    tables = {t.title: t for t in judged.report_tables([cell])}
    paper = next(t for title, t in tables.items() if "Table 2" in title)
    assert "S-Traj-Satisfy" in paper.columns and "S-Traj-Satisfy*" not in paper.columns
    judge = next(t for title, t in tables.items() if "LLM judge" in title)
    assert judge.rows[0][:6] == ["m", SETTING, 10, 0.5, 0.5, 50.0]
    plain_tables = [t.title for t in plain.report_tables([cell])]
    assert not any("LLM judge" in t for t in plain_tables)


def test_without_a_judge_no_column_is_labelled_acc(plain):
    # the deterministic answer check is a diagnostic a prose echo can partly pass: never shown as Acc
    names = {s.name for s in plain.metrics(SETTING)}
    assert "acc" not in names and "answer_facts" in names
    est = {"value": 0.5, "ci_low": 0.4, "ci_high": 0.6}
    cell = {"model": "m", "benchmark": "traject_bench", "setting": SETTING, "n": 10,
            "metrics": {k: est for k in ("em", "inclusion", "usage", "answer_facts", "traj_satisfy_proxy")}}
    paper = next(t for t in plain.report_tables([cell]) if "Table 2" in t.title)
    assert not any(c.endswith("-Acc") for c in paper.columns) and "S-Answer-facts (not Acc)" in paper.columns
