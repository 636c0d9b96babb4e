"""An interrupt in the MLflow phase is repaired by running the same command again: the run directory is
the record, the MLflow mirror is rebuilt from it (no run left RUNNING, every cell with its final metrics,
every picked episode's trace exactly once), and a complete record is then recognised without rebuilding."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import FAKE_TARGET, FAKES, interruptible
from toolsweep.actors.traces import pick_episodes
from toolsweep.evaluator.rundir import RunDirectory

CELLS = {(m, "fake", s) for m in ("oracle", "random") for s in ("small", "large")}


def _config(tmp_path: Path, uri: str) -> Path:
    p = tmp_path / "repair.yaml"
    p.write_text(textwrap.dedent(f"""
        name: repair
        seeds: 2
        models:
          - {{name: oracle, kind: scripted, policy: oracle}}
          - {{name: random, kind: scripted, policy: random}}
        benchmarks:
          - name: fake
            options: {{n_tasks: 30}}
            settings: [small, large]
        concurrency: {{workers: 1, episodes_per_worker: 16}}
        bootstrap: {{n_resamples: 500, live_n_resamples: 50}}
        mlflow_traces_per_cell: 60
        output_dir: {tmp_path / 'runs'}
        tracking_uri: {uri}
    """))
    return p


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(FAKES), env.get("PYTHONPATH", "")])
    env["TOOLSWEEP_EXTRA_BENCHMARKS"] = f"fake={FAKE_TARGET}"
    return env


def _interrupt_in_mlflow_phase(cmd: list[str], cwd: Path, runs: Path) -> int:
    """Start the CLI and send Ctrl-C as soon as summary.json is written: the episodes are all recorded
    and summarised, the final MLflow state is being written."""
    proc = subprocess.Popen(cmd, env=_env(), cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, preexec_fn=interruptible)
    try:
        deadline = time.time() + 300
        while not list(runs.rglob("summary.json")):
            assert proc.poll() is None, "the run ended before its MLflow phase"
            assert time.time() < deadline, "the run never reached its MLflow phase"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGINT)
        return proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def _store_state(uri: str, run_dir: RunDirectory) -> dict:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("repair")
    runs = client.search_runs([exp.experiment_id]) if exp else []
    cells = {tuple(r.data.tags["toolsweep.cell"].split("|")): r for r in runs if "toolsweep.cell" in r.data.tags}
    traces = {}
    for cell, r in cells.items():
        found = client.search_traces(locations=[exp.experiment_id], max_results=1000, include_spans=False,
                                     filter_string=f"metadata.`mlflow.sourceRun` = '{r.info.run_id}'")
        traces[cell] = Counter(t.info.tags.get("toolsweep.unit_id") for t in found)
    return {"statuses": Counter(r.info.status for r in runs), "cells": cells, "traces": traces}


def test_a_rerun_repairs_what_an_interrupt_in_the_mlflow_phase_left(tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    cmd = [sys.executable, "-m", "toolsweep.cluster.cli", "run", str(_config(tmp_path, uri)), "--no-progress"]

    assert _interrupt_in_mlflow_phase(cmd, tmp_path, tmp_path / "runs") == 130
    run_dir = RunDirectory(next((tmp_path / "runs" / "repair").iterdir()))
    assert run_dir.read_table(columns=["unit_id"]).num_rows == 2 * 2 * 30 * 2, "every episode was recorded"
    broken = _store_state(uri, run_dir)
    summary = json.loads(run_dir.summary_path.read_text())
    finals = {(c["model"], c["benchmark"], c["setting"]): c for c in summary["cells"]}
    picked = {}
    rows = run_dir.read_table(columns=["unit_id", "model", "benchmark", "setting", "termination"]).to_pylist()
    for cell in CELLS:
        own = [(r["unit_id"], r["termination"]) for r in rows if (r["model"], r["benchmark"], r["setting"]) == cell]
        picked[cell] = set(pick_episodes(own, 60))

    def whole(state: dict) -> bool:
        return (set(state["statuses"]) == {"FINISHED"} and set(state["cells"]) == CELLS
                and all(state["cells"][c].data.metrics.get("n") == finals[c]["n"] for c in CELLS)
                and all(state["traces"][c] == Counter(picked[c]) for c in CELLS))

    assert not whole(broken), "the interrupt left the store incomplete (else this test proves nothing)"

    again = subprocess.run(cmd, env=_env(), cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "rebuilding it from the run directory" in again.stderr
    repaired = _store_state(uri, run_dir)
    assert set(repaired["statuses"]) == {"FINISHED"}, repaired["statuses"]  # no run left RUNNING
    assert set(repaired["cells"]) == CELLS
    for cell in CELLS:
        metrics = repaired["cells"][cell].data.metrics
        assert metrics["n"] == finals[cell]["n"]
        assert metrics["accuracy"] == pytest.approx(finals[cell]["metrics"]["accuracy"]["value"])
        assert metrics["accuracy_ci_low"] == pytest.approx(finals[cell]["metrics"]["accuracy"]["ci_low"])
        assert metrics["complete"] == 1.0
        assert repaired["traces"][cell] == Counter(picked[cell]), "every picked episode's trace exactly once"

    third = subprocess.run(cmd, env=_env(), cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert third.returncode == 0, third.stderr[-3000:]
    assert "nothing to run" in third.stderr and "rebuilding" not in third.stderr  # a complete record is seen as one
    assert _store_state(uri, run_dir)["traces"] == repaired["traces"]


def test_a_trace_written_twice_is_one_trace_with_its_spans(tmp_path):
    """An export cut short and written again (the repair) completes the trace under the same id."""
    from mlflow.tracking import MlflowClient

    from toolsweep.actors.result_sink import local_artifact_location
    from toolsweep.actors.traces import episode_trace, export_traces
    from toolsweep.evaluator.types import (EpisodeResult, Message, Step, TerminationReason, Trajectory,
                                           Usage, WorkUnit)

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    exp = client.create_experiment("twice", artifact_location=local_artifact_location(uri))
    run_id = client.create_run(exp).info.run_id
    unit = WorkUnit(sweep="s", model="m", benchmark="b", setting="x", task_id="t1", seed=3)
    reply = Message(role="assistant", content="call")
    steps = [Step(reply=reply, observation=[Message(role="tool", content="out", tool_call_id="c")],
                        usage=Usage(latency_s=0.1, env_s=0.01))]
    result = EpisodeResult(unit=unit, termination=TerminationReason.ANSWERED,
                           trajectory=Trajectory(messages=[Message(role="user", content="q"), reply,
                                                           *steps[0].observation], steps=steps),
                           metrics={"accuracy": 1.0}, wall_time_s=0.2)
    first = episode_trace(exp, run_id, result, 1.8e9)
    export_traces(uri, [first.__class__(first.info, [])])  # cut short: the trace's info, no span
    export_traces(uri, [episode_trace(exp, run_id, result, 1.8e9)])
    found = client.search_traces(locations=[exp], include_spans=False,
                                 filter_string=f"metadata.`mlflow.sourceRun` = '{run_id}'")
    assert len(found) == 1  # the half-written trace was completed, not joined by a second one
    spans = client.get_trace(found[0].info.trace_id).data.spans
    assert sorted(s.name for s in spans) == sorted(
        ["m | b | x | t1 | seed 3", "turn 1", "turn 1: environment"])
    assert found[0].info.tags["seed"] == "3" and found[0].info.tags["model"] == "m"
