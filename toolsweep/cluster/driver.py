"""The driver: a sweep in four phases (`run_sweep` reads as them).

1. plan (`plan_sweep`): the config and every benchmark, setting and policy checked, the units
   expanded, the run directory and the token budgets checked, before Ray starts or any model loads,
   so a typo costs a second, not a cluster start; a run with nothing to do ends here;
2. provision (`provisioned`): Ray, the model servers, the preflight, the manifest;
3. run (`rollout_workers`, `result_sink`, `run_units`): workers, the run directory and MLflow
   mirror, the scheduler;
4. finish (`finish`): summary.json, report.html and plots, the final MLflow state.

Each phase that starts something stops it on the way out, in reverse order, whatever happens.

The phases call on modules of their own: `record` writes the run record (manifest, summary, report,
plots, failures.jsonl), `workers` starts and warms up the rollout workers, `endpoint_health` waits
out a model's endpoint, `ray_start` joins or starts Ray.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from toolsweep.cluster.config import ConfigError, SweepConfig, resolve_plans
from toolsweep.cluster.endpoint_health import EndpointMisconfigured
from toolsweep.cluster.ray_start import connect_ray
from toolsweep.cluster.record import (
    RecordScope,
    current_summary,
    finalize_run,
    in_flight_caps,
    infrastructure_counts,
    made_by_this_code,
    open_mirror,
    record_scope,
    specs_lookup,
    timeouts_by_model,
    update_failures,
    write_manifest,
)
from toolsweep.cluster.run_record import current_units, load_benchmarks
from toolsweep.cluster.workers import await_warmups, kill_quietly, start_workers
from toolsweep.evaluator.rundir import RunDirectory
from toolsweep.evaluator.unit_ids import UnitIds

Log = Callable[[str], None]


def _stderr(msg: str) -> None:
    """A log line on its own line, also while a progress bar is drawn (tqdm.write clears and redraws it)."""
    from tqdm import tqdm

    tqdm.write(msg, file=sys.stderr)


@dataclass
class RunOutcome:
    run_dir: RunDirectory
    total_units: int
    skipped: int
    done: int
    interrupted: bool
    gave_up: int
    cells: list[dict[str, Any]]
    table_text: str
    worker_restarts: int = 0
    wall_s: float = 0.0
    timeouts: dict[str, int] = field(default_factory=dict)
    terminated: bool = False
    phase_s: dict[str, float] = field(default_factory=dict)  # seconds per phase (PhaseClock)


def run_sweep(
    config: SweepConfig,
    *,
    progress: bool = True,
    log: Log = _stderr,
    extra_benchmarks: dict[str, str] | None = None,
    whole: SweepConfig | None = None,
) -> RunOutcome:
    """Run (or resume, or grow) a sweep end to end, as four phases: plan (no resources), provision (Ray,
    model servers, preflight, manifest), run (rollout workers, result sink, scheduler), finish (summary,
    report, MLflow). Everything a phase starts is stopped on the way out, whatever happens.

    `whole`: for a subset run (`run --models/--benchmarks/--settings/--limit`), the config the subset was
    taken from. Only `config`'s units run, but the record (summary, report, plots, manifest, MLflow)
    describes the whole, so a subset never replaces it.

    Off a terminal a line comes at least every `progress_interval_s` through every phase (`Heartbeat`)."""
    from toolsweep.cluster.heartbeat import Heartbeat

    clock = PhaseClock()
    heartbeat = Heartbeat(config.name, log, config.progress_interval_s, clock.current)
    if progress and sys.stderr.isatty():  # the bar shows it is alive
        return _run_phases(config, clock, progress, heartbeat.log, extra_benchmarks, whole)
    with heartbeat:
        return _run_phases(config, clock, progress, heartbeat.log, extra_benchmarks, whole)


def _run_phases(config: SweepConfig, clock: PhaseClock, progress: bool, log: Log,
                extra_benchmarks: dict[str, str] | None, whole: SweepConfig | None) -> RunOutcome:
    planned = plan_sweep(config, log, extra_benchmarks, whole=whole)
    clock.lap("plan")
    if isinstance(planned, RunOutcome):
        return planned
    _wait_for_mlflow(config, log)  # before any model server or GPU is taken
    if planned.all_recorded:
        return rewrite_record(planned, clock, log)
    with provisioned(planned, log) as models:
        todo = planned.todo()
        with rollout_workers(planned, models, todo, log) as scheduler:
            # the MLflow mirror opens while the workers build their benchmarks: both take seconds
            with result_sink(planned, log) as sink:
                clock.lap("start")
                stats, skipped = run_units(planned, scheduler, sink, todo, progress, log, models)
                clock.lap("episodes")
                outcome = finish(planned, models, sink, stats, skipped, clock)
    clock.lap("stop")
    outcome.phase_s = dict(clock.laps)
    log(f"time per phase: {clock.line()}")
    return outcome


class PhaseClock:
    """Seconds spent in each phase of a run, printed at its end, so a slow finish (the summary's
    bootstrap, the report, MLflow's traces) is seen for what it costs."""

    LABELS = {"plan": "plan", "start": "Ray, models and workers", "episodes": "episodes",
              "summary": "summary, report and plots", "mlflow": "MLflow", "stop": "shutdown"}

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._t = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = self.laps.get(name, 0.0) + (now - self._t)
        self._t = now

    NEXT = {"plan": "start", "start": "episodes", "episodes": "summary", "summary": "mlflow", "mlflow": "stop"}

    def current(self) -> str:
        """The phase in progress: the one after the last lap."""
        last = next(reversed(self.laps), None)
        name = "plan" if last is None else self.NEXT.get(last, last)
        return self.LABELS.get(name, name)

    def line(self) -> str:
        total = sum(self.laps.values())
        parts = [f"{self.LABELS.get(k, k)} {v:.1f} s" for k, v in self.laps.items()]
        return ", ".join(parts) + f" (total {total:.1f} s)"


@dataclass
class SweepPlan:
    """What a sweep will do, decided before any resource is taken."""

    config: SweepConfig
    plans: list[Any]
    benchmarks: dict[str, Any]
    units: Any  # a `UnitSpace`
    fingerprints: dict[str, Any]
    run_dir: RunDirectory
    extra_benchmarks: dict[str, str]
    unit_ids: UnitIds = field(default_factory=UnitIds)
    rope_reasons: dict[str, str] = field(default_factory=dict)  # why each `rope_scaling: auto` model got its rope
    record: RecordScope | None = None
    all_recorded: bool = False  # every unit is in the run directory: only the record is rewritten (`rewrite_record`)

    def __post_init__(self) -> None:
        self.unit_ids = self.units.id_set()  # shares the unit space's digests: no copy
        if self.record is None:
            self.record = RecordScope(self.config, self.benchmarks, self.unit_ids, self.fingerprints,
                                      self.units.cell_sizes())

    @property
    def is_subset(self) -> bool:
        return self.record is not None and self.record.config is not self.config

    def todo(self) -> Any:
        """The units the run directory has not recorded yet (a `UnitSelection`: built when leased)."""
        done = self.run_dir.finished_unit_ids() if self.run_dir.exists() else UnitIds()
        return self.units.select(done)


def plan_sweep(config: SweepConfig, log: Log = _stderr,
               extra_benchmarks: dict[str, str] | None = None, *,
               whole: SweepConfig | None = None) -> SweepPlan | RunOutcome:
    """Phase 1, no Ray and no engine: validate every benchmark, setting and policy, expand the units,
    check that the run directory can take them and that the token budgets fit. A run with nothing to
    do ends here, with its outcome. `whole`: the config a subset run was taken from (see `run_sweep`)."""
    from toolsweep.cluster.plan import check_budgets
    from toolsweep.evaluator.registry import extra_benchmarks as registered_extras

    subset = whole is not None and whole.config_sha256() != config.config_sha256()  # before rope is resolved
    config, rope_reasons = resolve_rope_scaling(config, log)
    record_config = resolve_rope_scaling(whole, lambda _m: None)[0] if subset else config
    if not subset:
        finished = _finished_already(config, log)
        if finished is not None:
            return finished
    plans = resolve_plans(config)
    benchmarks = load_benchmarks(config)
    units, fingerprints = current_units(config, benchmarks, plans)
    record = record_scope(record_config, benchmarks) if subset else None
    run_dir = RunDirectory(config.run_path())
    if run_dir.exists():
        _check_resumable(run_dir, config, fingerprints)
        finished = _nothing_to_do(run_dir, record_config, units, log)
        if finished is not None:
            return finished
    extras = {**registered_extras(), **(extra_benchmarks or {})}
    if run_dir.exists() and units.id_set() <= run_dir.finished_unit_ids():
        # an edited config (a setting, model or seed removed) whose units are all recorded: no budget to check
        return SweepPlan(config, plans, benchmarks, units, fingerprints, run_dir, extras, rope_reasons=rope_reasons,
                         record=record, all_recorded=True)
    check_budgets(config, log)  # before any engine starts
    return SweepPlan(config, plans, benchmarks, units, fingerprints, run_dir, extras, rope_reasons=rope_reasons,
                     record=record)


def rewrite_record(plan: SweepPlan, clock: PhaseClock, log: Log) -> RunOutcome:
    """Every unit the config asks for is recorded, but the record (manifest, summary, report, plots,
    MLflow) was made for another config, e.g. one with a setting more: it is rewritten for this
    config's scope from the episodes on disk. Nothing is played, so neither Ray nor a model server
    starts (a finished sweep with a setting removed took 13-53 s of Ray start-up to change nothing)."""
    log(f"{plan.run_dir.path}: all {len(plan.units)} units are recorded; rewriting the summary and report for "
        "this config (nothing to run, no Ray started)")
    write_manifest(plan.run_dir, plan.record, plan.config, plan.plans, None)
    with result_sink(plan, log) as sink:
        sink.start()
        clock.lap("start")
        update_failures(plan.run_dir, [], plan.config.max_attempts, log)  # units recorded since leave it
        outcome = finish(plan, Models(None, {}), sink, None, len(plan.units), clock)
    outcome.phase_s = dict(clock.laps)
    return outcome


def resolve_rope_scaling(config: SweepConfig, log: Log) -> tuple[SweepConfig, dict[str, str]]:
    """The config with each `rope_scaling: auto` model's choice written in (engine_args.hf_overrides and
    max_model_len, `models.sizing.choose_rope_scaling`), so the unit ids and the manifest carry what the
    server runs; returns it with the reason per model. Cells are measured as `toolsweep plan` does."""
    from toolsweep.models.config import VLLMModelConfig
    from toolsweep.models.sizing import choose_rope_scaling, native_window, needed_tokens

    auto = [m for m in config.models if isinstance(m, VLLMModelConfig) and m.rope_scaling == "auto"]
    if not auto:
        return config, {}
    from toolsweep.cluster.plan import plan_rows

    # measured without a window, so no cell is capped by the one being chosen
    unbounded = [m.model_copy(update={"engine_args": m.engine_args.model_copy(update={"max_model_len": None})})
                 for m in auto]
    needed = needed_tokens(plan_rows(config.model_copy(update={"models": unbounded}), n_tasks=2))
    reasons: dict[str, str] = {}
    models = []
    for m in config.models:
        if m not in auto:
            models.append(m)
            continue
        scaling, window, why = choose_rope_scaling(native_window(m.path), needed.get(m.name))
        extra = dict(m.engine_args.model_extra or {})
        overrides = {k: v for k, v in dict(extra.get("hf_overrides") or {}).items() if k != "rope_scaling"}
        if scaling is not None:
            overrides["rope_scaling"] = scaling
        engine = m.engine_args.model_dump()
        engine.pop("hf_overrides", None)
        if overrides:
            engine["hf_overrides"] = overrides
        if window is not None:
            engine["max_model_len"] = window
        models.append(m.model_copy(update={"engine_args": type(m.engine_args).model_validate(engine)}))
        reasons[m.name] = why
        log(f"model {m.name}: {why}")
    return config.model_copy(update={"models": models}), reasons


@dataclass
class Models:
    """The sweep's model servers and the endpoints the workers reach them by."""

    runtime: Any
    endpoints: dict[str, Any]
    waves: Any = None  # a `placement.WavePlan`; more than one wave: servers start and stop per wave
    timeline: Any = None  # the `waves.WaveTimeline` of this run (set by `run_units` when it ran waves)


@contextmanager
def provisioned(plan: SweepPlan, log: Log) -> Iterator[Models]:
    """Phase 2: Ray (embedded unless an address is given), the model servers, the preflight and the
    manifest. The servers, and a Ray this phase started, are stopped on the way out."""
    import ray

    from toolsweep.cluster.models_runtime import ModelRuntime

    config = plan.config
    _check_external_endpoints(config, log)
    sigterm = signal.getsignal(signal.SIGTERM)
    started_ray = connect_ray(config.ray_address, log, config.ray_start_timeout_s)
    if callable(sigterm) and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, sigterm)  # ray.init installs its own; the caller's (the CLI's) wins
    runtime = ModelRuntime(config.served_models(), scale_up_timeout_s=config.scale_up_timeout_s, log=log,
                           helpers=_helper_names(plan),
                           episode_tokens=_episode_tokens(config, log))
    for name, why in plan.rope_reasons.items():
        runtime.sizing.setdefault(name, {})["rope_scaling"] = why
    try:
        waves = runtime.plan_waves()
        endpoints = runtime.start_static()
        if len(waves.waves) == 1:
            endpoints = runtime.start_models([m.name for m in runtime.vllm_models])
            _preflight(config, endpoints, log)
        else:
            log(waves.describe())  # each wave's servers start when the wave begins (`run_units`)
        write_manifest(plan.run_dir, plan.record, plan.config, plan.plans, runtime, waves)
        yield Models(runtime, endpoints, waves)
    finally:
        runtime.stop()
        if started_ray:
            ray.shutdown()


