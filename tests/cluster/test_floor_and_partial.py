"""The no-LLM floor beside every model, the variance decomposition, and partial cells, end to end on the
embedded Ray: summary.json, report.html, the terminal tables, `toolsweep compare` and MLflow (sqlite)
all show the floor's value and whether each model is above it (a paired interval), and mark a cell
whose units are not all recorded."""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

import pytest
from test_sweep_end_to_end import make_config  # noqa: F401  (shares the session's fake registration)

from conftest import FAKE_TARGET, session_mlflow_uri
from toolsweep.cluster.cli import main
from toolsweep.cluster.config import SweepConfig, select_subset
from toolsweep.cluster.driver import run_sweep
from toolsweep.evaluator.registry import register_benchmark

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))

COIN = {"coin": "coin_bench:CoinBench"}
register_benchmark("coin", COIN["coin"])


def floor_config(tmp_path, name: str, **extra) -> SweepConfig:
    """Coin on a `certain` setting (every policy but `never` succeeds) and an `even` one (the floor, coin,
    succeeds about half the time): `oracle` beats the floor there, `same` plays the floor's own policy
    under another name, `never` always fails."""
    return SweepConfig.model_validate({
        "name": name, "seeds": 2, "floor": True,
        "models": [{"name": "oracle", "kind": "scripted", "policy": "oracle"},
                   {"name": "same", "kind": "scripted", "policy": "coin"},
                   {"name": "never", "kind": "scripted", "policy": "never"}],
        "benchmarks": [{"name": "coin", "options": {"n_tasks": 8}, "settings": ["certain", "even"]}],
        "concurrency": {"workers": 2, "episodes_per_worker": 8},
        "bootstrap": {"n_resamples": 1000, "live_n_resamples": 100},
        "output_dir": str(tmp_path / "runs"), "tracking_uri": session_mlflow_uri(), "preflight": False,
        **extra,
    })


def _sweep(cfg, **kw):
    return run_sweep(cfg, progress=False, extra_benchmarks={**COIN, "fake": FAKE_TARGET}, log=lambda m: None, **kw)


def _cells(summary):
    return {(c["model"], c["setting"]): c for c in summary["cells"]}


def _cell_runs(experiment: str) -> dict[tuple[str, str], object]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(session_mlflow_uri())
    exp = client.get_experiment_by_name(experiment)
    return {(r.data.tags["model"], r.data.tags["setting"]): r for r in client.search_runs([exp.experiment_id])
            if "toolsweep.cell" in r.data.tags}


