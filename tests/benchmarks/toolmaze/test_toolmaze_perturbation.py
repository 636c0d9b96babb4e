"""ToolMaze perturbation engine (spec §4, §11 checks 10-15)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from toolsweep.benchmarks.toolmaze import ToolMaze
from toolsweep.benchmarks.toolmaze.environment import ToolMazeEnv
from toolsweep.benchmarks.toolmaze.perturbation import EXPLICIT_POOL, Profile, Rule, build_profile, clean_call
from toolsweep.benchmarks.toolmaze.tools import canonical, constraint_violations, schema_valid


@pytest.fixture(scope="module")
def bench():
    return ToolMaze()


def _call(env: ToolMazeEnv, tool: str, args: dict | None = None):
    task = env.task
    if args is None:
        args = clean_call(task, tool)[0]
    return env.execute(f"c{len(env.calls)}", tool, json.dumps(args))


def test_transient_clears_after_one_call_permanent_never(bench):
    for tid in ("C1_task_089", "C1_task_007", "C1_task_064"):
        victim = bench.data.task(tid).victim
        for p in ("P1", "P3"):
            env = bench.make_env(tid, f"C1-{p}-std", 0)
            first, second = _call(env, victim), _call(env, victim)
            assert first.perturbed and not first.forwarded
            assert second.perturbed is None and second.forwarded and second.clean
        for p in ("P2", "P4"):
            env = bench.make_env(tid, f"C1-{p}-std", 0)
            recs = [_call(env, victim) for _ in range(25)]
            assert all(r.perturbed and not r.forwarded for r in recs)
            assert len({canonical(r.response) for r in recs}) == 1


@pytest.fixture(scope="module")
def literal():
    """The paper's literal activation rule (§3.4), kept as the `first_call` option."""
    return ToolMaze(fault_binding="first_call")


def test_group_activation_assigns_the_first_called_member(literal):
    bench = literal
    for tid, level in (("C2_task_084", 2), ("C3_task_040", 3), ("C2_task_011", 2), ("C3_task_077", 3)):
        task = bench.data.task(tid)
        (group,) = task.groups
        first_layer = sorted({m[0] for m in group.members})
        a = first_layer[0]
        others = [t for t in group.tools if t != a]
        for p in ("P1", "P2", "P3", "P4"):
            env = bench.make_env(tid, f"C{level}-{p}-std", 0)
            hit = _call(env, a)
            assert hit.perturbed and env.engine.assigned["r1"] == a
            for b in others:  # other members are clean under every mode
                assert _call(env, b).perturbed is None
            again = _call(env, a)
            assert (again.perturbed is not None) == (p in ("P2", "P4"))


def test_c4_slots_activate_independently_and_p0_never_perturbs(literal):
    bench = literal
    for tid in ("C4_task_090", "C4_task_003", "C4_task_050"):
        task = bench.data.task(tid)
        env = bench.make_env(tid, "C4-P2-std", 0)
        slot1, slot2 = task.groups[0], task.groups[1]
        m1 = slot1.members[0][0]
        assert _call(env, m1).perturbed
        assert env.engine.assigned["r2"] is None  # slot 1's activation leaves slot 2 untouched
        assert _call(env, slot1.members[-1][0] if slot1.members[-1][0] != m1 else slot1.members[0][-1]).perturbed is None
        m2 = slot2.members[0][0]
        assert _call(env, m2).perturbed and env.engine.assigned["r2"] == m2
        assert len(env.engine.profile.rules) == len(task.groups)
        clean = bench.make_env(tid, "C4-P0-std", 0)
        for tool in task.tool_set:
            for _ in range(2):
                assert _call(clean, tool).perturbed is None


def test_responses_fixed_per_task_and_mode_independent_of_args(bench):
    tid = "C1_task_089"
    victim = bench.data.task(tid).victim
    for p in ("P1", "P3"):
        a = bench.make_env(tid, f"C1-{p}-std", 0)
        b = bench.make_env(tid, f"C1-{p}-hint", 5)
        ra = _call(a, victim)
        rb = b.execute("x", victim, json.dumps({"unexpected": "args"}))
        assert canonical(ra.response) == canonical(rb.response)
    ts = bench.data
    for tid in ("C2_task_084", "C3_task_040", "C4_task_090", "C1_task_089"):
        task = ts.task(tid)
        p1, p2 = build_profile(ts, task, "P1"), build_profile(ts, task, "P2")
        p3, p4 = build_profile(ts, task, "P3"), build_profile(ts, task, "P4")
        assert [r.responses for r in p1.rules] == [r.responses for r in p2.rules]  # shared by persistence
        assert [r.responses for r in p3.rules] == [r.responses for r in p4.rules]
        assert canonical(p3.to_json()) == canonical(build_profile(ts, task, "P3").to_json())
        for r in p1.rules:
            assert all(json.loads(v) in EXPLICIT_POOL.values() for v in r.responses.values())


def test_implicit_responses_are_schema_valid_but_violate_a_constraint(bench):
    ts = bench.data
    corpus = ts.corpus
    n = 0
    for task in ts.tasks.values():
        prof = bench.profile(task.task_id, "P3")
        for r in prof.rules:
            for tool, resp in r.responses.items():
                args, clean = clean_call(task, tool)
                bad = json.loads(resp)
                assert schema_valid(corpus.tools[tool], bad), (task.task_id, tool)
                assert constraint_violations(corpus.tools[tool], args, bad), (task.task_id, tool, r.operators)
                assert constraint_violations(corpus.tools[tool], args, clean) == []
                assert bad != clean
                n += 1
    assert n >= 1000


def test_perturbed_calls_are_never_forwarded(bench):
    ts = bench.data
    task = dataclasses.replace(ts.task("C1_task_003"), tools_visible=["query_availability", "schedule_meeting"])
    rule = Rule("r1", "tool", ("schedule_meeting",), {"schedule_meeting": canonical(EXPLICIT_POOL["http_503"])})
    env = ToolMazeEnv(ts, task, Profile(task.task_id, "P2", (rule,)), "std", 0)
    env.reset()
    date = "2026-03-10"
    free = _call(env, "query_availability", {"date": date}).response
    slot = free["next_slot"]
    rec = _call(env, "schedule_meeting", {"slot": slot, "attendee": "mei.chen@example.com"})
    assert rec.perturbed == "explicit" and not rec.forwarded
    assert slot in _call(env, "query_availability", {"date": date}).response["free_slots"]  # nothing booked
    assert "booked" not in env.state or slot not in env.state["booked"]
