"""APB with helper models: the LLM-judge grader (J1-J9, §6.5) with its agreement statistics
against the rule grader, the judge-validation sample, and the model critic of Critic_R± (§8.1).
The helpers here are scripted stand-ins for a served model (the cluster tests use real servers)."""

from __future__ import annotations

import asyncio
import json
import math

import pytest

from toolsweep.benchmarks.apb import APB, SETTINGS, prompts
from toolsweep.benchmarks.apb.environment import JUDGE_ASKS, JUDGE_REMINDER
from toolsweep.cluster.config import ConfigError, SweepConfig, resolve_plans
from toolsweep.evaluator import AgentReply, Message, TerminationReason, WorkUnit, run_episode


class Judge:
    """Answers every consult with a fixed reply, and keeps what it was asked."""

    def __init__(self, reply: str | dict) -> None:
        self.reply = reply if isinstance(reply, str) else json.dumps(reply)
        self.asked: list[str] = []

    async def act(self, messages, tools):
        self.asked.append(messages[-1].text())
        return AgentReply(message=Message(role="assistant", content=self.reply))


YES = {"is_correct": "YES", "grade": 1.0, "score": 1.0, "error_list": []}


@pytest.fixture(scope="module")
def judged() -> APB:
    return APB(grader="llm:judge-model", critic="model:critic-model")


def play(bench: APB, setting: str, policy: str, helpers: dict, index: int = 0):
    task = bench.tasks(setting)[index]
    env = bench.make_env(task, setting, 0)
    unit = WorkUnit(sweep="s", model=policy, benchmark="apb", setting=setting, task_id=task, seed=0)
    agent = bench.make_scripted_policy(policy, env, unit.rng_seed)
    return asyncio.run(run_episode(env, agent, unit, max_turns=bench.max_turns(setting), helpers=helpers)), env


def test_judge_grades_in_place_of_the_rules_and_agreement_is_recorded(judged):
    ok, _ = play(judged, "holistic", "oracle", {"judge": Judge(YES)})
    assert ok.metrics["correct"] == 1.0 and ok.metrics["judge_agree"] == 1.0
    assert ok.metrics["judge_tp"] == 1.0 and ok.metrics["judge_flag_agree"] == 1.0
    # a random plan the rules fail, a lenient judge passes: the judge's verdict counts, the rules' stays
    lenient, _ = play(judged, "holistic", "random", {"judge": Judge(YES)})
    m = lenient.metrics
    assert m["correct"] == 1.0 and m["rule_correct"] == 0.0 and m["judge_agree"] == 0.0
    assert (m["judge_tp"], m["judge_pos"], m["rule_pos"]) == (0.0, 1.0, 0.0)
    assert m["judge_grade_abs_err"] == pytest.approx(1.0 - m["rule_grade"])
    # the holistic breakdowns follow the judged value
    assert [v for k, v in m.items() if k.startswith("correct_mod_") and not math.isnan(v)] == [1.0]


def test_judge_flags_and_an_unreadable_verdict(judged):
    strict, _ = play(judged, "stepwise_k1", "oracle",
                     {"judge": Judge({"E4_LOGIC_ERROR": True, "score": 0.4, "is_correct": "NO"})})
    m = strict.metrics
    assert (m["correct"], m["E4"], m["grade"], m["rule_correct"]) == (0.0, 1.0, 0.4, 1.0)
    assert m["judge_flag_agree"] == pytest.approx(5 / 6)
    garbled, _ = play(judged, "stepwise_k1", "oracle", {"judge": Judge("I think this looks fine!")})
    g = garbled.metrics
    # the judge's failure, not the model's: asked again, then left undefined, never the rule grade
    assert [c.role for c in garbled.trajectory.consults] == ["judge"] * JUDGE_ASKS
    assert g["judge_unreadable"] == 1.0 and g["judge_reasks"] == JUDGE_ASKS - 1 and g["rule_correct"] == 1.0
    assert math.isnan(g["correct"]) and math.isnan(g["grade"]) and all(math.isnan(g[f]) for f in ("E1", "E4"))
    assert math.isnan(g["judge_agree"]) and g["judge_pos"] == 0.0 and g["rule_pos"] == 0.0


class Scripted:
    """Answers consults from a list of replies, in turn (the last one repeated), keeping each request."""

    def __init__(self, *replies: str | dict) -> None:
        self.replies = [r if isinstance(r, str) else json.dumps(r) for r in replies]
        self.requests: list[list[Message]] = []

    async def act(self, messages, tools):
        self.requests.append(list(messages))
        reply = self.replies[min(len(self.requests), len(self.replies)) - 1]
        return AgentReply(message=Message(role="assistant", content=reply))


