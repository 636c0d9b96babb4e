"""An adaptive sweep end to end on the embedded Ray: rounds add seeds only to the cells whose interval
was too wide (every model the same seeds), summary.json reports each cell's rounds, its interval and the
method that keeps it valid, and a re-run adds nothing; a paired goal decides each model pair's sign (or
equivalence) at its group-sequential boundary."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_sweep_end_to_end import make_config  # noqa: F401  (shares the session's fake registration)

from toolsweep.cluster.adaptive import round_config, run_adaptive, task_orders
from toolsweep.cluster.config import ConfigError, SweepConfig, load_config
from toolsweep.evaluator.adaptive import (
    PAIRED_METHOD,
    WIDTH_METHOD,
    boundary_confidence,
    paired_interval,
    task_order,
)
from toolsweep.evaluator.protocols import MetricSpec
from toolsweep.evaluator.registry import register_benchmark
from toolsweep.evaluator.stats import summarize_metrics

COIN = {"coin": "coin_bench:CoinBench"}
register_benchmark("coin", COIN["coin"])


def coin_config(tmp_path, **stop) -> SweepConfig:
    return SweepConfig.model_validate({
        "name": "adaptive",
        "seeds": 2,
        "models": [{"name": "oracle", "kind": "scripted", "policy": "oracle"},
                   {"name": "coin", "kind": "scripted", "policy": "coin"}],
        "benchmarks": [{"name": "coin", "options": {"n_tasks": 10}, "settings": ["certain", "even"]}],
        "stop_when": {"ci_half_width": 0.15, "max_rounds": 3, "seeds_per_round": 2, "max_seeds": 6, **stop},
        "concurrency": {"workers": 2, "episodes_per_worker": 8},
        "bootstrap": {"n_resamples": 2000, "live_n_resamples": 200},
        "output_dir": str(tmp_path / "runs"),
        "mlflow": False,
        "preflight": False,
    })


def _episodes(run_dir):
    table = run_dir.read_table(columns=["model", "setting", "task_id", "seed", "metrics"])
    return [dict(zip(table.column_names, row)) for row in zip(*(table.column(c).to_pylist() for c in table.column_names))]


def test_rounds_grow_only_the_wide_cell_and_a_rerun_adds_nothing(ray_local, tmp_path):
    cfg = coin_config(tmp_path)
    out = run_adaptive(cfg, progress=False, log=lambda m: None, extra_benchmarks=COIN)
    summary = json.loads(out.run_dir.summary_path.read_text())
    section = summary["adaptive"]
    cells = {c["setting"]: c for c in section["cells"]}
    # round 1 judged both cells at the nominal confidence (a width goal): the certain cell is a point,
    # the even one wide
    assert section["method"] == WIDTH_METHOD and section["resample"] == "tasks"
    assert cells["certain"]["rounds"] == 1 and cells["certain"]["seeds"] == 2 and cells["certain"]["met"]
    assert cells["certain"]["confidence"] == pytest.approx(0.95)
    even = cells["even"]
    assert even["rounds"] >= 2 and even["seeds"] == 2 + 2 * (even["rounds"] - 1)
    assert even["confidence"] == pytest.approx(0.95)
    assert section["grown_per_round"] == [[["coin", "even"]]] * (even["rounds"] - 1)

    # the run directory holds exactly those seeds, for both models: paired differences stay paired
    eps = _episodes(out.run_dir)
    seeds: dict[tuple[str, str], set[int]] = {}
    for e in eps:
        seeds.setdefault((e["model"], e["setting"]), set()).add(e["seed"])
    seeds = {k: sorted(v) for k, v in seeds.items()}
    for model in ("oracle", "coin"):
        assert seeds[(model, "certain")] == [0, 1]
        assert seeds[(model, "even")] == list(range(even["seeds"]))
    assert len(eps) == 2 * 10 * (2 + even["seeds"]) == out.total_units

    # the decisions hold against the episodes themselves: round 1's even interval (seeds 0-1) was wide
    spec = MetricSpec(name="success")
    first = [e for e in eps if e["model"] == "coin" and e["setting"] == "even" and e["seed"] < 2]
    y = np.array([json.loads(e["metrics"])["success"] for e in first])
    r1 = summarize_metrics([e["task_id"] for e in first], [e["seed"] for e in first], {"success": y}, [spec],
                           n_resamples=2000, confidence=0.95)["success"]
    assert (r1.ci_high - r1.ci_low) / 2 > 0.15
    # the reported interval is the one at the stopping round's confidence, on that round's episodes
    final = [e for e in eps if e["model"] == "coin" and e["setting"] == "even"]
    y = np.array([json.loads(e["metrics"])["success"] for e in final])
    rep = even["models"]["coin"]
    assert rep["value"] == pytest.approx(y.mean())
    assert rep["half_width"] == pytest.approx((rep["ci_high"] - rep["ci_low"]) / 2)
    assert even["met"] == (rep["half_width"] <= 0.15)
    assert "adaptive sweep:" in out.table_text and "even" in out.table_text
    assert {k: v for k, v in json.loads((out.run_dir.path / "adaptive.json").read_text()).items()} == section

    # `toolsweep report` rebuilds summary.json: the rounds stay in it
    from toolsweep.cluster.cli import main

    assert main(["report", str(out.run_dir.path)]) == 0
    assert json.loads(out.run_dir.summary_path.read_text())["adaptive"] == section

    # a re-run replays the same decisions from the recorded episodes and runs nothing
    again = run_adaptive(cfg, progress=False, log=lambda m: None, extra_benchmarks=COIN)
    assert again.done == 0 and again.total_units == out.total_units
    assert out.run_dir.read_table(columns=["unit_id"]).num_rows == len(eps)
    assert json.loads(again.run_dir.summary_path.read_text())["adaptive"] == section


def test_a_paired_goal_decides_each_pair_at_its_boundary(ray_local, tmp_path):
    cfg = coin_config(tmp_path, ci_half_width=None, paired_difference="decided", margin=0.05, baseline="coin")
    cfg = SweepConfig.model_validate({**cfg.model_dump(mode="json"), "models": [
        {"name": "oracle", "kind": "scripted", "policy": "oracle"}, {"name": "coin", "kind": "scripted", "policy": "coin"},
        {"name": "coin2", "kind": "scripted", "policy": "coin"}]})
    out = run_adaptive(cfg, progress=False, log=lambda m: None, extra_benchmarks=COIN)
    section = json.loads(out.run_dir.summary_path.read_text())["adaptive"]
    assert section["method"] == PAIRED_METHOD and section["pairs"] == ["oracle - coin", "coin2 - coin"]
    cells = {c["setting"]: c for c in section["cells"]}
    # both cells start with 2 seeds and may grow to 6 by 2 (looks at 2, 4, 6); two pairs: Bonferroni
    level = boundary_confidence([2, 4, 6], 0.05 / 2)
    assert all(c["confidence"] == pytest.approx(level) for c in cells.values()) and level > 0.975
    # coin2 plays the same coin as coin on every (task, seed): a difference of exactly 0, equivalent;
    # the oracle always succeeds where the even coin does about half the time: oracle > coin
    assert cells["even"]["decisions"] == {"coin2 - coin": "equivalent", "oracle - coin": "a>b"}
    assert cells["certain"]["decisions"] == {"coin2 - coin": "equivalent", "oracle - coin": "equivalent"}
    assert all(c["met"] for c in cells.values()) and section["reason"] == "met"
    # the reported interval is the paired interval on the episodes of the round the cell stopped in
    eps = [e for e in _episodes(out.run_dir) if e["setting"] == "even" and e["seed"] < cells["even"]["seeds"]]
    side = {m: [e for e in eps if e["model"] == m] for m in ("oracle", "coin")}
    args = [a for m in ("oracle", "coin") for a in ([e["task_id"] for e in side[m]], [e["seed"] for e in side[m]],
                                                     {"success": np.array([json.loads(e["metrics"])["success"]
                                                                           for e in side[m]])})]
    ref = paired_interval(*args, MetricSpec(name="success"), level)
    rep = cells["even"]["models"]["oracle - coin"]
    assert (rep["value"], rep["ci_low"], rep["ci_high"]) == pytest.approx((ref.value, ref.ci_low, ref.ci_high))
    assert "a>b" in out.table_text


def test_round_configs_move_grown_cells_to_entries_of_their_own(tmp_path):
    cfg = coin_config(tmp_path)
    grown = round_config(cfg, {("coin", "even"): [0, 1, 2, 3], ("coin", "certain"): [0, 1]})
    entries = [(b.settings, b.seeds) for b in grown.benchmarks]
    assert entries == [(["certain"], None), (["even"], [0, 1, 2, 3])]
    assert grown.benchmarks[1].options == {"n_tasks": 10}
    assert round_config(cfg, {}).config_sha256() == cfg.config_sha256()
    # the budget bound `validate` prints: 2 models x 2 settings x 10 tasks x min(max_seeds, 2 + 2 x 2)
    from toolsweep.cluster.adaptive import most_units

    assert most_units(cfg) == 2 * 2 * 10 * 6 and most_units(coin_config(tmp_path, max_seeds=4)) == 2 * 2 * 10 * 4


def test_stop_when_is_validated_before_anything_starts(tmp_path):
    with pytest.raises(ValueError, match="max_seeds is 1 but benchmarks.0"):
        coin_config(tmp_path, max_seeds=1)
    with pytest.raises(ValueError, match="ci_half_width"):
        coin_config(tmp_path, ci_half_width=0)
    with pytest.raises(ValueError, match="exactly one goal"):
        coin_config(tmp_path, paired_difference="decided", margin=0.05)
    with pytest.raises(ValueError, match="needs margin"):
        coin_config(tmp_path, ci_half_width=None, paired_difference="decided")
    with pytest.raises(ValueError, match="margin and baseline belong to paired_difference"):
        coin_config(tmp_path, margin=0.05)
    with pytest.raises(ValueError, match="baseline 'gpt' is not a model of this sweep"):
        coin_config(tmp_path, ci_half_width=None, paired_difference="decided", margin=0.05, baseline="gpt")
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nmodels: [{name: o, kind: scripted, policy: oracle}]\nbenchmarks: [{name: coin}]\n"
                    "stop_when: {ci_half_width: 0.1, seeds_per_rounds: 2}\n")
    with pytest.raises(ConfigError, match="stop_when.seeds_per_rounds: unknown field"):
        load_config(path)
    from toolsweep.cluster.adaptive import check_stop_when

    with pytest.raises(ConfigError, match="stop_when.metric: 'accuracy' is not a metric of coin.*success"):
        check_stop_when(coin_config(tmp_path, metric="accuracy"))


# ----------------------------------------------------------------------------- rounds that add tasks


def tasky_config(tmp_path, grow: str, **stop) -> SweepConfig:
    """A cell whose tasks are easy or hard by the task alone (coin's `tasky`: 0.95 or 0.05), the config
    running the first 10 of the setting's 60 tasks: seeds cannot narrow its interval, tasks can."""
    return SweepConfig.model_validate({
        "name": f"tasky_{grow}", "seeds": 2,
        "models": [{"name": "oracle", "kind": "scripted", "policy": "oracle"},
                   {"name": "coin", "kind": "scripted", "policy": "coin"}],
        "benchmarks": [{"name": "coin", "options": {"n_tasks": 60}, "settings": ["tasky"], "tasks": {"limit": 10}}],
        "stop_when": {"ci_half_width": 0.2, "max_rounds": 4, "seeds_per_round": 2, "max_seeds": 8, "grow": grow,
                      **stop},
        "concurrency": {"workers": 2, "episodes_per_worker": 8},
        "bootstrap": {"n_resamples": 2000, "live_n_resamples": 200},
        "output_dir": str(tmp_path / "runs"), "mlflow": False, "preflight": False,
    })


def test_a_cell_with_a_task_limit_grows_its_tasks_and_meets_a_target_seeds_cannot(ray_local, tmp_path):
    # seeds alone: the coin's interval on the first 10 tasks stays about +-0.3 whatever the seeds; the
    # cell stops unmet (futile: it needs tasks)
    seeds_only = run_adaptive(tasky_config(tmp_path, "seeds"), progress=False, log=lambda m: None,
                              extra_benchmarks=COIN)
    cell = json.loads(seeds_only.run_dir.summary_path.read_text())["adaptive"]["cells"][0]
    assert not cell["met"] and cell["tasks"] == 10 and cell["models"]["coin"]["half_width"] > 0.2
    assert {e["task_id"] for e in _episodes(seeds_only.run_dir)} == {f"t{i}" for i in range(10)}

    cfg = tasky_config(tmp_path, "auto")
    out = run_adaptive(cfg, progress=False, log=lambda m: None, extra_benchmarks=COIN)
    section = json.loads(out.run_dir.summary_path.read_text())["adaptive"]
    cell = section["cells"][0]
    assert section["grow"] == "auto" and section["reason"] == "met"
    assert cell["met"] and cell["tasks"] > 10 and cell["seeds"] == 2 and cell["models"]["coin"]["half_width"] <= 0.2
    # every round grew tasks (as many units as a round of seeds: 10 -> 20 -> 40 ...), none seeds
    designs = [[(c["tasks"], c["seeds"], c.get("grew")) for c in r["cells"]][0] for r in section["design_per_round"]]
    assert designs[0] == (10, 2, None) and all(g == "tasks" and s == 2 for _, s, g in designs[1:])
    assert [t for t, _, _ in designs] == [10 * 2 ** k for k in range(len(designs))] and designs[-1][0] == cell["tasks"]
    # the tasks run are the first 10, then the setting's next ones in the order seeded from the sweep and
    # the cell, for both models (paired differences stay paired); a re-run grows the same way
    from toolsweep.cluster.run_record import load_benchmarks

    order = task_orders(cfg, load_benchmarks(cfg))[("coin", "tasky")]
    assert order == task_order([f"t{i}" for i in range(10)], [f"t{i}" for i in range(60)], "tasky_auto|coin|tasky")
    eps = _episodes(out.run_dir)
    for model in ("oracle", "coin"):
        run = {(e["task_id"], e["seed"]) for e in eps if e["model"] == model}
        assert run == {(t, s) for t in order[:cell["tasks"]] for s in (0, 1)}
    assert order[:10] == [f"t{i}" for i in range(10)] and order[10:20] != [f"t{i}" for i in range(10, 20)]
    # the reported interval is on the episodes of the cell's final tasks
    coin = [json.loads(e["metrics"])["success"] for e in eps if e["model"] == "coin"]
    assert cell["models"]["coin"]["value"] == pytest.approx(np.mean(coin))
    assert section["units_per_round"] == [2 * t * 2 for t, _, _ in designs]
    # a re-run replays the rounds from the run directory and runs nothing
    again = run_adaptive(cfg, progress=False, log=lambda m: None, extra_benchmarks=COIN)
    assert again.done == 0 and json.loads(again.run_dir.summary_path.read_text())["adaptive"] == section


def test_grow_options_are_validated(tmp_path):
    with pytest.raises(ValueError, match="grow: auto works with the ci_half_width goal only"):
        coin_config(tmp_path, ci_half_width=None, paired_difference="decided", margin=0.05, grow="auto")
    with pytest.raises(ValueError, match="max_tasks and tasks_per_round belong to grow"):
        coin_config(tmp_path, max_tasks=20)
    with pytest.raises(ValueError, match="max_tasks is 5 but benchmarks.0 .coin. starts with 10 tasks"):
        tasky_config(tmp_path, "tasks", max_tasks=5)
    # a grown cell's entry lists its tasks; the budget counts the tasks a cell may draw
    cfg = tasky_config(tmp_path, "tasks", max_tasks=30)
    grown = round_config(cfg, {("coin", "tasky"): [0, 1]}, tasks={("coin", "tasky"): ["t0", "t5", "t7"]})
    assert grown.benchmarks[0].tasks.ids == ["t0", "t5", "t7"] and grown.benchmarks[0].tasks.limit is None
    from toolsweep.cluster.adaptive import most_units

    # the largest tasks x seeds of any order of 3 growth rounds: e.g. 10 -> 20 -> 30 tasks, then 4 seeds
    assert most_units(cfg) == 2 * 120 and most_units(tasky_config(tmp_path, "seeds")) == 2 * 10 * 8


# ----------------------------------------------------------------------------- the no-LLM floor as a model


def test_policy_baseline_plays_each_benchmarks_floor_and_pairs_with_the_models(ray_local, tmp_path):
    cfg = SweepConfig.model_validate({
        "name": "floor", "seeds": 2,
        "models": [{"name": "oracle", "kind": "scripted", "policy": "oracle"},
                   {"name": "floor", "kind": "scripted", "policy": "baseline"},
                   {"name": "coin", "kind": "scripted", "policy": "coin"}],
        "benchmarks": [{"name": "coin", "options": {"n_tasks": 6}, "settings": ["even"]}],
        "concurrency": {"workers": 2, "episodes_per_worker": 8}, "bootstrap": {"n_resamples": 500},
        "output_dir": str(tmp_path / "runs"), "mlflow": False, "preflight": False,
    })
    out = run_sweep_with_coin(cfg)
    eps = _episodes(out.run_dir)
    by = {(e["model"], e["task_id"], e["seed"]): json.loads(e["metrics"])["success"] for e in eps}
    # the floor played coin's baseline policy ("coin"): the same outcome on every (task, seed)
    floor = {k[1:]: v for k, v in by.items() if k[0] == "floor"}
    assert floor == {k[1:]: v for k, v in by.items() if k[0] == "coin"} and len(floor) == 12
    assert 0 < sum(floor.values()) < 12  # not a constant: the comparison below means something
    summary = json.loads(out.run_dir.summary_path.read_text())
    above = [p for p in summary["paired"] if {p["model_a"], p["model_b"]} == {"oracle", "floor"}]
    assert len(above) == 1
    # the oracle succeeds on every (task, seed), the floor on some: the paired difference is positive,
    # with the same sign as (oracle - floor) whichever side the summary put each model
    sign = 1 if above[0]["model_a"] == "oracle" else -1
    assert sign * above[0]["value"] == 1 - sum(floor.values()) / 12 and 0.0 <= above[0]["p_value"] < 0.05


def run_sweep_with_coin(cfg):
    from toolsweep.cluster.driver import run_sweep

    return run_sweep(cfg, progress=False, extra_benchmarks=COIN, log=lambda m: None)


def test_policy_baseline_is_refused_where_a_benchmark_names_no_floor(tmp_path):
    from toolsweep.cluster.config import resolve_plans

    data = coin_config(tmp_path).model_dump(mode="json")
    data["models"] = [{"name": "floor", "kind": "scripted", "policy": "baseline"}]
    assert resolve_plans(SweepConfig.model_validate(data), check_endpoints=False)  # coin names "coin"
    data["benchmarks"] = [{"name": "fake", "settings": ["small"]}]
    with pytest.raises(ConfigError, match="models.0.policy: benchmark 'fake' names no baseline"):
        resolve_plans(SweepConfig.model_validate({**data, "stop_when": None}), check_endpoints=False)
