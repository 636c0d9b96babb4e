"""§7.8 intervals in the APB report: stratified for the composites over cells, paired over base cases
for the differences between settings, from per-episode records; and C_com across models."""

from __future__ import annotations

import numpy as np
import pytest

from toolsweep.benchmarks.apb import APB
from toolsweep.benchmarks.apb.metrics import report_tables
from toolsweep.evaluator.stats import Stratum, cell_summary, composite_estimate
from toolsweep.evaluator.summary import CellEpisodes, ReportEpisodes

BENCH = APB()
LEVELS = (0, 2, 4, 6, 8, 10)


def _cell(setting: str, per_base: dict[int, dict[str, float]]) -> CellEpisodes:
    eps = CellEpisodes()
    for i, metrics in per_base.items():
        eps.add(f"apb-g0-{setting}-{i:05d}", 0, "answered", metrics)
    return eps


def _episodes(model: str, rng: np.random.Generator) -> dict[tuple[str, str], CellEpisodes]:
    out = {}
    for k, p in ((1, 0.8), (2, 0.6), (3, 0.4)):
        out[(model, f"stepwise_k{k}")] = _cell(f"stepwise_k{k}", {
            i: {"correct": float(rng.random() < p), "grade": 0.5} for i in range(300)})
    # the extraneous levels share 150 bases; a base that is hard stays hard as distractors are added
    skill = rng.random(150)
    for half in ("holistic", "stepwise"):
        for n in LEVELS:
            out[(model, f"extraneous_{half}_n{n}")] = _cell(f"extraneous_{half}_n{n}", {
                i: {"correct": float(skill[i] > 0.3 + 0.01 * n), "ext_used": float(n > 0 and skill[i] < 0.5)}
                for i in range(150)})
    refuses = rng.random(100)
    for u in ("conflict", "info", "tool", "visual"):
        out[(model, f"unsolvable_{u}")] = _cell(f"unsolvable_{u}", {i: {"pass": float(refuses[i] < 0.6)} for i in range(100)})
    out[(model, "unsolvable_control")] = _cell("unsolvable_control", {i: {"refused": float(refuses[i] < 0.2)} for i in range(100)})
    return out


def _summaries(episodes: dict) -> list[dict]:
    cells = []
    for (model, setting), eps in episodes.items():
        specs = BENCH.metrics(setting)
        cells.append({**cell_summary(model, "apb", setting, eps.task_ids, eps.seeds, eps.values(specs),
                                     dict(eps.terminations), specs, n_resamples=1000, seed=1)})
    return cells


def _tables(cells, episodes=None):
    return {t.title.split(" — ")[0]: t for t in report_tables(cells, episodes)}


def test_composites_use_stratified_and_paired_bootstraps():
    episodes = _episodes("m", np.random.default_rng(0))
    cells = _summaries(episodes)
    with_records = _tables(cells, ReportEpisodes(episodes, n_resamples=2000, seed=0))
    from_cells = _tables(cells)
    sw_cr = with_records["Table 1b"].rows[0][1]
    expected = np.mean([np.mean([m["correct"] for m in episodes[("m", f"stepwise_k{k}")].metrics]) for k in (1, 2, 3)])
    assert sw_cr.startswith(f"{100 * expected:.1f} ±")
    assert "stratified bootstrap" in with_records["Table 1b"].note
    values = with_records["Table 1b"].metrics
    assert values["apb/m/stepwise/correct"] == pytest.approx(expected)
    assert values["apb/m/stepwise/correct_ci_low"] < expected < values["apb/m/stepwise/correct_ci_high"]
    assert from_cells["Table 1b"].metrics == {}  # no records, no bootstrap composites
    # Δ on the same bases: the paired interval is far narrower than treating the levels as independent
    paired_delta = with_records["Table 2"].rows[0][4]
    assert "±" in paired_delta and "±" not in from_cells["Table 2"].rows[0][4]
    hw_paired = float(paired_delta.split("±")[1])
    strata = [Stratum(episodes[("m", f"extraneous_holistic_n{n}")].task_ids,
                      [m["correct"] for m in episodes[("m", f"extraneous_holistic_n{n}")].metrics]) for n in LEVELS]
    unpaired = composite_estimate(strata, lambda a: a[1:].mean(axis=0) - a[0], n_resamples=2000)
    assert hw_paired < 0.5 * 100 * (unpaired.ci_high - unpaired.ci_low) / 2
    # TRR - FRR and calibration, paired over the 100 bases
    calib = with_records["Refusal calibration (%)"].rows[0]
    assert "±" in calib[7] and "±" in calib[8]
    trr = np.mean([m["pass"] for m in episodes[("m", "unsolvable_info")].metrics])
    frr = np.mean([m["refused"] for m in episodes[("m", "unsolvable_control")].metrics])
    assert calib[7].split(" ")[0] == f"{100 * (trr - frr):.1f}"
    assert calib[8].split(" ")[0] == f"{100 * 0.5 * (trr + 1 - frr):.1f}"


