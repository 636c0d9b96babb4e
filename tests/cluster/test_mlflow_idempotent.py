"""MLflow a re-run or a re-sync leaves as it was: no metric history grows twice."""

from __future__ import annotations

import json

from test_sweep_end_to_end import _run, make_config

from toolsweep.cluster.sync import sync_run_dir


def _histories(uri: str, experiment: str) -> dict[tuple[str, str], list[tuple[int, float]]]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    out = {}
    for run in client.search_runs([exp.experiment_id]):
        for key in run.data.metrics:
            out[(run.info.run_name, key)] = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, key))
    return out


def test_rerun_and_resync_leave_mlflow_history_unchanged(ray_local, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cfg = make_config(tmp_path, name="idem", n_tasks=4, seeds=[0], tracking_uri=uri)
    out = _run(cfg)
    before = _histories(uri, "idem")
    assert before and all(len(h) >= 1 for h in before.values())
    _run(cfg)  # nothing to do
    sync_run_dir(out.run_dir.path, uri)
    sync_run_dir(out.run_dir.path, uri)
    after = _histories(uri, "idem")
    assert after == before


def test_episode_transcripts_are_traces_on_their_cell_run(ray_local, tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cfg = make_config(tmp_path, name="traced", n_tasks=8, seeds=[0], tracking_uri=uri)
    out = _run(cfg)
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("traced")
    cell_runs = {r.info.run_name: r.info.run_id for r in client.search_runs([exp.experiment_id])
                 if "mlflow.parentRunId" in r.data.tags}
    run_id = cell_runs["random | fake | small"]
    traces = client.search_traces(locations=[exp.experiment_id], filter_string=f"metadata.`mlflow.sourceRun` = '{run_id}'")
    table = out.run_dir.read_table(columns=["model", "setting", "termination", "unit_id"]).to_pylist()
    mine = [r for r in table if r["model"] == "random" and r["setting"] == "small"]
    failures = sum(r["termination"] != "answered" for r in mine)
    assert len(traces) == min(failures, 20) + min(5, len(mine) - failures)
    trace = client.get_trace(traces[0].info.trace_id)
    finished = {r["unit_id"]: r["finished_at"] for r in out.run_dir.read_table(columns=["unit_id", "finished_at"]).to_pylist()}
    unit = trace.info.tags["toolsweep.unit_id"]
    # on the episode's own time (the UI lists traces by time range), ending when the episode did
    assert trace.info.request_time / 1000 <= finished[unit] + 1e-3
    assert abs(trace.info.request_time / 1000 - finished[unit]) < 60
    root = trace.data.spans[0]
    assert "NaN" not in json.dumps(root.outputs)  # strict JSON: an undefined metric is null
    names = [s.name for s in trace.data.spans]
    assert names[0].startswith("random | fake | small") and "turn 1" in names
    turn = next(s for s in trace.data.spans if s.name == "turn 1")
    assert turn.inputs["messages"][-1]["role"] == "user" and turn.outputs["message"]["role"] == "assistant"
    sync_run_dir(out.run_dir.path, uri)  # a re-sync adds no second copy
    again = client.search_traces(locations=[exp.experiment_id], filter_string=f"metadata.`mlflow.sourceRun` = '{run_id}'")
    assert len(again) == len(traces)


def test_show_prints_transcripts_of_a_run(ray_local, tmp_path, capsys):
    from toolsweep.cluster.cli import main

    cfg = make_config(tmp_path, name="shown", n_tasks=3, seeds=[0], mlflow=False)
    out = _run(cfg)
    assert main(["show", str(out.run_dir.path), "--cell", "oracle/fake/small", "--limit", "2"]) == 0
    text = capsys.readouterr().out
    assert text.count("== oracle | fake | small") == 2 and "[assistant]" in text and "metrics:" in text
    assert "1 more match" in text
    assert main(["show", str(out.run_dir.path), "--cell", "nope"]) == 2


def test_the_sweeps_run_carries_every_cells_headline_metric(ray_local, tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    out = _run(make_config(tmp_path, name="headline", n_tasks=4, seeds=[0], tracking_uri=uri))
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("headline")
    parent = next(r for r in client.search_runs([exp.experiment_id]) if "mlflow.parentRunId" not in r.data.tags)
    assert out.cells  # the loop below checks something
    for cell in out.cells:
        key = f"{cell['model']}/fake/{cell['setting']}/accuracy"
        assert parent.data.metrics[key] == cell["metrics"]["accuracy"]["value"]
        assert parent.data.metrics[key + "_ci_low"] <= parent.data.metrics[key] <= parent.data.metrics[key + "_ci_high"]
