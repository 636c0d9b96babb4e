"""Builds the policy that plays one episode for a configured model."""

from __future__ import annotations

from typing import Any

from toolsweep.evaluator.protocols import Benchmark, Environment, Policy
from toolsweep.evaluator.types import WorkUnit
from toolsweep.models.config import ScriptedModelConfig


def build_policy(
    model: Any,
    benchmark: Benchmark,
    env: Environment,
    unit: WorkUnit,
    endpoints: dict[str, Any] | None = None,
) -> Policy:
    """The policy for `unit`: a benchmark's scripted policy, or the generic LLM agent for a model
    reached through its endpoint (`endpoints[model.name]`, provided by the driver)."""
    if isinstance(model, ScriptedModelConfig):
        return benchmark.make_scripted_policy(model.policy, env, unit.rng_seed)
    raise NotImplementedError(f"model kind {model.kind!r} is not supported yet")
