"""The rule grader: planted errors give exactly their flag (§12.10-12.17), the grade rubric is a
monotone total function (§12.13), and malformed output is graded, never raised (§5)."""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import random

import pytest

from toolsweep.benchmarks.apb import APB, plans
from toolsweep.benchmarks.apb.grader import holistic_grade, stepwise_grade
from toolsweep.benchmarks.apb.tools import FINISH
from toolsweep.evaluator.episode import run_episode
from toolsweep.evaluator.types import AgentReply, Message, TerminationReason, WorkUnit


@pytest.fixture(scope="module")
def bench() -> APB:
    return APB()


def envs(bench: APB, setting: str, n: int | None = None, seed: int = 3):
    ids = [t["task_id"] for t in bench.data.tasks[setting]]  # an Unsolvable setting's cases, not their twins
    if n is not None and n < len(ids):
        ids = random.Random(seed).sample(ids, n)
    return [bench.make_env(t, setting, 0) for t in ids]


def oracle_obj(env) -> dict:
    return json.loads(env.reference_answer())


def node_of(env, nid):
    return plans.node_map(env.base["reference"]["nodes"])[nid]


def grade(env, obj):
    return env.grader.holistic(json.dumps(obj))


def forbidden_tools(env) -> set[str]:
    """Tools a case's constraints forbid, by name or by capability."""
    names = {t for c in env.base["constraints"] if c["type"] == "forbid_tool" for t in c["spec"]["tools"]}
    caps = {c["spec"]["cap"] for c in env.base["constraints"] if c["type"] == "forbid_capability"}
    return names | {t["name"] for t in env.tools if caps & set(t["hidden"]["capabilities"])}


def chain_index(obj, env, nid):
    """Position of the oracle chain entry for node `nid` (the oracle follows the linearization)."""
    return env.base["reference"]["linearization"].index(nid)


# ----------------------------------------------------------------------------- holistic perturbations (§12.11)

def test_any_topological_order_and_reference_style_is_correct(bench):
    for env in envs(bench, "holistic", 150):
        ref = env.base["reference"]
        rules = [(c["spec"]["before"], c["spec"]["after"]) for c in env.base["constraints"] if c["type"] == "order"]
        for k, style in enumerate(("dollar", "step")):
            for attempt in range(50):  # a topological order that also keeps the query's stated order
                order = plans.linearize(ref["nodes"], random.Random(f"{env.task['task_id']}|{k}|{attempt}"))
                if all(order.index(a) < order.index(b) for a, b in rules):
                    break
            chain = plans.holistic_chain(ref["nodes"], order, style=style)
            res = env.grader.holistic(json.dumps({"plan": ref["plan"], "tool_chain": chain}))
            assert res.correct and res.grade == 1.0 and not res.flags, (env.task["task_id"], res.notes)


def test_drop_goal_node_gives_exactly_e2(bench):
    checked = 0
    for env in envs(bench, "holistic", 200):
        obj = oracle_obj(env)
        goal = env.base["reference"]["goal_node"]
        del obj["tool_chain"][chain_index(obj, env, goal)]
        res = grade(env, obj)
        assert res.flags == {"E2"} and not res.correct, res.notes
        if res.coverage >= 0.7:
            assert res.grade == 0.6
            checked += 1
    assert checked > 100


def _unique_tool_nodes(env):
    ref = env.base["reference"]
    tools = [n["tool"] for n in ref["nodes"]]
    consumers = {n["id"]: [m for m in ref["nodes"] if n["id"] in m["deps"] and plans.spec_sources] for n in ref["nodes"]}
    out = []
    for n in ref["nodes"]:
        if n["goal"] or tools.count(n["tool"]) != 1 or n["alt_tools"]:
            continue
        cons = consumers[n["id"]]
        if cons and all(any(n["id"] in plans.spec_sources(s) for s in c["args"].values()) for c in cons):
            out.append(n)
    return out


