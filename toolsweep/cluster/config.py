"""Sweep configuration: a plain typed record, validated before any resource is taken."""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from toolsweep.evaluator.registry import UnknownBenchmark, available_benchmarks, get_benchmark
from toolsweep.evaluator.sweep import BenchmarkPlan
from toolsweep.evaluator.types import Sampling, canonical_json, stable_seed
from toolsweep.models.config import BASELINE, ModelConfig, ScriptedModelConfig, model_dir_problem


DEFAULT_RUN_ID = "main"
FLOOR_MODEL = "floor"
"""The name of the model `floor: true` adds (a scripted `policy: baseline`)."""


class ConfigError(ValueError):
    """A config problem, phrased for the user; the CLI prints it and exits with code 2."""


MAX_SEEDS = 100_000
MAX_UNITS = 20_000_000
"""Expansions larger than this are refused before anything is allocated (a typo like 50000000 seeds)."""


def _reject_bools(value: Any) -> Any:
    """YAML's `true` is not a number of seeds (pydantic would read it as 1)."""
    if isinstance(value, bool) or (isinstance(value, list) and any(isinstance(x, bool) for x in value)):
        raise ValueError(f"must be a number of seeds or a list of seeds, got {value!r}")
    return value


def _seed_list(value: int | list[int]) -> list[int]:
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f"must be a positive number of seeds or a list of seeds, got {value}")
        if value > MAX_SEEDS:
            raise ValueError(f"{value} seeds is more than the {MAX_SEEDS:,} a sweep takes; is it a typo?")
        return list(range(value))
    if not value:
        raise ValueError("must list at least one seed")
    if len(value) > MAX_SEEDS:
        raise ValueError(f"a list of {len(value):,} seeds is more than the {MAX_SEEDS:,} a sweep takes; is it a typo?")
    negative = [s for s in value if s < 0]
    if negative:
        raise ValueError(f"seeds must be non-negative, got {negative[:5]}")
    if len(set(value)) != len(value):
        seen: set[int] = set()
        repeated = sorted({s for s in value if s in seen or seen.add(s)})
        raise ValueError(f"seeds must be distinct; repeated: {repeated[:10]}")
    return list(value)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TaskFilter(_Strict):
    """Which tasks of each setting to run: all (default), the first `limit`, these `ids`, or a seeded
    random `sample` (a pilot: a benchmark's first tasks need not be typical of it)."""

    limit: int | None = Field(None, gt=0, description="Run only the first N tasks of each setting.")
    ids: list[str] | None = Field(None, description="Run only these task ids.")
    sample: int | None = Field(
        None, gt=0, description="Run a random sample of N tasks of each setting, seeded from the sweep's name, the "
        "benchmark and the setting (the same tasks on every run): the pilot `toolsweep plan --power` plans from.")

    @model_validator(mode="after")
    def _one_way_to_narrow(self) -> TaskFilter:
        if self.sample is not None and self.limit is not None:
            raise ValueError("tasks.sample and tasks.limit both narrow the tasks; keep one (sample for a pilot)")
        return self


def sample_tasks(task_ids: list[str], n: int, *seed_parts: Any) -> list[str]:
    """`n` of `task_ids` drawn without replacement from a generator seeded by `seed_parts`, in their order."""
    import numpy as np

    if n >= len(task_ids):
        return list(task_ids)
    rng = np.random.default_rng(stable_seed("task-sample", *seed_parts))
    keep = set(rng.choice(len(task_ids), size=n, replace=False).tolist())
    return [t for i, t in enumerate(task_ids) if i in keep]


