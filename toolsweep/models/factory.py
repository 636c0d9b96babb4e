"""Builds the policy that plays one episode for a configured model."""

from __future__ import annotations

from typing import Any

from toolsweep.evaluator.protocols import Benchmark, Environment, Policy
from toolsweep.evaluator.types import WorkUnit
from toolsweep.models.client import Endpoint, client_for
from toolsweep.models.config import (
    BASELINE,
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
            max_in_flight=model.in_flight_cap(),
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
            max_in_flight=model.in_flight_cap(),
            timeout_s=model.timeout_s,
            extra_body=model.extra_body,
            system_prompt=model.system_prompt,
            hf=model.model_dump(mode="json"),
        )
    return None


def _endpoint_for(model: Any, endpoints: dict[str, Any] | None) -> Endpoint:
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
    return spec if isinstance(spec, Endpoint) else Endpoint.model_validate(spec)


def scripted_policy_name(policy: str, benchmark: Benchmark) -> str | None:
    """The benchmark's policy a scripted model's `policy` names: itself, or for `baseline` the
    benchmark's baseline policy (None when the benchmark names none)."""
    return benchmark.baseline_policy() if policy == BASELINE else policy


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
        name = scripted_policy_name(model.policy, benchmark)
        if name is None:
            raise ValueError(f"model {model.name!r}: benchmark {benchmark.name!r} names no baseline policy")
        return benchmark.make_scripted_policy(name, env, unit.rng_seed)
    endpoint = _endpoint_for(model, endpoints)
    return LLMPolicy(
        client_for(endpoint),
        unit.sampling.with_stop(benchmark.stop_sequences(unit.setting) if benchmark is not None else []),
        seed=unit.rng_seed,
        session=unit.unit_id,
        system_prompt=endpoint.system_prompt,
    )


def build_helpers(
    roles: dict[str, str],
    models: dict[str, Any],
    unit: WorkUnit,
    endpoints: dict[str, Any] | None = None,
) -> dict[str, Policy]:
    """The helper models (judge, critic, ...) a benchmark consults during `unit`, by role.

    Helpers decode greedily whatever the sweep's sampling and reply within their own token budget
    (`helper_max_tokens`), never the unit's: a judge must not vary with the model under test. The config
    validator has already checked that each named model exists and is served."""
    helpers: dict[str, Policy] = {}
    for role, name in roles.items():
        model = models.get(name)
        if model is None or isinstance(model, ScriptedModelConfig):
            raise ValueError(f"{role} model {name!r} is not a served model of this sweep")
        endpoint = _endpoint_for(model, endpoints)
        helpers[role] = LLMPolicy(
            client_for(endpoint),
            unit.sampling.model_copy(update={"temperature": 0.0, "top_p": 1.0,
                                             "max_tokens": getattr(model, "helper_max_tokens", unit.sampling.max_tokens)}),
            seed=unit.rng_seed,
            session=f"{unit.unit_id}:{role}",
            system_prompt=endpoint.system_prompt,
        )
    return helpers
