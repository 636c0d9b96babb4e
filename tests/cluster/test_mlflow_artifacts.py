"""What a run leaves in MLflow besides its metrics: artifacts where the store says, plots beside the
runs they describe, episodes split by cell a part at a time, metric keys that map back to names."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
from test_sweep_end_to_end import _run, make_config

from toolsweep.actors.result_sink import (
    METRIC_NAMES_TAG,
    MlflowMirror,
    local_artifact_location,
    metric_key,
    metric_keys,
    renamed_metrics,
    split_episodes_by_cell,
)
from toolsweep.evaluator.rundir import EpisodeWriter, RunDirectory
from toolsweep.evaluator.sweep import BenchmarkPlan, expand_units
from toolsweep.evaluator.types import EpisodeResult, Sampling, TerminationReason


def test_metric_keys_are_valid_everywhere_and_map_back_to_their_names():
    import re

    names = ["correct_bin_>20", "correct_bin_gt20", "share_%", "a<=b", "accuracy", "E1"]
    keys = metric_keys(names)
    assert keys["correct_bin_>20"] != keys["correct_bin_gt20"]  # a clash gets its own key
    assert keys["correct_bin_gt20"] == "correct_bin_gt20" and keys["accuracy"] == "accuracy"
    assert metric_key("correct_bin_>20") == "correct_bin_gt20" and keys["correct_bin_>20"] == "correct_bin_gt20_2"
    assert keys["share_%"] == "share_pct" and keys["a<=b"] == "ale" + "b"
    assert len(set(keys.values())) == len(names)
    for key in keys.values():  # MLflow's rule on every platform (Windows allows no colon)
        assert re.fullmatch(r"[/\w.\- ]*", key)
    summary = {"metrics": {n: {} for n in names}}
    back = {k: n for k, n in renamed_metrics(summary).items()}
    assert {keys[n]: n for n in names if keys[n] != n} == back
    assert all(back.get(keys[n], n) == n for n in names)  # every key reads back as its name


def test_a_sqlite_stores_artifacts_live_beside_it(tmp_path):
    assert local_artifact_location(f"sqlite:///{tmp_path}/x/mlflow.db") == (tmp_path / "x" / "mlflow_artifacts").as_uri()
    assert local_artifact_location("http://127.0.0.1:5000") is None
    assert local_artifact_location("sqlite:///:memory:") is None


def _results(cells: dict[tuple[str, str], int]) -> list[EpisodeResult]:
    out = []
    for (model, setting), n in cells.items():
        units = expand_units("s", [model], [BenchmarkPlan("fake", {setting: [f"t{i}" for i in range(n)]}, [0])], Sampling())
        out += [EpisodeResult(unit=u, termination=TerminationReason.ANSWERED, metrics={"accuracy": 1.0}) for u in units]
    return out


def test_episodes_split_by_cell_across_parts_and_the_log_without_duplicates(tmp_path):
    rd = RunDirectory(tmp_path / "run")
    results = _results({("a", "small"): 5, ("b", "small"): 4, ("a", "large"): 3})
    w = EpisodeWriter(rd, part_rows=4)
    for i in range(0, 8, 4):
        w.append(results[i : i + 4])  # a part each
    w.append(results[8:10])  # stays in the write-ahead log
    import shutil

    shutil.copy(rd.part_paths()[0], rd.episodes_dir / "part-00099.parquet")  # a part recorded twice
    assert len(rd.part_paths()) == 3 and len(rd._pending_rows()) == 2
    wanted = {("a", "fake", "small"), ("a", "fake", "large")}
    folders = split_episodes_by_cell(rd, wanted, tmp_path / "out")
    assert set(folders) == wanted  # ("b", ...) not asked for
    for cell, n in ((("a", "fake", "small"), 5), (("a", "fake", "large"), 1)):
        t = pq.read_table(folders[cell] / "episodes.parquet")
        ids = t.column("unit_id").to_pylist()
        assert len(ids) == len(set(ids)) == n
        assert set(t.column("setting").to_pylist()) == {cell[2]} and set(t.column("model").to_pylist()) == {"a"}
    w.close()


def test_artifacts_and_plots_land_beside_the_store_not_in_the_working_directory(ray_local, tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    (tmp_path / "store").mkdir()
    out = _run(make_config(tmp_path, name="placed", n_tasks=6, seeds=[0], tracking_uri=uri))
    assert not (elsewhere / "mlruns").exists() and list(elsewhere.iterdir()) == []
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("placed")
    assert exp.artifact_location == (tmp_path / "store" / "mlflow_artifacts").as_uri()
    runs = client.search_runs([exp.experiment_id])
    parent = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    assert [a.path for a in client.list_artifacts(parent.info.run_id, "plots")] == ["plots/fake.svg"]
    cell = next(r for r in runs if r.info.run_name == "random | fake | small")
    files = {a.path for a in client.list_artifacts(cell.info.run_id)}
    assert {"episodes.parquet", "summary.json", "plots"} <= files
    (plot,) = client.list_artifacts(cell.info.run_id, "plots")
    svg = client.download_artifacts(cell.info.run_id, plot.path, str(tmp_path / "dl"))
    text = open(svg).read()
    assert text.startswith("<svg") and "random | fake | small — accuracy (%)" in text and "episodes" in text
    episodes = pq.read_table(client.download_artifacts(cell.info.run_id, "episodes.parquet", str(tmp_path / "dl")))
    summary = json.loads(out.run_dir.summary_path.read_text())
    n = next(c["n"] for c in summary["cells"] if (c["model"], c["setting"]) == ("random", "small"))
    assert episodes.num_rows == n and set(episodes.column("setting").to_pylist()) == {"small"}
    # the run directory keeps the same plots
    assert (out.run_dir.plots_dir / "fake.svg").exists()
    assert len(list((out.run_dir.plots_dir / "cells").glob("*.svg"))) == 4


def test_a_renamed_metric_is_tagged_with_its_name(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mirror = MlflowMirror(uri, "renamed", "r1")
    mirror.connect({}, {})
    est = {"value": 0.5, "ci_low": 0.25, "ci_high": 0.75}
    mirror.log_summaries([{"model": "m", "benchmark": "apb", "setting": "holistic", "n": 4,
                           "terminations": {"answered": 4}, "metrics": {"correct_bin_>20": est, "correct": est}}])
    run = mirror.client.get_run(mirror.children[("m", "apb", "holistic")])
    assert run.data.metrics["correct_bin_gt20"] == 0.5 and "correct_bin_gt20_ci_high" in run.data.metrics
    assert json.loads(run.data.tags[METRIC_NAMES_TAG]) == {"correct_bin_gt20": "correct_bin_>20"}


def test_a_trace_sits_on_the_episodes_own_time_with_strict_json_outputs(tmp_path):
    from mlflow.tracking import MlflowClient

    from toolsweep.actors.traces import log_episode_trace

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    exp = client.create_experiment("timed", artifact_location=local_artifact_location(uri))
    run = client.create_run(exp)
    (result,) = _results({("a", "small"): 1})
    result = result.model_copy(update={"metrics": {"accuracy": 1.0, "precision": float("nan")}, "wall_time_s": 2.5})
    finished = 1_800_000_000.0
    import mlflow

    mlflow.set_tracking_uri(uri)  # the trace exporter writes to the process's tracking URI
    trace_id = log_episode_trace(client, exp, run.info.run_id, result, finished)
    mlflow.flush_trace_async_logging(terminate=False)
    trace = client.get_trace(trace_id)
    assert trace.info.request_time == int((finished - 2.5) * 1000)  # started when the episode did
    assert abs(trace.info.execution_duration - 2500) <= 1  # and lasted as long
    outputs = trace.data.spans[0].outputs
    assert outputs["metrics"] == {"accuracy": 1.0, "precision": None}
    assert "NaN" not in json.dumps(outputs)