class BenchmarkEntry(_Strict):
    name: str = Field(description="Registered benchmark name (`toolsweep benchmarks` lists them).")
    options: dict[str, Any] = Field(default_factory=dict, description="The benchmark's own options.")
    settings: list[str] | Literal["all"] = Field("all", description='Setting names, or "all".')
    tasks: TaskFilter = Field(default_factory=TaskFilter)
    seeds: int | list[int] | None = Field(None, description="Overrides the sweep's seeds for this benchmark.")

    @field_validator("seeds", mode="before")
    @classmethod
    def _no_bool_seeds(cls, v: Any) -> Any:
        return _reject_bools(v)

    @field_validator("seeds")
    @classmethod
    def _check_seeds(cls, v: int | list[int] | None) -> list[int] | None:
        return None if v is None else _seed_list(v)

    @field_validator("settings")
    @classmethod
    def _some_settings(cls, v: list[str] | str) -> list[str] | str:
        if isinstance(v, list) and not v:
            raise ValueError('is empty: list setting names or write "all"')
        return v


class Concurrency(_Strict):
    workers: int | Literal["auto"] = Field(
        "auto", description='Rollout workers; "auto" = one per free CPU of the cluster.'
    )
    worker_cpus: float = Field(1.0, ge=0, description="CPUs reserved per rollout worker.")
    episodes_per_worker: int = Field(64, gt=0, description="Episodes in flight per worker.")
    spares_per_worker: int | None = Field(
        None, ge=0,
        description="Units queued at each worker beyond its running episodes, each started there the moment "
        "an episode of its model ends, without waiting for the driver (a model's in-flight cap still holds); "
        "default: as many as episodes_per_worker; 0: none.",
    )
    offload_env: bool | Literal["auto"] = Field(
        "auto",
        description="Run environment steps in a thread so the worker's event loop stays free: "
        '"auto" offloads only environments whose steps cost more than 2 ms.',
    )

    def resolved_spares(self) -> int:
        """`spares_per_worker`, its default (as many as `episodes_per_worker`) filled in."""
        return self.episodes_per_worker if self.spares_per_worker is None else self.spares_per_worker

    @field_validator("workers")
    @classmethod
    def _check_workers(cls, v: int | str) -> int | str:
        if isinstance(v, int) and v < 1:
            raise ValueError("must be at least 1 (or \"auto\")")
        return v


class Bootstrap(_Strict):
    n_resamples: int = Field(10_000, gt=0)
    confidence: float = Field(0.95, gt=0, lt=1)
    live_n_resamples: int = Field(
        1000, gt=0, description="Resamples for the intervals logged while the sweep runs."
    )
    resample: Literal["tasks", "tasks_then_seeds"] = Field(
        "tasks", description="How a resample is drawn. 'tasks' (default): the cluster bootstrap, tasks with "
        "replacement, each bringing all its seeds (Davison & Hinkley 1997 §3.8; consistent under the random-"
        "effects model, Field & Welsh 2007); its 95% intervals covered 93-97% over 1,000 simulated sweeps at 1 "
        "and 3 seeds. 'tasks_then_seeds': the two-stage draw (seeds redrawn within each drawn task), which counts "
        "the within-task variance twice: with 60 tasks x 3 seeds it covered 97.7% at 95%, intervals ~17% too "
        "wide. Identical with one seed per task.")


