"""`floor: true` adds each benchmark's no-LLM floor as a scripted model: once, as ordinary units (unit
ids as if the model were listed by hand), reusing a `policy: baseline` model the config already has,
and refused with a way out where a benchmark names no floor."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_sweep_end_to_end import make_config  # noqa: F401  (shares the session's fake registration)

from toolsweep.cluster.config import ConfigError, SweepConfig, load_config, resolve_plans, select_subset
from toolsweep.cluster.run_record import current_units
from toolsweep.evaluator.registry import register_benchmark

register_benchmark("coin", "coin_bench:CoinBench")
REPO = Path(__file__).resolve().parents[2]


def _config(**extra) -> dict:
    return {"name": "f", "seeds": 2,
            "models": [{"name": "oracle", "kind": "scripted", "policy": "oracle"}],
            "benchmarks": [{"name": "coin", "options": {"n_tasks": 3}}], **extra}


def test_floor_true_adds_the_floor_once_as_ordinary_units():
    cfg = SweepConfig.model_validate(_config(floor=True))
    assert [(m.name, getattr(m, "policy", None)) for m in cfg.models] == [("oracle", "oracle"), ("floor", "baseline")]
    assert cfg.floor_model() == "floor"
    again = SweepConfig.model_validate(cfg.model_dump(mode="json"))  # what a manifest records, read back
    assert [m.name for m in again.models] == ["oracle", "floor"] and again.config_sha256() == cfg.config_sha256()
    by_hand = SweepConfig.model_validate(_config(models=[{"name": "oracle", "kind": "scripted", "policy": "oracle"},
                                                         {"name": "floor", "kind": "scripted", "policy": "baseline"}]))
    units, _ = current_units(cfg)
    assert units.id_set() == current_units(by_hand)[0].id_set()  # the same units as the model listed by hand
    assert units.cell_sizes() == {(m, "coin", s): 3 * 2 for m in ("oracle", "floor") for s in ("certain", "even", "tasky")}
    # a subset of the models keeps the floor beside them
    assert [m.name for m in select_subset(cfg, models=["oracle"]).models] == ["oracle", "floor"]
    plain = SweepConfig.model_validate(_config())
    assert [m.name for m in plain.models] == ["oracle"] and plain.floor_model() is None


def test_a_config_with_a_baseline_model_uses_it_as_the_floor():
    two = [{"name": "base", "kind": "scripted", "policy": "baseline"},
           {"name": "base2", "kind": "scripted", "policy": "baseline"}]
    cfg = SweepConfig.model_validate(_config(floor=True, models=two))
    assert [m.name for m in cfg.models] == ["base", "base2"] and cfg.floor_model() == "base"  # the first one
    assert SweepConfig.model_validate(_config(models=two)).floor_model() == "base"  # floor: false lists it too


def test_floor_true_refuses_a_name_clash_and_a_benchmark_without_a_floor():
    with pytest.raises(ValueError, match="floor: true adds a scripted model named 'floor'.*rename that model"):
        SweepConfig.model_validate(_config(floor=True, models=[{"name": "floor", "kind": "scripted", "policy": "oracle"}]))
    cfg = SweepConfig.model_validate(_config(floor=True, benchmarks=[{"name": "fake", "settings": ["small"]}]))
    with pytest.raises(ConfigError, match="benchmark 'fake' names no baseline.*set `floor: false`"):
        resolve_plans(cfg, check_endpoints=False)


def test_the_quick_start_runs_the_floor():
    cfg = load_config(REPO / "configs/sweeps/quickstart.yaml")
    assert cfg.floor and cfg.floor_model() == "floor"
