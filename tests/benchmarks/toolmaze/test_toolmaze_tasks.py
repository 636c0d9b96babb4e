"""ToolMaze task generator (spec §2.1, §3.2, §11 checks 5-9) and cross-process determinism."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from toolsweep.benchmarks.toolmaze import ToolMaze
from toolsweep.benchmarks.toolmaze.tasks import (
    LEVELS,
    build_tasks,
    canonical_tasks,
    jaccard_mean,
    phrase_inventory,
    reverse_parse,
    values_match,
)
from toolsweep.benchmarks.toolmaze.tools import ACTION, SOURCE, TYPES, canonical, render

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def ts():
    return build_tasks(0)


def test_400_tasks_100_per_level_with_paper_ids(ts):
    assert len(ts.tasks) == 400
    for c in LEVELS:
        level = ts.level(c)
        assert len(level) == 100
        assert [t.task_id for t in level] == [f"C{c}_task_{i:03d}" for i in range(1, 101)]
    assert "C1_task_089" in ts.tasks and "C4_task_090" in ts.tasks


def test_primary_domains_balanced_within_one(ts):
    for c in LEVELS:
        counts = Counter(t.primary_domain for t in ts.level(c))
        assert len(counts) == 6 and max(counts.values()) - min(counts.values()) <= 1


def test_dags_are_typed_acyclic_and_well_formed(ts):
    corpus = ts.corpus
    for t in ts.tasks.values():
        cats = {corpus.tools[x].category for x in t.tool_set}
        assert SOURCE in cats and ACTION in cats, t.task_id
        assert corpus.tools[t.default_path[-1]].category == ACTION
        for path, binds in zip(t.solutions, t.bindings):
            order = {tool: i for i, tool in enumerate(path)}
            for tool, params in binds.items():
                spec = corpus.tools[tool].param_map
                # every required parameter bound exactly once (joins also bind optional sections)
                assert {p.name for p in corpus.tools[tool].required} <= set(params) <= set(spec)
                for pname, b in params.items():
                    if b[0] == "user":
                        assert TYPES[spec[pname].type].user is not None
                        assert b[1] in t.slots
                        continue
                    assert order[b[1]] < order[tool]  # edges point forward: acyclic
                    if b[0] == "edge":
                        src_field = next(o for o in corpus.tools[b[1]].outputs if o.path == b[2])
                        assert src_field.type == spec[pname].type  # type-equal edges only
                    else:
                        assert spec[pname].free


def test_shapes_per_level(ts):
    for t in ts.level(1):
        assert len(t.solutions) == 1 and not t.groups and 3 <= len(t.default_path) <= 5
        assert t.victim in t.default_path[:-1]
    n_paths = Counter()
    for t in ts.level(2):
        (g,) = t.groups
        assert g.kind == "1toN" and all(len(m) == 1 for m in g.members)
        assert len(t.solutions) == len(g.members) in (2, 3)
        n_paths[len(t.solutions)] += 1
    # C2 offers N = 2 or 3 substitutes (spec §2.1), not always 2
    assert n_paths[3] >= 10 and n_paths[2] >= 50, n_paths
    for t in ts.level(3):
        (g,) = t.groups
        assert g.kind == "m2m" and len(t.solutions) >= 3
        assert any(len(m) >= 2 for m in g.members)
        for tool in g.tools:  # every block tool is avoidable
            assert any(tool not in s for s in t.solutions), (t.task_id, tool)
    for t in ts.level(4):
        kinds = Counter(g.kind for g in t.groups)
        assert len(t.groups) >= 2 and kinds["1toN"] >= 1 and kinds["m2m"] >= 1
        prod = 1
        for g in t.groups:
            prod *= len(g.members)
        assert len(t.solutions) == prod
        tools = [x for g in t.groups for x in g.tools]
        assert len(tools) == len(set(tools))  # tools unique across slots


def test_solution_sets_minimal_path_and_agreeing_actions(ts):
    for t in ts.tasks.values():
        sets = [set(s) for s in t.solutions]
        assert not any(a < b for a in sets for b in sets)  # no path is a superset of another
        assert len(t.default_path) == min(len(s) for s in t.solutions)
        finals = [e[s[-1]]["args"] for s, e in zip(t.solutions, t.expected)]
        for f in finals:
            assert set(f) == set(finals[0]) and all(values_match(finals[0][k], f[k]) for k in f)
        if t.complexity >= 2:  # every single tool can fail permanently and a path remains
            for tool in t.tool_set:
                if any(tool in g.tools for g in t.groups):
                    assert any(tool not in s for s in t.solutions)


def test_diversity_and_no_duplicates(ts):
    for c in LEVELS:
        level = ts.level(c)
        assert jaccard_mean(level) <= 0.06
        multisets = [tuple(sorted(t.tool_set)) for t in level]
        assert len(set(multisets)) == 100


def test_queries_verbatim_slots_no_tool_names_and_reverse_parse(ts):
    inventory = phrase_inventory(ts.corpus)
    names = set(ts.corpus.tools)
    for t in ts.tasks.values():
        q = t.query
        assert 25 <= len(q.split()) <= 90
        for v in t.slots.values():
            assert render(v) in q
        assert not (set(re.findall(r"[A-Za-z_]+", q)) & names)
        assert reverse_parse(q, inventory) == Counter(p.phrase for p in t.positions)
        assert t.task_spec["goal"] and "entity" in t.task_spec


def test_corpus_is_spread_and_paper_example_query_is_used(ts):
    used = {x for t in ts.tasks.values() for x in t.tool_set}
    assert len(used) >= 200  # usage-weighted sampling spreads the corpus
    paper = [t for t in ts.tasks.values() if "—my account settles in euros." in t.query]
    assert paper and all(f"invest in {t.slots['company']}—" in t.query for t in paper)


_CHILD = """
import hashlib, json
from toolsweep.benchmarks.toolmaze import ToolMaze
from toolsweep.benchmarks.toolmaze.tasks import canonical_tasks
from toolsweep.benchmarks.toolmaze.tools import canonical
b = ToolMaze()
tasks = hashlib.sha256(canonical_tasks(b.data, (1, 2)).encode()).hexdigest()
prof = [canonical(b.profile(tid, p).to_json()) for tid in ("C1_task_089", "C2_task_084")
        for p in ("P1", "P2", "P3", "P4")]