def _helper_names(plan: SweepPlan) -> list[str]:
    """The models the benchmarks consult (`helpers:`, and models under test named as a judge or
    critic): in a sweep that runs in waves they are up in every wave."""
    named = {name for bench in plan.benchmarks.values() for name in bench.helper_models().values()}
    return [m.name for m in plan.config.served_models() if m.name in named or m in plan.config.helpers]


def _episode_tokens(config: SweepConfig, log: Log) -> dict[str, int]:
    """Per vLLM model under test, the tokens one episode holds at its longest (the cells measured as
    `toolsweep plan` does): what its in-flight cap is sized by (`models.sizing`)."""
    from toolsweep.models.config import VLLMModelConfig
    from toolsweep.models.sizing import episode_tokens

    served = [m for m in config.models if isinstance(m, VLLMModelConfig)]
    if not served:
        return {}
    from toolsweep.cluster.plan import plan_rows

    try:
        return episode_tokens(plan_rows(config.model_copy(update={"models": served}), n_tasks=2))
    except Exception as exc:  # noqa: BLE001 - sizing falls back to max_num_seqs, said in the log
        log(f"could not measure the cells' prompt sizes ({type(exc).__name__}: {exc}); in-flight caps follow max_num_seqs")
        return {}


def _external(model: Any) -> bool:
    """An endpoint the sweep does not start (`kind: openai`, a base_url): reachable, or not, before Ray is."""
    return getattr(model, "kind", "") == "openai"


