"""The shipped model configs validate, and the config types keep their contracts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import TypeAdapter, ValidationError

from toolsweep.models.config import HFModelConfig, ModelConfig, VLLMModelConfig, load_model_config
from toolsweep.models.smollm2 import CHAT_TEMPLATE, config_snippet

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "models"


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_model_configs_validate(path):
    model = load_model_config(path)
    assert model.name and model.kind in {"vllm", "hf", "openai"}
    assert "~" not in getattr(model, "path", "")
    if isinstance(model, VLLMModelConfig) and model.device == "cpu":
        assert "VLLM_CPU_KVCACHE_SPACE" in model.env


def test_gpu_configs_and_smollm2_configs_exist():
    models = {load_model_config(p).name: load_model_config(p) for p in CONFIGS.glob("*.yaml")}
    kinds = {(m.kind, getattr(m, "device", None)) for m in models.values()}
    assert ("hf", "cpu") in kinds and ("vllm", "cpu") in kinds and ("vllm", "gpu") in kinds
    assert any(m.engine_args.tensor_parallel_size > 1 for m in models.values() if isinstance(m, VLLMModelConfig))
    assert {"qwen3-8b", "llama3-8b"} <= set(models)


def test_printed_snippet_is_a_valid_models_list(tmp_path):
    import yaml

    entries = yaml.safe_load(config_snippet(tmp_path))["models"]
    parsed = [TypeAdapter(ModelConfig).validate_python(e) for e in entries]
    assert {m.kind for m in parsed} == {"hf", "vllm"}
    assert all(m.path == str(tmp_path) for m in parsed)


def test_path_expansion_and_unknown_fields():
    m = HFModelConfig(name="x", path="~/models/x")
    assert m.path == os.path.expanduser("~/models/x")
    with pytest.raises(ValidationError):
        TypeAdapter(ModelConfig).validate_python({"name": "x", "kind": "hf", "path": "p", "devcie": "cpu"})
    # engine args accept any vLLM flag but type-check the ones results depend on
    v = VLLMModelConfig(name="v", path="/m", engine_args={"max_num_seqs": 8, "swap_space": 4})
    assert v.engine_args.model_extra == {"swap_space": 4}
    with pytest.raises(ValidationError):
        VLLMModelConfig(name="v", path="/m", engine_args={"tensor_parallel_size": 0})


def test_smollm2_template_renders_tools_and_tool_turns():
    jinja2 = pytest.importorskip("jinja2")
    env = jinja2.Environment()
    env.filters["tojson"] = lambda v: __import__("json").dumps(v)
    tools = [{"type": "function", "function": {"name": "add", "parameters": {}}}]
    msgs = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "2+3?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}]},
        {"role": "tool", "tool_call_id": "c", "content": "5"},
    ]
    text = env.from_string(CHAT_TEMPLATE).render(messages=msgs, tools=tools, add_generation_prompt=True)
    assert text.startswith("<|im_start|>system\nBe brief.\n\n# Tools")
    assert '<tools>\n{"type": "function"' in text
    assert '<|im_start|>assistant\n<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call><|im_end|>' in text
    assert "<|im_start|>user\n<tool_response>\n5\n</tool_response><|im_end|>" in text
    assert text.endswith("<|im_start|>assistant\n")
    plain = env.from_string(CHAT_TEMPLATE).render(messages=msgs[1:2], tools=None, add_generation_prompt=True)
    assert plain.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM") and "# Tools" not in plain
