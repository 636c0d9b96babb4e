"""Tier 3: a LoRA adapter through the transformers backend (peft) on CPU. SmolLM2 and a random-init
adapter of it play real ToolMaze episodes in one sweep (embedded Ray, a rollout worker): both models
are recorded with their own unit ids, the adapter's weights hash is in the manifest, and the adapter
really changes what the model says (the same greedy prompt, other tokens)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.tier3


@pytest.fixture(scope="module")
def smollm2() -> Path:
    from toolsweep.models.smollm2 import prepare

    return prepare()


@pytest.fixture(scope="module")
def adapter(smollm2, tmp_path_factory) -> Path:
    """A rank-8 adapter on q/v projections with random (non-zero) weights, saved as peft saves one."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(str(smollm2), dtype=torch.float32)
    lora = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"],
                                           init_lora_weights=False))
    out = tmp_path_factory.mktemp("lora") / "smollm2-lora"
    lora.save_pretrained(str(out))
    return out


def test_an_adapter_changes_the_models_replies(smollm2, adapter):
    from toolsweep.evaluator.types import Sampling
    from toolsweep.models.config import HFModelConfig
    from toolsweep.models.hf import HFClient

    msgs = [{"role": "user", "content": "Name a colour."}]
    replies = []
    for extra in ({}, {"adapter": str(adapter)}):
        client = HFClient(HFModelConfig(name="m", path=str(smollm2), num_threads=1, max_model_len=2048,
                                        kv_cache_mib=128, **extra))
        try:
            reply = asyncio.run(client.chat(msgs, sampling=Sampling(temperature=0.0, max_tokens=12)))
        finally:
            client.close()
        replies.append(reply.message.content)
    assert replies[0] != replies[1], replies


@pytest.mark.long(minutes=2)
def test_a_lora_adapter_plays_real_toolmaze_episodes_in_a_sweep(smollm2, adapter, ray_local, tmp_path):
    from toolsweep.cluster.config import SweepConfig
    from toolsweep.cluster.driver import run_sweep

    common = {"kind": "hf", "path": str(smollm2), "max_batch_size": 8, "max_model_len": 8192,
              "tool_parser": "hermes", "num_threads": 1, "kv_cache_mib": 1024, "max_in_flight": 8}
    config = SweepConfig.model_validate({
        "name": "hf-lora",
        "seeds": [0],
        "models": [{"name": "smollm2-hf", **common}, {"name": "smollm2-lora", "adapter": str(adapter), **common}],
        # Only the task's tools in view: real ToolMaze episodes whose prompts are ~1,000 tokens, not the default
        # view's ~6,500 (a minute of a core a first turn, per model); what is checked is the adapter's path.
        "benchmarks": [{"name": "toolmaze", "settings": ["C1-P0-std"], "tasks": {"limit": 1},
                        "options": {"max_steps": 3, "tool_view": "task"}}],
        "sampling": {"temperature": 0.0, "max_tokens": 64},
        "concurrency": {"workers": 1},
        "episode_timeout_s": 1800,
        "output_dir": str(tmp_path / "runs"),
        "mlflow": False,
        "preflight": False,  # SmolLM2-135M answers the preflight's tool-call probe in prose
    })
    out = run_sweep(config, progress=False, log=print)
    assert out.done == 2 and out.gave_up == 0
    rows = out.run_dir.read_table(columns=["unit_id", "model", "termination", "completion_tokens"]).to_pylist()
    assert sorted(r["model"] for r in rows) == ["smollm2-hf", "smollm2-lora"], rows
    assert len({r["unit_id"] for r in rows}) == 2
    assert all(r["termination"] not in ("timeout", "infra_error", "env_error") for r in rows), rows
    assert all(r["completion_tokens"] > 0 for r in rows), rows
    manifest = json.loads(out.run_dir.manifest_path.read_text())
    lora = manifest["models"]["smollm2-lora"]
    assert lora["adapter"] == str(adapter) and lora["adapter_sha256"] and lora["base"] == str(smollm2)
    assert "adapter" not in manifest["models"]["smollm2-hf"]
