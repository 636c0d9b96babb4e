"""Rebuild MLflow from a run directory (the record of truth), e.g. after MLflow was down."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from toolsweep.actors.result_sink import MlflowMirror, mirror_current, record_mirror, resolve_tracking_uri
from toolsweep.cluster.config import SweepConfig
from toolsweep.cluster.record import finalize_run, open_mirror, setting_param_docs, setting_params, specs_lookup
from toolsweep.cluster.run_record import config_from_run_dir, current_units, load_benchmarks
from toolsweep.evaluator.rundir import RunDirectory, read_summary
from toolsweep.evaluator.summary import CellTable

CHECKPOINTS = 20
"""Points per cell on the replayed convergence chart: enough to see the interval narrow."""


def sync_run_dir(path: Path, tracking_uri: str | None = None) -> int:
    """Mirror every cell of a run directory into MLflow; returns the number of cells."""
    run_dir = RunDirectory(path)
    config = config_from_run_dir(run_dir)
    benchmarks = load_benchmarks(config)
    units = current_units(config, benchmarks)[0]
    unit_ids = units.id_set()
    specs_for = specs_lookup(benchmarks)
    mirror = MlflowMirror(resolve_tracking_uri(tracking_uri), config.name, config.resolved_run_id(),
                          setting_params=setting_params(config, benchmarks), traces_per_cell=config.mlflow_traces_per_cell,
                          param_docs=setting_param_docs(benchmarks))
    mirror.verify_traces = True  # a store an older version filled may hold second copies: remove them
    mirror.connect(run_dir.read_manifest(), {"config_sha256": config.config_sha256()})

    rows = sorted((r for r in run_dir.read_table(
        columns=["unit_id", "model", "benchmark", "setting", "task_id", "seed", "termination", "metrics", "finished_at"]
    ).to_pylist() if r["unit_id"] in unit_ids), key=lambda r: r["finished_at"])
    per_cell: dict[tuple[str, str, str], int] = {}
    for r in rows:
        cell = (r["model"], r["benchmark"], r["setting"])
        per_cell[cell] = per_cell.get(cell, 0) + 1
    # Replay in finishing order, logging each cell at ~CHECKPOINTS steps, as the live sweep did.
    table = CellTable()
    seen: dict[tuple[str, str, str], int] = {}
    live = config.bootstrap.live_n_resamples
    for r in rows:
        cell = (r["model"], r["benchmark"], r["setting"])
        table.cells[cell].add(r["task_id"], int(r["seed"]), r["termination"], json.loads(r["metrics"]))
        seen[cell] = seen.get(cell, 0) + 1
        every = max(1, per_cell[cell] // CHECKPOINTS)
        if seen[cell] % every == 0 and seen[cell] < per_cell[cell]:
            mirror.log_summaries(table.summarize(specs_for, n_resamples=live, confidence=config.bootstrap.confidence, seed=0,
                                                 only=[cell], resample=config.bootstrap.resample))
    cells, _ = finalize_run(run_dir, config, benchmarks, unit_ids=unit_ids, cell_units=units.cell_sizes())
    mirror.log_summaries(cells)
    mirror.log_artifacts(run_dir, cells)
    mirror.finish("FINISHED")
    record_mirror(run_dir, mirror.tracking_uri)
    return len(cells)


def repair_mirror(run_dir: RunDirectory, config: SweepConfig, log: Callable[[str], None]) -> bool:
    """Bring MLflow up to date with a run directory whose episodes are all recorded, when the last
    mirror of its summary did not finish (an interrupt or a crash in the MLflow phase, MLflow down):
    runs left RUNNING end, cells get their final metrics, artifacts and traces (each exactly once).
    A mirror that is current costs a file read (`mirror_current`). Returns whether MLflow is current;
    when it cannot be reached the run directory stays the record and the message says so."""
    from toolsweep.actors.result_sink import mlflow_trouble

    uri = resolve_tracking_uri(config.tracking_uri)
    if not config.mlflow or mirror_current(run_dir, uri) or not run_dir.summary_path.exists():
        return True
    log(f"{run_dir.path}: MLflow at {uri} does not hold this run's final state (a run stopped in its MLflow "
        "phase?); rebuilding it from the run directory")
    mirror = open_mirror(config, run_dir, log)
    if mirror is None:
        return False  # unreachable: said, and the same command retries later
    try:
        cells = read_summary(run_dir.summary_path)["cells"]
        mirror.log_summaries(cells)
        mirror.log_artifacts(run_dir, cells)
        mirror.finish("FINISHED")
    except Exception as exc:  # noqa: BLE001 - MLflow trouble never fails a finished sweep
        log(f"MLflow at {uri} {mlflow_trouble(exc)} ({type(exc).__name__}: {str(exc)[:200]}); the run directory "
            f"{run_dir.path} is complete; run the same command again to retry")
        return False
    record_mirror(run_dir, uri)
    return True
