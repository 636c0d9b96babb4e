"""`run --models/--benchmarks/--settings/--limit` runs a subset without changing unit ids, so the full
run afterwards reuses every unit the subset recorded."""

from __future__ import annotations

import pytest
from test_sweep_end_to_end import _run, make_config

from toolsweep.cluster.config import ConfigError, select_subset


def test_a_subset_then_the_full_run_reuses_the_subsets_units(ray_local, tmp_path):
    full = make_config(tmp_path, name="subset", n_tasks=6, seeds=[0], mlflow=False)
    part = select_subset(full, models=["oracle"], settings=["small"], limit=2)
    first = _run(part)
    assert first.done == first.total_units == 2
    second = _run(full)
    assert second.run_dir.path == first.run_dir.path
    assert second.skipped == 2 and second.done == second.total_units - 2 == 2 * 2 * 6 - 2


def test_subset_options_name_what_is_wrong(tmp_path):
    cfg = make_config(tmp_path, name="subset", n_tasks=6, seeds=[0], mlflow=False)
    with pytest.raises(ConfigError, match="--models"):
        select_subset(cfg, models=["gpt-9"])
    with pytest.raises(ConfigError, match="--settings"):
        select_subset(cfg, settings=["nope"])
    with pytest.raises(ConfigError, match="--limit"):
        select_subset(cfg, limit=0)
    assert select_subset(cfg, limit=3).benchmarks[0].tasks.limit == 3
