"""Scripted policies through the real episode loop: the oracle is perfect in every setting, always-refuse
has calibration 0.5, random planners fail (§12.9, 12.10, 12.14-12.16, 12.22)."""

from __future__ import annotations

import asyncio
import math
import random

import pytest

from toolsweep.benchmarks.apb import APB
from toolsweep.benchmarks.apb.metrics import calibration, setting_metrics
from toolsweep.evaluator.episode import run_episode
from toolsweep.evaluator.registry import get_benchmark, register_benchmark
from toolsweep.evaluator.types import TerminationReason, WorkUnit

register_benchmark("apb", "toolsweep.benchmarks.apb:APB")


@pytest.fixture(scope="module")
def bench() -> APB:
    b = get_benchmark("apb")
    assert isinstance(b, APB)
    return b


def run_many(bench: APB, setting: str, policy: str, ids: list[str] | None = None, seed: int = 0):
    async def main():
        out = []
        for tid in ids if ids is not None else bench.tasks(setting):
            env = bench.make_env(tid, setting, seed)
            pol = bench.make_scripted_policy(policy, env, seed)
            unit = WorkUnit(sweep="t", model=policy, benchmark="apb", setting=setting, task_id=tid, seed=seed)
            out.append(await run_episode(env, pol, unit, max_turns=bench.max_turns(setting)))
        return out

    return asyncio.run(main())


def mean(results, key):
    vals = [r.metrics[key] for r in results if not math.isnan(r.metrics[key])]
    return sum(vals) / len(vals)


def sample(ids: list[str], n: int) -> list[str]:
    return ids if len(ids) <= n else random.Random(7).sample(ids, n)


IN_4209 = ["holistic", "stepwise_k1", "stepwise_k2", "stepwise_k3", "broken",
           *[f"extraneous_{h}_n{n}" for h in ("holistic", "stepwise") for n in (2, 4, 6, 8, 10)],
           *[f"unsolvable_{u}" for u in ("conflict", "info", "tool", "visual")]]
EXTRAS = ["stepwise_stage_early", "stepwise_stage_late", "extraneous_holistic_n0", "extraneous_stepwise_n0",
          "unsolvable_control", "efficiency", "refine_self_plus", "refine_self_minus", "refine_critic_plus",
          "refine_critic_minus"]


def test_oracle_is_perfect_in_every_setting(bench):
    assert set(IN_4209 + EXTRAS) == set(bench.settings())
    for setting in IN_4209 + EXTRAS:
        # a seeded sample keeps the suite fast; bench/apb_env.py runs the oracle on every case
        ids = sample(bench.tasks(setting), 120 if setting in IN_4209 else 60)
        res = run_many(bench, setting, "oracle", ids)
        assert all(r.termination == TerminationReason.ANSWERED for r in res), setting
        names = {m.name for m in setting_metrics(setting)}
        for r in res:
            assert set(r.metrics) <= names | {"ext_calls"} or setting == "holistic", setting
        if setting.startswith("unsolvable_") and setting != "unsolvable_control":
            assert mean(res, "pass") == 1.0, setting
            assert mean(res, "pass_strict") == 1.0, setting
            # with its solvable twins: each planned, none refused
            assert mean(res, "correct") == 1.0 and mean(res, "refused") == 0.0, setting
            continue
        if setting == "broken":
            assert mean(res, "replace") == 1.0 and mean(res, "recovery") == 1.0
            continue
        bad = [(r.unit.task_id, r.trajectory.steps[-1].info) for r in res if r.metrics["correct"] != 1.0]
        assert not bad, (setting, bad[:2])
        assert mean(res, "grade") == 1.0, setting
        assert all(r.metrics[f"E{i}"] == 0.0 for r in res for i in range(1, 7)), setting
        if setting == "unsolvable_control":
            assert mean(res, "refused") == 0.0  # refuses no solvable twin
        if setting in ("holistic", "extraneous_holistic_n10"):
            assert mean(res, "false_refusal") == 0.0
        if setting.startswith("extraneous"):
            assert mean(res, "ext_used") == 0.0
        if setting == "efficiency":
            assert mean(res, "optimal_rate") == 1.0 and mean(res, "cost_ratio") == 1.0
        if setting.startswith("refine_"):
            assert mean(res, "hol_delta") == 0.0 and mean(res, "sw_delta") == 0.0
            assert mean(res, "hol_over_correction") == 0.0


