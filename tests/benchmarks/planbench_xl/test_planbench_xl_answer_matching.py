"""PlanBench-XL's answer match, both ways (spec §3.5): the gold value must appear in the answer, after
normalisation (case, whitespace). An answer that only appears inside the gold value (empty, blank, a
fragment of it) is never credited, however the episode got to the target; one that holds the gold value
among other words is; case and whitespace change nothing."""

from __future__ import annotations

import asyncio

from hypothesis import given, settings
from hypothesis import strategies as st

from toolsweep.benchmarks.planbench_xl.policies import answer_text
from toolsweep.evaluator.episode import run_episode
from toolsweep.evaluator.registry import get_benchmark, register_benchmark
from toolsweep.evaluator.types import AgentReply, Message, WorkUnit

register_benchmark("planbench_xl", "toolsweep.benchmarks.planbench_xl:PlanBenchXL")
SETTING = "default"
WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz .,:-", min_size=1, max_size=20)


class AnswersInstead:
    """The oracle's path to the target, with `answer` in place of each of its final answers."""

    def __init__(self, oracle, answer: str) -> None:
        self.oracle, self.answer = oracle, answer

    async def act(self, messages, tools) -> AgentReply:
        reply = await self.oracle.act(messages, tools)
        if reply.message.content.lstrip().startswith("<final_answer>"):
            return AgentReply(message=Message(role="assistant", content=answer_text(self.answer)))
        return reply


def credited(task_index: int, answer: str) -> tuple[bool, str]:
    """Whether `answer`, given after the oracle reached the target, is scored correct; and the gold."""
    b = get_benchmark("planbench_xl")
    tid = b.tasks(SETTING)[task_index]
    env = b.make_env(tid, SETTING, 0)
    policy = AnswersInstead(b.make_scripted_policy("oracle", env, 0), answer)
    unit = WorkUnit(sweep="t", model="m", benchmark="planbench_xl", setting=SETTING, task_id=tid, seed=0)
    result = asyncio.run(run_episode(env, policy, unit, max_turns=b.max_turns(SETTING)))
    answers = [x for x in env.state.log if x.get("action") == "final_answer"]
    assert answers and all(a["target_reached"] and a["answer_grounded"] for a in answers)  # only the text differs
    return result.metrics["accuracy"] == 1.0, env.task.gold


def gold_of(task_index: int) -> str:
    b = get_benchmark("planbench_xl")
    return b.make_env(b.tasks(SETTING)[task_index], SETTING, 0).task.gold


TASK = st.integers(0, 40)


def test_the_gold_value_itself_is_credited_and_an_empty_answer_never():
    for i in (0, 7, 23):
        assert credited(i, gold_of(i))[0]
        assert not credited(i, "")[0]
        assert not credited(i, "   ")[0]


@settings(max_examples=25, deadline=None)
@given(TASK, st.data())
def test_a_fragment_of_the_gold_value_is_never_credited(i, data):
    gold = gold_of(i)
    start = data.draw(st.integers(0, len(gold) - 1))
    end = data.draw(st.integers(start, len(gold)))
    fragment = gold[start:end]
    if len(fragment.strip()) == len(gold.strip()):
        fragment = gold[:-1]
    assert not credited(i, fragment)[0], (gold, fragment)


@settings(max_examples=25, deadline=None)
@given(TASK, WORDS, WORDS)
def test_the_gold_value_among_other_words_is_credited(i, before, after):
    gold = gold_of(i)
    assert credited(i, f"{before} {gold} {after}")[0], gold


@settings(max_examples=25, deadline=None)
@given(TASK, st.data())
def test_case_and_whitespace_change_nothing(i, data):
    gold = gold_of(i)
    flips = data.draw(st.lists(st.booleans(), min_size=len(gold), max_size=len(gold)))
    cased = "".join(c.upper() if f else c.lower() for c, f in zip(gold, flips))
    pad = data.draw(st.sampled_from(["", " ", "  \t", "\n "]))
    spaced = pad + cased.replace(" ", data.draw(st.sampled_from([" ", "  ", " \t "]))) + pad
    assert credited(i, spaced)[0], (gold, spaced)
