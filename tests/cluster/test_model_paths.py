"""A model `path` must hold a model (config.json, weights, a tokenizer; or a GGUF file that holds all
three) or the config is refused with exit 2 before Ray starts: a directory that existed but held no
model used to pass, start Ray, spend three attempts on every unit and exit 1 after minutes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from toolsweep.cluster.cli import EXIT_CONFIG, main
from toolsweep.models.config import model_dir_problem

ROOT = Path(__file__).resolve().parents[2]


def model_dir(root: Path, *, config: str | None = '{"model_type": "llama"}', weights: bool = True,
              tokenizer: str | None = "tokenizer.json") -> Path:
    root.mkdir(parents=True)
    if config is not None:
        (root / "config.json").write_text(config)
    if weights:
        (root / "model.safetensors").write_bytes(os.urandom(128))
    if tokenizer:
        (root / tokenizer).write_text("{}")
    return root


def test_a_whole_model_directory_passes(tmp_path):
    assert model_dir_problem(model_dir(tmp_path / "m")) is None
    assert model_dir_problem(model_dir(tmp_path / "sp", tokenizer="tokenizer.model")) is None


def test_each_missing_part_is_named(tmp_path):
    assert "no config.json" in model_dir_problem(model_dir(tmp_path / "a", config=None))
    assert "no weights" in model_dir_problem(model_dir(tmp_path / "b", weights=False))
    assert "no tokenizer" in model_dir_problem(model_dir(tmp_path / "c", tokenizer=None))
    assert "not valid JSON" in model_dir_problem(model_dir(tmp_path / "d", config="{not json"))
    assert "JSON object" in model_dir_problem(model_dir(tmp_path / "e", config="[]"))
    empty = tmp_path / "empty"
    empty.mkdir()
    problem = model_dir_problem(empty)
    assert "no config.json" in problem and "no weights" in problem and "tokenizer" in problem


def test_empty_weight_files_are_no_weights(tmp_path):
    d = model_dir(tmp_path / "m", weights=False)
    (d / "model.safetensors").write_bytes(b"")
    assert "no weights" in model_dir_problem(d)


def test_a_tokenizer_elsewhere_is_looked_for_there(tmp_path):
    d = model_dir(tmp_path / "m", tokenizer=None)
    tok = tmp_path / "tok"
    tok.mkdir()
    assert "tokenizer" in model_dir_problem(d, tokenizer=str(tok))
    (tok / "tokenizer.json").write_text("{}")
    assert model_dir_problem(d, tokenizer=str(tok)) is None


def test_a_gguf_file_must_be_there_and_be_gguf(tmp_path):
    d = tmp_path / "g"
    d.mkdir()
    assert "is not in" in model_dir_problem(d, gguf_file="m.gguf")
    (d / "m.gguf").write_bytes(b"PK\x03\x04" + os.urandom(64))
    assert "not a GGUF file" in model_dir_problem(d, gguf_file="m.gguf")
    (d / "m.gguf").write_bytes(b"GGUF" + os.urandom(64))
    assert model_dir_problem(d, gguf_file="m.gguf") is None


def sweep_yaml(tmp_path: Path, model: dict) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(json.dumps({
        "name": "paths", "seeds": 1, "models": [model],
        "benchmarks": [{"name": "toolmaze", "settings": ["C1-P1-std"], "tasks": {"limit": 1}}],
        "mlflow": False, "output_dir": str(tmp_path / "runs")}))
    return path


def test_validate_refuses_a_vllm_path_without_weights_or_tokenizer(tmp_path, capsys):
    d = model_dir(tmp_path / "half", weights=False, tokenizer=None)
    path = sweep_yaml(tmp_path, {"name": "v", "kind": "vllm", "path": str(d), "device": "cpu"})
    assert main(["validate", str(path)]) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert "models.0.path" in err and "holds no model" in err and "no weights" in err and "tokenizer" in err


def test_run_refuses_an_hf_path_that_holds_no_model_before_ray_starts(tmp_path):
    empty = tmp_path / "downloaded-nothing"
    empty.mkdir()
    path = sweep_yaml(tmp_path, {"name": "h", "kind": "hf", "path": str(empty)})
    out = subprocess.run([sys.executable, "-m", "toolsweep.cluster.cli", "run", str(path), "--no-progress"],
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == EXIT_CONFIG, out.stderr[-2000:]
    assert "holds no model" in out.stderr and "Traceback" not in out.stderr
    assert "starting an embedded Ray" not in out.stderr and not (tmp_path / "runs").exists()