def _check_external_endpoints(config: SweepConfig, log: Log) -> None:
    """The preflight of what runs at endpoints the sweep does not start (helpers answer, models' replies
    parse), before Ray and any server are started: a judge or model that refuses connections stops the run
    in seconds, not after Ray's start (exit 3, the same message)."""
    helpers = [h for h in config.helpers if _external(h)]
    models = [m for m in config.models if _external(m)]
    if not config.preflight or not (helpers or models):
        return
    from toolsweep.cluster.preflight import HelpersUnreachable, check_helpers, require_preflight

    if helpers:
        log("preflight: checking that every helper model at an external endpoint answers (before Ray starts)")
        unreachable = check_helpers(helpers, {})
        if unreachable:
            raise HelpersUnreachable(unreachable)
    if models:
        log("preflight: checking that the replies of every model at an external endpoint parse into valid actions "
            "(before Ray starts)")
        require_preflight(models, list(config.benchmarks), {}, on_result=lambda r: log(r.line()))


def _preflight(config: SweepConfig, endpoints: dict[str, Any], log: Log, models: list[Any] | None = None,
               helpers: bool = True) -> None:
    """Every helper answers and every model's replies parse into valid actions, before any unit (in a
    sweep that runs in waves: before each wave's first unit, for the models of that wave). Helpers at
    external endpoints were checked before Ray started (`_check_external_endpoints`), and so were
    the models there."""
    models = list(config.models) if models is None else models
    served_helpers = [h for h in config.helpers if not _external(h)]
    if config.preflight and helpers and served_helpers:
        from toolsweep.cluster.preflight import HelpersUnreachable, check_helpers

        log("preflight: checking that every helper model answers")
        unreachable = check_helpers(served_helpers, endpoints)
        if unreachable:
            raise HelpersUnreachable(unreachable)
    models = [m for m in models if not _external(m)]
    if config.preflight and any(m.kind != "scripted" for m in models):
        from toolsweep.cluster.preflight import require_preflight

        log("preflight: checking that every model's replies parse into valid actions")
        require_preflight(models, list(config.benchmarks), endpoints, on_result=lambda r: log(r.line()))


