"""The small extension points: Environment, Policy, Benchmark, and how metrics aggregate."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from toolsweep.evaluator.types import AgentReply, EpisodeMetrics, Message, Observation


@runtime_checkable
class Environment(Protocol):
    """One episode of one task. Parses the agent's replies itself; a malformed reply is an
    observation that counts in the metrics, never an exception.

    An environment that consults a helper model (an observation with `consult` set) also
    implements `consult_reply(role, reply: Message) -> Observation`, and its benchmark names the
    model for each role in `helper_models()`.
    """

    def reset(self) -> Observation: ...

    def step(self, reply: Message) -> Observation: ...

    def result(self) -> EpisodeMetrics: ...


@runtime_checkable
class Policy(Protocol):
    """What answers the environment. Gets the whole conversation so far and the visible tools.

    Raise `ContextExceeded` when the conversation no longer fits the model, `InfraError` when the
    model cannot be reached (the scheduler retries the unit elsewhere).
    """

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply: ...


class ContextExceeded(Exception):
    """The conversation no longer fits the model's context window (termination `context_exceeded`)."""


class InfraError(Exception):
    """Infrastructure failed (dead actor, unreachable server): the unit is retried, never scored.
    `cause` is one of `evaluator.failures`' transient causes."""

    def __init__(self, message: str = "", cause: str = "unreachable") -> None:
        super().__init__(message)
        self.cause = cause


class EndpointConfigError(Exception):
    """The endpoint refuses the sweep's configuration (a bad key, an unknown model name, a bad URL):
    every unit would fail the same way, so the run stops, and nothing is scored. `cause`: auth,
    not_found or unreachable (an unusable URL)."""

    def __init__(self, message: str = "", cause: str = "auth") -> None:
        super().__init__(message)
        self.cause = cause


class MetricSpec(BaseModel):
    """How one metric aggregates over episodes.

    - `mean`: mean of the per-episode value stored under `name` (NaN values are left out, so a
      metric defined on a subset, e.g. PRR over exposed trajectories, is a mean over that subset).
    - `ratio`: sum of `numerator` over sum of `denominator` (ratio of global totals); the bootstrap
      resamples numerators and denominators together.
    """

    model_config = ConfigDict(frozen=True)

    name: str
    kind: Literal["mean", "ratio"] = "mean"
    numerator: str | None = None
    denominator: str | None = None
    higher_is_better: bool | None = Field(
        True, description="The metric's better direction; None for a descriptive metric the paper gives no "
        "direction (PlanBench-XL's turns, EDT and S/C ratio): it gets no 'better' verdict and no floor judgement.")
    description: str = ""
    scale: float = Field(1.0, description="Display multiplier, e.g. 100 for percentages.")

    def keys(self) -> list[str]:
        """The per-episode keys this metric reads."""
        if self.kind == "ratio":
            return [self.numerator or f"{self.name}_num", self.denominator or f"{self.name}_den"]
        return [self.name]


class ReportTable(BaseModel):
    """A paper-style table a benchmark lays out from cell summaries (rendered as text and HTML)."""

    title: str
    columns: list[str]
    rows: list[list[Any]]
    note: str = ""
    metrics: dict[str, float] = Field(
        default_factory=dict,
        description="Machine-readable values behind the table (composites across cells, with `_ci_low`/"
        "`_ci_high`); summary.json keeps them under `composites` and MLflow logs them on the sweep's run.",
    )


class ExploitPolicy(BaseModel):
    """A scripted policy that tries to score without doing the task, with the bounds its metrics must
    respect. Every benchmark's exploit suite runs in the default tests; a new metric or benchmark must
    pass it.

    Bounds are in the metrics' data units (fractions, not percentages): `ceilings` for metrics where a
    higher value is better (the exploit must stay at or below), `floors` for metrics where lower is
    better (the exploit must stay at or above). `settings` limits where the bounds apply (None: all).
    """

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    ceilings: dict[str, float] = Field(default_factory=dict)
    floors: dict[str, float] = Field(default_factory=dict)
    settings: list[str] | None = None
    pooled: bool = Field(False, description="Check the bounds once on every applicable setting's episodes "
                         "pooled (a random policy's per-setting value is noisy on a small sample).")


class Benchmark(ABC):
    """A benchmark plugin. Heavy data (a world, a dataset, an index) is built once per process in
    `__init__` or lazily and cached; never per episode.

    Subclasses set `name`, `version`, and `Options` (a pydantic model of the benchmark's options,
    e.g. `data_dir`), and implement the abstract methods.
    """

    name: ClassVar[str]
    version: ClassVar[str]

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid")

    def __init__(self, **options: Any) -> None:
        self.options = self.Options(**options)

    @abstractmethod
    def settings(self) -> dict[str, dict[str, Any]]:
        """Named settings with their parameters (JSON-serialisable)."""

    @abstractmethod
    def tasks(self, setting: str) -> list[str]:
        """Task ids of a setting, in a stable order."""

    @abstractmethod
    def make_env(self, task_id: str, setting: str, seed: int) -> Environment:
        """A fresh environment for one episode; identical for every model given the same arguments."""

    @abstractmethod
    def metrics(self, setting: str | None = None) -> list[MetricSpec]:
        """The metrics its paper defines for a setting (all settings when None)."""

    def scripted_policies(self) -> dict[str, str]:
        """Names and one-line descriptions of policies that need no model (`oracle`, `random`, ...)."""
        return {}

    def make_scripted_policy(self, name: str, env: Environment, seed: int) -> Policy:
        """A scripted policy for one episode; it may read the environment's ground truth."""
        raise KeyError(
            f"benchmark {self.name!r} has no scripted policy {name!r}; "
            f"available: {sorted(self.scripted_policies())}"
        )

    def exploit_policies(self) -> list[ExploitPolicy]:
        """Scripted policies that try to game the metrics, each with its asserted bounds. Each name is
        also a scripted policy (`make_scripted_policy`)."""
        return []

    def baseline_policy(self) -> str | None:
        """The strongest scripted policy that uses no language model and does not read the ground
        truth (e.g. a greedy argument binder). Its per-cell scores are the benchmark's floor: the
        report and the compare tables show them beside every model, and a model's score means something
        only above them. Its name is also a scripted policy (`make_scripted_policy`)."""
        return None

    def fingerprint(self) -> dict[str, Any]:
        """What identifies the benchmark's content for the run manifest (e.g. a world hash)."""
        return {"version": self.version}

    def setting_param_docs(self) -> dict[str, str]:
        """What each setting parameter means (name -> one line), for the description of a cell's MLflow
        run, where the parameters are listed as `setting.<name>`; parameters not described are listed
        bare."""
        return {}

    def stop_sequences(self, setting: str) -> list[str]:
        """Stop sequences the setting's text protocol needs (e.g. ReAct stops where the environment's
        observation begins, so a model cannot write its own); sent with every model request."""
        return []

    def helper_models(self) -> dict[str, str]:
        """Models this benchmark's environments consult, by role (e.g. {"judge": "qwen-72b"}), as its
        options configure them; each must be a served model of the sweep (`models` or `helpers`)."""
        return {}

    def max_turns(self, setting: str) -> int:
        """A hard cap on agent turns that run_episode enforces on top of the environment's own."""
        return 200

    def report_tables(self, cells: list[dict[str, Any]], episodes: Any = None) -> list[ReportTable]:
        """Paper-style tables from cell summaries (see `evaluator.stats.summarize_cell`). `episodes`
        (an `evaluator.summary.ReportEpisodes`, when the caller has them) gives the per-episode
        records that composite intervals across cells need."""
        return []