def test_drop_non_goal_node_keeping_dollar_refs_gives_e2_e6(bench):
    n_checked = 0
    for env in envs(bench, "holistic", 200):
        if len(env.base["reference"]["nodes"]) < 6:
            continue
        cands = _unique_tool_nodes(env)
        if not cands:
            continue
        obj = oracle_obj(env)
        del obj["tool_chain"][chain_index(obj, env, cands[0]["id"])]
        res = grade(env, obj)
        assert res.flags == {"E2", "E6"}, (env.task["task_id"], res.notes)
        n_checked += 1
    assert n_checked > 50


def _plain_const(env, allow_goal_node=False):
    constrained = {(c["spec"]["node"], c["spec"]["param"]) for c in env.base["constraints"] if c["type"] == "param_equals"}
    for nid in env.base["reference"]["linearization"]:
        n = node_of(env, nid)
        if n["goal"] and not allow_goal_node:
            continue
        for p, spec in n["args"].items():
            if spec["kind"] == "const" and not spec["goal_slot"] and (nid, p) not in constrained:
                return n, p
    return None, None


def _altered(v):
    return round(v * 1.37 + 1.11, 3) if isinstance(v, (int, float)) else "zzz-unrelated-value"


def test_alter_non_goal_const_gives_exactly_e5_and_grade_08(bench):
    n_checked = 0
    for env in envs(bench, "holistic", 250):
        if len(env.base["reference"]["nodes"]) < 10:
            continue
        n, p = _plain_const(env)
        if n is None:
            continue
        obj = oracle_obj(env)
        step = obj["tool_chain"][chain_index(obj, env, n["id"])]
        step["parameter_description"][p] = _altered(step["parameter_description"][p])
        res = grade(env, obj)
        assert res.flags == {"E5"} and res.grade == 0.8, (env.task["task_id"], res.notes)
        n_checked += 1
    assert n_checked > 80


def test_alter_goal_slot_gives_exactly_e1(bench):
    for env in envs(bench, "holistic", 150):
        obj = oracle_obj(env)
        done = False
        for i, nid in enumerate(env.base["reference"]["linearization"]):
            for p, spec in node_of(env, nid)["args"].items():
                if spec["kind"] == "const" and spec["goal_slot"]:
                    obj["tool_chain"][i]["parameter_description"][p] = "Someone Else Entirely"
                    done = True
                    break
            if done:
                break
        assert done
        res = grade(env, obj)
        assert res.flags == {"E1"} and not res.correct, res.notes


def test_swap_dependent_pair_gives_exactly_e4(bench):
    n_checked = 0
    for env in envs(bench, "holistic", 200):
        order = env.base["reference"]["linearization"]
        tools = [n["tool"] for n in env.base["reference"]["nodes"]]
        for i in range(len(order) - 1):
            u, v = order[i], order[i + 1]
            # an unambiguous pair: with a repeated tool, the swapped calls can read as another entity's steps
            unique = tools.count(node_of(env, u)["tool"]) == 1 and tools.count(node_of(env, v)["tool"]) == 1
            if u in node_of(env, v)["deps"] and not node_of(env, v)["goal"] and unique:
                obj = oracle_obj(env)
                tc = obj["tool_chain"]
                tc[i], tc[i + 1] = tc[i + 1], tc[i]
                res = grade(env, obj)
                assert res.flags == {"E4"}, (env.task["task_id"], res.notes)
                n_checked += 1
                break
    assert n_checked > 100


def test_tool_name_typo_or_case_change_gives_e6(bench):
    for k, env in enumerate(envs(bench, "holistic", 150)):
        obj = oracle_obj(env)
        i = 0
        name = obj["tool_chain"][i]["name"]
        obj["tool_chain"][i]["name"] = name.swapcase() if k % 2 else name[:-1] + ("x" if name[-1] != "x" else "y")
        res = grade(env, obj)
        assert "E6" in res.flags and not res.correct


