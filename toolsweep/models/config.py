"""Typed model configs: what a sweep's `models:` list may name.

Every kind is reached the same way by agents: scripted policies directly, every other kind
through the async OpenAI-compatible client (see `toolsweep.models.factory`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field


class _ModelBase(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    name: str = Field(description="Label of this model in results, MLflow and reports; unique in a sweep.")
    max_in_flight: int = Field(64, gt=0, description="Cap on this model's requests in flight.")


class ScriptedModelConfig(_ModelBase):
    """A benchmark's non-LLM policy (`oracle`, `random`, ...), run like any model."""

    kind: Literal["scripted"] = "scripted"
    policy: str = Field(description="Scripted policy name, e.g. oracle or random (`toolsweep benchmarks`).")


class OpenAIModelConfig(_ModelBase):
    """Any existing OpenAI-compatible endpoint (a hosted API, a `vllm serve` already running)."""

    kind: Literal["openai"] = "openai"
    base_url: str = Field(description="e.g. http://127.0.0.1:8000/v1")
    model: str = Field(description="Model name the endpoint expects.")
    api_key_env: str | None = Field(None, description="Environment variable holding the API key (never logged).")


class VLLMModelConfig(_ModelBase):
    """vLLM OpenAI-compatible servers started by the cluster, one Ray actor per replica."""

    kind: Literal["vllm"] = "vllm"
    path: str = Field(description="Local model directory (no hub downloads at run time).")
    replicas: int = Field(1, gt=0)
    engine_args: dict[str, Any] = Field(default_factory=dict)


class HFModelConfig(_ModelBase):
    """transformers in-process (CPU or GPU)."""

    kind: Literal["hf"] = "hf"
    path: str
    gguf_file: str | None = None
    device: str = "cpu"
    dtype: str = "float32"


ModelConfig = Annotated[
    Union[ScriptedModelConfig, OpenAIModelConfig, VLLMModelConfig, HFModelConfig],
    Field(discriminator="kind"),
]
