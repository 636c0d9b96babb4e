"""APB's cross-cell composites (Table 1's step-wise mean, Table 2's paired Δ) land in summary.json and
on the sweep's MLflow run; each cell's run carries its setting's parameters (k, n_e, ...)."""

from __future__ import annotations

import json

from conftest import session_mlflow_uri
from toolsweep.cluster.config import SweepConfig
from toolsweep.cluster.driver import run_sweep


def test_composites_reach_summary_and_mlflow(ray_local, tmp_path):
    settings = ["stepwise_k1", "stepwise_k2", "stepwise_k3", *[f"extraneous_holistic_n{n}" for n in (0, 2, 4, 6, 8, 10)]]
    cfg = SweepConfig.model_validate({
        "name": "apb-composites", "seeds": 1,
        "models": [{"name": "oracle", "kind": "scripted", "policy": "oracle"},
                   {"name": "random", "kind": "scripted", "policy": "random"}],
        "benchmarks": [{"name": "apb", "settings": settings, "tasks": {"limit": 8}}],
        "concurrency": {"workers": 1, "episodes_per_worker": 32},
        "bootstrap": {"n_resamples": 500, "live_n_resamples": 100},
        "output_dir": str(tmp_path / "runs"), "tracking_uri": session_mlflow_uri(),
    })
    out = run_sweep(cfg, progress=False, log=lambda m: None)
    assert out.done == 2 * 8 * len(settings)
    composites = json.loads(out.run_dir.summary_path.read_text())["composites"]
    assert composites["apb/oracle/stepwise/correct"] == 1.0
    assert composites["apb/oracle/extraneous_holistic/delta"] == 0.0
    random_sw = composites["apb/random/stepwise/correct"]
    assert composites["apb/random/stepwise/correct_ci_low"] <= random_sw <= composites["apb/random/stepwise/correct_ci_high"]

    from mlflow.tracking import MlflowClient

    client = MlflowClient(cfg.tracking_uri)
    exp = client.get_experiment_by_name("apb-composites")
    runs = client.search_runs([exp.experiment_id])
    [parent] = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert parent.data.metrics["apb/oracle/stepwise/correct"] == 1.0
    assert parent.data.metrics["apb/random/stepwise/correct"] == random_sw
    k2 = next(r for r in runs if r.data.tags.get("setting") == "stepwise_k2" and r.data.tags.get("model") == "oracle")
    assert k2.data.params["setting.k"] == "2" and k2.data.params["setting.kind"] == "stepwise"
    n6 = next(r for r in runs if r.data.tags.get("setting") == "extraneous_holistic_n6")
    assert n6.data.params["setting.n_e"] == "6"