def test_constraint_violations_give_exactly_e3(bench):
    forb = brk = orders = caps = forb_cap = per_item = ranges = 0
    for env in envs(bench, "holistic", 400):
        for c in env.base["constraints"]:
            obj = oracle_obj(env)
            if c["type"] == "forbid_tool":
                obj["tool_chain"].insert(0, {"name": c["spec"]["tools"][0], "parameter_description": {}, "reason": "x"})
                forb += 1
            elif c["type"] == "param_equals":
                i = chain_index(obj, env, c["spec"]["node"])
                pd = obj["tool_chain"][i]["parameter_description"]
                pd[c["spec"]["param"]] = _altered(pd[c["spec"]["param"]])
                brk += 1
            elif c["type"] == "max_calls":
                # a repeat of the last call to that tool, right after it (one call too many)
                i = max(j for j, t in enumerate(obj["tool_chain"]) if t["name"] == c["spec"]["tool"])
                obj["tool_chain"].insert(i + 1, json.loads(json.dumps(obj["tool_chain"][i])))
                caps += 1
            elif c["type"] == "order":
                # move the 'after' node (a chain head: nothing it needs) to the very front
                i = chain_index(obj, env, c["spec"]["after"])
                obj["tool_chain"].insert(0, obj["tool_chain"].pop(i))
                orders += 1
            elif c["type"] == "param_range":
                i = chain_index(obj, env, c["spec"]["node"])
                pd = obj["tool_chain"][i]["parameter_description"]
                inside = dict(obj, tool_chain=[dict(t) for t in obj["tool_chain"]])
                inside["tool_chain"][i] = dict(obj["tool_chain"][i], parameter_description=dict(
                    pd, **{c["spec"]["param"]: c["spec"]["min"] + 1}))
                assert grade(env, inside).correct  # any threshold inside the range is right
                pd[c["spec"]["param"]] = c["spec"]["max"] + 5
                ranges += 1
            elif c["type"] == "forbid_capability":
                tool = next(t["name"] for t in env.tools if c["spec"]["cap"] in t["hidden"]["capabilities"])
                obj["tool_chain"].insert(0, {"name": tool, "parameter_description": {"x": "y"}, "reason": "x"})
                forb_cap += 1
            elif c["type"] == "per_item":
                # the batching failure: one call fewer than items; the missing lookup is also E2
                heads = [i for i, t in enumerate(obj["tool_chain"]) if t["name"] == c["spec"]["tool"]]
                obj["tool_chain"].pop(heads[-1])
                res = grade(env, obj)
                assert "E3" in res.flags and "E2" in res.flags and any(c["text"] in n for n in res.notes)
                per_item += 1
                continue
            else:
                continue
            res = grade(env, obj)
            assert res.flags == {"E3"}, (env.task["task_id"], c, res.notes)
    assert forb > 20 and brk > 20 and orders > 10 and caps > 10 and forb_cap > 10 and per_item > 10 and ranges > 5


def test_distractor_call_gives_e5_and_grade_zero(bench):
    for env in envs(bench, "extraneous_holistic_n4", 100):
        obj = oracle_obj(env)
        d = env.task["distractors"][0]
        obj["tool_chain"].insert(1, {"name": d["name"], "parameter_description": {"item_id": "x"}, "reason": "x"})
        res = grade(env, obj)
        assert res.flags == {"E5"} and res.grade == 0.0 and res.ext_use == 1


def _neutral_extras(env) -> list[str]:
    forbidden = forbidden_tools(env)
    return [t for t in env.base["meta"]["neutral_tools"] if t not in forbidden]


def test_extra_call_that_matches_no_node_is_not_correct(bench):
    """The reference plan plus one call no step needs is a flawed plan (E4, docs/apb.md): it was
    correct with grade 1.0, so padding a plan with calls cost nothing."""
    n = 0
    for env in envs(bench, "holistic", 150):
        extra = _neutral_extras(env)
        if not extra:
            continue
        tool = env.grader.tools[extra[0]]
        args = {p: "the query's value" for p in tool["parameters"].get("required", [])}
        obj = oracle_obj(env)
        obj["tool_chain"].insert(0, {"name": extra[0], "parameter_description": args, "reason": "check"})
        res = grade(env, obj)
        assert not res.correct and res.flags == {"E4"} and res.grade == 0.8, (env.task["task_id"], res.notes)
        n += 1
    assert n > 100