def test_an_unreadable_verdict_is_asked_again_and_the_readable_one_grades(judged):
    judge = Scripted("Looks fine to me.", {"is_correct": "NO", "score": 0.2, "error_list": ["E1"]})
    result, _ = play(judged, "holistic", "oracle", {"judge": judge})
    m = result.metrics
    assert (m["correct"], m["grade"], m["E1"], m["rule_correct"]) == (0.0, 0.2, 1.0, 1.0)  # the judge's, read
    assert m["judge_unreadable"] == 0.0 and m["judge_reasks"] == 1.0 and m["judge_agree"] == 0.0
    first, second = judge.requests
    assert second[: len(first)] == first  # the same request, then its unreadable reply and a reminder
    assert second[-2].text() == "Looks fine to me." and second[-1].text() == JUDGE_REMINDER


def test_a_verdict_unreadable_after_every_ask_leaves_each_kind_of_case_unscored(judged):
    broken, _ = play(judged, "broken", "oracle", {"judge": Scripted("category: replace")})
    m = broken.metrics
    assert all(math.isnan(m[k]) for k in ("replace", "alter", "recovery", "correct"))
    assert m["rule_replace"] + m["rule_alter"] == 1.0 and m["judge_unreadable"] == 1.0
    refused, _ = play(judged, "unsolvable_tool", "always_refuse", {"judge": Scripted("PASS")})
    assert math.isnan(refused.metrics["pass"]) and math.isnan(refused.metrics["correct"])
    assert refused.metrics["rule_pass"] == 1.0 and refused.metrics["judge_unreadable"] == 1.0
    # refinement: the initial answer's verdict never readable, the refined one's readable at its first ask
    judge = Scripted("?", "?", "?", YES)
    refined, _ = play(judged, "refine_self_plus", "oracle", {"judge": judge})
    r = refined.metrics
    assert [c.role for c in refined.trajectory.consults] == ["judge"] * (JUDGE_ASKS + 1)
    assert math.isnan(r["hol_base_cr"]) and math.isnan(r["hol_delta"]) and r["hol_refined_cr"] == 1.0
    assert r["correct"] == 1.0 and r["judge_unreadable"] == 0.5


def test_broken_and_unsolvable_verdicts(judged):
    retry, _ = play(judged, "broken", "oracle", {"judge": Judge({"category": 3, "is_correct": False})})
    m = retry.metrics
    assert (m["retry"], m["recovery"], m["correct"], m["rule_replace"] + m["rule_alter"]) == (1.0, 0.0, 0.0, 1.0)
    refused, _ = play(judged, "unsolvable_tool", "always_refuse", {"judge": Judge({"is_correct": True})})
    assert refused.metrics["pass"] == 1.0 and refused.metrics["judge_agree"] == refused.metrics["rule_pass"]


def test_judge_prompts_carry_the_reference_not_the_review(judged):
    judge = Judge(YES)
    result, env = play(judged, "refine_self_plus", "oracle", {"judge": judge})
    assert result.termination == TerminationReason.ANSWERED
    assert [c.role for c in result.trajectory.consults] == ["judge", "judge"]  # initial and refined answers
    reference = env.reference_plan()
    assert all(f"Expert Example: {reference}" in text for text in judge.asked)
    assert all(text.startswith(prompts.JUDGE_PROMPTS["J4"][:60]) for text in judge.asked)
    assert result.metrics["hol_base_cr"] == 1.0 and result.metrics["hol_refined_cr"] == 1.0


def test_model_critic_reviews_and_the_agent_sees_its_review():
    bench = APB(critic="model:critic-model")
    critic = Judge("Step 2 uses the wrong tool; use the search tool first.")
    result, env = play(bench, "refine_critic_plus", "oracle", {"critic": critic})
    [asked] = critic.asked
    initial = result.trajectory.steps[0].reply.text()
    assert f"Initial response:\n{initial}" in asked and env.first_prompt in asked
    assert prompts.render_p8(metric=True, gui=env.base["source_style"] == "OpenCUA") in asked
    second_turn = result.trajectory.steps[0].observation[-1].text()
    assert second_turn.startswith("Review of your plan:\nStep 2 uses the wrong tool") and prompts.REFINE_FINAL in second_turn
    # step-wise critic gets the self-contained P7 with the initial prediction
    sw_index = next(i for i, t in enumerate(bench.tasks("refine_critic_minus")) if t.endswith("-sw"))
    sw_critic = Judge("Fine.")
    sw, sw_env = play(bench, "refine_critic_minus", "oracle", {"critic": sw_critic}, index=sw_index)
    assert sw.termination == TerminationReason.ANSWERED and sw_env.half == "stepwise"
    sw_initial = sw.trajectory.steps[0].reply.text()
    assert sw_critic.asked == [prompts.render_p7(sw_env.query_block, sw_env.tool_lines, sw_env.prefix, sw_initial,
                                                 metric=False)]
    rule_only, _ = play(APB(), "refine_critic_plus", "oracle", {})
    assert rule_only.trajectory.consults == [] and "Review of your plan:" in rule_only.trajectory.messages[3].text()