@contextmanager
def rollout_workers(plan: SweepPlan, models: Models, todo: Any, log: Log) -> Iterator[Any]:
    """Phase 3a: the rollout workers (warming up their benchmarks in the background) and the scheduler
    that drives them, or None when every unit is recorded. The workers are killed on the way out."""
    import ray

    scheduler = None
    try:
        if todo:
            scheduler = start_workers(plan.config, ray, todo, models.endpoints, plan.extra_benchmarks,
                                       models.runtime, log)
        yield scheduler
    finally:
        for w in scheduler.workers if scheduler is not None else []:
            kill_quietly(ray, w)


@contextmanager
def result_sink(plan: SweepPlan, log: Log) -> Iterator[Any]:
    """Phase 3b: the result sink (run directory and MLflow mirror); a run that fails or is cut short
    closes it as FAILED, keeping every recorded episode."""
    from toolsweep.actors.result_sink import ResultSink

    config = plan.config
    assert plan.record is not None
    mirror = open_mirror(plan.record.config, plan.run_dir, log, plan.record.benchmarks)
    sink = ResultSink(
        plan.run_dir, specs_lookup(plan.record.benchmarks), mirror=mirror, unit_ids=plan.record.unit_ids,
        live_n_resamples=config.bootstrap.live_n_resamples, confidence=config.bootstrap.confidence,
        resample=config.bootstrap.resample,
        flush_interval_s=config.mlflow_interval_s, log=log, floor_model=plan.record.config.floor_model(),
    )
    try:
        yield sink
    finally:
        sink.close(None, status="FAILED")  # nothing if `finish` closed it