def test_the_floor_stands_beside_every_model_with_a_paired_judgement(ray_local, tmp_path, capsys):
    cfg = floor_config(tmp_path, "floor_side")
    assert [m.name for m in cfg.models] == ["oracle", "same", "never", "floor"]  # `floor: true` added it
    out = _sweep(cfg)
    assert out.done == 4 * 2 * 8 * 2
    summary = json.loads(out.run_dir.summary_path.read_text())
    assert summary["floor_model"] == "floor"
    cells = _cells(summary)
    assert cells[("floor", "even")]["is_floor"] and cells[("floor", "even")]["floor"]["policy"] == "coin"
    assert "is_floor" not in cells[("oracle", "even")]

    def reading(model, setting):
        return cells[(model, setting)]["floor"]["metrics"]["success"]

    floor_even = cells[("floor", "even")]["metrics"]["success"]["value"]
    assert 0 < floor_even < 1  # the floor is not a constant here: the comparisons below mean something
    # the oracle beats the floor where the floor fails sometimes, and ties it where both always succeed
    assert reading("oracle", "even")["judgement"] == "above"
    assert reading("oracle", "even")["difference"]["value"] == pytest.approx(1 - floor_even)
    assert reading("oracle", "even")["floor"]["value"] == floor_even
    assert reading("oracle", "certain")["judgement"] == "not distinguishable"
    # the floor's own policy under another name: zero on every pair, never judged apart from it
    for setting in ("certain", "even"):
        diff = reading("same", setting)["difference"]
        assert (diff["value"], diff["ci_low"], diff["ci_high"]) == (0.0, 0.0, 0.0) and diff["n"] == 16
        assert reading("same", setting)["judgement"] == "not distinguishable"
        assert reading("never", setting)["judgement"] == "below"
    # the interval is the paired one of the summary's own rows (model - floor: the row's sign flipped
    # when the floor is model A)
    row = next(p for p in summary["paired"] if {p["model_a"], p["model_b"]} == {"floor", "never"}
               and p["setting"] == "even")
    sign = 1 if row["model_a"] == "never" else -1
    assert reading("never", "even")["difference"]["value"] == pytest.approx(sign * row["value"])

    # report.html: the floor labelled as the floor, each model's mark and difference against it
    page = out.run_dir.report_path.read_text()
    assert "floor (coin)" in page and "model − floor" in page
    assert 'class="num floor-above"' in page and 'class="num floor-below"' in page and "floor-same" in page
    assert "≈ 0.0 [0.0, 0.0]" in page  # `same` against the floor, in the cells table
    assert "Every metric against the floor" in page
    # the variance decomposition and pass^k of each cell (summary.json's `variance`, `pass_k`)
    assert "Variance: between and within tasks" in page and "effective n" in page and "pass^2" in page
    # the terminal summary: the floor first, each model's mark against it, the legend
    text = summary["table_text"]
    head = next(line for line in text.splitlines() if line.startswith("setting"))
    assert head.split()[1:3] == ["floor", "(coin)"] and "▲" in text and "▼" in text and "≈" in text
    assert "above the no-LLM floor" in text
    full = summary["table_text_full"]
    assert "success − floor" in full and "(the floor)" in full

    # `toolsweep compare`: the floor first, the judgement per model, in text and JSON
    assert main(["compare", str(out.run_dir.path)]) == 0
    shown = capsys.readouterr().out
    assert shown.splitlines()[0].split()[4] == "floor"
    assert "coin/even success: same - floor = 0.0 [0.0, 0.0]: not distinguishable" in shown
    assert "coin/even success: oracle - floor = +" in shown and ": above" in shown
    assert main(["compare", str(out.run_dir.path), "--format", "json"]) == 0
    rows = {(r["model"], r["setting"]): r for r in json.loads(capsys.readouterr().out)["cells"]}
    assert rows[("floor", "even")]["is_floor"] and "vs_floor" not in rows[("floor", "even")]
    assert [rows[(m, "even")]["vs_floor"] for m in ("oracle", "same", "never")] == \
        ["above", "not distinguishable", "below"]
    assert main(["compare", str(out.run_dir.path), "--format", "csv"]) == 0
    by_csv = {(r["model"], r["setting"]): r for r in csv.DictReader(io.StringIO(capsys.readouterr().out))}
    assert by_csv[("never", "certain")]["vs_floor"] == "below" and float(by_csv[("never", "certain")]["minus_floor"]) == -1.0
    assert main(["compare", str(out.run_dir.path), "--format", "latex"]) == 0
    latex = capsys.readouterr().out
    assert r"$\blacktriangle$" in latex and r"$\blacktriangledown$" in latex and "▲" not in latex  # amssymb, said on line 1

    # MLflow: the floor's value, model - floor and the judgement on every model's cell run
    runs = _cell_runs("floor_side")
    assert runs[("floor", "even")].data.tags["toolsweep.role"] == "floor"
    assert runs[("oracle", "even")].data.tags["toolsweep.floor"] == "floor"
    m = {key: run.data.metrics for key, run in runs.items()}
    assert [m[(k, "even")]["success.vs_floor"] for k in ("oracle", "same", "never")] == [1.0, 0.0, -1.0]
    assert m[("oracle", "even")]["success.floor"] == pytest.approx(floor_even)
    assert m[("never", "certain")]["success.above_floor"] == -1.0
    assert m[("same", "even")]["success.above_floor_ci_low"] == 0.0 == m[("same", "even")]["success.above_floor_ci_high"]
    assert "success.vs_floor" not in m[("floor", "even")]
    # and each cell's variance decomposition and pass^k, as summary.json has them
    variance = cells[("floor", "even")]["variance"]["success"]
    assert m[("floor", "even")]["success.icc"] == pytest.approx(variance["icc"])
    assert m[("floor", "even")]["success.effective_n"] == pytest.approx(variance["effective_n"])
    assert m[("floor", "even")]["success.pass_k.2"] == pytest.approx(cells[("floor", "even")]["pass_k"]["success"]["2"])
    assert m[("oracle", "even")]["complete"] == 1.0 and m[("oracle", "even")]["units_expected"] == 16