def test_judge_validation_sample(judged):
    ids = judged.tasks("judge_validation")
    assert len(ids) == 720 and ids == APB(grader="llm:other").tasks("judge_validation")
    origin = judged.judge_sample()
    assert {s for s in origin.values()} <= {s for s, v in SETTINGS.items() if v["in_4209"]}
    assert len(set(origin.values())) >= 10  # spread over the settings of Table 1
    assert len(set(APB(grader="llm:x", gen_seed=1).tasks("judge_validation")) & set(ids)) == 0
    plan_case = next(i for i, t in enumerate(ids) if origin[t].startswith(("holistic", "stepwise", "extraneous")))
    result, _ = play(judged, "judge_validation", "oracle", {"judge": Judge(YES)}, index=plan_case)
    names = {s.name for s in judged.metrics("judge_validation")}
    assert {"judge_agree", "judge_precision", "judge_recall", "judge_f1", "judge_grade_abs_err",
            "judge_flag_agree", "rule_correct", "correct"} <= names
    assert result.metrics["judge_agree"] == 1.0 and result.metrics["rule_correct"] == 1.0
    with pytest.raises(KeyError, match="needs grader: llm"):
        APB().tasks("judge_validation")
    assert "judge_validation" not in APB().settings()


def _config(helpers, options):
    return SweepConfig.model_validate({
        "name": "j", "models": [{"name": "oracle", "kind": "scripted", "policy": "oracle"}], "helpers": helpers,
        "benchmarks": [{"name": "apb", "options": options, "settings": ["holistic"], "tasks": {"limit": 2}}]})


def test_config_checks_the_helper_models():
    served = [{"name": "j7", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}]
    with pytest.raises(ConfigError, match="judge model 'missing' is not configured; add it under `helpers:`"):
        resolve_plans(_config(served, {"grader": "llm:missing"}))
    resolve_plans(_config(served, {"grader": "llm:j7", "critic": "model:j7"}))
    with pytest.raises(ConfigError, match="scripted policy"):
        resolve_plans(_config([], {"grader": "llm:oracle"}))
    with pytest.raises(ValueError, match="a helper must be a served model"):
        _config([{"name": "h", "kind": "scripted", "policy": "oracle"}], {})
    with pytest.raises(ValueError, match="pattern"):
        APB(grader="gpt-judge")
    assert _config(served, {}).config_sha256() != _config([], {}).config_sha256()


def test_shipped_judge_config_is_valid():
    from pathlib import Path

    from toolsweep.cluster.config import load_config

    cfg = load_config(Path(__file__).resolve().parents[3] / "configs" / "sweeps" / "apb_judge.yaml")
    [plan] = resolve_plans(cfg)
    assert len(plan.tasks_by_setting["judge_validation"]) == 720
    assert [m.name for m in cfg.helpers] == ["judge"]


def test_efficiency_follows_the_judges_verdict(judged):
    """C_pass and the optimal rate are over the cases the grader calls solved: with a judge grading, the
    judge's verdict (an optimal plan the judge fails is neither), unreadable leaves them undefined; the
    rule grader's values stay under rule_*."""
    failed, _ = play(judged, "efficiency", "oracle", {"judge": Judge({"is_correct": "NO", "score": 0.3})})
    m = failed.metrics
    assert m["correct"] == 0.0 and m["rule_correct"] == 1.0
    assert math.isnan(m["cost_pass"]) and m["optimal_rate"] == 0.0
    assert m["rule_cost_pass"] == m["cost"] and m["rule_optimal_rate"] == 1.0
    passed, _ = play(judged, "efficiency", "oracle", {"judge": Judge(YES)})
    assert passed.metrics["cost_pass"] == passed.metrics["cost"] and passed.metrics["optimal_rate"] == 1.0
    unreadable, _ = play(judged, "efficiency", "oracle", {"judge": Judge("fine")})
    assert math.isnan(unreadable.metrics["cost_pass"]) and math.isnan(unreadable.metrics["optimal_rate"])


def test_the_twins_are_judged_as_plans_and_their_refusal_read_as_the_controls(judged):
    """An Unsolvable setting's solvable twin gets the plan judge (J4, as the controls), not a J8 refusal
    judge, which asks about something missing; a Tool-Broken twin gets the step-wise judge (J1). Their
    `refused` and `false_recovery` are read from the answer by rule, as the controls' FRR is."""
    for setting, head in (("unsolvable_tool", "judge the quality of an AI-generated plan"),
                          ("broken", "evaluating a planning model’s next step prediction")):
        assert "-twin-" in judged.tasks(setting)[1]
        for verdict, correct in ((YES, 1.0), ({"is_correct": "NO", "grade": 0.2, "error_list": ["E2"]}, 0.0)):
            judge = Judge(verdict)
            twin, _ = play(judged, setting, "oracle", {"judge": judge}, index=1)
            assert len(judge.asked) == 1 and head in judge.asked[0], setting
            assert twin.metrics["correct"] == correct and twin.metrics["rule_correct"] == 1.0, setting
            assert twin.metrics.get("refused", 0.0) == 0.0 and twin.metrics.get("false_recovery", 0.0) == 0.0
            assert math.isnan(twin.metrics.get("pass", math.nan)) and math.isnan(twin.metrics.get("replace", math.nan))
