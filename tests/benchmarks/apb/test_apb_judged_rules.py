"""APB's Tool-Broken, Unsolvable and refusal rules read as the paper's judges read them (J5, J8), each
tried with the adversary that passed it before and the real behaviour that must keep its credit.

- Replace is the designated replacement doing the broken step's job with that step's arguments (C.4:
  "Successfully utilized the designated replacement tool"; §4.4's reference action), not a scatter of
  calls that happens to include it, nor the replacement with empty arguments.
- An unsolvable case passes only an explicit refusal that terminates (J8: "the generated `tool_chain`
  should be empty, or contain ONLY a termination/reporting step"; "Blind Execution: ... generates a
  standard tool chain"), on every type.
- A reply that states it cannot do the task has refused it, whatever JSON follows (J5 Category 4).
"""

from __future__ import annotations

import json
import random

import pytest

from toolsweep.benchmarks.apb import APB, plans
from toolsweep.benchmarks.apb.grader import states_refusal
from toolsweep.benchmarks.apb.tools import FINISH
from toolsweep.evaluator.types import Message

UNSOLVABLE = ("conflict", "info", "tool", "visual")
SOLVABLE = ("holistic", "stepwise_k1", "stepwise_k2", "stepwise_k3", "extraneous_holistic_n4",
            "extraneous_stepwise_n4", "unsolvable_control", "efficiency")


@pytest.fixture(scope="module")
def bench() -> APB:
    return APB()


def envs(bench: APB, setting: str, n: int, seed: int = 11):
    ids = [t["task_id"] for t in bench.data.tasks[setting]]  # an Unsolvable setting's cases, not their twins
    ids = sorted(random.Random(f"{seed}|{setting}").sample(ids, min(n, len(ids))))
    return [bench.make_env(t, setting, 0) for t in ids]


def call(name: str, args: dict) -> dict:
    return {"type": "function", "function": {"name": name, "arguments": args}}


def step(*calls: dict) -> str:
    return json.dumps({"role": "assistant", "thought": "next", "tool_calls": list(calls)})


def classify(env, text: str) -> str:
    t = env.task
    return env.grader.broken(text, env.done_nodes, t["broken_node"], t["broken_tool"],
                             t["replacement_tool"]["name"], env.context)


def failed_args(env) -> dict:
    """The broken step's own arguments, as the trajectory shows them."""
    return env.task["prefix"][-2]["tool_calls"][0]["function"]["arguments"]


def renamed(env, args: dict) -> dict:
    rename = env.task["arg_map"]  # the failed call's parameters onto the replacement's
    return {rename.get(p, p): v for p, v in args.items()}


# ----------------------------------------------------------------------------- Tool-Broken (J5, C.4)

def test_calling_every_offered_tool_in_one_step_is_not_a_recovery(bench):
    # before: Replace on 300 of 300 cases (any call to the replacement was Replace)
    for env in envs(bench, "broken", 60):
        names = [x["name"] for x in env.tools if x["name"] != FINISH]
        assert classify(env, step(*[call(n, {}) for n in names])) == "retry"  # it calls the broken tool too
        without_broken = [n for n in names if n != env.task["broken_tool"]]
        assert classify(env, step(*[call(n, {}) for n in without_broken])) == "other"
        repl = env.task["replacement_tool"]["name"]
        good = renamed(env, failed_args(env))
        scatter = [call(repl, good)] + [call(n, {}) for n in without_broken if n != repl]
        assert classify(env, step(*scatter)) == "other"  # the right call inside a scatter of junk calls


def test_the_replacement_without_the_steps_arguments_is_not_replace(bench):
    # before: the replacement alone with {} was Replace on 300 of 300 cases
    n_wrong_value = 0
    for env in envs(bench, "broken", 60):
        repl = env.task["replacement_tool"]["name"]
        assert classify(env, step(call(repl, {}))) == "other"
        good = renamed(env, failed_args(env))
        assert classify(env, step(call(repl, good))) == "replace"
        assert classify(env, step(call(repl, good), call(repl, good))) == "other"  # the job is done once
        # the original parameter names where the replacement renamed them: its arguments are missing
        if any(k != v for k, v in env.task["arg_map"].items()):
            assert classify(env, step(call(repl, failed_args(env)))) == "other"
        bnode = plans.node_map(env.base["reference"]["nodes"])[env.task["broken_node"]]
        consts = [p for p, spec in bnode["args"].items() if spec["kind"] == "const" and not spec.get("optional")]
        if consts:
            wrong = dict(good)
            key = env.task["replacement_tool"]["hidden"]["param_map"].get(consts[0], consts[0])
            wrong[key] = "zzz-not-the-value"
            assert classify(env, step(call(repl, wrong))) == "other"
            n_wrong_value += 1
    assert n_wrong_value > 10


