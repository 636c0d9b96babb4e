"""`toolsweep plan --power`: from a pilot run directory, the tasks x seeds each cell needs for a target
interval, and what each model pair can detect. The pilot is a real run directory written by the
episode writer (no Ray needed to read it)."""

from __future__ import annotations

import json
import math

import numpy as np

from conftest import FAKE_TARGET
from toolsweep.cluster.config import SweepConfig
from toolsweep.cluster.plan import main
from toolsweep.cluster.power import guarded, power_rows
from toolsweep.evaluator.design import variance_components
from toolsweep.evaluator.rundir import RunDirectory


def pilot(tmp_path, rng) -> RunDirectory:
    """Two scripted models on the fake benchmark, three seeds: a real sweep's run directory."""
    from toolsweep.cluster.driver import run_sweep

    cfg = SweepConfig.model_validate({
        "name": "pilot", "seeds": 3,
        "models": [{"name": "oracle", "kind": "scripted", "policy": "oracle"},
                   {"name": "random", "kind": "scripted", "policy": "random"}],
        "benchmarks": [{"name": "fake", "options": {"n_tasks": 20}, "settings": ["small"]}],
        "concurrency": {"workers": 1}, "bootstrap": {"n_resamples": 200, "live_n_resamples": 50},
        "output_dir": str(tmp_path / "runs"), "mlflow": False,
    })
    out = run_sweep(cfg, progress=False, extra_benchmarks={"fake": FAKE_TARGET}, log=lambda m: None)
    (tmp_path / "sweep.yaml").write_text(json.dumps(cfg.model_dump(mode="json")))
    return out.run_dir


def test_power_rows_and_the_cli_on_a_pilot(ray_local, tmp_path, capsys):
    run_dir = pilot(tmp_path, np.random.default_rng(0))
    cells, pairs = power_rows(run_dir, half=0.05, difference=0.1, power=0.8)
    assert {c["model"] for c in cells} == {"oracle", "random"}
    for c in cells:
        assert c["tasks"] == 20 and math.isclose(c["seeds"], 3.0)
        # more seeds never need more tasks
        needed = [c["tasks_needed"][s] for s in (1, 2, 3, 5)]
        assert needed == sorted(needed, reverse=True)
    assert pairs and pairs[0]["tasks_needed"] >= 2
    assert main([str(tmp_path / "sweep.yaml"), "--power", str(run_dir.path), "--half-width", "0.05"]) == 0
    out = capsys.readouterr().out
    assert "tasks @3 seeds" in out and "paired differences" in out
    assert main([str(tmp_path / "sweep.yaml"), "--power", str(tmp_path / "nowhere")]) == 2


def test_a_pilot_with_no_variation_is_planned_conservatively():
    flat = variance_components(["a", "b", "c"] * 2, np.zeros(6))
    vc, note = guarded(flat)
    assert note and vc.var_task > 0  # not "2 tasks suffice" from a pilot that saw nothing
    varied = variance_components(["a", "a", "b", "b"], np.array([0.0, 1.0, 1.0, 1.0]))
    assert guarded(varied) == (varied, "")
