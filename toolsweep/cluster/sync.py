"""Rebuild MLflow from a run directory (the record of truth), e.g. after MLflow was down."""

from __future__ import annotations

import json
from pathlib import Path

from toolsweep.actors.result_sink import MlflowMirror, resolve_tracking_uri
from toolsweep.cluster.driver import (
    config_from_run_dir,
    current_units,
    finalize_run,
    load_benchmarks,
    setting_param_docs,
    setting_params,
    specs_lookup,
)
from toolsweep.evaluator.rundir import RunDirectory
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
    return len(cells)