class StopWhen(_Strict):
    """An adaptive sweep (docs/adaptive.md): run in rounds, adding `seeds_per_round` seeds (or, with
    `grow`, more of the setting's tasks in a fixed seeded order) to the (benchmark, setting) cells that
    need more, until every cell meets the goal or the budget is spent.
    Exactly one goal:

    - `ci_half_width`: every model's interval at most this wide (half-width). The rule looks at the data
      only through the width, so intervals are judged and reported at the nominal confidence (the
      fixed-width sequential interval, Chow & Robbins 1965; 93-97% coverage measured over 1,000
      simulated adaptive sweeps).
    - `paired_difference: decided` with `margin`: every model pair's paired interval (or each model's
      against `baseline`) excludes 0 or lies inside +-margin. That rule stops on the estimate, so the
      intervals are repeated confidence intervals of a group-sequential design (a Pocock-type boundary
      over the cell's planned rounds, Bonferroni over its pairs): wrong-sign decisions stay <= alpha."""

    ci_half_width: float | None = Field(None, gt=0, description="Target half-width of every model's interval, in "
                                        "the metric's own units (unscaled: 0.03 is 3 points of a 0-1 success rate).")
    paired_difference: Literal["decided"] | None = Field(
        None, description="Run until every paired difference of a cell is decided: its interval excludes 0 (which "
        "model is better) or lies inside +-margin (equivalent within the margin).")
    margin: float | None = Field(None, gt=0, description="With paired_difference: the equivalence margin, in the "
                                 "metric's own units (0.05 = 5 points of a success rate).")
    baseline: str | None = Field(None, description="With paired_difference: compare each model with this one only "
                                 "(default: every pair of models).")
    metric: str | None = Field(None, description="The metric judged; default: each setting's first metric.")
    max_rounds: int = Field(5, ge=1, le=50, description="Rounds at most, the config as written being round 1.")
    max_seeds: int = Field(32, ge=1, le=MAX_SEEDS, description="Seeds per cell at most, the initial ones included.")
    seeds_per_round: int = Field(2, ge=1, le=MAX_SEEDS, description="Seeds a round adds to a cell that needs more.")
    grow: Literal["seeds", "tasks", "auto"] = Field(
        "seeds", description="What a round adds to a cell that needs more (ci_half_width goal). 'seeds' (default): "
        "seeds_per_round seeds. 'tasks': more of the setting's tasks than the config runs (its tasks.limit or "
        "tasks.ids), drawn in a fixed order seeded from the sweep and the cell (the tasks already run first), "
        "tasks_per_round at a time, up to max_tasks, then seeds. 'auto': per cell and round, whichever shrinks its "
        "widest interval more per unit, from its variance components (width ~ sqrt(var_task/T + var_within/(T S)); "
        "a task costs S units, a seed T). A cell that runs all its setting's tasks grows seeds.")
    max_tasks: int | None = Field(None, ge=1, description="With grow tasks/auto: tasks per cell at most, the "
                                  "initial ones included (default: all of the setting's tasks).")
    tasks_per_round: int | None = Field(
        None, ge=1, description="With grow tasks/auto: tasks a round adds to a cell (default: as many units as a "
        "round of seeds, T x seeds_per_round / S tasks).")

    @model_validator(mode="after")
    def _one_goal(self) -> StopWhen:
        if (self.ci_half_width is None) == (self.paired_difference is None):
            raise ValueError("give exactly one goal: ci_half_width: <half-width>, or paired_difference: decided "
                             "with margin: <equivalence margin>")
        if self.paired_difference is not None and self.margin is None:
            raise ValueError("paired_difference: decided needs margin: <float> (a difference inside +-margin "
                             "counts as decided: equivalent)")
        if self.paired_difference is None and (self.margin is not None or self.baseline is not None):
            raise ValueError("margin and baseline belong to paired_difference: decided; drop them or use that goal")
        if self.paired_difference is not None and self.grow != "seeds":
            raise ValueError(f"grow: {self.grow} works with the ci_half_width goal only (the paired goal's group-"
                             "sequential boundary is planned over seeds); use grow: seeds, or plan the tasks with "
                             "`toolsweep plan --power`")
        if self.grow == "seeds" and (self.max_tasks is not None or self.tasks_per_round is not None):
            raise ValueError("max_tasks and tasks_per_round belong to grow: tasks or grow: auto; drop them or set grow")
        return self


