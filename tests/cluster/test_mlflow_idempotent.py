"""MLflow a re-run or a re-sync leaves as it was: no metric history grows twice."""

from __future__ import annotations

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
