"""Episode checks through run_episode (spec §3, §5, §6.2, §10.6, §10.8-10.12)."""

from __future__ import annotations

import asyncio
import json

import pytest

from toolsweep.benchmarks.planbench_xl import PlanBenchXL
from toolsweep.benchmarks.planbench_xl.blocking import SETTINGS
from toolsweep.benchmarks.planbench_xl.environment import (
    ENFORCED_FEEDBACK, INVALID_ACTION, PlanBenchEnv, system_prompt,
)
from toolsweep.benchmarks.planbench_xl.policies import answer_text, call_text, retrieve_text
from toolsweep.benchmarks.planbench_xl.tasks import _make_task, dt_mask
from toolsweep.benchmarks.planbench_xl.world import norm_value
from toolsweep.evaluator.episode import run_episode
from toolsweep.evaluator.registry import get_benchmark, register_benchmark
from toolsweep.evaluator.types import AgentReply, Message, TerminationReason, WorkUnit

register_benchmark("planbench_xl", "toolsweep.benchmarks.planbench_xl:PlanBenchXL")


def bench() -> PlanBenchXL:
    return get_benchmark("planbench_xl")  # type: ignore[return-value]


def unit(setting: str, task_id: str, model: str = "oracle", seed: int = 42) -> WorkUnit:
    return WorkUnit(sweep="t", model=model, benchmark="planbench_xl", setting=setting, task_id=task_id, seed=seed)


def play(setting: str, task_ids: list[str], policy: str = "oracle", seed: int = 42):
    b = bench()

    async def go():
        out = []
        for tid in task_ids:
            env = b.make_env(tid, setting, seed)
            pol = b.make_scripted_policy(policy, env, seed)
            out.append(await run_episode(env, pol, unit(setting, tid, policy, seed), max_turns=b.max_turns(setting)))
        return out

    return asyncio.run(go())