def test_oracle_with_step_references(bench):
    """§12.9: refs written as "the output of step i" are as good as `$Tool.field`."""
    step_bench = APB(oracle_ref_style="step")
    for setting in ("holistic", "extraneous_holistic_n6", "efficiency"):
        res = run_many(step_bench, setting, "oracle", sample(step_bench.tasks(setting), 100))
        assert mean(res, "correct") == 1.0 and mean(res, "grade") == 1.0, setting


def test_always_refuse_calibration_is_one_half(bench):
    trr = {}
    for u in ("conflict", "info", "tool", "visual"):
        res = run_many(bench, f"unsolvable_{u}", "always_refuse")
        trr[u] = mean(res, "pass")
    frr = mean(run_many(bench, "unsolvable_control", "always_refuse"), "refused")
    cal = calibration(trr, frr)
    assert trr == {u: 1.0 for u in trr} and frr == 1.0 and cal["Calibration"] == 0.5
    hol = run_many(bench, "holistic", "always_refuse", sample(bench.tasks("holistic"), 200))
    assert mean(hol, "correct") == 0.0 and mean(hol, "false_refusal") == 1.0 and mean(hol, "grade") == 0.0
    # the oracle plans solvable cases and rejects unsolvable ones: calibration 1
    trr_o = {u: mean(run_many(bench, f"unsolvable_{u}", "oracle", sample(bench.tasks(f"unsolvable_{u}"), 30)), "pass")
             for u in ("conflict", "info", "tool", "visual")}
    frr_o = mean(run_many(bench, "unsolvable_control", "oracle", sample(bench.tasks("unsolvable_control"), 30)), "refused")
    assert calibration(trr_o, frr_o)["Calibration"] == 1.0
    # broken: a refusal is classified Refuse
    br = run_many(bench, "broken", "always_refuse", sample(bench.tasks("broken"), 40))
    assert mean(br, "refuse") == 1.0 and mean(br, "recovery") == 0.0


def test_random_planner_fails(bench):
    hol = run_many(bench, "holistic", "random", sample(bench.tasks("holistic"), 300))
    assert mean(hol, "correct") < 0.02
    sw = run_many(bench, "stepwise_k1", "random")
    assert mean(sw, "correct") < 0.15
    # the same unit gives the same episode (seeded policy, deterministic environment)
    again = run_many(bench, "stepwise_k1", "random", [r.unit.task_id for r in sw[:20]])
    assert [r.metrics for r in again] == [r.metrics for r in sw[:20]]


def test_report_tables_from_oracle_cells(bench):
    cells = []
    for setting in ("holistic", "stepwise_k1", "stepwise_k2", "stepwise_k3", "broken",
                    *[f"unsolvable_{u}" for u in ("conflict", "info", "tool", "visual")], "unsolvable_control",
                    *[f"extraneous_{h}_n{n}" for h in ("holistic", "stepwise") for n in (0, 2, 4, 6, 8, 10)]):
        res = run_many(bench, setting, "oracle", sample(bench.tasks(setting), 20))
        metrics = {}
        for spec in setting_metrics(setting):
            v = mean(res, spec.name) if any(not math.isnan(r.metrics.get(spec.name, math.nan)) for r in res) else math.nan
            metrics[spec.name] = {"value": v, "ci_low": v, "ci_high": v}
        cells.append({"model": "oracle", "benchmark": "apb", "setting": setting, "n": len(res),
                      "terminations": {"answered": len(res)}, "metrics": metrics})
    tables = {t.title.split(" —")[0]: t for t in bench.report_tables(cells)}
    t1a = tables["Table 1a"]
    row = dict(zip(t1a.columns, t1a.rows[0]))
    assert row["Hol CR"].startswith("100.0") and row["Ext CR"].startswith("100.0") and row["Hol E2"] == "0.0"
    t1b = tables["Table 1b"]
    row = dict(zip(t1b.columns, t1b.rows[0]))
    assert row["SW CR"].startswith("100.0") and row["Rp"] == "100.0" and row["Vis"] == "100"
    cal = tables["Refusal calibration (%)"]
    assert dict(zip(cal.columns, cal.rows[0]))["Calibration"] == "100.0"
    twins = dict(zip(tables["Cases beside their twins (correct %)"].columns,
                     tables["Cases beside their twins (correct %)"].rows[0]))
    assert twins["Vis"].startswith("100.0") and twins["Vis FRR"] == "0.0" and twins["Broken false recovery"] == "0.0"
    t2 = dict(zip(tables["Table 2"].columns, tables["Table 2"].rows[0]))
    assert t2["Hol TC"] == "0" and t2["Hol CR_B"] == "100.0" and t2["Hol Δ"] == "+0.0"
