"""World checks (spec §1, §10.1-10.4): Table 2 counts, names, aliases, retrieval bounds, determinism."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from toolsweep.benchmarks.planbench_xl.retriever import RETURN_CAP, Retriever
from toolsweep.benchmarks.planbench_xl.world import (
    DATATYPES, DT, NOISY_CATEGORIES, build_world, norm_value,
)
from toolsweep.evaluator.registry import get_benchmark, register_benchmark

register_benchmark("planbench_xl", "toolsweep.benchmarks.planbench_xl:PlanBenchXL")
REPO = Path(__file__).resolve().parents[3]


def bench():
    return get_benchmark("planbench_xl")


def test_table2_counts_and_tool_structure():
    w = bench().world
    assert len(DATATYPES) == 56
    kinds = Counter(t.kind.split(":")[0] for t in w.tools)
    assert kinds == {"executable": 185, "noisy": 925, "blocker": 555}
    assert len(w.tools) == 1665
    assert len({t.name.lower() for t in w.tools}) == 1665  # unique, case-insensitive
    assert all(1 <= len(t.inputs) <= 5 for t in w.tools)
    assert Counter(len(t.inputs) for t in w.executable) == {1: 178, 2: 4, 3: 2, 4: 1}
    assert len({(t.input_set, t.output) for t in w.executable}) == 185
    for t in w.executable:
        noisy = w.noisy_of[t.id]
        assert sorted(n.kind.split(":")[1] for n in noisy) == sorted(NOISY_CATEGORIES)
        assert all(n.inputs == t.inputs and n.output == t.output for n in noisy)
        assert sorted(w.blockers_of[t.id]) == ["exp", "imp", "sem"]
        sem = w.blockers_of[t.id]["sem"]
        assert sem.output != t.output and sem.output not in t.inputs and sem.inputs == t.inputs
        family = [t, *noisy, *w.blockers_of[t.id].values()]
        descs = [x.description for x in family]
        assert len(set(descs)) == len(descs)  # no description repeats or holds a twin's (issue 42)
        assert not any(a != b and a in b for a in descs for b in descs)


def test_values_and_fakes_protect_the_grader():
    w = bench().world
    assert w.records[0]["order_id"] == "ord_7001" and w.records[0]["payment_intent_id"] == "pi_10001"
    assert w.records[0]["default_payment_method_id"] == w.records[0]["payment_method_id"] == "pm_9001"
    for c, rec in enumerate(w.records, start=1):
        vals = [(k, norm_value(v)) for k, v in rec.items()]
        assert all(len(v) >= 4 for _, v in vals)
        for i, (ka, a) in enumerate(vals):
            for kb, b in vals[i + 1:]:
                if {ka, kb} == {"default_payment_method_id", "payment_method_id"} and c % 2:
                    continue
                assert a not in b and b not in a, (c, ka, kb)
    real = w.real_values
    for t in w.tools:
        if t.fixed_output and not t.fixed_output.startswith("error"):
            fake = norm_value(t.fixed_output)
            assert not any(r in fake for r in real), (t.id, t.fixed_output)


def test_alias_resolution_and_fig15():
    w = bench().world
    r = Retriever(w)
    for d in DATATYPES:
        for a in (*d.aliases, d.name.replace("_", " ")):
            assert r.resolve(a) == d.name, (a, d.name)
    for t in w.executable:
        got = r.matches("by_io_info", [p for p, _ in t.params], [t.output])
        assert got == [t]
        got = r.matches("by_io_info", [d.replace("_", " ") for d in t.inputs], [t.output.replace("_", " ")])
        assert got == [t]
    assert r.matches("by_inputs", ["order_id", "order_status"], []) == []


def test_retrieval_bounds_and_balanced_noise_fill():
    w = bench().world
    r = Retriever(w)
    groups = list(r.by_inputs.values()) + list(r.by_output.values()) + list(r.by_io.values())
    for matched in groups:
        assert 1 <= len(matched) <= 14
        lst, _ = r.result_list(matched, frozenset(), ("exp", "imp", "sem"))
        assert len(lst) == min(RETURN_CAP, 6 * len(matched))
        per = Counter(t.paired for t in lst if not t.is_exec)
        if len(matched) > 1 and per:
            assert max(per.values()) - min(per.get(t.id, 0) for t in matched) <= 1
        # Blocking up to K_blk = 6 matches keeps K + 2m <= 30 primary tools, all listed, none blocked.
        blocked = frozenset(t.id for t in matched[:6])
        lst, replaced = r.result_list(matched, blocked, ("exp", "imp", "sem"))
        primary = len(matched) + 2 * len(blocked)
        assert primary <= RETURN_CAP and len(lst) == min(RETURN_CAP, primary + 5 * len(matched))
        assert not any(t.id in blocked for t in lst) and replaced == [t.id for t in matched[:6]]
        assert sum(t.kind.startswith("blocker:") for t in lst) == 3 * len(blocked)


def test_world_build_is_cached():
    # its build time is measured in bench/planbench_xl_env.py, not asserted here
    w = build_world(3)  # a fresh (uncached) world: 3 backend cases
    assert build_world(3) is w and len(w.tools) == 1665


def test_same_world_and_tasks_in_two_processes():
    code = ("import json;from toolsweep.benchmarks.planbench_xl import PlanBenchXL;"
            "f=PlanBenchXL().fingerprint();print(json.dumps([f['world_hash'],f['tasks_hash']]))")
    env = {"PYTHONPATH": str(REPO), "PYTHONHASHSEED": "random", "PATH": "/usr/bin:/bin"}
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, env=env, cwd=REPO)
             for _ in range(2)]
    outs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    here = bench().fingerprint()
    assert outs[0] == outs[1] == [here["world_hash"], here["tasks_hash"]]


def test_descriptions_carry_no_marker_a_search_can_key_on():
    """App. F.1: the agent never observes datatypes; App. B.2.2: noisy tools disclose their
    unreliability in LLM-written prose. No description names its own datatype, no noisy tool
    carries a fixed marker, and purpose clauses are per tool, not one per workflow."""
    w = bench().world
    for d in DATATYPES:
        assert f"({d.name})" not in d.description
    noisy = [t for t in w.tools if t.kind.startswith("noisy:")]
    assert not any("Note:" in t.description for t in noisy)
    for cat in NOISY_CATEGORIES:
        notes = {t.note for t in noisy if t.kind == f"noisy:{cat}"}
        assert len(notes) >= 3, cat  # several wordings, not one sentence
    assert all(t.note and t.note in t.description for t in w.tools)  # every tool has a service sentence
    starts_with_note = sum(t.description.startswith(t.note) for t in w.tools)
    assert 0.3 < starts_with_note / len(w.tools) < 0.7
    functional = {t.description.replace(t.note, "").strip() for t in w.executable}
    assert len(functional) == len(w.executable)
    openings = Counter(t.description.replace(t.note, "").strip().split(" ", 1)[0] for t in w.tools)
    assert len(openings) >= 5 and max(openings.values()) < 0.3 * len(w.tools)


def test_implicit_failures_are_plausible_and_misleading_tools_tell_the_truth():
    w = bench().world
    real = w.real_values
    for t in w.executable:
        for imp in w.alternatives_of[t.id]["imp"]:
            v = imp.fixed_output
            assert norm_value(v) not in real and v not in ("tuna", "-1", "NaN", "undefined")
            ref = w.records[0][t.output]
            if DT[t.output].is_id:  # a well-formed ID of the declared datatype, of no record
                assert v.split("_")[0] == ref.split("_")[0] and v.split("_")[-1].isdigit()
        for sem in w.alternatives_of[t.id]["sem"]:
            assert sem.output != t.output and sem.inputs == t.inputs and sem.fixed_output is None
            for rec in w.records:  # its value is its declared field of the record its inputs find
                assert w.lookup[sem.id][tuple(rec[d] for d in sem.inputs)] == rec[sem.output]
    firsts = [w.blockers_of[t.id]["sem"] for t in w.executable]
    # A real function wherever the world has one with the same inputs.
    assert sum(s.id in w.sem_relation for s in firsts) == 172