def test_a_cell_not_run_yet_is_marked_partial_everywhere_until_it_is(ray_local, tmp_path, capsys):
    whole = floor_config(tmp_path, "floor_partial")
    out = _sweep(select_subset(whole, limit=3), whole=whole)  # 3 of 8 tasks: the rest not run yet
    summary = json.loads(out.run_dir.summary_path.read_text())
    cell = _cells(summary)[("oracle", "even")]
    assert (cell["complete"], cell["units_done"], cell["units_expected"], cell["units_given_up"]) == (False, 6, 16, 0)
    assert summary["complete"] is False and summary["cells_missing"] == []
    page = out.run_dir.report_path.read_text()
    assert "100.0* [100.0, 100.0]" in page and "(6/16 units)" in page and "6/16*" in page
    assert "partial cell" in page
    assert "100.0* [100.0, 100.0]" in summary["table_text"] and "(6/16 units)" in summary["table_text"]
    assert "partial cell" in summary["table_text_full"]
    assert main(["compare", str(out.run_dir.path)]) == 0
    shown = capsys.readouterr().out
    assert "100.0* [100.0, 100.0] (6/16 units)" in shown and "partial cell" in shown
    runs = _cell_runs("floor_partial")
    assert runs[("oracle", "even")].data.tags["toolsweep.partial"] == "6/16"
    assert runs[("oracle", "even")].data.metrics["complete"] == 0.0
    # `toolsweep report` rebuilds the summary from the run directory: the same marks
    assert main(["report", str(out.run_dir.path)]) == 0
    assert "100.0* [100.0, 100.0] (6/16 units)" in capsys.readouterr().out
    assert _cells(json.loads(out.run_dir.summary_path.read_text()))[("oracle", "even")]["units_expected"] == 16
    # `sync-mlflow` rebuilds MLflow from it: the floor readings and the partial tag on a fresh store
    uri = f"sqlite:///{tmp_path / 'resync.db'}"
    assert main(["sync-mlflow", str(out.run_dir.path), "--tracking-uri", uri]) == 0
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    resynced = {(r.data.tags["model"], r.data.tags["setting"]): r for r in
                client.search_runs([client.get_experiment_by_name("floor_partial").experiment_id])
                if "toolsweep.cell" in r.data.tags}
    assert resynced[("oracle", "even")].data.tags["toolsweep.partial"] == "6/16"
    # 6 of 16 units are too few tasks for an interval: no floor reading is mirrored for them
    assert "success.vs_floor" not in resynced[("never", "even")].data.metrics
    assert resynced[("floor", "even")].data.tags["toolsweep.role"] == "floor"

    again = _sweep(whole)  # the rest of the units: the cells are whole
    summary = json.loads(again.run_dir.summary_path.read_text())
    cell = _cells(summary)[("oracle", "even")]
    assert (cell["complete"], cell["units_done"], cell["units_expected"]) == (True, 16, 16)
    assert "*" not in summary["table_text"] and "partial cell" not in again.run_dir.report_path.read_text()
    assert _cell_runs("floor_partial")[("oracle", "even")].data.tags["toolsweep.partial"] == "no"


