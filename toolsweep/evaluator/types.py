"""The shared vocabulary of toolsweep: messages, observations, work units, results.

Everything here is a plain pydantic record so it crosses process boundaries (Ray, Parquet, JSON)
unchanged. No Ray, vLLM, MLflow or torch imports in this package.
"""

from __future__ import annotations

import hashlib
import json
from enum import Enum
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class FunctionCall(BaseModel):
    """OpenAI function-call payload; `arguments` is the raw JSON string the model produced."""

    name: str
    arguments: str = "{}"


class ToolCall(BaseModel):
    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(BaseModel):
    """One chat message in OpenAI format: the one language between environments, agents and models."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None

    def text(self) -> str:
        """The message's text content (image parts dropped); empty string when there is none."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.get("text", "") for part in self.content if part.get("type") == "text")

    def to_openai(self) -> dict[str, Any]:
        """The dict an OpenAI-compatible endpoint expects (None fields left out)."""
        return self.model_dump(exclude_none=True)


class TerminationReason(str, Enum):
    """Why an episode ended. ANSWERED, MAX_TURNS, AGENT_FORMAT_ERROR, CONTEXT_EXCEEDED and ENV_ERROR
    are the model's (or environment's) own and are scored. INFRA_ERROR and TIMEOUT (a wall-clock
    expiry: the machine, not the model) are retried and never enter a metric; CONFIG_ERROR stops the
    run. See docs/failures.md."""

    ANSWERED = "answered"
    MAX_TURNS = "max_turns"
    AGENT_FORMAT_ERROR = "agent_format_error"
    CONTEXT_EXCEEDED = "context_exceeded"
    TIMEOUT = "timeout"
    ENV_ERROR = "env_error"
    INFRA_ERROR = "infra_error"
    CONFIG_ERROR = "config_error"


UNSCORED = frozenset({TerminationReason.INFRA_ERROR, TerminationReason.TIMEOUT, TerminationReason.CONFIG_ERROR})
"""Terminations that are never a result: retried (infra_error, timeout) or stopping the run."""


class Consult(BaseModel):
    """A question the environment puts to a helper model it names by role (an LLM judge, a critic).

    The episode loop sends `messages` to the model the benchmark configured for `role`, greedily,
    and hands the reply to `env.consult_reply(role, reply)`; the agent never sees the exchange.
    """

    role: str
    messages: list[Message]


class Observation(BaseModel):
    """What the environment shows the agent after reset() or step().

    `messages` are the *new* messages to append to the conversation; `tools` are the OpenAI tool
    schemas currently visible (empty for benchmarks whose actions are plain text); `info` carries the
    environment's structured record of the step (the parsed action, flags) for the trajectory.
    With `consult` set, the environment first needs a helper model's answer (see `Consult`).
    """

    messages: list[Message] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    done: bool = False
    termination: TerminationReason | None = None
    info: dict[str, Any] = Field(default_factory=dict)
    consult: Consult | None = None


EpisodeMetrics = dict[str, float]
"""Per-episode numbers as the paper defines them. NaN means "not defined for this episode" (the
episode is left out of that metric's mean). Ratio metrics store numerator and denominator as
separate keys; see `MetricSpec`."""


class Usage(BaseModel):
    """Cost of one model call, recorded per turn."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    env_s: float = 0.0
    """Seconds the environment took to answer the turn (its step and any consults), so a transcript's
    timeline shows where the episode spent its time."""


class AgentReply(BaseModel):
    """What a policy returns for one turn: the message plus what it cost."""

    message: Message
    usage: Usage = Field(default_factory=Usage)


class Sampling(BaseModel):
    """Sampling parameters sent to a model; part of a unit's identity."""

    model_config = ConfigDict(extra="forbid")

    temperature: float = Field(0.0, ge=0.0, description="0 = greedy, as most agent papers decode.")
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens: int = Field(1024, gt=0, description="Cap on tokens per model reply.")
    stop: list[str] = Field(
        default_factory=list, max_length=8,
        description="Stop sequences; a benchmark's own (e.g. ReAct's observation marker) are added to these.")

    def with_stop(self, extra: list[str]) -> Sampling:
        """These parameters with more stop sequences (no duplicates, the configured ones first)."""
        return self if not extra else self.model_copy(update={"stop": list(dict.fromkeys([*self.stop, *extra]))})