def test_argument_less_extra_call_is_e4_and_e5(bench):
    n = 0
    for env in envs(bench, "holistic", 150):
        extra = [t for t in _neutral_extras(env) if env.grader.tools[t]["parameters"].get("required")]
        if not extra:
            continue
        obj = oracle_obj(env)
        obj["tool_chain"].insert(0, {"name": extra[0], "parameter_description": {}, "reason": "also"})
        res = grade(env, obj)
        assert res.flags == {"E4", "E5"} and res.grade == 0.6 and not res.correct, (env.task["task_id"], res.notes)
        n += 1
    assert n > 50


def test_copying_every_unneeded_tool_into_the_plan_is_never_correct(bench):
    n = 0
    for env in envs(bench, "holistic", 150):
        extra = _neutral_extras(env)
        if not extra:
            continue
        obj = oracle_obj(env)
        obj["tool_chain"] = [{"name": t, "parameter_description": {}, "reason": "may help"} for t in extra] + \
            obj["tool_chain"]
        res = grade(env, obj)
        assert not res.correct and "E4" in res.flags and res.grade <= 0.6
        n += 1
    assert n > 100


def test_repeated_call_of_a_done_step_is_e4(bench):
    n = 0
    for env in envs(bench, "holistic", 100):
        obj = oracle_obj(env)
        calls = [c for c in obj["tool_chain"] if c["name"] != FINISH]
        if len(calls) < 2:
            continue
        dup = copy.deepcopy(calls[0])
        if any(c["type"] == "max_calls" and c["spec"]["tool"] == dup["name"] for c in env.base["constraints"]):
            continue  # the repeat breaks that constraint (E3), tested above
        obj["tool_chain"].insert(len(calls), dup)
        res = grade(env, obj)
        assert not res.correct and "E4" in res.flags, (env.task["task_id"], res.notes)
        n += 1
    assert n > 50


def test_refusal_on_solvable_case_is_false_refusal(bench):
    env = envs(bench, "holistic", 1)[0]
    for text in ('{"status": "REJECT", "reason": "no"}', '{"plan": "nothing", "tool_chain": []}'):
        res = env.grader.holistic(text)
        assert res.false_refusal and res.flags == {"E2"} and res.grade == 0.0


# ----------------------------------------------------------------------------- step-wise (§12.10, §12.12)

def _actions(env):
    a = json.loads(env.reference_answer())
    return a if isinstance(a, list) else [a]


def test_any_other_ready_node_is_correct(bench):
    n = 0
    for env in envs(bench, "stepwise_k1"):
        nodes = plans.node_map(env.base["reference"]["nodes"])
        done = set(env.done_nodes)
        after = {c["spec"]["after"]: c["spec"]["before"] for c in env.base["constraints"] if c["type"] == "order"}
        ready = [x for x in env.base["reference"]["linearization"][env.j + 1:] if set(nodes[x]["deps"]) <= done
                 and (x not in after or after[x] in done)]
        if not ready:
            continue
        act = plans.stepwise_action(nodes[ready[0]], nodes, done)
        res = env.grader.stepwise(json.dumps(act), 1, env.done_nodes, env.context)
        assert res.correct and res.grade == 1.0, res.notes
        n += 1
    assert n > 50


def test_literal_for_unobserved_dependency_gives_e6(bench):
    n = 0
    for env in envs(bench, "stepwise_k2"):
        order = env.base["reference"]["linearization"]
        if env.j + 2 > len(order):
            continue
        first, second = order[env.j], order[env.j + 1]
        nodes = plans.node_map(env.base["reference"]["nodes"])
        params = [p for p, s in nodes[second]["args"].items() if first in plans.spec_sources(s)]
        if not params:
            continue
        acts = _actions(env)
        acts[1]["tool_calls"][0]["function"]["arguments"][params[0]] = plans.resolve_value(nodes[second]["args"][params[0]], nodes)
        res = env.grader.stepwise(json.dumps(acts), 2, env.done_nodes, env.context)
        assert "E6" in res.flags, res.notes
        n += 1
    assert n > 30