def test_a_given_up_unit_marks_its_cell_partial(ray_local, tmp_path, capsys):
    """An endpoint that fails every request of one task: that unit is given up (failures.jsonl) and its
    cell says 2/3 units, 1 given up, in summary.json, report.html, the tables and compare."""
    from fake_bench import FakeBench
    from models_fake_server import FakeOpenAIServer
    from test_llm_sweep import adder

    question = FakeBench(n_tasks=3).make_env("t1", "small", 0).reset().messages[-1].content

    def failing_one_task(body):
        firsts = [m["content"] for m in body["messages"] if m["role"] == "user"]
        return (500, {"error": "boom"}) if firsts and firsts[0] == question else adder(body)

    cfg = SweepConfig.model_validate({
        "name": "given_up", "seeds": [0],
        "models": [{"name": "served", "kind": "openai", "base_url": "http://127.0.0.1:1/v1", "model": "m",
                    "max_retries": 1}],
        "benchmarks": [{"name": "fake", "options": {"n_tasks": 3}, "settings": ["small"]}],
        "concurrency": {"workers": 1, "episodes_per_worker": 4},
        "bootstrap": {"n_resamples": 200, "live_n_resamples": 50},
        "output_dir": str(tmp_path / "runs"), "mlflow": False, "preflight": False, "max_attempts": 2,
    })
    with FakeOpenAIServer() as server:
        server.default = failing_one_task
        data = cfg.model_dump(mode="json")
        data["models"][0]["base_url"] = server.base_url
        cfg = SweepConfig.model_validate(data)
        out = _sweep(cfg)
    assert out.gave_up == 1 and out.done == 2
    summary = json.loads(out.run_dir.summary_path.read_text())
    cell = summary["cells"][0]
    assert (cell["complete"], cell["units_done"], cell["units_expected"], cell["units_given_up"]) == (False, 2, 3, 1)
    page = out.run_dir.report_path.read_text()
    assert "100.0*<br>[100.0, 100.0] (2/3 units, 1 given up)" in page and "2/3* (1 given up)" in page
    assert "(2/3 units, 1 given up)" in summary["table_text"] and "failures.jsonl" in summary["table_text"]
    assert main(["compare", str(out.run_dir.path)]) == 0
    assert "100.0* [100.0, 100.0] (2/3 units, 1 given up)" in capsys.readouterr().out


def test_the_floors_cells_trace_as_many_failures_as_answered_episodes(tmp_path):
    """A model's every failure (up to 20) is a transcript worth reading; the floor's are a scripted policy's,
    so its cell traces `mlflow_traces_per_cell` of them, as many as of its answered episodes."""
    from mlflow.tracking import MlflowClient

    from toolsweep.actors.result_sink import MlflowMirror
    from toolsweep.evaluator.rundir import EpisodeWriter, RunDirectory
    from toolsweep.evaluator.sweep import BenchmarkPlan, expand_units
    from toolsweep.evaluator.types import EpisodeResult, Sampling, TerminationReason

    rd = RunDirectory(tmp_path / "run")
    writer = EpisodeWriter(rd)
    for model in ("floor", "model"):
        units = expand_units("t", [model], [BenchmarkPlan("fake", {"small": [f"t{i}" for i in range(12)]}, [0])],
                             Sampling())
        writer.append([EpisodeResult(unit=u, termination=TerminationReason.MAX_TURNS, metrics={"accuracy": 0.0})
                       for u in units])
    writer.close()
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mirror = MlflowMirror(uri, "floor_traces", "main", traces_per_cell=3)
    mirror.connect({"run_id": "main"}, {})
    cell = {"benchmark": "fake", "setting": "small", "n": 12, "metrics": {}, "terminations": {"max_turns": 12}}
    mirror.log_artifacts(rd, [{**cell, "model": "floor", "is_floor": True}, {**cell, "model": "model"}])
    mirror.finish("FINISHED")
    client = MlflowClient(uri)
    traces = client.search_traces(locations=[client.get_experiment_by_name("floor_traces").experiment_id],
                                  max_results=100)
    assert sorted(t.info.tags["model"] for t in traces) == ["floor"] * 3 + ["model"] * 12