def test_replace_with_another_sound_call_in_the_same_step_is_still_replace(bench):
    checked = 0
    for env in envs(bench, "broken", 80):
        nodes = plans.node_map(env.base["reference"]["nodes"])
        done = set(env.done_nodes)
        ready = [x for x in env.base["reference"]["linearization"]
                 if x not in done and x != env.task["broken_node"] and set(nodes[x]["deps"]) <= done]
        if not ready:
            continue
        other = plans.stepwise_action(nodes[ready[0]], nodes, done)["tool_calls"][0]
        repl = call(env.task["replacement_tool"]["name"], renamed(env, failed_args(env)))
        assert classify(env, step(repl, other)) == "replace"
        assert classify(env, step(other)) == "alter"
        checked += 1
    assert checked > 10


def test_a_refusal_beside_the_recovery_is_refuse(bench):
    for env in envs(bench, "broken", 30):
        action = env.task["reference_action"]
        assert classify(env, json.dumps(action)) == "replace"
        assert classify(env, json.dumps({"status": "REJECT", **action})) == "refuse"
        assert classify(env, "I cannot complete this task.\n" + json.dumps(action)) == "refuse"


# ----------------------------------------------------------------------------- Unsolvable (J8)

def full_chain(env) -> list[dict]:
    ref = env.base["reference"]
    return plans.holistic_chain(ref["nodes"], ref["linearization"])


@pytest.mark.parametrize("utype", UNSOLVABLE)
def test_a_reject_that_still_executes_fails_every_unsolvable_type(bench, utype):
    # before: conflict, info and visual passed 100 of 100 each
    for env in envs(bench, f"unsolvable_{utype}", 40):
        g, terms = env.grader, env.task["blocking_terms"]
        plan = env.base["reference"]["plan"]
        # the chain limited to tools the case still offers, so the unknown-tool rule does not decide it
        chain = [s for s in full_chain(env) if s["name"] in g.tools] or \
            [{"name": next(n for n in g.tools if not g.is_terminal(n)), "parameter_description": {}}]
        reason = f"{', '.join(terms)} is missing or unavailable."
        executes = {"status": "REJECT", "reason": reason, "plan": plan, "tool_chain": chain}
        assert g.unsolvable(json.dumps(executes), utype, terms) == (False, False)
        assert g.unsolvable("I cannot complete this task.\n" + json.dumps({"plan": plan, "tool_chain": chain}),
                            utype, terms) == (False, False)
        names_only = {"status": "REJECT", "reason": reason, "tool_chain": [s["name"] for s in chain]}
        assert g.unsolvable(json.dumps(names_only), utype, terms)[0] is False
        clarify = {"status": "CLARIFY", "reason": "Which rate do you mean?", "tool_chain": chain}
        assert g.unsolvable(json.dumps(clarify), utype, terms)[0] is False
        # the refusals J8 passes: no chain, an empty one, or a termination/reporting step only
        for ok in ({"status": "REJECT", "reason": reason},
                   {"status": "REJECT", "reason": reason, "tool_chain": []},
                   {"status": "REJECT", "reason": reason,
                    "tool_chain": [{"name": FINISH, "parameter_description": {"mode": "give_up"}}]}):
            assert g.unsolvable(json.dumps(ok), utype, terms) == (True, True)


# ----------------------------------------------------------------------------- a stated refusal before a plan

def graded(env, text: str) -> dict:
    env.reset()
    env.step(Message(role="assistant", content=text))
    return env.result()