class Script:
    """A fixed sequence of replies (a fake agent)."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = list(replies)

    async def act(self, messages, tools) -> AgentReply:
        text = self.replies.pop(0) if self.replies else "nothing"
        return AgentReply(message=Message(role="assistant", content=text))


def run_script(env: PlanBenchEnv, replies: list[str]):
    return asyncio.run(run_episode(env, Script(replies), unit(env.spec.name, env.task.id, "script"), max_turns=200))


@pytest.mark.parametrize("setting", ["default", "one_path_mixed"])
def test_oracle_solves_all_327_tasks(setting):
    results = play(setting, bench().tasks(setting))
    assert len(results) == 327
    for r in results:
        m = r.metrics
        assert r.termination == TerminationReason.ANSWERED and m["accuracy"] == 1.0, r.unit.task_id
        assert m["egt_precision"] == 1.0 and m["invalid_calls"] == 0 and m["untrusted_rejections"] == 0
        assert m["retrievals"] == m["tool_calls"] and m["turns"] == 2 * m["tool_calls"] + 1


@pytest.mark.slow
@pytest.mark.parametrize("setting", [s for s in SETTINGS if s not in ("default", "one_path_mixed", "single_step")])
def test_oracle_solves_every_task_of_every_other_setting(setting):
    """Spec §10.6, in full: every task of every setting, no sampling."""
    ids = bench().tasks(setting)
    assert len(ids) == 327
    for r in play(setting, ids):
        assert r.metrics["accuracy"] == 1.0, (setting, r.unit.task_id)


def test_oracle_single_step_and_other_seeds():
    for r in play("single_step", bench().tasks("single_step")):
        assert r.metrics["accuracy"] == 1.0 and r.metrics["turns"] == 3 and r.metrics["gt_tool_retrieved"] == 1.0
    for seed in (1000, 2000, 3000):
        assert all(r.metrics["accuracy"] == 1.0 for r in play("one_path_mixed", bench().tasks("default")[::29], seed=seed))


def test_oracle_in_blocked_setting_avoids_blocked_tools():
    b = bench()
    hit = 0
    for tid in b.tasks("default")[::7]:
        env = b.make_env(tid, "one_path_mixed", 42)
        r = asyncio.run(run_episode(env, b.make_scripted_policy("oracle", env, 0), unit("one_path_mixed", tid)))
        called = {s["tool_id"] for s in env.state.log if s.get("action") == "tool_call"}
        assert not called & env.blocked and r.metrics["accuracy"] == 1.0
        hit += bool(env.blocked)
    assert hit > 0


def _worked_example_env() -> tuple[PlanBenchEnv, dict]:
    """Spec §6.2 with U=order_id (initial), O=return_request_id, R=return_audit_id, S=refund_status."""
    b = bench()
    w, g = b.world, b.task_set.graph
    names = ["order_id", "return_request_id", "return_audit_id", "refund_status"]
    chain = [next(t for t in w.executable if t.inputs == (a,) and t.output == z) for a, z in zip(names, names[1:])]
    sets = g.minimal_sets(dt_mask(["order_id"]), dt_mask(["refund_status"]), cap=3)
    task = _make_task(w, g, "worked_example", ("order_id",), "refund_status", sets)
    env = PlanBenchEnv(w, b._data()[2], task, SETTINGS["default"], frozenset(), 42)
    return env, {"chain": chain, "rec": w.records[task.case - 1], "noisy": w.noisy_of[chain[1].id]}


def _io(t) -> str:
    return retrieve_text("by_io_info", [d.replace("_", " ") for d in t.inputs], [t.output.replace("_", " ")])


def test_worked_example_metrics():
    env, ctx = _worked_example_env()
    o, r, s = ctx["chain"]
    rec = ctx["rec"]
    noisy = next(n for n in ctx["noisy"] if n.kind in ("noisy:stale", "noisy:unreliable", "noisy:non_authoritative"))
    replies = [
        _io(o),
        call_text(o.name, {o.params[0][0]: rec["order_id"]}),
        _io(r),
        _io(s),
        "<tool_call>{not json</tool_call>",
        call_text(noisy.name, {noisy.params[0][0]: rec["return_request_id"]}),
        call_text(s.name, {s.params[0][0]: noisy.fixed_output}),
        call_text(r.name, {r.params[0][0]: rec["return_request_id"]}),
        call_text(s.name, {s.params[0][0]: rec["return_audit_id"]}),
        answer_text(rec["refund_status"]),
    ]
    res = run_script(env, replies)
    m = res.metrics
    assert res.termination == TerminationReason.ANSWERED
    assert m["accuracy"] == 1.0 and m["egt_precision"] == 1.0 and m["turns"] == 10 and m["edt"] == 3
    assert (m["retrievals"], m["tool_calls"], m["invalid_calls"], m["untrusted_rejections"]) == (3, 6, 1, 1)
    assert round(100 * m["invalid_calls"] / m["tool_calls"], 1) == 16.7


def test_grounding_rules():
    b = bench()
    t0 = b.task_set.tasks[0]
    env = b.make_env(t0.id, "default", 42)
    res = run_script(env, [answer_text(t0.gold)])
    assert res.metrics["accuracy"] == 0 and res.metrics["failure_target_datatype_not_reached"] == 1
    # Fig. 11/14: default_payment_method_id equals pm_9001 in case 1 but is a different datatype.
    env, ctx = _worked_example_env()
    w = b.world
    user_default = next(t for t in w.executable if t.inputs == ("payment_method_id",) and t.output == "default_payment_method_id")
    pm_user = next(t for t in w.executable if t.inputs == ("payment_method_id",) and t.output == "person_name")
    assert user_default and pm_user
    # A task from payment_method_id is not needed: check the datatype rule directly on the env.
    env.reset()
    env.state.have.add("default_payment_method_id")
    env.state.retrieved[pm_user.name] = pm_user
    obs = env.step(Message(role="assistant", content=call_text(pm_user.name, {pm_user.params[0][0]: "pm_9001"})))
    body = json.loads(obs.messages[0].content)
    assert body["status"] == "rejected" and body["error"] == 'missing required datatype ["payment_method_id"]'
    assert env.state.invalid_calls == 1


def test_implicit_failure_value_as_answer_is_wrong_and_enforced_feedback_is_bounded():
    b = bench()
    for tid in b.tasks("default"):
        env = b.make_env(tid, "one_path_mixed_enf2", 42)
        if env.blocked:
            break
    env.reset()
    replies = [answer_text("no idea")] * 4
    res = run_script(env, replies)
    feedback = [m for m in res.trajectory.messages if m.role == "user" and m.content == ENFORCED_FEEDBACK]
    assert len(feedback) == 2 and res.metrics["turns"] == 3 and res.metrics["accuracy"] == 0
    # An implicit blocker's value is untrusted downstream and never a correct answer.
    env, ctx = _worked_example_env()
    o = ctx["chain"][0]
    imp = b.world.blockers_of[o.id]["imp"]
    env.reset()
    env.state.retrieved[imp.name] = imp
    env.step(Message(role="assistant", content=call_text(imp.name, {imp.params[0][0]: ctx["rec"]["order_id"]})))
    assert "return_request_id" in env.state.have and "return_request_id" not in env.state.executed
    # Fig. 17: the target reached only through an implicit failure; its value as the answer is wrong.
    last = ctx["chain"][2]
    imp_last = b.world.blockers_of[last.id]["imp"]
    env.state.have.add("return_audit_id")  # as if obtained from a trusted call
    env.state.grounded.add(norm_value(ctx["rec"]["return_audit_id"]))
    env.state.grounded_as.setdefault(norm_value(ctx["rec"]["return_audit_id"]), set()).add("return_audit_id")
    env.state.retrieved[imp_last.name] = imp_last
    env.step(Message(role="assistant", content=call_text(imp_last.name, {imp_last.params[0][0]: ctx["rec"]["return_audit_id"]})))
    obs = env.step(Message(role="assistant", content=answer_text(imp_last.fixed_output)))
    m = env.result()
    assert obs.done and m["accuracy"] == 0 and m["failure_final_answer_wrong"] == 1
    assert m["category_no_traction"] == 1.0 or m["category_other"] == 1.0


def test_error_taxonomy_is_the_papers_and_the_rest_is_other():
    """§6.3/§6.4: a wrong answer is a 'wrong tool value' only if a tool returned it; a budget spent
    on calls rather than search is not 'search exhaustion'; a datatype held only through an implicit
    failure does not make the first real call for it non-progress."""
    b = bench()
    env, ctx = _worked_example_env()
    o, r, s = ctx["chain"]
    rec = ctx["rec"]
    imp = b.world.blockers_of[o.id]["imp"]
    env.reset()
    env.state.retrieved[imp.name] = imp
    env.step(Message(role="assistant", content=call_text(imp.name, {imp.params[0][0]: rec["order_id"]})))
    env.step(Message(role="assistant", content=_io(o)))
    env.step(Message(role="assistant", content=call_text(o.name, {o.params[0][0]: rec["order_id"]})))
    assert env.state.log[-1]["progress"] is True  # D_t held it (Fig. 17), D_exec did not
    env.step(Message(role="assistant", content=answer_text("rrq_99999")))
    assert env.result()["ending_other"] == 1.0  # fabricated: no tool returned it

    env, _ = _worked_example_env()
    env.reset()
    env.step(Message(role="assistant", content=_io(o)))
    env.step(Message(role="assistant", content=call_text(o.name, {o.params[0][0]: rec["order_id"]})))
    env.step(Message(role="assistant", content=answer_text(rec["return_request_id"])))
    assert env.result()["ending_wrong_tool_value"] == 1.0

    calls = [_io(o)] + [call_text(o.name, {o.params[0][0]: rec["order_id"]})] * 99
    env, _ = _worked_example_env()
    m = run_script(env, calls).metrics
    assert m["failure_exceeded_max_steps"] == 1 and m["ending_other"] == 1.0
    searches = [_io(o), call_text(o.name, {o.params[0][0]: rec["order_id"]})] + [_io(r)] * 98
    env, _ = _worked_example_env()
    m = run_script(env, searches).metrics
    assert m["failure_exceeded_max_steps"] == 1 and m["ending_search_exhaustion"] == 1.0


def test_malformed_outputs_are_classified_never_raise():
    b = bench()
    t = b.task_set.tasks[3]
    env = b.make_env(t.id, "default", 42)
    first = b.world.executable[t.gt_path[0]]
    replies = [
        "I will just chat.",  # no tag
        "<retrieve_tools>{}</retrieve_tools><tool_call>{}</tool_call>",  # two tags
        "<retrieve_tools>not json at all</retrieve_tools>",  # unparseable retrieval
        "<think>hmm <final_answer>x</final_answer></think>" + _io(first),  # reasoning stripped
        call_text("get_nothing_from_nowhere", {"a": "b"}),  # unknown tool
        call_text(first.name.upper(), {"wrong_key": t.input_values[0]}),  # wrong keys (name case-insensitive)
        "<tool_call>```json\n{\"tool_name\": 5}\n```</tool_call>",  # third invalid call -> end
    ]
    res = run_script(env, replies)
    log = env.state.log
    assert [r["action"] for r in log[:3]] == ["invalid_format", "invalid_format", "retrieve"]
    assert res.trajectory.steps[0].observation[0].content == INVALID_ACTION
    assert log[2]["mode"] == "malformed" and log[3]["action"] == "retrieve" and log[3]["tool_count"] == 6
    assert "has not been retrieved" in log[4]["error"] and "do not match" in log[5]["error"]
    assert res.termination == TerminationReason.AGENT_FORMAT_ERROR and res.metrics["failure_exceeded_max_tool_call_errors"] == 1
    assert res.metrics["tool_calls"] == 3 and res.metrics["retrievals"] == 2 and res.metrics["turns"] == 7
    assert res.metrics["category_format_error"] == 1


def test_noisy_value_is_untrusted_not_invalid_and_budget_is_100_turns():
    env, ctx = _worked_example_env()
    o, r, s = ctx["chain"]
    noisy = next(n for n in bench().world.noisy_of[o.id] if n.kind == "noisy:stale")
    res = run_script(env, [_io(o), call_text(noisy.name, {noisy.params[0][0]: ctx["rec"]["order_id"]})])
    assert res.termination == TerminationReason.MAX_TURNS  # script ran dry: invalid formats until 100
    assert res.metrics["turns"] == 100 and res.metrics["failure_exceeded_max_steps"] == 1
    assert res.metrics["invalid_calls"] == 0 and res.metrics["tool_calls"] == 1
    assert "return_request_id" not in env.state.executed and "return_request_id" not in env.state.have
    assert noisy.fixed_output in env.state.untrusted_vals


def test_random_never_scores_and_every_correct_answer_was_obtained():
    """Properties, not a planner floor: the random policy can never pass the grounded grader, and
    whatever any scripted policy gets right, its answer is a value a trusted call of that episode
    produced (the planner scores what a typed search can, see bench/planbench_xl_baselines.py)."""
    b = bench()
    ids = b.tasks("default")[::41]
    solved = 0
    for setting in ("default", "one_path_implicit", "one_path_misleading"):
        rnd = play(setting, ids, "random")
        assert sum(r.metrics["accuracy"] for r in rnd) == 0
        for tid in ids:
            env = b.make_env(tid, setting, 42)
            res = asyncio.run(run_episode(env, b.make_scripted_policy("planner", env, 42),
                                          unit(setting, tid, "planner"), max_turns=b.max_turns(setting)))
            if res.metrics["accuracy"] == 1.0:
                solved += 1
                assert norm_value(env.task.gold) in env.state.grounded
                assert env.state.log[-1]["answer_grounded"] and env.state.log[-1]["target_reached"]
    assert solved > 0  # the property was checked on some correct answer, not on none


def _first_step_blocked(setting: str):
    b = bench()
    for t in b.task_set.tasks:
        env = b.make_env(t.id, setting, 42)
        for tool_id in sorted(env.blocked):
            tool = b.world.by_id[tool_id]
            if tool.input_set <= set(t.inputs):
                return env, tool
    raise AssertionError("no task whose first step is blocked")


def test_a_misleading_alternative_does_what_its_description_says():
    """Tab. 4: a misleading tool's response is consistent with its own description. It returns its
    declared field of the record; it counts as trusted exactly when the world has that function."""
    b = bench()
    env, tool = _first_step_blocked("one_path_misleading")
    rec = b.world.records[env.task.case - 1]
    alts = env.retriever.alternatives(tool.id, ("sem",))
    assert alts  # the loop below checks something
    env.reset()
    env.step(Message(role="assistant", content=_io(tool)))
    for sem in alts:
        obs = env.step(Message(role="assistant", content=call_text(sem.name, {p: rec[d] for p, d in sem.params})))
        body = json.loads(obs.messages[0].content)
        assert body["output_value"] == rec[sem.output] and body["output_datatype"] == sem.output
        assert (sem.output in env.state.executed) == (sem.id in b.world.sem_relation)
        assert env.state.log[-1]["trusted"] == (sem.id in b.world.sem_relation)


def test_show_steps_left_tells_the_budget_without_breaking_json():
    from toolsweep.benchmarks.planbench_xl import PlanBenchXL

    b = PlanBenchXL(show_steps_left=True)
    tid = b.tasks("default")[0]
    env = b.make_env(tid, "default", 42)
    env.reset()
    obs = env.step(Message(role="assistant", content=retrieve_text("by_outputs", outputs=["order status"])))
    assert json.loads(obs.messages[0].content)["steps_left"] == 99
    obs = env.step(Message(role="assistant", content="no tags at all"))
    assert obs.messages[0].content.endswith("(Steps left: 98)")
    plain = bench().make_env(tid, "default", 42)
    plain.reset()
    obs = plain.step(Message(role="assistant", content=retrieve_text("by_outputs", outputs=["order status"])))
    assert "steps_left" not in json.loads(obs.messages[0].content)


def test_system_prompt_is_the_paper_prompt():
    p = system_prompt()
    assert p.startswith("[System Prompt]\nYou are an agent that solves user queries")
    assert "You have at most 100 steps." in p and p.endswith("Begin.")
    assert "(already satisfied at query start in all-tools mode;" in p
    assert "by_io_info" in p and "by_io_info" not in system_prompt(meta_tool_addendum=False)


def test_fig11_default_payment_method_trap_is_not_a_correct_answer():
    """Fig. 11/14: from an order, the default payment method id equals pm_9001 in case 1, yet the
    target payment_method_id was never reached, and the value cannot stand in for it."""
    from toolsweep.benchmarks.planbench_xl.tasks import Task

    b = bench()
    w, g = b.world, b.task_set.graph
    rec = w.records[0]
    task = Task(id="fig11", inputs=("order_id",), target="payment_method_id", case=1,
                input_values=(rec["order_id"],), gold=rec["payment_method_id"], query="q", lstar=0,
                gt_path=(), graph=g)
    env = PlanBenchEnv(w, b._data()[2], task, SETTINGS["default"], frozenset(), 42)
    to_draft = next(t for t in w.executable if t.inputs == ("order_id",) and t.output == "order_draft_id")
    to_default = next(t for t in w.executable if t.inputs == ("order_draft_id",) and t.output == "default_payment_method_id")
    pm_tool = next(t for t in w.executable if t.inputs == ("payment_method_id",) and t.output == "user_id")
    assert rec["default_payment_method_id"] == "pm_9001" == task.gold
    res = run_script(env, [
        _io(to_draft), call_text(to_draft.name, {to_draft.params[0][0]: rec["order_id"]}),
        _io(to_default), call_text(to_default.name, {to_default.params[0][0]: rec["order_draft_id"]}),
        _io(pm_tool), call_text(pm_tool.name, {pm_tool.params[0][0]: "pm_9001"}),
        answer_text("pm_9001"),
    ])
    rejected = json.loads(res.trajectory.steps[5].observation[0].content)
    assert rejected["error"] == 'missing required datatype ["payment_method_id"]'
    assert res.metrics["accuracy"] == 0 and res.metrics["failure_target_datatype_not_reached"] == 1
    assert res.metrics["invalid_calls"] == 1
    assert res.metrics["egt_precision"] < 1.0  # the default-method detour is off every GT path


def test_a_guessed_value_is_never_used_or_credited():
    # Before value-level provenance, an agent that got an implicit failure's value and then used (or
    # answered) the real ID it guessed scored correct: 41 of 42 such episodes in one_path_implicit.
    b, guessed, answered = bench(), 0, 0
    for setting in ("one_path_implicit", "default"):
        for tid in b.tasks(setting)[:15]:
            env = b.make_env(tid, setting, 0)
            policy = b.make_scripted_policy("guess_ids", env, 0)
            unit = WorkUnit(sweep="t", model="g", benchmark="planbench_xl", setting=setting, task_id=tid, seed=0)
            r = asyncio.run(run_episode(env, policy, unit, max_turns=b.max_turns(setting)))
            assert r.metrics["accuracy"] == 0.0, (setting, tid)
            answers = [x for x in env.state.log if x.get("action") == "final_answer"]
            assert all(a["norm_match"] and not a["answer_grounded"] for a in answers), (setting, tid)
            answered += bool(answers)
            guessed += env.state.ungrounded
    assert guessed > 0 and answered > 0  # guessed arguments were refused, and guessed answers not credited
