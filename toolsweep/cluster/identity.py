"""What a unit's id covers beyond (sweep, model, benchmark, setting, task, seed, sampling): the
model's outcome-relevant configuration and the benchmark's content, so a run directory can grow with
its config and reuse a finished unit only when its episode would be the same.

Operational settings (how fast or where a model is served: replicas, in-flight caps, timeouts, the URL
of a server hosting the same model, the key) are left out, so changing them reuses everything.
"""

from __future__ import annotations

import hashlib
from typing import Any

from toolsweep.evaluator.types import canonical_json

OPERATIONAL_FIELDS = frozenset({
    "name", "max_in_flight", "timeout_s", "max_retries", "replicas", "num_cpus", "startup_timeout_s", "start_stagger_s", "python",
    "base_url", "api_key_env", "context_window", "kv_cache_mib",
})
OPERATIONAL_ENGINE_ARGS = frozenset({"max_num_seqs", "gpu_memory_utilization"})
HELPER_FIELDS = frozenset({"helper_max_tokens"})
"""Fields that change only what a model answers as a helper: in the identity of the units it grades
(`helper_identity`), not in the identity of its own units."""


def adapter_hashes(path: str) -> dict[str, str]:
    """sha256 of a LoRA adapter's weights and its adapter_config.json: an adapter retrained in place is
    a different model."""
    from pathlib import Path

    from toolsweep.models.manifest import sha256_file, weight_hashes

    out = dict(weight_hashes(path))
    config = Path(path) / "adapter_config.json"
    if config.is_file():
        out["adapter_config.json"] = sha256_file(config)
    return out


def model_identity(model: Any) -> dict[str, Any]:
    """The fields of a model's config that can change what it answers (a LoRA adapter: its weights' hash
    too). Models without an adapter keep the identity they had before adapters existed."""
    data = model.model_dump(mode="json", exclude=set(OPERATIONAL_FIELDS | HELPER_FIELDS))
    if isinstance(data.get("engine_args"), dict):
        data["engine_args"] = {k: v for k, v in data["engine_args"].items() if k not in OPERATIONAL_ENGINE_ARGS}
    if data.get("adapter") is None:
        data.pop("adapter", None)
    else:
        data["adapter_sha256"] = adapter_hashes(data["adapter"])
    if data.get("rope_scaling") is None:
        data.pop("rope_scaling", None)
    return data


def helper_identity(model: Any) -> dict[str, Any]:
    """What a helper model's answers depend on: its identity and how it is asked as a helper."""
    return {**model_identity(model), **{f: getattr(model, f) for f in sorted(HELPER_FIELDS) if hasattr(model, f)}}


def _short_hash(obj: Any) -> str:
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()[:16]


def unit_contexts(config: Any, benchmarks: dict[str, Any], fingerprints: dict[str, Any]) -> dict[tuple[str, str], str]:
    """(model, benchmark) -> the context hash every unit of that pair carries: the model's identity,
    the benchmark's fingerprint (a benchmark puts the options that change its episodes there), and
    the identity of every helper model the benchmark consults."""
    served = {m.name: m for m in config.served_models()}
    out = {}
    for model in config.models:
        mine = model_identity(model)
        for name, bench in benchmarks.items():
            ident = mine
            if mine.get("kind") == "scripted" and mine.get("policy") == "baseline":
                # the floor is the policy the benchmark names now: another baseline is another episode
                ident = {**mine, "baseline": bench.baseline_policy()}
            helpers = {role: helper_identity(served[h]) for role, h in sorted(bench.helper_models().items())
                       if h in served}
            out[(model.name, name)] = _short_hash({"model": ident, "benchmark": fingerprints.get(name),
                                                   "helpers": helpers})
    return out
