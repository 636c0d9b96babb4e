"""The manifest records what beside the weights changes a model's answers (generation_config.json's
sampling defaults, the tokenizer) and the node's GPUs and driver when it has any."""

from __future__ import annotations

import hashlib
import os
import stat

from toolsweep.models.manifest import config_hashes, gpu_info


def test_generation_config_and_tokenizer_files_are_hashed(tmp_path):
    (tmp_path / "generation_config.json").write_text('{"top_k": 20}')
    (tmp_path / "tokenizer.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    hashes = config_hashes(tmp_path)
    assert set(hashes) == {"generation_config.json", "tokenizer.json"}
    assert hashes["generation_config.json"] == hashlib.sha256(b'{"top_k": 20}').hexdigest()
    assert config_hashes(tmp_path / "missing") == {}


def test_gpus_are_read_from_nvidia_smi_when_present(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gpu_info() is None  # no nvidia-smi: no GPU claimed
    smi = tmp_path / "nvidia-smi"  # a stand-in with nvidia-smi's CSV output
    smi.write_text("#!/bin/sh\necho 'NVIDIA H100 80GB HBM3, 580.65.06, 81559 MiB'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    assert gpu_info() == [{"name": "NVIDIA H100 80GB HBM3", "driver": "580.65.06", "memory": "81559 MiB"}]
    assert os.environ["PATH"] == str(tmp_path)
