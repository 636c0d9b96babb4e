"""Consults: an environment asks a helper model (a judge, a critic) by role; the episode loop
answers it with the configured helper, outside the agent's conversation."""

from __future__ import annotations

import asyncio

import pytest

from toolsweep.evaluator import (
    AgentReply,
    Consult,
    InfraError,
    Message,
    Observation,
    TerminationReason,
    Usage,
    WorkUnit,
    run_episode,
)


class JudgedEcho:
    """Asks the agent one question, then asks a judge whether the answer was right."""

    def __init__(self) -> None:
        self.verdicts: list[str] = []
        self.answer = ""

    def reset(self) -> Observation:
        return Observation(messages=[Message(role="user", content="Say hi.")])

    def step(self, reply: Message) -> Observation:
        self.answer = reply.text()
        return Observation(consult=Consult(role="judge", messages=[Message(role="user", content=f"Grade: {self.answer}")]))

    def consult_reply(self, role: str, reply: Message) -> Observation:
        self.verdicts.append(reply.text())
        return Observation(done=True, termination=TerminationReason.ANSWERED)

    def result(self) -> dict[str, float]:
        return {"judged_ok": float(self.verdicts[-1] == "YES") if self.verdicts and self.verdicts[-1] else float("nan")}


class Said:
    def __init__(self, text: str, fail: Exception | None = None) -> None:
        self.text, self.fail, self.seen = text, fail, []

    async def act(self, messages, tools):
        self.seen.append([m.text() for m in messages])
        if self.fail is not None:
            raise self.fail
        return AgentReply(message=Message(role="assistant", content=self.text), usage=Usage(prompt_tokens=7))


UNIT = WorkUnit(sweep="s", model="m", benchmark="b", setting="x", task_id="t", seed=0)


def play(env, agent, helpers):
    return asyncio.run(run_episode(env, agent, UNIT, helpers=helpers))


def test_helper_answers_outside_the_agents_conversation():
    env, judge = JudgedEcho(), Said("YES")
    result = play(env, Said("hi"), {"judge": judge})
    assert result.termination == TerminationReason.ANSWERED
    assert result.metrics == {"judged_ok": 1.0}
    assert judge.seen == [["Grade: hi"]]  # the judge sees only what the environment put to it
    assert [m.text() for m in result.trajectory.messages] == ["Say hi.", "hi"]
    [consult] = result.trajectory.consults
    assert consult.role == "judge" and consult.reply.text() == "YES" and consult.usage.prompt_tokens == 7
    assert result.trajectory.prompt_tokens == 7  # the agent's tokens only; the judge's are on its consult
    assert result.trajectory.helper_tokens == 7


def test_failing_helper_gives_an_empty_answer_and_the_error_is_kept():
    env = JudgedEcho()
    result = play(env, Said("hi"), {"judge": Said("", fail=ValueError("bad json from judge"))})
    assert result.termination == TerminationReason.ANSWERED
    assert env.verdicts == [""]
    assert "bad json from judge" in result.trajectory.consults[0].error


def test_missing_helper_is_an_environment_error_naming_the_role():
    result = play(JudgedEcho(), Said("hi"), {})
    assert result.termination == TerminationReason.ENV_ERROR
    assert "consults a 'judge' model" in result.error


def test_unreachable_helper_propagates_as_infrastructure_error():
    with pytest.raises(InfraError):
        play(JudgedEcho(), Said("hi"), {"judge": Said("", fail=InfraError("connection refused"))})
