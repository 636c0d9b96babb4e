"""Reading a run directory back: its config, its benchmarks, the config's units, its episodes as cell
tables. Shared by the driver and the commands that read a finished run (`plan --pilot`'s power table,
`report`, `sync-mlflow`, an adaptive sweep's judgement), so none of those imports the driver."""

from __future__ import annotations

from collections.abc import Set
from typing import Any

import pyarrow as pa

from toolsweep.cluster.config import SweepConfig, resolve_plans
from toolsweep.evaluator.registry import get_benchmark
from toolsweep.evaluator.rundir import RunDirectory, unit_id_digests
from toolsweep.evaluator.summary import CellTable
from toolsweep.evaluator.sweep import expand_units
from toolsweep.evaluator.unit_ids import UnitIds


def load_benchmarks(config: SweepConfig) -> dict[str, Any]:
    return {e.name: get_benchmark(e.name, e.options) for e in config.benchmarks}


def config_from_run_dir(run_dir: RunDirectory) -> SweepConfig:
    return SweepConfig.model_validate(run_dir.read_manifest()["config"])


def current_units(config: SweepConfig, benchmarks: dict[str, Any] | None = None,
                  plans: list[Any] | None = None) -> tuple[list[Any], dict[str, Any]]:
    """The config's units (ids covering model identity and benchmark content) and the benchmarks'
    fingerprints."""
    from toolsweep.cluster.identity import unit_contexts

    plans = plans if plans is not None else resolve_plans(config, check_endpoints=False)
    benchmarks = benchmarks if benchmarks is not None else load_benchmarks(config)
    fingerprints = {name: {"version": b.version, **b.fingerprint()} for name, b in benchmarks.items()}
    contexts = unit_contexts(config, benchmarks, fingerprints)
    return expand_units(config.name, [m.name for m in config.models], plans, config.sampling, contexts), fingerprints


def read_cells(run_dir: RunDirectory, unit_ids: Set[str] | None) -> tuple[CellTable, int, int]:
    """The run directory's episodes as a CellTable, read a part file at a time (a million rows never
    sit in memory as dicts); with `unit_ids`, episodes of other units are left out (a vectorised
    look-up of each part's ids) and counted. Returns (table, episodes kept, episodes left out)."""
    wanted = None if unit_ids is None else UnitIds.of(unit_ids)
    table = CellTable()
    kept = outside = 0
    columns = ["unit_id", "model", "benchmark", "setting", "task_id", "seed", "termination", "metrics", "finished_at"]
    for part in run_dir.iter_tables(columns=columns):
        if wanted is not None:
            ours = wanted.contains(unit_id_digests(part.column("unit_id")))
            if not ours.all():
                outside += len(ours) - int(ours.sum())
                part = part.filter(pa.array(ours))
        kept += part.num_rows
        table.add_columns({name: part.column(name).to_pylist() for name in columns[1:]})
    return table, kept, outside
