"""A multi-node cluster, a killed driver, and a real `mlflow server` on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import FAKE_TARGET, FAKES, interruptible
from toolsweep.cluster.driver import run_sweep
from toolsweep.evaluator.rundir import RunDirectory

from test_sweep_end_to_end import make_config

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_units_spread_over_every_node_of_a_multi_node_cluster(tmp_path):
    import ray
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()  # the shared embedded Ray; the next test that needs it starts it again
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
        node_ids = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        assert len(node_ids) == 3
        cfg = make_config(tmp_path, name="multinode", n_tasks=12, seeds=1, delay_s=0.02,
                          concurrency={"workers": 3, "episodes_per_worker": 4}, mlflow=False)
        out = run_sweep(cfg, progress=False, extra_benchmarks={"fake": FAKE_TARGET}, log=lambda m: None)
        used = set(out.run_dir.read_table(columns=["node_id"]).column("node_id").to_pylist())
        assert used == node_ids, "every node ran episodes"
        assert out.done == out.total_units == 2 * 2 * 12
    finally:
        ray.shutdown()
        cluster.shutdown()


def _cli_env(tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(FAKES), env.get("PYTHONPATH", "")])
    env["TOOLSWEEP_EXTRA_BENCHMARKS"] = f"fake={FAKE_TARGET}"
    return env


def _sweep_yaml(tmp_path, name, delay_s, tracking_uri):
    p = tmp_path / f"{name}.yaml"
    p.write_text(textwrap.dedent(f"""
        name: {name}
        seeds: 2
        models:
          - {{name: oracle, kind: scripted, policy: oracle}}
          - {{name: random, kind: scripted, policy: random}}
        benchmarks:
          - name: fake
            options: {{n_tasks: 15, delay_s: {delay_s}}}
            settings: [small, large]
        concurrency: {{workers: 2, episodes_per_worker: 4}}
        bootstrap: {{n_resamples: 1000, live_n_resamples: 100}}
        output_dir: {tmp_path / 'runs'}
        tracking_uri: {tracking_uri}
    """))
    return p


def _start_and_stop_when(cmd, env, cwd, at_rows, sig, tmp_path):
    """Start the CLI, wait until `at_rows` episodes are on disk, send `sig`; returns the exit code."""
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=interruptible)
    try:
        deadline = time.time() + 180
        while time.time() < deadline:
            logs = list((tmp_path / "runs").rglob("pending.jsonl"))
            if logs and sum(1 for _ in logs[0].open()) >= at_rows:
                break
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            time.sleep(0.05)
        else:
            pytest.fail("the sweep never got going")
        if sig == signal.SIGKILL:
            os.killpg(proc.pid, sig)  # the driver and everything it started, at once
        else:
            os.kill(proc.pid, sig)  # Ctrl-C reaches the driver
        return proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def test_interrupted_then_killed_driver_then_rerun_finishes_without_duplicates(tmp_path):
    cfg = _sweep_yaml(tmp_path, "killdriver", 0.05, f"sqlite:///{tmp_path}/mlflow.db")
    cmd = [sys.executable, "-m", "toolsweep.cluster.cli", "run", str(cfg), "--no-progress", "--no-mlflow"]
    env = _cli_env(tmp_path)
    total = 2 * 2 * 15 * 2

    assert _start_and_stop_when(cmd, env, tmp_path, 15, signal.SIGINT, tmp_path) == 130
    run_path = next((tmp_path / "runs" / "killdriver").iterdir())
    after_ctrl_c = RunDirectory(run_path).read_table(columns=["unit_id"]).num_rows
    assert 15 <= after_ctrl_c < total
    assert RunDirectory(run_path).summary_path.exists(), "Ctrl-C still summarises what finished"

    _start_and_stop_when(cmd, env, tmp_path, 20, signal.SIGKILL, tmp_path)
    after_kill = RunDirectory(run_path).read_table(columns=["unit_id"]).num_rows
    assert after_ctrl_c < after_kill < total

    done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "already done" in done.stderr
    ids = RunDirectory(run_path).read_table(columns=["unit_id"]).column("unit_id").to_pylist()
    assert len(ids) == len(set(ids)) == total


@pytest.fixture
def mlflow_server(tmp_path):
    port = _free_port()
    env = dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")
    mlflow_bin = Path(sys.executable).parent / "mlflow"
    proc = subprocess.Popen(
        [str(mlflow_bin), "server", "--backend-store-uri", f"sqlite:///{tmp_path}/server.db",
         "--default-artifact-root", str(tmp_path / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        import urllib.request

        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(url + "/health", timeout=2).read()
                break
            except Exception:  # noqa: BLE001
                if time.time() > deadline or proc.poll() is not None:
                    pytest.fail("mlflow server did not start")
                time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def test_real_mlflow_server_and_sync_of_an_offline_run(ray_local, tmp_path, mlflow_server):
    from mlflow.tracking import MlflowClient

    from toolsweep.cluster.sync import sync_run_dir

    run_sweep(make_config(tmp_path, name="served", n_tasks=6, seeds=1, tracking_uri=mlflow_server),
              progress=False, extra_benchmarks={"fake": FAKE_TARGET}, log=lambda m: None)
    client = MlflowClient(mlflow_server)
    exp = client.get_experiment_by_name("served")
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 5
    child = next(r for r in runs if r.data.tags.get("model") == "oracle" and r.data.tags.get("setting") == "small")
    assert child.data.metrics["accuracy"] == 1.0
    assert {a.path for a in client.list_artifacts(child.info.run_id)} >= {"episodes.parquet", "summary.json"}

    offline = run_sweep(make_config(tmp_path, name="offline", n_tasks=6, seeds=1, mlflow=False),
                        progress=False, extra_benchmarks={"fake": FAKE_TARGET}, log=lambda m: None)
    assert sync_run_dir(offline.run_dir.path, mlflow_server) == 4
    exp = client.get_experiment_by_name("offline")
    children = [r for r in client.search_runs([exp.experiment_id]) if "mlflow.parentRunId" in r.data.tags]
    assert len(children) == 4
    by_cell = {(r.data.tags["model"], r.data.tags["setting"]): r for r in children}
    assert by_cell[("oracle", "large")].data.metrics["accuracy"] == 1.0
