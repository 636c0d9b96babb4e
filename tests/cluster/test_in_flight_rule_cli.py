"""The documented in-flight sizing rule holds in every `toolsweep run`: a served model's cap follows the
engine (its KV capacity and max_num_seqs) unless the user wrote `max_in_flight`, and the manifest and
summary say which rule set it. `run` passes every config through the subset selection, which once
re-validated the config and so marked `max_in_flight` as written: every cap read "64, set in the model's
config". A real `toolsweep run` (the CLI's entry point) of a vLLM model behind the stand-in server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_gpu_path import fake_python, model_dir  # noqa: F401 - fixtures

from toolsweep.cluster.cli import main
from toolsweep.evaluator.rundir import RunDirectory


def sweep_file(tmp_path: Path, model_dir: Path, python: str, **model: object) -> Path:
    path = tmp_path / f"sweep-{len(model)}.json"
    path.write_text(json.dumps({
        "name": "caps", "seeds": 1,
        "models": [{"name": "q", "kind": "vllm", "path": str(model_dir), "device": "cpu", "python": python,
                    "startup_timeout_s": 60, "engine_args": {"max_num_seqs": 8}, **model}],
        "benchmarks": [{"name": "fake", "options": {"n_tasks": 4}, "settings": ["small"]}],
        "output_dir": str(tmp_path / f"runs-{len(model)}"), "mlflow": False, "preflight": False,
        "bootstrap": {"n_resamples": 100, "live_n_resamples": 20},
    }))
    return path


def recorded_caps(path: Path) -> tuple[dict, dict]:
    cfg = json.loads(path.read_text())
    run = next((Path(cfg["output_dir"]) / cfg["name"]).iterdir())
    d = RunDirectory(run)
    return d.read_manifest()["in_flight"], json.loads((run / "summary.json").read_text())["in_flight"]


@pytest.mark.parametrize("subset", [[], ["--models", "q"]], ids=["whole", "subset"])
def test_the_engine_sets_the_cap_unless_the_user_wrote_one(ray_local, tmp_path, model_dir, fake_python, subset):
    path = sweep_file(tmp_path, model_dir, fake_python)
    assert main(["run", str(path), "--no-progress", *subset]) == 0
    manifest, summary = recorded_caps(path)
    assert manifest["q"]["max_in_flight"] == summary["q"]["max_in_flight"] <= 8  # never the 64 default
    assert "set in the model's config" not in summary["q"]["rule"]
    assert "max_num_seqs 8" in summary["q"]["rule"] or "KV cache" in summary["q"]["rule"]

    written = sweep_file(tmp_path, model_dir, fake_python, max_in_flight=5)
    assert main(["run", str(written), "--no-progress", *subset]) == 0
    manifest, summary = recorded_caps(written)
    assert manifest["q"]["max_in_flight"] == summary["q"]["max_in_flight"] == 5
    assert summary["q"]["rule"] == manifest["q"]["rule"] == "max_in_flight 5 set in the model's config"


def test_a_subset_leaves_unwritten_what_the_user_did_not_write_in_models_and_helpers(tmp_path, model_dir):
    from toolsweep.cluster.config import SweepConfig, select_subset

    served = {"kind": "vllm", "path": str(model_dir), "engine_args": {"max_num_seqs": 8}}
    whole = SweepConfig.model_validate({
        "name": "caps", "models": [{"name": "q", **served}, {"name": "w", "max_in_flight": 5, **served}],
        "helpers": [{"name": "judge", **served}],
        "benchmarks": [{"name": "fake", "settings": ["small"]}], "output_dir": str(tmp_path), "mlflow": False,
    })
    subset = select_subset(whole, models=["q", "w"], limit=2)
    q, w = subset.models
    assert "max_in_flight" not in q.model_fields_set and q.in_flight_cap() == 8
    assert "max_in_flight" in w.model_fields_set and w.in_flight_cap() == 5
    assert "max_in_flight" not in subset.helpers[0].model_fields_set
    assert subset.config_sha256() != whole.config_sha256()  # the limit changed it; the models did not
    assert select_subset(whole).config_sha256() == whole.config_sha256()