def canonical_json(obj: Any) -> str:
    """Stable JSON (sorted keys, no spaces) so hashes do not depend on dict order."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def stable_seed(*parts: Any) -> int:
    """A 63-bit seed from sha256 over the parts; never Python's salted hash()."""
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


class WorkUnit(BaseModel):
    """One episode to run: (sweep, model, benchmark, setting, task, seed) plus sampling.

    `seed` is the environment seed as the user wrote it (e.g. the paper's 42/1000/2000/3000); every
    model sees the same environment for the same (benchmark, setting, task_id, seed). The unit's own
    RNG seed (`rng_seed`, for sampling and random policies) is derived from `unit_id`.
    """

    model_config = ConfigDict(frozen=True)

    sweep: str
    model: str
    benchmark: str
    setting: str
    task_id: str
    seed: int
    sampling: Sampling = Field(default_factory=Sampling)
    context: str = Field("", description="Hash of the rest of what decides the episode: the model's outcome-"
                         "relevant config and the benchmark's fingerprint (see cluster.identity).")

    @cached_property
    def unit_id(self) -> str:
        # Cached: the driver looks it up for every unit many times (resume, leases, the log).
        return hashlib.sha256(canonical_json(self.model_dump(mode="json")).encode()).hexdigest()

    @property
    def rng_seed(self) -> int:
        return int(self.unit_id[:15], 16)

    @property
    def cell(self) -> tuple[str, str, str]:
        """The (model, benchmark, setting) cell this unit's metrics aggregate into."""
        return (self.model, self.benchmark, self.setting)


class Step(BaseModel):
    """One agent turn in the trajectory: what the agent said, what it cost, what came back."""

    reply: Message
    usage: Usage = Field(default_factory=Usage)
    observation: list[Message] = Field(default_factory=list)
    info: dict[str, Any] = Field(default_factory=dict)


class ConsultStep(BaseModel):
    """One exchange with a helper model: the request, the reply, what it cost, and any failure."""

    role: str
    request: list[Message]
    reply: Message
    usage: Usage = Field(default_factory=Usage)
    error: str | None = None


class Trajectory(BaseModel):
    messages: list[Message] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)
    consults: list[ConsultStep] = Field(default_factory=list)

    @property
    def prompt_tokens(self) -> int:
        return sum(s.usage.prompt_tokens for s in self.steps)

    @property
    def completion_tokens(self) -> int:
        return sum(s.usage.completion_tokens for s in self.steps)

    @property
    def helper_tokens(self) -> int:
        """Prompt plus completion tokens of the helper models consulted (judge, critic)."""
        return sum(c.usage.prompt_tokens + c.usage.completion_tokens for c in self.consults)


class EpisodeResult(BaseModel):
    """A finished unit: how it ended, what happened, and the metrics its paper defines."""

    # NaN ("not defined for this episode") must survive JSON, which is how results cross processes.
    model_config = ConfigDict(ser_json_inf_nan="constants")

    unit: WorkUnit
    termination: TerminationReason
    metrics: EpisodeMetrics = Field(default_factory=dict)
    trajectory: Trajectory = Field(default_factory=Trajectory)
    error: str | None = None
    wall_time_s: float = 0.0
    node_id: str = ""
    worker_id: str = ""
    attempts: int = 1

    @property
    def unit_id(self) -> str:
        return self.unit.unit_id

    @property
    def num_turns(self) -> int:
        return len(self.trajectory.steps)
