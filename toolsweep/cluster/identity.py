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
    "name", "max_in_flight", "timeout_s", "max_retries", "replicas", "num_cpus", "startup_timeout_s", "python",
    "base_url", "api_key_env", "context_window",
})
OPERATIONAL_ENGINE_ARGS = frozenset({"max_num_seqs", "gpu_memory_utilization"})


def model_identity(model: Any) -> dict[str, Any]:
    """The fields of a model's config that can change what it answers."""
    data = model.model_dump(mode="json", exclude=set(OPERATIONAL_FIELDS))
    if isinstance(data.get("engine_args"), dict):
        data["engine_args"] = {k: v for k, v in data["engine_args"].items() if k not in OPERATIONAL_ENGINE_ARGS}
    return data


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
            helpers = {role: model_identity(served[h]) for role, h in sorted(bench.helper_models().items())
                       if h in served}
            out[(model.name, name)] = _short_hash({"model": ident, "benchmark": fingerprints.get(name),
                                                   "helpers": helpers})
    return out