def test_stepwise_planted_errors(bench):
    non_ready = 0
    for env in envs(bench, "stepwise_k1"):
        act = _actions(env)[0]
        g = env.grader
        empty = dict(act, tool_calls=[])
        res = g.stepwise(json.dumps(empty), 1, env.done_nodes, env.context)
        assert res.flags == {"E2"} and res.grade == 0.4
        fin = plans.finish_action()
        assert g.stepwise(json.dumps(fin), 1, env.done_nodes, env.context).flags == {"E2"}
        res = g.stepwise(json.dumps([act, act]), 1, env.done_nodes, env.context)
        assert "E3" in res.flags
        res = g.stepwise("I would call the tool next", 1, env.done_nodes, env.context)
        assert res.grade == 0.0 and not res.correct
        # a node whose inputs are not available yet
        nodes = plans.node_map(env.base["reference"]["nodes"])
        done = set(env.done_nodes)
        later = [x for x in env.base["reference"]["linearization"][env.j:] if not set(nodes[x]["deps"]) <= done
                 and all(nodes[x]["tool"] != nodes[y]["tool"] for y in nodes if y != x)]
        if later:
            bad = plans.stepwise_action(nodes[later[0]], nodes, done | set(nodes[later[0]]["deps"]))
            assert g.stepwise(json.dumps(bad), 1, env.done_nodes, env.context).flags == {"E4"}
            non_ready += 1
    assert non_ready > 50


def test_always_finish_is_e2_everywhere(bench):
    es = envs(bench, "stepwise_k1")
    e2 = [e.grader.stepwise(json.dumps(plans.finish_action()), 1, e.done_nodes, e.context).flags == {"E2"} for e in es]
    assert sum(e2) / len(e2) == 1.0


# ----------------------------------------------------------------------------- rubric properties (§12.13)

def test_grade_functions_are_monotone_and_exact():
    flags = ("E1", "E2", "E3", "E4", "E5", "E6")
    subsets = [frozenset(s) for r in range(7) for s in itertools.combinations(flags, r)]
    for F in subsets:
        for trivial in (False, True):
            g = stepwise_grade(set(F), trivial and F == {"E5"})
            assert (g == 1.0) == (not F)
            for f in flags:
                if f not in F:
                    assert stepwise_grade(set(F | {f}), False) <= g
        for c in (0.0, 0.3, 0.5, 0.75, 0.95, 1.0):
            for goal in (False, True):
                u = len(F)
                g = holistic_grade(set(F), c, u, goal)
                assert g in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
                assert (g == 1.0) == (not F)
                for f in flags:
                    if f not in F:
                        assert holistic_grade(set(F | {f}), c, u + 1, goal) <= g


# ----------------------------------------------------------------------------- broken (§12.14)

def test_broken_behaviour_classes(bench):
    n_alter = 0
    for env in envs(bench, "broken", 150):
        t = env.task
        g = env.grader

        def cls(obj):
            return g.broken(json.dumps(obj) if not isinstance(obj, str) else obj, env.done_nodes,
                            t["broken_node"], t["broken_tool"], t["replacement_tool"]["name"], env.context)

        assert cls(t["reference_action"]) == "replace"
        retry = copy.deepcopy(t["prefix"][-2])
        assert cls(retry) == "retry"
        assert cls({"status": "REJECT", "reason": "tool broken"}) == "refuse"
        assert cls(plans.assistant_call("I cannot continue.", FINISH, {"mode": "give_up"})) == "refuse"
        assert cls("The tool is down, sorry about that.") == "other"
        assert cls({"role": "assistant", "thought": "wait", "tool_calls": []}) == "other"
        assert cls(plans.assistant_call("x", "TotallyMadeUpTool", {})) == "other"
        nodes = plans.node_map(env.base["reference"]["nodes"])
        done = set(env.done_nodes)
        ready = [x for x in env.base["reference"]["linearization"] if x not in done and x != t["broken_node"]
                 and set(nodes[x]["deps"]) <= done]
        if ready:
            assert cls(plans.stepwise_action(nodes[ready[0]], nodes, done)) == "alter"
            n_alter += 1
    assert n_alter > 20