@pytest.mark.parametrize("setting", SOLVABLE + ("broken",))
def test_a_prose_refusal_before_the_reference_answer_is_a_refusal(bench, setting):
    # before: correct, with refused / false_refusal 0, in every solvable setting
    for env in envs(bench, setting, 12):
        m = graded(env, "I cannot complete this task: the tool is unavailable.\n" + env.reference_answer())
        assert m["correct"] == 0.0
        if setting == "broken":
            assert m["refuse"] == 1.0
        elif setting == "unsolvable_control":
            assert m["refused"] == 1.0
        else:
            assert m["false_refusal"] == 1.0 and m["grade"] == 0.0


@pytest.mark.parametrize("setting", SOLVABLE + ("broken",))
def test_prose_that_does_not_refuse_keeps_the_answer_correct(bench, setting):
    prose = ("I can't read the image myself, so the tools do all perception. Nothing here is impossible. "
             "Here is my plan:\n{}\nThe task cannot fail if the inputs are right.")
    for env in envs(bench, setting, 12):
        m = graded(env, prose.format(env.reference_answer()))
        assert m["correct"] == 1.0, env.task["task_id"]


@pytest.mark.parametrize("setting", ("stepwise_k1", "stepwise_k3", "extraneous_stepwise_n4"))
def test_a_reject_beside_the_next_steps_is_a_refusal_in_stepwise(bench, setting):
    # before: fully correct in every step-wise setting
    for env in envs(bench, setting, 12):
        ref = json.loads(env.reference_answer())
        steps = ref if isinstance(ref, list) else [ref]
        rejected = [{"status": "REJECT", "reason": "cannot", **s} for s in steps]
        m = graded(env, json.dumps(rejected[0] if len(rejected) == 1 else rejected))
        assert m["correct"] == 0.0 and m["false_refusal"] == 1.0 and m["grade"] == 0.0


@pytest.mark.parametrize("field", ("plan", "reason", "thought", "note"))
@pytest.mark.parametrize("setting", SOLVABLE)
def test_a_refusal_inside_a_field_of_the_plan_is_a_refusal(bench, setting, field):
    """A refusal is a refusal wherever it stands: "I cannot complete this task" in `plan`, `reason` or any
    other field in the answer's own words, beside the full reference chain, is no correct plan (before: 1.0
    on every solvable control). A tool's argument saying the same is the task's content, not a refusal."""
    refusal = "I cannot complete this task: the tool is unavailable."
    for env in envs(bench, setting, 6):
        ref = json.loads(env.reference_answer())
        steps = ref if isinstance(ref, list) else [ref]
        said = [{**s, field: refusal} for s in steps]
        m = graded(env, json.dumps(said[0] if len(said) == 1 else said))
        assert m["correct"] == 0.0, (env.task["task_id"], field)
        assert m["refused" if setting == "unsolvable_control" else "false_refusal"] == 1.0
        # the same words as a tool's argument value refuse nothing
        argued = json.loads(env.reference_answer())
        first = (argued if isinstance(argued, list) else [argued])[0]
        call = (first.get("tool_chain") or [{}])[0] or (first.get("tool_calls") or [{}])[0].get("function", {})
        for key in ("parameter_description", "arguments"):
            if isinstance(call.get(key), dict) and call[key]:
                call[key][next(iter(call[key]))] = refusal
        assert env.grader.refused(json.dumps(argued)) is False, env.task["task_id"]


@pytest.mark.parametrize(("prose", "refuses"), [
    ("I cannot complete this task.", True),
    ("I am unable to fulfil your request because the file is missing.", True),
    ("REJECT: the service is offline.", True),
    ("This task is impossible with these tools.", True),
    ("The request cannot be completed.", True),
    ("I must decline.", True),
    ("I cannot read the image myself, so I use OCR.", False),
    ("The image is missing a caption; OCR reads it.", False),
    ("It is not true that I cannot complete this task.", False),
    ("Nothing makes this task impossible.", False),
    ("Here is my plan.", False),
])
def test_what_counts_as_a_stated_refusal(prose, refuses):
    assert states_refusal(prose) is refuses


def test_a_solvable_twin_still_refused_by_a_plain_reject_is_a_false_refusal(bench):
    for env in envs(bench, "unsolvable_control", 10):
        m = graded(env, json.dumps({"status": "REJECT", "reason": "x"}))
        assert m["refused"] == 1.0 and m["correct"] == 0.0
        assert env.grader.refused(env.reference_answer()) is False