def run_units(plan: SweepPlan, scheduler: Any, sink: Any, todo: Any, progress: bool,
              log: Log, models: Models | None = None) -> tuple[Any, int]:
    """Phase 3c: lease the units the sink has not seen to the workers, recording each result as it
    comes (wave by wave when the models do not fit at once: `cluster.waves`); returns the scheduler's
    stats (None when there was nothing to run) and the units skipped."""
    from toolsweep.cluster.progress import make_progress
    from toolsweep.cluster.scheduler import frozen_heap

    todo = todo.without(sink.known_unit_ids)
    skipped = len(plan.units) - len(todo)
    if skipped:
        log(f"resuming {plan.run_dir.path}: {skipped} of {len(plan.units)} units already done")
    sink.start()
    stats = None
    if scheduler is not None and todo:
        await_warmups(scheduler, scheduler.warmups, log)
        with make_progress(len(todo), plan.config.name, progress, log, plan.config.progress_interval_s) as bar, \
                frozen_heap():
            scheduler.record = sink.add
            scheduler.progress = bar
            if models is not None and models.waves is not None and len(models.waves.waves) > 1:
                stats = _run_in_waves(plan, models, scheduler, todo, bar, log)
            else:
                stats = scheduler.run(todo)
    update_failures(plan.run_dir, stats.gave_up if stats else [], plan.config.max_attempts, log)
    if stats is not None and stats.config_error is not None:
        raise EndpointMisconfigured(stats.config_error)  # the sink closes as FAILED
    return stats, skipped


def _run_in_waves(plan: SweepPlan, models: Models, scheduler: Any, todo: Any, bar: Any, log: Log) -> Any:
    """The run phase of a sweep whose models run in waves: each wave's servers up, its models'
    preflight, its units, its servers down; the timeline is kept on `models` for the summary."""
    from toolsweep.cluster.waves import run_waves, save_invocation

    checked_helpers: list[bool] = []
    invocation = uuid.uuid4().hex  # this run's entry in the run directory's wave history

    def check(wave: Any, endpoints: dict[str, Any]) -> None:
        _preflight(plan.config, endpoints, log, [m for m in plan.config.models if m.name in wave.models],
                   helpers=not checked_helpers)
        checked_helpers.append(True)

    stats, models.timeline = run_waves(models.waves, models.runtime, scheduler, todo, bar=bar,
                                       desc=plan.config.name, log=log, check=check,
                                       on_change=lambda timeline: save_invocation(plan.run_dir.path, invocation, timeline))
    if models.timeline.text():
        log(models.timeline.text())
    return stats