# ----------------------------------------------------------------------------- unsolvable (§12.15)

def test_unsolvable_judge(bench):
    for u in ("conflict", "info", "tool", "visual"):
        for env in envs(bench, f"unsolvable_{u}", 40):
            plan = env.base["reference"]
            chain = plans.holistic_chain(plan["nodes"], plan["linearization"])
            text = json.dumps({"plan": plan["plan"], "tool_chain": chain})
            assert env.grader.unsolvable(text, u, env.task["blocking_terms"]) == (False, False)
            assert env.grader.unsolvable('{"status": "REJECT", "reason": "x"}', u, env.task["blocking_terms"])[0]
            assert env.grader.unsolvable("I cannot do this: the image is missing.", u, [])[0]
            clar = '{"status": "CLARIFY", "reason": "Which rate do you mean?"}'
            assert env.grader.unsolvable(clar, u, env.task["blocking_terms"])[0] == (u == "info")


# ----------------------------------------------------------------------------- efficiency (§12.17)

def test_efficiency_reference_chain_and_traps(bench):
    for env in envs(bench, "efficiency"):
        ref = env.base["reference"]
        chain = plans.holistic_chain(ref["nodes"], ref["linearization"])
        res = env.grader.holistic(json.dumps({"plan": "p", "tool_chain": chain}))
        assert res.correct and res.cost > env.task["optimal_cost"]
        red = [t for t in env.task["traps"] if t["hidden"].get("trap") == "redundant"]
        if red:  # the split pair is a valid (dearer) covering; its second half alone is incomplete
            nid = red[0]["hidden"]["covers"][0]
            nodes = plans.node_map(ref["nodes"])
            calls = []
            for x in ref["linearization"]:
                if x == nid:
                    calls.append({"name": red[0]["hidden"]["requires"], "covers": [], "param_map": {}})
                    calls.append({"name": red[0]["name"], "covers": [x], "param_map": red[0]["hidden"]["param_map"]})
                else:
                    calls.append({"name": nodes[x]["tool"], "covers": [x], "param_map": None})
            both = plans.holistic_chain(ref["nodes"], ref["linearization"], calls=calls)
            r_both = env.grader.holistic(json.dumps({"plan": "p", "tool_chain": both}))
            assert r_both.correct and r_both.cost > res.cost, r_both.notes
            half = [c for c in both if c["name"] != red[0]["hidden"]["requires"]]
            assert env.grader.holistic(json.dumps({"plan": "p", "tool_chain": half})).flags == {"E2"}
        off = [t for t in env.task["traps"] if t["hidden"].get("trap") == "off_target"]
        if off:
            near = off[0]["hidden"]["near"]
            i = ref["linearization"].index(near)
            chain2 = copy.deepcopy(chain)
            chain2[i]["name"] = off[0]["name"]
            res2 = env.grader.holistic(json.dumps({"plan": "p", "tool_chain": chain2}))
            assert {"E2", "E5"} <= res2.flags


# ----------------------------------------------------------------------------- malformed output (§5)

class FixedText:
    def __init__(self, text: str) -> None:
        self.text = text

    async def act(self, messages, tools) -> AgentReply:
        return AgentReply(message=Message(role="assistant", content=self.text))


MALFORMED = ["Sure! First I will look at the image.", '{"plan": "x", "tool_chain": [{"name": ',
             '{"plan": "x", "tool_chain": [{"name": "NoSuchTool", "parameter_description": {}}]}',
             '[{"role": "assistant", "thought": "x", "tool_calls": [{"type": "function", "function": '
             '{"name": "NoSuchTool", "arguments": "{not json"}}]}]', "", "```json\n[1, 2, 3]\n```", "null"]