def test_common_cost_over_cases_every_model_solved():
    episodes = {}
    for model, solved, cost in (("a", {0, 1, 2}, 10.0), ("b", {1, 2, 3}, 20.0)):
        episodes[(model, "efficiency")] = _cell("efficiency", {
            i: {"correct": float(i in solved), "grade": 1.0, "cost": cost + i, "cost_pass": cost + i,
                "cost_ratio": 1.0, "optimal_rate": 0.0} for i in range(5)})
    cells = _summaries(episodes)
    rows = {r[0]: r for r in _tables(cells, ReportEpisodes(episodes))["Table 5"].rows}
    assert rows["a"][5] == "11.50" and rows["b"][5] == "21.50"  # cases 1 and 2 only
    assert {r[0]: r[5] for r in _tables(cells)["Table 5"].rows} == {"a": "—", "b": "—"}


@pytest.mark.parametrize("setting", ["judge_validation", "holistic"])
def test_judge_agreement_table(setting):
    bench = APB(grader="llm:j")
    eps = CellEpisodes()
    for i, (rule, judge) in enumerate([(1, 1), (1, 0), (0, 0), (0, 1), (1, 1)]):
        eps.add(f"apb-g0-x-{i:05d}", 0, "answered", {
            "correct": float(judge), "rule_correct": float(rule), "judge_agree": float(rule == judge),
            "judge_tp": float(rule and judge), "judge_pos": float(judge), "rule_pos": float(rule),
            "judge_f1_num": 2.0 * (rule and judge), "judge_f1_den": float(rule + judge),
            "judge_grade_abs_err": 0.2, "judge_flag_agree": 1.0, "judge_unreadable": 0.0})
    specs = bench.metrics(setting)
    cell = cell_summary("m", "apb", setting, eps.task_ids, eps.seeds, eps.values(specs), {}, specs, n_resamples=200)
    [row] = _tables([cell])["Table 7 analogue"].rows
    assert row[3].startswith("60.0") and row[3].endswith("⚠") and row[4] == "66.7" and row[5] == "66.7" and row[6] == "0.667"


def test_bootstrap_checks_of_spec_12_21():
    """The CI contains the point estimate, a fixed seed gives identical output, and the paired Δ of a
    no-op refiner (the oracle keeps its correct plan) has a zero-width interval."""
    import asyncio

    from toolsweep.evaluator import WorkUnit, run_episode

    async def play(setting: str, task: str):
        env = BENCH.make_env(task, setting, 0)
        unit = WorkUnit(sweep="s", model="oracle", benchmark="apb", setting=setting, task_id=task, seed=0)
        return await run_episode(env, BENCH.make_scripted_policy("oracle", env, 0), unit, max_turns=4)

    async def many(setting: str, n: int):
        return await asyncio.gather(*(play(setting, t) for t in BENCH.tasks(setting)[:n]))

    results = asyncio.run(many("refine_self_plus", 40))
    eps = CellEpisodes()
    for r in results:
        eps.add(r.unit.task_id, r.unit.seed, r.termination.value, r.metrics)
    specs = BENCH.metrics("refine_self_plus")
    summary = cell_summary("oracle", "apb", "refine_self_plus", eps.task_ids, eps.seeds, eps.values(specs), {},
                           specs, n_resamples=500, seed=11)
    assert summary == cell_summary("oracle", "apb", "refine_self_plus", eps.task_ids, eps.seeds, eps.values(specs),
                                   {}, specs, n_resamples=500, seed=11)
    deltas = [summary["metrics"][k] for k in ("hol_delta", "sw_delta") if not np.isnan(summary["metrics"][k]["value"])]
    assert deltas and all((d["value"], d["ci_low"], d["ci_high"]) == (0.0, 0.0, 0.0) for d in deltas)
    for m in summary["metrics"].values():
        if not np.isnan(m["value"]):
            assert m["ci_low"] - 1e-12 <= m["value"] <= m["ci_high"] + 1e-12
    # the same no-op across settings: a paired difference of identical strata is exactly zero
    s = Stratum(eps.task_ids, [m["correct"] for m in eps.metrics])
    est = composite_estimate([s, s], lambda a: a[1] - a[0], paired=True, n_resamples=500)
    assert (est.value, est.ci_low, est.ci_high) == (0.0, 0.0, 0.0)