print(json.dumps({"tasks": tasks, "corpus": b.data.corpus.fingerprint(),
                  "prof": hashlib.sha256("".join(prof).encode()).hexdigest()}))
"""


def test_same_tasks_and_faults_in_two_processes(ts):
    import json
    import os

    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONHASHSEED="random")
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=env, cwd=str(REPO)) for _ in range(2)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err.decode()[-2000:]
        outs.append(json.loads(out.decode().strip().splitlines()[-1]))
    assert outs[0] == outs[1]
    b = ToolMaze()
    assert outs[0]["tasks"] == hashlib.sha256(canonical_tasks(ts, (1, 2)).encode()).hexdigest()
    assert outs[0]["corpus"] == ts.corpus.fingerprint()
    prof = [canonical(b.profile(tid, p).to_json()) for tid in ("C1_task_089", "C2_task_084")
            for p in ("P1", "P2", "P3", "P4")]
    assert outs[0]["prof"] == hashlib.sha256("".join(prof).encode()).hexdigest()


def test_dataset_seed_changes_tasks_run_seed_does_not():
    b = ToolMaze()
    e1 = b.make_env("C2_task_010", "C2-P1-std", seed=0)
    e2 = b.make_env("C2_task_010", "C2-P1-std", seed=99)
    assert e1.task is e2.task and e1.profile is e2.profile
    assert canonical(e1.reset().model_dump()) == canonical(e2.reset().model_dump())