class SweepConfig(_Strict):
    """One sweep: models × benchmarks × settings × tasks × seeds, and how to run it."""

    name: str = Field(description="Sweep name: the MLflow experiment and runs/<name>/.")
    seeds: int | list[int] = Field(
        1, validate_default=True, description="Environment seeds: a count N (0..N-1) or a list."
    )
    models: list[ModelConfig] = Field(min_length=1)
    helpers: list[ModelConfig] = Field(
        default_factory=list,
        description="Served models that benchmarks consult (an LLM judge, a critic) without being evaluated "
        "themselves; a benchmark's options name them, e.g. apb `grader: llm:<name>`. A model under test can "
        "also serve as a helper.",
    )
    benchmarks: list[BenchmarkEntry] = Field(min_length=1)
    sampling: Sampling = Field(default_factory=Sampling)
    concurrency: Concurrency = Field(default_factory=Concurrency)
    bootstrap: Bootstrap = Field(default_factory=Bootstrap)
    episode_timeout_s: float = Field(
        3600.0, gt=0, description="Infrastructure guard on an episode's working wall-clock time (waits for a "
        "slot or in an in-process model's queue, backoffs and failed attempts excluded); an expiry is retried, never scored. The benchmarks' own "
        "budgets are in turns and tokens.")
    max_attempts: int = Field(3, ge=1, description="Tries per unit on infrastructure errors specific to the "
                              "unit (an endpoint outage spends none: see outage_budget_s).")
    outage_budget_s: float = Field(
        600.0, ge=0, le=7 * 86_400,
        description="How long a model's endpoint may stay unreachable before its units are given up. While it "
        "is down its units wait (no attempt spent) and it is probed with backoff; other models keep running.")
    output_dir: str = Field("runs", description="Parent of runs/<sweep>/<run-id>/.")
    run_id: str | None = Field(None, description="Default 'main': re-running resumes, and an edited config grows "
                               "the same run directory (unchanged units are reused).")
    ray_address: str | None = Field(None, description='None = embedded Ray; "auto" = a `ray start` cluster.')
    ray_start_timeout_s: float = Field(
        0.0, ge=0, le=86_400,
        description="An embedded Ray whose start fails (Ray waits a fixed 30 s for its raylet, too short on a "
        "busy machine) is started again: once always, and again while this many seconds have not passed since "
        "the first try.",
    )
    scale_up_timeout_s: float = Field(
        0.0, ge=0, le=86_400,
        description="On an autoscaling cluster (KubeRay GPU groups from zero): ask the autoscaler for the "
        "model servers' GPUs and wait up to this long for them before the placement check. 0 = do not wait.",
    )
    tracking_uri: str | None = Field(None, description="MLflow; default sqlite:///mlflow.db (env MLFLOW_TRACKING_URI).")
    mlflow: bool = Field(True, description="Mirror results to MLflow.")
    mlflow_wait_s: float = Field(
        0.0, ge=0, le=86_400,
        description="Wait up to this long for an MLflow server (its /health) before anything starts, and "
        "stop if it never answers; 0 = do not wait (an unreachable MLflow is then skipped and synced later).",
    )
    mlflow_traces_per_cell: int = Field(
        5, ge=0, description="Episode transcripts logged as MLflow traces per cell at the end of a run: every "
        "episode that did not end as answered (up to 20) plus this many answered ones; 0 logs none.")
    mlflow_interval_s: float = Field(
        2.0, gt=0, description="Seconds between live MLflow updates of the cells that changed."
    )
    progress_interval_s: float = Field(
        30.0, gt=0, le=86_400,
        description="Off a terminal (a log file, CI, `kubectl logs`): seconds between progress lines. A line "
        "comes at least this often while units run, also when none finishes: units done, running (the oldest "
        "one's age), queued, and models whose endpoint is being checked.")
    preflight: bool = Field(
        True, description="Before the first unit, check that each model's replies parse into valid actions."
    )
    stop_when: StopWhen | None = Field(
        None, description="Make the sweep adaptive: rounds of added seeds (or tasks: grow) until every cell's "
        "interval is narrow enough (ci_half_width) or every paired difference is decided (paired_difference: "
        "decided, margin, baseline); metric, max_rounds, max_seeds, seeds_per_round, grow, max_tasks, "
        "tasks_per_round.")
    floor: bool = Field(
        False, description="Run each benchmark's no-LLM floor (its baseline_policy: the strongest scripted policy "
        "that reads only what a model reads) beside the models, as a scripted model named `floor` on every "
        "(benchmark, setting, task, seed); the report, `compare` and MLflow then show every model's floor and "
        "whether the model is above it (a paired interval). A model with `policy: baseline` already in "
        "`models` is the floor instead. Off by default so a config runs what it lists; the quick start sets it.")
    budget_check: Literal["warn", "refuse", "off"] = Field(
        "warn", description="Before engines start, compare each cell's prompt tokens with the model's context "
        "window (`toolsweep plan`): warn, refuse cells whose first prompt cannot fit, or skip the check.")

    @field_validator("name")
    @classmethod
    def _check_name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", v):
            raise ValueError("must be letters, digits, '_', '-' or '.', starting with a letter or digit")
        return v

    @field_validator("seeds", mode="before")
    @classmethod
    def _no_bool_seeds(cls, v: Any) -> Any:
        return _reject_bools(v)

    @field_validator("seeds")
    @classmethod
    def _check_seeds(cls, v: int | list[int]) -> list[int]:
        return _seed_list(v)

    @model_validator(mode="after")
    def _unique_names(self) -> SweepConfig:
        names = [m.name for m in self.models] + [m.name for m in self.helpers]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"models and helpers: names must be unique, repeated: {dupes}")
        scripted = [m.name for m in self.helpers if isinstance(m, ScriptedModelConfig)]
        if scripted:
            raise ValueError(f"helpers: {scripted} are scripted policies; a helper must be a served model")
        return self

    @model_validator(mode="after")
    def _stop_when_fits(self) -> SweepConfig:
        """The budget must leave room to grow: no benchmark may start with more seeds than max_seeds."""
        stop = self.stop_when
        if stop is None:
            return self
        for i, entry in enumerate(self.benchmarks):
            n = len(entry.seeds or self.seeds)
            if n > stop.max_seeds:
                raise ValueError(f"stop_when.max_seeds is {stop.max_seeds} but benchmarks.{i} ({entry.name}) starts "
                                 f"with {n} seeds; raise max_seeds or start with fewer seeds")
            first = len(entry.tasks.ids) if entry.tasks.ids is not None else entry.tasks.limit
            if entry.tasks.limit is not None and first is not None:
                first = min(first, entry.tasks.limit)
            if stop.max_tasks is not None and first is not None and first > stop.max_tasks:
                raise ValueError(f"stop_when.max_tasks is {stop.max_tasks} but benchmarks.{i} ({entry.name}) starts "
                                 f"with {first} tasks a setting; raise max_tasks or start with fewer tasks")
        if stop.seeds_per_round > stop.max_seeds:
            raise ValueError(f"stop_when.seeds_per_round ({stop.seeds_per_round}) is more than max_seeds "
                             f"({stop.max_seeds}); lower it")
        names = [m.name for m in self.models]
        if stop.paired_difference is not None and len(names) < 2:
            raise ValueError("stop_when.paired_difference needs at least two models to compare")
        if stop.baseline is not None and stop.baseline not in names:
            raise ValueError(f"stop_when.baseline {stop.baseline!r} is not a model of this sweep; its models: "
                             f"{', '.join(names)}")
        return self

    @model_validator(mode="after")
    def _add_floor(self) -> SweepConfig:
        """`floor: true` adds the floor model unless a model already plays `policy: baseline`; idempotent, so
        the config a manifest records (floor model included) validates to itself."""
        if not self.floor or self.floor_model() is not None:
            return self
        if any(m.name == FLOOR_MODEL for m in [*self.models, *self.helpers]):
            raise ValueError(f"floor: true adds a scripted model named {FLOOR_MODEL!r} (policy: baseline), but a "
                             f"model of that name plays something else; rename that model, or list "
                             f"{{name: {FLOOR_MODEL}, kind: scripted, policy: baseline}} yourself")
        self.models.append(ScriptedModelConfig(name=FLOOR_MODEL, policy=BASELINE))
        return self

    def floor_model(self) -> str | None:
        """The model whose cells are every benchmark's floor: the first with `policy: baseline` (the one
        `floor: true` adds, or one the config lists); None when there is none."""
        return next((m.name for m in self.models if isinstance(m, ScriptedModelConfig) and m.policy == BASELINE),
                    None)

    def served_models(self) -> list[ModelConfig]:
        """Every model the sweep must reach: the models under test, then the helpers."""
        return [*self.models, *self.helpers]

    # -- identity -------------------------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        """What defines the results (not where or how fast they are computed)."""
        return self.model_dump(
            mode="json",
            include={"name", "seeds", "models", "benchmarks", "sampling"}
            | ({"helpers"} if self.helpers else set()),  # configs without helpers keep their run ids
        )

    def config_sha256(self) -> str:
        return hashlib.sha256(canonical_json(self.identity()).encode()).hexdigest()

    def resolved_run_id(self) -> str:
        """One run directory per sweep name by default: it grows as the config grows (finished units
        whose ids are unchanged are reused); pass `run_id` for a separate one."""
        return self.run_id or DEFAULT_RUN_ID

    def run_path(self) -> Path:
        return Path(self.output_dir) / self.name / self.resolved_run_id()


