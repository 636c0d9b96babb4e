"""How a vLLM server is sized for a sweep: requests in flight per replica, and rope scaling. Pure
functions; each returns its decision with the reason, which the run records (summary.json "servers").

In flight per replica. vLLM keeps a running sequence's whole context in its KV cache; when the
sequences scheduled need more blocks than the cache holds it preempts one and later recomputes its
prefill from scratch (vLLM docs, "Optimization and Tuning: Preemption"; the engine's start-up line
"Maximum concurrency for N tokens per request: X" is the same arithmetic with N = max_model_len). An
agent episode re-sends its growing conversation every turn, so a preempted episode pays its whole
prefill again. The cap is therefore the engine's reported KV capacity (`vllm:cache_config_info` on
/metrics: num_gpu_blocks x block_size tokens) divided by the tokens one episode holds at its longest
(the sweep's cells measured before the run: the oracle's longest request plus the reply budget,
`toolsweep plan`), and never above max_num_seqs. A `max_in_flight` set in the model's config wins.

Rope scaling. Qwen's model cards advise adding static YaRN only when long inputs need it: it scales
every position, short ones too, and "may impact performance on shorter texts". So YaRN is chosen per
model from the sweep's cells: none when the longest cell fits the native window
(config.json `max_position_embeddings`), else the smallest factor of 2 or 4 (the factors Qwen
documents) that covers it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

CACHE_INFO = re.compile(r"^vllm:cache_config_info\{(?P<labels>[^}]*)\}", re.M)


def kv_capacity(metrics_text: str) -> dict[str, int] | None:
    """KV-cache capacity from a vLLM server's /metrics text: {"num_gpu_blocks", "block_size", "kv_tokens"}."""
    match = CACHE_INFO.search(metrics_text)
    if not match:
        return None
    labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group("labels")))
    try:
        blocks, size = int(labels["num_gpu_blocks"]), int(labels["block_size"])
    except (KeyError, ValueError):
        return None
    return {"num_gpu_blocks": blocks, "block_size": size, "kv_tokens": blocks * size}


def in_flight_per_replica(
    *, kv_tokens: int | None, tokens_per_episode: int | None, max_num_seqs: int | None, default: int,
    override: int | None = None,
) -> tuple[int, str]:
    """Requests in flight per replica and why (see the module docstring)."""
    ceiling = max_num_seqs or default
    ceiling_why = f"max_num_seqs {max_num_seqs}" if max_num_seqs else f"max_in_flight default {default}"
    if override is not None:
        return override, f"max_in_flight {override} set in the model's config"
    if not kv_tokens or not tokens_per_episode:
        missing = "the engine reported no KV capacity" if not kv_tokens else "no cell was measured"
        return ceiling, f"{ceiling_why} ({missing})"
    fits = max(1, kv_tokens // tokens_per_episode)
    if fits >= ceiling:
        return ceiling, f"{ceiling_why}; the KV cache ({kv_tokens:,} tokens) holds {fits} episodes of {tokens_per_episode:,}"
    return fits, (f"KV cache {kv_tokens:,} tokens / {tokens_per_episode:,} tokens an episode at its longest = {fits} "
                  f"(below {ceiling_why}: more would be preempted and re-prefilled)")


def in_flight_record(models: list[Any], sizing: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per model, its requests in flight for the whole sweep and the rule that set them (the manifest's
    and summary's `in_flight`): a served model's from its server's sizing (`in_flight_per_replica`,
    shared by the models the server serves), any other's from its config, written or default."""
    out: dict[str, dict[str, Any]] = {}
    for m in models:
        server = next((s for s in sizing.values() if m.name in s.get("serves", ())), None)
        if server is not None:
            cap = max(1, server["in_flight_per_replica"] * server["replicas"] // len(server["serves"]))
            out[m.name] = {"max_in_flight": cap, "rule": server["rule"]}
        elif m.kind == "vllm":
            out[m.name] = {"max_in_flight": None, "rule": "sized when its server starts (a later wave)"}
        else:
            written = "max_in_flight" in m.model_fields_set
            out[m.name] = {"max_in_flight": m.in_flight_cap(), "rule": (
                f"max_in_flight {m.max_in_flight} set in the model's config" if written
                else f"max_in_flight default {m.max_in_flight}")}
    return out


YARN_FACTORS = (2.0, 4.0)


def native_window(model_path: str) -> int | None:
    """The model's trained context (config.json `max_position_embeddings`), None when unknown."""
    try:
        cfg = json.loads((Path(model_path) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    value = cfg.get("max_position_embeddings")
    return int(value) if isinstance(value, int) and value > 0 else None


def choose_rope_scaling(native: int | None, needed: int | None) -> tuple[dict[str, Any] | None, int | None, str]:
    """(rope_scaling or None, max_model_len or None, reason) for a model whose cells need `needed` tokens."""
    if native is None or needed is None:
        return None, None, "no YaRN: the native window or the cells' length is unknown"
    if needed <= native:
        return None, None, f"no YaRN: the longest cell needs {needed:,} tokens, within the native {native:,}"
    for factor in YARN_FACTORS:
        if native * factor >= needed:
            scaling = {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": native}
            return scaling, int(native * factor), (
                f"YaRN factor {factor:g}: the longest cell needs {needed:,} tokens, over the native {native:,}")
    factor = YARN_FACTORS[-1]
    scaling = {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": native}
    return scaling, int(native * factor), (
        f"YaRN factor {factor:g} (the largest documented): the longest cell needs {needed:,} tokens, more than "
        f"{int(native * factor):,}; those episodes end as context_exceeded")


def episode_tokens(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Per model, the tokens one episode holds at its longest, from `toolsweep plan` rows: the oracle's
    longest request plus the reply budget, over the model's cells (capped at its window)."""
    out: dict[str, int] = {}
    for r in rows:
        need = int(r["oracle_longest"]) + int(r["max_tokens"] or 0)
        if r.get("context_window"):
            need = min(need, int(r["context_window"]))
        out[r["model"]] = max(out.get(r["model"], 0), need)
    return out


def needed_tokens(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Per model, the context its longest cell needs (oracle's longest request plus the reply budget),
    uncapped: what rope scaling is chosen for."""
    out: dict[str, int] = {}
    for r in rows:
        out[r["model"]] = max(out.get(r["model"], 0), int(r["oracle_longest"]) + int(r["max_tokens"] or 0))
    return out

