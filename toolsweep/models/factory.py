"""Builds the policy that plays one episode for a configured model."""

from __future__ import annotations

from typing import Any

from toolsweep.evaluator.protocols import Benchmark, Environment, Policy
from toolsweep.evaluator.types import WorkUnit
from toolsweep.models.client import Endpoint, client_for
from toolsweep.models.config import (
    HFModelConfig,
    OpenAIModelConfig,
    ScriptedModelConfig,
    VLLMModelConfig,
)
from toolsweep.models.policy import LLMPolicy


def static_endpoint(model: Any) -> Endpoint | None:
    """The endpoint of a model that needs no server started by the cluster (openai, hf)."""
    if isinstance(model, OpenAIModelConfig):
        return Endpoint(
            kind="openai",
            name=model.name,
            model=model.model,
            base_urls=[model.base_url],
            api_key_env=model.api_key_env,
            max_in_flight=model.max_in_flight,
            timeout_s=model.timeout_s,
            max_retries=model.max_retries,
            extra_body=model.extra_body,
            system_prompt=model.system_prompt,
        )
    if isinstance(model, HFModelConfig):
        return Endpoint(
            kind="hf",
            name=model.name,
            model=model.name,
            max_in_flight=model.max_in_flight,
            timeout_s=model.timeout_s,
            extra_body=model.extra_body,
            system_prompt=model.system_prompt,
            hf=model.model_dump(mode="json"),
        )
    return None


def build_policy(
    model: Any,
    benchmark: Benchmark,
    env: Environment,
    unit: WorkUnit,
    endpoints: dict[str, Any] | None = None,
) -> Policy:
    """The policy for `unit`: a benchmark's scripted policy, or the generic LLM agent for a model
    reached through its endpoint (`endpoints[model.name]`, provided by the driver's ModelRuntime;
    openai and hf models work without one)."""
    if isinstance(model, ScriptedModelConfig):
        return benchmark.make_scripted_policy(model.policy, env, unit.rng_seed)
    spec = (endpoints or {}).get(model.name)
    if spec is None:
        spec = static_endpoint(model)
    if spec is None:
        kind = getattr(model, "kind", type(model).__name__)
        if isinstance(model, VLLMModelConfig):
            raise ValueError(
                f"model {model.name!r} (kind vllm) has no endpoint: start its servers with "
                "ModelRuntime(models).start() and pass the returned endpoints"
            )
        raise ValueError(f"model kind {kind!r} is not supported")
    endpoint = spec if isinstance(spec, Endpoint) else Endpoint.model_validate(spec)
    return LLMPolicy(
        client_for(endpoint),
        unit.sampling,
        seed=unit.rng_seed,
        session=unit.unit_id,
        system_prompt=endpoint.system_prompt,
    )