def test_malformed_output_is_graded_never_raised(bench):
    settings = ["holistic", "stepwise_k2", "broken", "unsolvable_info", "unsolvable_control", "efficiency",
                "extraneous_stepwise_n4", "refine_self_plus", "refine_critic_minus"]

    async def main():
        out = []
        for s in settings:
            for tid in bench.tasks(s)[:3] + bench.tasks(s)[-2:]:
                for text in MALFORMED:
                    env = bench.make_env(tid, s, 0)
                    unit = WorkUnit(sweep="t", model="fixed", benchmark="apb", setting=s, task_id=tid, seed=0)
                    out.append((s, text, await run_episode(env, FixedText(text), unit, max_turns=bench.max_turns(s))))
        return out

    for s, text, r in asyncio.run(main()):
        assert r.error is None, (s, text, r.error)
        assert r.termination in (TerminationReason.ANSWERED, TerminationReason.AGENT_FORMAT_ERROR)
        m = r.metrics
        if s.startswith("unsolvable_info") and "-twin-" in r.unit.task_id:
            assert m["correct"] == 0.0 and m["refused"] == 0.0  # a solvable twin: no plan, and no refusal
            continue
        if s.startswith("unsolvable_info"):
            assert m["pass"] == 0.0  # none of these refuses, and none is a plan that could pass
            continue
        if s == "broken" and "-twin-" in r.unit.task_id:
            assert m["correct"] == 0.0 and m["false_recovery"] == 0.0  # its call succeeded: no next step here
            continue
        if s == "broken":
            assert m["other"] == 1.0
            continue
        assert m["correct"] == 0.0 and m["grade"] <= 0.2, (s, text, m)
        if s in ("holistic", "efficiency") and text in MALFORMED[:2]:
            assert r.termination == TerminationReason.AGENT_FORMAT_ERROR and m["grade"] == 0.0 and m["E3"] == 1.0
        if s == "holistic" and text == MALFORMED[2]:
            assert m["E6"] == 1.0


def test_unavailable_result_literal_gives_e6(bench):
    """A holistic plan that writes a tool-only value (a secret) where a step's output belongs."""
    n = 0
    for env in envs(bench, "holistic", 150):
        obj = oracle_obj(env)
        nodes = plans.node_map(env.base["reference"]["nodes"])
        for i, nid in enumerate(env.base["reference"]["linearization"]):
            refs = [p for p, s in nodes[nid]["args"].items() if s["kind"] == "ref"]
            if refs and not nodes[nid]["goal"]:
                val = plans.resolve_value(nodes[nid]["args"][refs[0]], nodes)
                if isinstance(val, list):
                    continue
                obj["tool_chain"][i]["parameter_description"][refs[0]] = val
                res = grade(env, obj)
                assert res.flags == {"E6"}, res.notes
                n += 1
                break
    assert n > 100


def test_stepwise_unneeded_tool_gives_e1(bench):
    n = 0
    for env in envs(bench, "stepwise_k1"):
        neutral = env.base["meta"]["neutral_tools"]
        forbidden = forbidden_tools(env)
        ok = [t for t in neutral if t not in forbidden]
        if not ok:
            continue
        act = plans.assistant_call("x", ok[0], {"x": "y"})
        assert env.grader.stepwise(json.dumps(act), 1, env.done_nodes, env.context).flags == {"E1"}
        n += 1
    assert n > 100


def test_json_extraction():
    from toolsweep.benchmarks.apb.grader import extract_json

    assert extract_json('<think>maybe {"a": 1}</think>\n```json\n{"b": 2}\n```') == ({"b": 2}, True, False)
    assert extract_json('Here it is: [1, 2] thanks') == ([1, 2], True, True)
    assert extract_json('{"a": ') == (None, False, True)
    assert extract_json(None) == (None, False, False)
