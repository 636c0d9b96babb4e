"""The run directory and its MLflow mirror stay whole after any sequence of full runs, growths, subset
runs and syncs: a test replays such a sequence and compares the result, trace by trace and cell by
cell, with a clean full run's."""

from __future__ import annotations

import json
from collections import Counter

from conftest import FAKE_TARGET
from test_sweep_end_to_end import make_config

from toolsweep.actors.traces import pick_episodes
from toolsweep.cluster.config import select_subset
from toolsweep.cluster.driver import run_sweep
from toolsweep.cluster.sync import sync_run_dir

PER_CELL = 3


def _run(cfg, whole=None, log=None):
    return run_sweep(cfg, progress=False, extra_benchmarks={"fake": FAKE_TARGET}, whole=whole,
                     log=log or (lambda m: None))


def _cfg(tmp_path, seeds, uri):
    return make_config(tmp_path, name="image", n_tasks=5, seeds=seeds, tracking_uri=uri,
                       mlflow_traces_per_cell=PER_CELL)


def _store(uri: str) -> dict[str, object]:
    """What the MLflow store holds of the sweep: each cell run's traced unit ids (with multiplicity),
    its last metric values, and the parent's metrics."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("image")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    traces: dict[str, Counter] = {}
    metrics: dict[str, dict[str, float]] = {}
    for r in runs:
        if "mlflow.parentRunId" not in r.data.tags:
            continue
        found = client.search_traces(locations=[exp.experiment_id], max_results=1000, include_spans=False,
                                     filter_string=f"metadata.`mlflow.sourceRun` = '{r.info.run_id}'")
        traces[r.info.run_name] = Counter(t.info.tags["toolsweep.unit_id"] for t in found)
        metrics[r.info.run_name] = {k: round(v, 9) for k, v in r.data.metrics.items()}
    every = client.search_traces(locations=[exp.experiment_id], max_results=5000, include_spans=False)
    return {"parents": len(parents), "traces": traces, "metrics": metrics, "all_traces": len(every),
            "parent_metrics": {k: round(v, 9) for k, v in parents[0].data.metrics.items()}}


def _expected_traces(run_dir) -> dict[str, Counter]:
    rows = run_dir.read_table(columns=["model", "benchmark", "setting", "unit_id", "termination"]).to_pylist()
    by_cell: dict[str, list[tuple[str, str]]] = {}
    for r in rows:
        by_cell.setdefault(f"{r['model']} | {r['benchmark']} | {r['setting']}", []).append((r["unit_id"], r["termination"]))
    return {cell: Counter(pick_episodes(eps, PER_CELL)) for cell, eps in by_cell.items()}


def _summary(run_dir) -> dict[str, object]:
    s = json.loads(run_dir.summary_path.read_text())
    cells = {(c["model"], c["setting"]): (c["n"], {k: v["value"] for k, v in c["metrics"].items()}) for c in s["cells"]}
    return {"cells": cells, "units": s["units"], "complete": s["complete"]}


def test_growth_subset_and_sync_leave_the_image_of_a_clean_full_run(ray_local, tmp_path):
    uri = f"sqlite:///{tmp_path / 'grown.db'}"
    small, grown = _cfg(tmp_path / "a", [0], uri), _cfg(tmp_path / "a", [0, 1, 2], uri)
    _run(small)  # the quick start
    _run(grown)  # grown by seeds: the cells' picks change
    subset = select_subset(grown, models=["random"], settings=["small"], limit=2)
    logs: list[str] = []
    out = _run(subset, whole=grown, log=logs.append)  # nothing new to run, but a subset invocation
    assert not [m for m in logs if "MLflow at" in m], logs
    sync_run_dir(out.run_dir.path, uri)

    clean_uri = f"sqlite:///{tmp_path / 'clean.db'}"
    clean = _run(_cfg(tmp_path / "b", [0, 1, 2], clean_uri))

    store, reference = _store(uri), _store(clean_uri)
    expected = _expected_traces(out.run_dir)
    assert store["traces"] == expected, "every picked episode traced exactly once, no other"
    assert all(n == 1 for c in store["traces"].values() for n in c.values())
    assert store["all_traces"] == sum(sum(c.values()) for c in expected.values())
    assert store["traces"] == reference["traces"]
    assert {k: v for k, v in store["metrics"].items()} == reference["metrics"]
    assert store["parent_metrics"] == reference["parent_metrics"]
    assert store["parents"] == reference["parents"] == 1
    assert _summary(out.run_dir) == _summary(clean.run_dir)


def test_a_subset_run_adds_its_units_and_keeps_the_whole_record(ray_local, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    full = _cfg(tmp_path, [0], uri)
    first = _run(full)
    before = _summary(first.run_dir)
    plots = sorted(p.name for p in first.run_dir.plots_dir.rglob("*.svg"))
    grown = _cfg(tmp_path, [0, 1], uri)
    subset = select_subset(grown, models=["random"], settings=["small"], limit=2)
    logs: list[str] = []
    out = _run(subset, whole=grown, log=logs.append)
    assert out.done == 2  # the subset's new units: random/small, tasks 0-1, seed 1
    assert not [m for m in logs if "MLflow at" in m], logs
    after = _summary(out.run_dir)
    assert set(after["cells"]) == set(before["cells"])  # every cell, not the subset's one
    assert after["cells"][("random", "small")][0] == before["cells"][("random", "small")][0] + 2
    assert after["cells"][("oracle", "large")] == before["cells"][("oracle", "large")]
    assert after["units"] == 2 * 2 * 5 * 2 and after["complete"] is False
    assert sorted(p.name for p in out.run_dir.plots_dir.rglob("*.svg")) == plots
    report = out.run_dir.report_path.read_text()
    assert "oracle" in report and "large" in report
    manifest = json.loads(out.run_dir.manifest_path.read_text())
    assert manifest["config"]["seeds"] == [0, 1] and [m["name"] for m in manifest["config"]["models"]] == ["oracle", "random"]
    assert manifest["config_sha256"] == grown.config_sha256()
    sub = manifest["subset_history"][-1]
    assert sub["models"] == ["random"] and sub["benchmarks"] == {"fake": ["small"]} and sub["limit"] == 2
    assert sub["config_sha256"] == subset.config_sha256()


def test_only_a_connection_failure_is_called_unreachable(tmp_path):
    import socket

    from toolsweep.actors.result_sink import MlflowMirror, mlflow_trouble

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mirror = MlflowMirror(f"http://127.0.0.1:{port}", "dead", "r0")
    try:
        mirror.connect({}, {})
    except Exception as exc:  # noqa: BLE001
        assert mlflow_trouble(exc) == "is unreachable"
    else:
        raise AssertionError("connect to a closed port must fail")
    try:
        {"planbench_xl": 1}["apb"]
    except KeyError as exc:
        assert "unreachable" not in mlflow_trouble(exc) and "toolsweep fault" in mlflow_trouble(exc)


def test_trace_spans_last_as_long_as_the_turns_and_the_state_says_how_it_ended(ray_local, tmp_path):
    from mlflow.tracking import MlflowClient

    from toolsweep.evaluator.rundir import row_to_result

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cfg = make_config(tmp_path, name="spans", n_tasks=3, seeds=[0], delay_s=0.02, tracking_uri=uri, fail_tasks=["t1"])
    out = _run(cfg)
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("spans")
    traces = client.search_traces(locations=[exp.experiment_id], max_results=100)
    rows = {r["unit_id"]: row_to_result(r) for r in out.run_dir.read_table().to_pylist()}
    ended = {}
    for t in traces:
        result = rows[t.info.tags["toolsweep.unit_id"]]
        ended[result.termination.value] = t.info.state.value if hasattr(t.info.state, "value") else str(t.info.state)
        spans = {s.name: s for s in t.data.spans}
        for i, step in enumerate(result.trajectory.steps, 1):
            turn = spans[f"turn {i}"]
            assert (turn.end_time_ns - turn.start_time_ns) == max(int(step.usage.latency_s * 1e9), 1000)
            assert step.usage.latency_s > 0  # the policy's time, measured where it reports none
            if step.observation:
                env = spans[f"turn {i}: environment"]
                assert step.usage.env_s >= 0.02  # the fake environment sleeps delay_s a step
                assert (env.end_time_ns - env.start_time_ns) == int(step.usage.env_s * 1e9)
        root = t.data.spans[0]
        if result.termination.value != "answered":  # OpenTelemetry keeps a description for errors only
            assert root.status.description == f"ended as {result.termination.value}"
    assert ended.get("answered") == "OK" and ended.get("env_error") == "ERROR", ended

    # an episode that ran out of turns is not a success either
    from toolsweep.actors.traces import log_episode_trace
    from toolsweep.evaluator.types import TerminationReason

    answered = next(r for r in rows.values() if r.termination.value == "answered")
    out_of_turns = answered.model_copy(update={"termination": TerminationReason.MAX_TURNS})
    run_id = client.create_run(exp.experiment_id).info.run_id
    import mlflow

    mlflow.set_tracking_uri(uri)
    trace_id = log_episode_trace(client, exp.experiment_id, run_id, out_of_turns)
    mlflow.flush_trace_async_logging(terminate=False)
    trace = client.get_trace(trace_id)
    assert str(getattr(trace.info.state, "value", trace.info.state)) == "ERROR"
    assert trace.data.spans[0].status.description == "ended as max_turns"


def test_a_cell_runs_description_explains_its_setting_params():
    from toolsweep.actors.result_sink import cell_description
    from toolsweep.benchmarks.apb import APB
    from toolsweep.cluster.record import setting_param_docs

    apb = APB()
    docs = setting_param_docs({"apb": apb})["apb"]
    params = apb.settings()["extraneous_holistic_n4"]
    text = cell_description(("m", "apb", "extraneous_holistic_n4"), params, docs)
    for name in params:  # every param it shows is explained
        line = next(x for x in text.splitlines() if x.startswith(f"- `setting.{name}`"))
        assert ": " in line.split("` = `", 1)[1], line
    assert "4,209" in text and "distractor tools" in text