def finish(plan: SweepPlan, models: Models, sink: Any, stats: Any, skipped: int,
           clock: PhaseClock | None = None) -> RunOutcome:
    """Phase 4: summary.json with full-B intervals, report.html and plots, the final MLflow state."""
    clock = clock or PhaseClock()
    sink.end_run()  # the live table is freed before the summary builds its own
    assert plan.record is not None  # the whole record, also after a subset run
    extra: dict[str, Any] = {"infrastructure": infrastructure_counts(plan.run_dir, stats, models.runtime)}
    if getattr(models.runtime, "sizing", None):
        extra["servers"] = models.runtime.sizing  # each server's in-flight cap and rope scaling, with the reason
    if (caps := in_flight_caps(plan.config, models.runtime)) is not None:
        extra["in_flight"] = caps  # each model's cap and the rule that set it
    from toolsweep.cluster.waves import accumulated_waves

    waves = accumulated_waves(plan.run_dir.path)  # every invocation's, also one a kill cut short
    if waves is None and models.timeline is not None and models.timeline.records:
        waves = models.timeline.as_json()
    if waves is not None:
        extra["waves"] = waves
    if models.timeline is not None and models.timeline.records:
        extra["infrastructure"]["waves"] = models.timeline.metrics()
    cells, text = finalize_run(plan.run_dir, plan.record.config, plan.record.benchmarks, unit_ids=plan.record.unit_ids,
                               extra=extra, cell_units=plan.record.cell_units)
    if models.timeline is not None and models.timeline.text():
        text += "\n\n" + models.timeline.text()
    clock.lap("summary")
    sink.close(cells, status="KILLED" if stats and stats.interrupted else "FINISHED")
    clock.lap("mlflow")
    return RunOutcome(
        run_dir=plan.run_dir, total_units=len(plan.units), skipped=skipped,
        done=stats.done if stats else 0, interrupted=bool(stats and stats.interrupted),
        gave_up=len(stats.gave_up) if stats else 0, cells=cells, table_text=text,
        worker_restarts=stats.worker_restarts if stats else 0, wall_s=stats.wall_s if stats else 0.0,
        timeouts=timeouts_by_model(stats), terminated=bool(stats and stats.terminated),
    )


def _wait_for_mlflow(config: SweepConfig, log: Log) -> None:
    """With `mlflow_wait_s`, wait that long for the tracking server and stop if it never answers."""
    from toolsweep.actors.result_sink import resolve_tracking_uri
    from toolsweep.cluster.mlflow_wait import wait_for_mlflow

    if config.mlflow:
        wait_for_mlflow(resolve_tracking_uri(config.tracking_uri), config.mlflow_wait_s, log)


def _check_resumable(run_dir: RunDirectory, config: SweepConfig, fingerprints: dict[str, Any]) -> None:
    """A run directory grows with its config (unit ids decide what is reused), but takes no episodes of
    a benchmark whose content changed since it was started."""
    old = run_dir.read_manifest()
    recorded = old.get("benchmarks", {})
    changed = sorted(n for n, fp in fingerprints.items()
                     if n in recorded and recorded[n] != json.loads(json.dumps(fp, default=str)))
    if changed:
        raise ConfigError(
            f"benchmark(s) {changed} changed since {run_dir.path} was started (version or content "
            "fingerprint differs), so its episodes cannot be mixed with new ones; pass --run-id NEW"
        )


def _reused(run_dir: RunDirectory, summary: dict[str, Any], n: int, log: Log) -> RunOutcome:
    log(f"{run_dir.path}: all {n} units are recorded; nothing to run")
    return RunOutcome(run_dir=run_dir, total_units=n, skipped=n, done=0, interrupted=False, gave_up=0,
                      cells=summary["cells"], table_text=summary["table_text"])


def _finished_already(config: SweepConfig, log: Log) -> RunOutcome | None:
    """The cheapest no-op: the summary was made, complete, for this very config, by this version of
    toolsweep, from the records on disk; nothing is loaded or generated (0.75 s for the quickstart)."""
    run_dir = RunDirectory(config.run_path())
    if not run_dir.exists():
        return None
    if not made_by_this_code(run_dir.read_manifest()):
        return None  # other code may generate other tasks: `_nothing_to_do` checks the units themselves
    summary = current_summary(run_dir, config)
    if summary is None or not summary.get("complete"):
        return None
    return _reused(run_dir, summary, int(summary.get("units", 0)), log)


def _nothing_to_do(run_dir: RunDirectory, config: SweepConfig, units: Any, log: Log) -> RunOutcome | None:
    """A re-run whose units (a `UnitSpace`) are all recorded, with a summary made for this config from
    these records: no Ray, no MLflow, no bootstrap; the summary is printed as it is. Both id sets are
    sorted digests, so the check is one vectorised look-up."""
    summary = current_summary(run_dir, config)
    if summary is None or not units.id_set() <= run_dir.finished_unit_ids():
        return None
    return _reused(run_dir, summary, len(units), log)
