"""Sweeps through a real embedded Ray, a real run directory and a real MLflow (sqlite file)."""

from __future__ import annotations

import json
import threading
import time

import pyarrow.parquet as pq
import pytest

from conftest import FAKE_TARGET, session_mlflow_uri
from toolsweep.cluster.config import SweepConfig
from toolsweep.cluster.driver import run_sweep


def make_config(tmp_path, name="e2e", n_tasks=12, seeds=2, delay_s=0.0, fail_tasks=(), tracking_uri=None, **extra):
    return SweepConfig.model_validate({
        "name": name,
        "seeds": seeds,
        "models": [
            {"name": "oracle", "kind": "scripted", "policy": "oracle"},
            {"name": "random", "kind": "scripted", "policy": "random"},
        ],
        "benchmarks": [{
            "name": "fake",
            "options": {"n_tasks": n_tasks, "delay_s": delay_s, "fail_tasks": list(fail_tasks)},
            "settings": ["small", "large"],
        }],
        "concurrency": {"workers": 2, "episodes_per_worker": 8},
        "bootstrap": {"n_resamples": 2000, "live_n_resamples": 200},
        "output_dir": str(tmp_path / "runs"),
        "tracking_uri": tracking_uri or session_mlflow_uri(),
        **extra,
    })


def _run(cfg, **kw):
    return run_sweep(cfg, progress=False, extra_benchmarks={"fake": FAKE_TARGET}, log=kw.pop("log", lambda m: None))


def _values(outcome):
    return {(c["model"], c["setting"]): {k: v["value"] for k, v in c["metrics"].items()} for c in outcome.cells}


def test_sweep_writes_run_dir_and_mlflow_and_resumes(ray_local, tmp_path, capsys):
    cfg = make_config(tmp_path, delay_s=0.01, mlflow_interval_s=0.2)
    out = _run(cfg)
    n_units = 2 * 2 * 12 * 2
    assert out.total_units == n_units and out.done == n_units and out.skipped == 0
    rd = out.run_dir
    for p in (rd.manifest_path, rd.summary_path, rd.report_path):
        assert p.exists(), p
    manifest = json.loads(rd.manifest_path.read_text())
    assert manifest["config_sha256"] == cfg.config_sha256() and manifest["versions"]["ray"] == "2.60.0"
    table = pq.read_table(rd.part_paths())
    ids = table.column("unit_id").to_pylist()
    assert len(ids) == n_units == len(set(ids))
    values = _values(out)
    assert values[("oracle", "small")]["accuracy"] == 1.0
    assert values[("random", "large")]["accuracy"] < 0.5
    summary = json.loads(rd.summary_path.read_text())
    oracle_small = next(c for c in summary["cells"] if c["model"] == "oracle" and c["setting"] == "small")
    assert oracle_small["n"] == 24 and oracle_small["metrics"]["calls_per_turn"]["value"] == pytest.approx(0.5)
    assert summary["paired"], "two models on the same cells give paired differences"
    report = rd.report_path.read_text()
    assert "Fake accuracy" in report and "Convergence" in report

    from mlflow.tracking import MlflowClient

    client = MlflowClient(cfg.tracking_uri)
    exp = client.get_experiment_by_name("e2e")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert len(parents) == 1 and len(children) == 4
    child = next(r for r in children if r.data.tags["model"] == "random" and r.data.tags["setting"] == "small")
    for key in ("accuracy", "accuracy_ci_low", "accuracy_ci_high", "calls_per_turn"):
        assert key in child.data.metrics
    assert child.data.params["setting.max"] == "5" and child.data.params["model"] == "random"
    history = client.get_metric_history(child.info.run_id, "accuracy")
    steps = sorted({m.step for m in history})
    assert steps[-1] == 24 and len(steps) >= 2, "logged as the cell filled up, not only at the end"
    assert child.data.metrics["accuracy_ci_low"] <= child.data.metrics["accuracy"] <= child.data.metrics["accuracy_ci_high"]

    from toolsweep.cluster.cli import main

    rd.report_path.unlink()
    assert main(["report", str(rd.path)]) == 0
    printed = capsys.readouterr().out
    # the headline metric per setting and model, short and narrow; every metric with --full
    assert "== fake: accuracy (%), higher is better (96 episodes)" in printed and rd.report_path.exists()
    table = printed.split("\nwrote ")[0].splitlines()  # the last line names the files
    assert "calls_per_turn" not in printed and max(len(line) for line in table) <= 100
    assert len(table) <= 12
    assert main(["report", str(rd.path), "--full"]) == 0
    printed = capsys.readouterr().out
    assert "calls_per_turn" in printed and "answered=" in printed

    again = _run(cfg)
    assert again.done == 0 and again.skipped == n_units
    assert _values(again) == values
    assert len(client.search_runs([exp.experiment_id])) == 5, "resume reuses the parent and child runs"


def test_env_error_is_counted_and_sweep_goes_on(ray_local, tmp_path):
    out = _run(make_config(tmp_path, name="errs", n_tasks=6, seeds=1, fail_tasks=["t2"]))
    assert out.done == 2 * 2 * 6
    cell = next(c for c in out.cells if c["model"] == "oracle" and c["setting"] == "small")
    assert cell["terminations"]["env_error"] == 1 and cell["terminations"]["answered"] == 5
    summary = json.loads(out.run_dir.summary_path.read_text())
    assert "env_error=1" in summary["table_text_full"]  # `toolsweep report --full` shows the terminations


def test_mlflow_unreachable_sweep_completes_and_says_so_once(ray_local, tmp_path):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    messages = []
    out = _run(make_config(tmp_path, name="nomlflow", n_tasks=4, seeds=1, tracking_uri=f"http://127.0.0.1:{port}"),
               log=messages.append)
    assert out.done == 16 and out.run_dir.summary_path.exists()
    warned = [m for m in messages if "unreachable" in m]
    assert len(warned) == 1 and "toolsweep sync-mlflow" in warned[0]


def test_killed_worker_loses_nothing_and_counts_nothing_twice(ray_local, tmp_path):
    import ray

    baseline = _run(make_config(tmp_path / "a", name="kill", n_tasks=10, seeds=2, mlflow=False))
    cfg = make_config(tmp_path / "b", name="kill", n_tasks=10, seeds=2, delay_s=0.05, mlflow=False)
    killed = []

    def killer():
        deadline = time.time() + 60
        while time.time() < deadline and not killed:
            names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
                     if a["name"].startswith("toolsweep:kill:")]
            parts = list((tmp_path / "b").rglob("pending.jsonl"))
            if names and parts and sum(1 for _ in parts[0].open()) >= 10:
                ray.kill(ray.get_actor(names[0]))
                killed.append(names[0])
            time.sleep(0.05)

    t = threading.Thread(target=killer)
    t.start()
    out = _run(cfg)
    t.join()
    assert killed, "the test must have killed a worker mid-sweep"
    assert out.worker_restarts >= 1
    ids = out.run_dir.read_table(columns=["unit_id"]).column("unit_id").to_pylist()
    assert len(ids) == len(set(ids)) == out.total_units
    assert _values(out) == _values(baseline)
