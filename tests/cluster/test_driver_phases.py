"""The driver's phases one at a time: plan takes no resource, provision stops what it started, the
rollout workers die with their phase, and the result sink closes as FAILED when a run is cut short."""

from __future__ import annotations

import pytest
from test_sweep_end_to_end import FAKE_TARGET, make_config

from toolsweep.cluster.config import ConfigError
from toolsweep.cluster.driver import (
    RunOutcome,
    SweepPlan,
    plan_sweep,
    provisioned,
    result_sink,
    rollout_workers,
    run_sweep,
)

EXTRA = {"fake": FAKE_TARGET}


def _no_ray():
    import ray

    if ray.is_initialized():
        ray.shutdown()  # the shared embedded Ray; the next test that needs it starts it again
    return ray


def test_plan_takes_no_resource_and_refuses_a_bad_config_first(tmp_path):
    ray = _no_ray()
    cfg = make_config(tmp_path, name="phases", n_tasks=3, seeds=[0], mlflow=False)
    planned = plan_sweep(cfg, lambda m: None, EXTRA)
    assert isinstance(planned, SweepPlan) and len(planned.units) == 2 * 2 * 3
    todo = planned.todo()
    assert [u.unit_id for u in todo] == list(planned.units.ids) == sorted(planned.unit_ids) and len(planned.unit_ids) == 12
    assert not ray.is_initialized() and not planned.run_dir.path.exists()
    bad = cfg.model_copy(update={"benchmarks": [cfg.benchmarks[0].model_copy(update={"settings": ["tiny"]})]})
    with pytest.raises(ConfigError, match="tiny"):
        plan_sweep(bad, lambda m: None, EXTRA)
    assert not ray.is_initialized()


def test_provision_stops_what_it_started_even_when_the_run_fails(tmp_path):
    ray = _no_ray()
    cfg = make_config(tmp_path, name="phases-fail", n_tasks=3, seeds=[0], mlflow=False)
    planned = plan_sweep(cfg, lambda m: None, EXTRA)
    workers = []
    with pytest.raises(RuntimeError, match="cut short"):
        with provisioned(planned, lambda m: None) as models:
            assert ray.is_initialized() and planned.run_dir.manifest_path.exists()
            with rollout_workers(planned, models, planned.todo(), lambda m: None) as scheduler:
                workers = list(scheduler.workers)
                assert all(ray.get(w.info.remote(), timeout=60) for w in workers)
                with result_sink(planned, lambda m: None) as sink:
                    raise RuntimeError("cut short")
    assert sink.closed  # closed as FAILED, its records kept
    assert not ray.is_initialized()  # the embedded Ray this phase started is gone, with its workers
    assert len(workers) == 2


def test_the_phases_make_a_run_and_a_rerun_is_planned_as_done(tmp_path):
    _no_ray()
    cfg = make_config(tmp_path, name="phases-ok", n_tasks=3, seeds=[0], mlflow=False)
    out = run_sweep(cfg, progress=False, extra_benchmarks=EXTRA, log=lambda m: None)
    assert out.done == out.total_units == 12
    again = plan_sweep(cfg, lambda m: None, EXTRA)
    assert isinstance(again, RunOutcome) and again.done == 0 and again.skipped == 12


def test_a_finished_sweep_with_a_setting_removed_rewrites_its_record_without_ray(tmp_path, monkeypatch):
    import json

    ray = _no_ray()
    cfg = make_config(tmp_path, name="phases-shrink", n_tasks=3, seeds=[0], mlflow=False)
    first = run_sweep(cfg, progress=False, extra_benchmarks=EXTRA, log=lambda m: None)
    assert first.done == 12 and not ray.is_initialized()

    def no_ray_start(*args, **kwargs):
        raise AssertionError("Ray was started for a sweep whose units are all recorded")

    monkeypatch.setattr(ray, "init", no_ray_start)
    shrunk = cfg.model_copy(update={"benchmarks": [cfg.benchmarks[0].model_copy(update={"settings": ["small"]})]})
    lines: list[str] = []
    out = run_sweep(shrunk, progress=False, extra_benchmarks=EXTRA, log=lines.append)
    assert out.done == 0 and out.skipped == out.total_units == 6 and out.gave_up == 0
    assert not ray.is_initialized() and not any("rollout workers" in line for line in lines), lines
    summary = json.loads(out.run_dir.summary_path.read_text())
    assert {(c["model"], c["setting"]) for c in summary["cells"]} == {("oracle", "small"), ("random", "small")}
    assert summary["complete"] and summary["units"] == 6 and summary["episodes_not_in_config"] == 6
    assert summary["config_sha256"] == shrunk.config_sha256()
    manifest = json.loads(out.run_dir.manifest_path.read_text())
    assert manifest["config_sha256"] == shrunk.config_sha256()
    assert [h["config_sha256"] for h in manifest["config_history"]] == [cfg.config_sha256()]
    assert set(manifest["models"]) == {"oracle", "random"}  # as recorded when the episodes were played
    assert "large" not in out.table_text and "small" in out.table_text

    # unchanged since: the summary is reused as it is; the setting back: the whole record again, no Ray either
    again = run_sweep(shrunk, progress=False, extra_benchmarks=EXTRA, log=lambda m: None)
    assert again.skipped == 6 and again.run_dir.summary_path.read_text() == out.run_dir.summary_path.read_text()
    whole = run_sweep(cfg, progress=False, extra_benchmarks=EXTRA, log=lambda m: None)
    summary = json.loads(whole.run_dir.summary_path.read_text())
    assert len(summary["cells"]) == 4 and summary["episodes_not_in_config"] == 0 and summary["complete"]
    assert not ray.is_initialized()
