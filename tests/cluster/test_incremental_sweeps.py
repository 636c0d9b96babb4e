"""A run directory grows with its config: added seeds, models or settings run only their new units;
units dropped from the config stay on disk but leave the summary; a re-run with nothing to do starts
nothing."""

from __future__ import annotations

import json

import pytest
from test_sweep_end_to_end import _run, make_config

from toolsweep.cluster.config import ConfigError, SweepConfig


def _with(cfg: SweepConfig, **changes) -> SweepConfig:
    return SweepConfig.model_validate({**cfg.model_dump(mode="json"), **changes})


def test_adding_a_seed_runs_only_the_new_units_into_the_same_directory(ray_local, tmp_path):
    cfg = make_config(tmp_path, name="grow", n_tasks=4, seeds=[0], mlflow=False)
    first = _run(cfg)
    assert first.done == first.total_units == 2 * 2 * 4
    grown = _with(cfg, seeds=[0, 1])
    second = _run(grown)
    assert second.run_dir.path == first.run_dir.path
    assert second.skipped == first.total_units and second.done == second.total_units - first.total_units == 16
    summary = json.loads(second.run_dir.summary_path.read_text())
    assert sum(c["n"] for c in summary["cells"]) == 32 and summary["episodes_not_in_config"] == 0
    manifest = json.loads(second.run_dir.manifest_path.read_text())
    assert [h["config_sha256"] for h in manifest["config_history"]] == [cfg.config_sha256()]
    assert manifest["config_sha256"] == grown.config_sha256()

    # a model less: its episodes stay on disk, out of the summary; nothing is recomputed
    shrunk = _with(grown, models=[{"name": "oracle", "kind": "scripted", "policy": "oracle"}])
    third = _run(shrunk)
    assert third.done == 0 and third.skipped == third.total_units == 16
    summary = json.loads(third.run_dir.summary_path.read_text())
    assert {c["model"] for c in summary["cells"]} == {"oracle"} and summary["episodes_not_in_config"] == 16
    assert third.run_dir.read_table(columns=["unit_id"]).num_rows == 32


def test_a_rerun_with_nothing_to_do_starts_nothing_and_takes_seconds(ray_local, tmp_path):
    cfg = make_config(tmp_path, name="noop", n_tasks=4, seeds=[0], mlflow=False)
    first = _run(cfg)
    summary_before = first.run_dir.summary_path.read_bytes()
    lines = []
    again = _run(cfg, log=lines.append)
    assert again.done == 0 and again.skipped == first.total_units
    assert any("nothing to run" in line for line in lines)
    assert not any("rollout workers" in line for line in lines)  # no worker was started
    assert again.run_dir.summary_path.read_bytes() == summary_before  # the summary was reused as it was
    assert again.table_text == first.table_text


def test_a_changed_benchmark_still_refuses_with_the_way_out(ray_local, tmp_path):
    cfg = make_config(tmp_path, name="bench", n_tasks=2, seeds=[0], mlflow=False)
    out = _run(cfg)
    manifest = json.loads(out.run_dir.manifest_path.read_text())
    # as if the run had been made by an older toolsweep whose benchmark differed
    manifest["benchmarks"]["fake"]["version"] = "0-old"
    manifest["versions"]["toolsweep"] = "0-old"
    out.run_dir.manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="--run-id"):
        _run(cfg)