def _format_validation_error(err: ValidationError, source: str) -> str:
    lines = [f"invalid sweep config {source}:"]
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"])
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown field (check the spelling; `toolsweep run --help` shows the fields)"
        elif e["type"] in ("literal_error", "union_tag_invalid"):
            msg = f"{msg}"
        lines.append(f"  {loc}: {msg}")
    return "\n".join(lines)


_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_env(value: Any, source: str, where: str = "") -> Any:
    """`${NAME}` and `${NAME:-default}` in a config's strings, from the environment: a path that
    differs between machines (a dataset's copy) is set where the config runs, not edited into it. A
    variable that is unset and has no default is a ConfigError naming it and the field."""
    if isinstance(value, dict):
        return {k: expand_env(v, source, f"{where}.{k}" if where else str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_env(v, source, f"{where}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str) or "${" not in value:
        return value

    def one(m: re.Match[str]) -> str:
        name, default = m.group(1), m.group(2)
        found = os.environ.get(name)
        if found:
            return found
        if default is not None:
            return default
        raise ConfigError(f"{source}: {where} uses ${{{name}}}, which is not set; set it (e.g. "
                          f"`export {name}=/path/to/...`) or write the value into the config")

    return _ENV_REF.sub(one, value)


def load_config(path: str | Path, **overrides: Any) -> SweepConfig:
    """Read and validate a sweep YAML; command-line overrides win over the file."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file {path} does not exist")
    if not path.is_file():
        raise ConfigError(f"{path} is a directory, not a sweep config file (e.g. configs/sweeps/quickstart.yaml)")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path} must hold a mapping of fields (name, models, benchmarks, ...)")
    raw = expand_env(raw, str(path))
    raw.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return SweepConfig.model_validate(raw)
    except ValidationError as err:
        raise ConfigError(_format_validation_error(err, str(path))) from None


def resolve_plans(config: SweepConfig, *, check_endpoints: bool = True) -> list[BenchmarkPlan]:
    """Check every benchmark, setting, task and scripted policy against the registry and expand
    settings and task filters; raises ConfigError naming the field and the allowed values."""
    plans = []
    known = available_benchmarks()
    for i, entry in enumerate(config.benchmarks):
        where = f"benchmarks.{i}"
        if entry.name not in known:
            raise ConfigError(f"{where}.name: unknown benchmark {entry.name!r}; allowed: {', '.join(known)}")
        try:
            bench = get_benchmark(entry.name, entry.options)
        except ValidationError as err:
            raise ConfigError(_format_validation_error(err, f"({where}.options)")) from None
        except UnknownBenchmark as err:
            raise ConfigError(f"{where}.name: {err}") from None
        except (ValueError, FileNotFoundError, OSError) as err:
            raise ConfigError(f"{where}.options: {err}") from None
        all_settings = list(bench.settings())
        settings = all_settings if entry.settings == "all" else entry.settings
        unknown = [s for s in settings if s not in all_settings]
        if unknown:
            shown = ", ".join(all_settings[:40]) + (" ..." if len(all_settings) > 40 else "")
            raise ConfigError(f"{where}.settings: unknown setting(s) {unknown}; allowed: {shown}")
        served = {m.name: m for m in config.served_models()}
        for role, name in bench.helper_models().items():
            if name not in served:
                raise ConfigError(
                    f"{where}.options: the {role} model {name!r} is not configured; add it under `helpers:` "
                    f"(or `models:`); configured: {', '.join(served) or '(none)'}"
                )
            if isinstance(served[name], ScriptedModelConfig):
                raise ConfigError(f"{where}.options: the {role} model {name!r} is a scripted policy; "
                                  "a helper must be a served model (openai, vllm, hf)")
        policies = bench.scripted_policies()
        for j, model in enumerate(config.models):
            if isinstance(model, ScriptedModelConfig) and model.policy == BASELINE:
                if bench.baseline_policy() not in policies:
                    added = config.floor and model.name == FLOOR_MODEL
                    raise ConfigError(
                        f"models.{j}.policy: benchmark {entry.name!r} names no baseline (no-LLM floor) policy "
                        f"(baseline_policy() is {bench.baseline_policy()!r}); "
                        + ("`floor: true` added this model: set `floor: false` for a sweep with this benchmark"
                           if added else f"name one of its policies instead: {', '.join(policies) or '(none)'}")
                    )
            elif isinstance(model, ScriptedModelConfig) and model.policy not in policies:
                raise ConfigError(
                    f"models.{j}.policy: benchmark {entry.name!r} has no scripted policy "
                    f"{model.policy!r}; allowed: {', '.join(policies) or '(none)'}"
                    + (f", or {BASELINE} (its no-LLM floor, {bench.baseline_policy()})" if bench.baseline_policy() else "")
                )
        tasks_by_setting = {}
        for setting in settings:
            task_ids = bench.tasks(setting)
            if entry.tasks.ids is not None:
                missing = [t for t in entry.tasks.ids if t not in set(task_ids)]
                if missing:
                    raise ConfigError(f"{where}.tasks.ids: not tasks of setting {setting!r}: {missing[:5]}")
                task_ids = list(entry.tasks.ids)
            if entry.tasks.limit is not None:
                task_ids = task_ids[: entry.tasks.limit]
            if entry.tasks.sample is not None:
                task_ids = sample_tasks(list(task_ids), entry.tasks.sample, config.name, entry.name, setting)
            tasks_by_setting[setting] = task_ids
        plans.append(BenchmarkPlan(entry.name, tasks_by_setting, entry.seeds or list(config.seeds)))
    n_units = len(config.models) * sum(len(p.seeds) * sum(map(len, p.tasks_by_setting.values())) for p in plans)
    if n_units > MAX_UNITS:
        raise ConfigError(f"the sweep expands to {n_units:,} units, more than the {MAX_UNITS:,} one run takes; "
                          "split it, or check seeds and tasks for a typo")
    if check_endpoints:
        check_models(config)
    return plans


def check_models(config: SweepConfig) -> None:
    """What can be known about each model before anything starts: a usable base URL, a set API key
    variable, a model path that exists. Raises ConfigError naming the field."""
    from urllib.parse import urlparse

    entries = [("models", i, m) for i, m in enumerate(config.models)]
    entries += [("helpers", i, m) for i, m in enumerate(config.helpers)]
    for group, i, model in entries:
        where = f"{group}.{i}"
        base_url = getattr(model, "base_url", None)
        if base_url is not None:
            url = urlparse(base_url)
            if url.scheme not in ("http", "https") or not url.hostname:
                raise ConfigError(f"{where}.base_url: {base_url!r} is not an http(s) URL "
                                  "(e.g. http://127.0.0.1:8000/v1)")
            try:
                url.port
            except ValueError:
                raise ConfigError(f"{where}.base_url: {base_url!r} has an invalid port") from None
        key_env = getattr(model, "api_key_env", None)
        if key_env and not os.environ.get(key_env):
            raise ConfigError(f"{where}.api_key_env: the environment variable {key_env} is not set "
                              f"(export {key_env}=... before running)")
        adapter = getattr(model, "adapter", None)
        if adapter is not None and not (Path(adapter) / "adapter_config.json").is_file():
            raise ConfigError(f"{where}.adapter: {adapter} is not a LoRA adapter directory (no adapter_config.json; "
                              "PEFT's save_pretrained writes one)")
        path = getattr(model, "path", None)
        if path is not None and model.kind in ("vllm", "hf") and not Path(path).exists():
            raise ConfigError(f"{where}.path: {path} does not exist (no hub downloads at run time; "
                              "`toolsweep models prepare` fetches the small test model)")
        if path is not None and model.kind in ("vllm", "hf"):
            engine = getattr(model, "engine_args", None)
            tokenizer = (engine.model_extra or {}).get("tokenizer") if engine is not None else None
            problem = model_dir_problem(path, getattr(model, "gguf_file", None), tokenizer)
            if problem:
                raise ConfigError(f"{where}.path: {problem}; a model directory holds config.json, its weights and "
                                  "its tokenizer (transformers' save_pretrained writes them; `toolsweep models "
                                  "prepare smollm2` makes the small test model)")


def _benchmark_settings(entry: dict[str, Any]) -> list[str]:
    """The setting names of a benchmark entry whose settings are "all" (its plugin is asked)."""
    try:
        return list(get_benchmark(entry["name"], entry.get("options") or {}).settings())
    except Exception as exc:  # noqa: BLE001 - the plan check names the problem with the benchmark itself
        raise ConfigError(f"benchmarks.{entry['name']}: cannot list its settings ({type(exc).__name__}: {exc})") from None


def select_subset(config: SweepConfig, *, models: list[str] | None = None, benchmarks: list[str] | None = None,
                  settings: list[str] | None = None, limit: int | None = None) -> SweepConfig:
    """The config narrowed to some models, benchmarks, settings and the first `limit` tasks of each
    setting. Unit ids do not depend on the config as a whole, so a later full run reuses every unit this
    one records."""
    data = config.model_dump(mode="json")
    # a model's fields as the user wrote them: re-validating a default as if written would make it an
    # override (`max_in_flight` would then beat the engine's KV-derived cap, `models.sizing`)
    for key in ("models", "helpers"):
        data[key] = [{"kind": m.kind, **m.model_dump(mode="json", exclude_unset=True)} for m in getattr(config, key)]
    if models:
        unknown = sorted(set(models) - {m["name"] for m in data["models"]})
        if unknown:
            raise ConfigError(f"--models: {unknown} are not in the config; it has {[m['name'] for m in data['models']]}")
        data["models"] = [m for m in data["models"] if m["name"] in models]
    if benchmarks:
        unknown = sorted(set(benchmarks) - {b["name"] for b in data["benchmarks"]})
        if unknown:
            raise ConfigError(f"--benchmarks: {unknown} are not in the config; it has "
                              f"{[b['name'] for b in data['benchmarks']]}")
        data["benchmarks"] = [b for b in data["benchmarks"] if b["name"] in benchmarks]
    if settings:
        # a setting name belongs to the benchmarks that have it: the others leave the subset, and only
        # when none has any of them is it an error
        kept = []
        for entry in data["benchmarks"]:
            own = _benchmark_settings(entry) if entry["settings"] == "all" else entry["settings"]
            entry["settings"] = [s for s in own if s in settings]
            if entry["settings"]:
                kept.append(entry)
        if not kept:
            names = ", ".join(repr(b["name"]) for b in data["benchmarks"])
            raise ConfigError(f"--settings: none of {settings} is a setting of the config's benchmarks ({names}); "
                              "`toolsweep benchmarks` lists each benchmark's settings")
        data["benchmarks"] = kept
    for entry in data["benchmarks"]:
        if limit is not None:
            if limit < 1:
                raise ConfigError("--limit must be at least 1")
            current = (entry.get("tasks") or {}).get("limit")
            entry.setdefault("tasks", {})["limit"] = min(limit, current) if current else limit
    try:
        return SweepConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_validation_error(err, "(after --models/--benchmarks/--settings/--limit)")) from None
