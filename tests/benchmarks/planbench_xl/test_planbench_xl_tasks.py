"""Task checks (spec §2, §10.1, §10.5): 327 tasks, L* distribution, minimality, gold answers."""

from __future__ import annotations

import itertools
from collections import Counter

from toolsweep.benchmarks.planbench_xl.environment import MAX_TURNS
from toolsweep.benchmarks.planbench_xl.retriever import RETURN_CAP
from toolsweep.benchmarks.planbench_xl.tasks import dt_mask
from toolsweep.benchmarks.planbench_xl.world import DT, norm_value
from toolsweep.evaluator.registry import get_benchmark, register_benchmark

register_benchmark("planbench_xl", "toolsweep.benchmarks.planbench_xl:PlanBenchXL")


def bench():
    return get_benchmark("planbench_xl")


def test_table2_tasks_budget_and_cap():
    b = bench()
    ts = b.task_set
    assert len(ts.tasks) == 327 and len(b.tasks("default")) == 327
    assert len(ts.single_step) == 185 and len(b.tasks("single_step")) == 185
    assert ts.n_candidates == 426
    assert all(5 <= t.lstar <= 9 for t in ts.tasks)
    assert Counter(t.lstar for t in ts.tasks) == {5: 90, 6: 81, 7: 67, 8: 45, 9: 44}
    assert Counter(len(t.inputs) for t in ts.tasks) == {1: 115, 2: 212}
    assert MAX_TURNS == 100 and RETURN_CAP == 30
    assert [t.id for t in ts.tasks][:2] == ["retail_task_0001", "retail_task_0002"]


def test_gold_is_the_value_reached_by_executing_the_gt_path():
    b = bench()
    w, g = b.world, b.task_set.graph
    for t in b.task_set.tasks:
        rec = w.records[t.case - 1]
        vals = dict(zip(t.inputs, t.input_values))
        for i in t.gt_path:
            tool = w.executable[i]
            assert all(d in vals for d in tool.inputs) and tool.output not in vals
            vals[tool.output] = w.lookup[tool.id][tuple(vals[d] for d in tool.inputs)]
        assert len(t.gt_path) == t.lstar
        assert vals[t.target] == t.gold == rec[t.target]
        assert len(norm_value(t.gold)) >= 4
        assert f"'{t.input_values[0]}'" in t.query and DT[t.target].phrase in t.query
        # Every input is necessary: no strict subset of D_0 reaches y.
        for k in range(1, len(t.inputs)):
            for sub in itertools.combinations(t.inputs, k):
                assert not g.closure(dt_mask(sub)) & dt_mask([t.target])


def test_minimal_sets_are_exactly_minimal_on_a_sample():
    b = bench()
    g = b.task_set.graph
    for t in b.task_set.tasks[::16]:
        d0, y = dt_mask(t.inputs), dt_mask([t.target])
        assert t.minimal_sets and min(len(r) for r in t.minimal_sets) == t.lstar <= t.lmax <= 12
        for r in t.minimal_sets:
            assert g.closure(d0, r) & y
            assert all(not g.closure(d0, [u for u in r if u != x]) & y for x in r)
            assert g.legal_order_count(d0, frozenset(r)) >= 1
        assert t.out_gt >= {t.target}


def test_paper_record_format():
    b = bench()
    rec = b.task_set.tasks[0].record(b.world)
    assert set(rec) >= {"input_datatypes", "num_inputs", "target_datatype", "steps", "one_available_path"}
    assert rec["steps"] == len(rec["one_available_path"]) == b.lstar(rec["task_id"])
