"""Adaptive sweeps: run in rounds, adding seeds only to the (benchmark, setting) cells that still need
them (an interval wider than `stop_when.ci_half_width`, or, with `paired_difference: decided`, a model
pair whose paired interval neither excludes 0 nor lies inside +-margin), until every cell meets the goal
or the budget (`max_rounds`, `max_seeds`) is spent. With `stop_when.grow: tasks | auto` (width goal) a
round may instead add tasks to a cell that runs a subset of its setting's tasks, in a fixed order seeded
from the sweep and the cell, the tasks already run first (`task_orders`).

Each round is an ordinary sweep (`run_sweep`) of a grown config: the cells that need more get a
benchmark entry of their own with more seeds (or `tasks.ids` listing its grown tasks), the same for
every model (paired differences stay paired); the run directory grows as it does for any edited config,
so resume and dedup are unchanged and a re-run whose rounds are all recorded runs nothing.

A width goal is judged at the nominal confidence (the fixed-width sequential interval); a paired goal at
the confidence of a Pocock-type group-sequential boundary over the cell's planned rounds
(`toolsweep.evaluator.adaptive` says why each is valid under its stopping; docs/adaptive.md). The round
logic is pure and lives there; this module builds each round's config, judges a round from the run
directory, and runs the rounds through `run_sweep`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from toolsweep.cluster.config import ConfigError, SweepConfig, resolve_plans
from toolsweep.evaluator.adaptive import (
    Cell,
    CellJudgement,
    PairedRule,
    RoundsResult,
    StoppingRule,
    WidthRule,
    format_adaptive,
    most_cell_episodes,
    run_rounds,
    task_order,
)
from toolsweep.evaluator.stats import Estimate


# ----------------------------------------------------------------------------- configs of the rounds


def initial_seeds(config: SweepConfig, plans: list[Any] | None = None) -> dict[Cell, list[int]]:
    """Every (benchmark, setting) of the config as written, with its seeds."""
    plans = plans if plans is not None else resolve_plans(config, check_endpoints=False)
    return {(p.benchmark, s): list(p.seeds) for p in plans for s in p.tasks_by_setting}


def initial_tasks(config: SweepConfig, plans: list[Any] | None = None) -> dict[Cell, list[str]]:
    """Every (benchmark, setting) of the config as written, with the task ids it runs."""
    plans = plans if plans is not None else resolve_plans(config, check_endpoints=False)
    return {(p.benchmark, s): list(ids) for p in plans for s, ids in p.tasks_by_setting.items()}


def task_orders(config: SweepConfig, benchmarks: Mapping[str, Any],
                plans: list[Any] | None = None) -> dict[Cell, list[str]]:
    """The order each cell draws tasks in when rounds may add tasks (`stop_when.grow` tasks or auto): the
    tasks the config runs, then the rest of the setting's tasks in a permutation seeded from the sweep's
    name and the cell (`task_order`), so a re-run grows the same way. With grow: seeds, just the tasks
    the config runs."""
    first = initial_tasks(config, plans)
    stop = config.stop_when
    if stop is None or stop.grow == "seeds":
        return first
    return {cell: task_order(ids, benchmarks[cell[0]].tasks(cell[1]), f"{config.name}|{cell[0]}|{cell[1]}")
            for cell, ids in first.items()}


def round_config(base: SweepConfig, seeds: Mapping[Cell, list[int]], plans: list[Any] | None = None,
                 tasks: Mapping[Cell, list[str]] | None = None) -> SweepConfig:
    """The base config with every cell whose seeds or tasks differ from the base's moved to a benchmark
    entry of its own (same options; its own seeds; its own `tasks.ids` where its tasks grew); the other
    cells stay in their entry."""
    plans = plans if plans is not None else resolve_plans(base, check_endpoints=False)
    tasks = tasks or {}
    data = base.model_dump(mode="json")
    entries: list[dict[str, Any]] = []
    for entry, plan in zip(data["benchmarks"], plans):
        settings = list(plan.tasks_by_setting)

        def own_seeds(s: str) -> list[int]:
            return list(seeds.get((plan.benchmark, s), plan.seeds))

        def own_tasks(s: str) -> list[str]:
            return list(tasks.get((plan.benchmark, s), plan.tasks_by_setting[s]))

        moved = [s for s in settings if own_seeds(s) != list(plan.seeds) or own_tasks(s) != plan.tasks_by_setting[s]]
        if not moved:
            entries.append(entry)
            continue
        kept = [s for s in settings if s not in moved]
        if kept:
            entries.append({**entry, "settings": kept})
        for s in moved:
            grown = {**entry, "settings": [s], "seeds": own_seeds(s)}
            if own_tasks(s) != plan.tasks_by_setting[s]:
                grown["tasks"] = {"limit": None, "ids": own_tasks(s)}
            entries.append(grown)
    data["benchmarks"] = entries
    return SweepConfig.model_validate(data)


def metric_for(config: SweepConfig, benchmarks: Mapping[str, Any], cell: Cell) -> Any:
    """The MetricSpec a cell is judged on: `stop_when.metric`, or the setting's first metric."""
    specs = list(benchmarks[cell[0]].metrics(cell[1]))
    wanted = config.stop_when.metric if config.stop_when else None
    if wanted is None:
        return specs[0]
    for spec in specs:
        if spec.name == wanted:
            return spec
    raise ConfigError(f"stop_when.metric: {wanted!r} is not a metric of {cell[0]} setting {cell[1]!r}; "
                      f"its metrics: {', '.join(s.name for s in specs)}")


def model_pairs(config: SweepConfig) -> list[tuple[str, str]]:
    """The (A, B) pairs a paired goal decides, A - B: each model against `stop_when.baseline`, or every
    pair of models in the config's order."""
    names = [m.name for m in config.models]
    base = config.stop_when.baseline if config.stop_when else None
    if base is not None:
        return [(m, base) for m in names if m != base]
    return [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]


def pair_key(a: str, b: str) -> str:
    return f"{a} - {b}"


def stopping_rule(config: SweepConfig) -> StoppingRule:
    """The config's goal as the pure loop's rule."""
    stop = config.stop_when
    if stop is None:
        raise ValueError("an adaptive sweep needs stop_when")
    level = config.bootstrap.confidence
    if stop.paired_difference is not None:
        assert stop.margin is not None
        return PairedRule(margin=stop.margin, pairs=len(model_pairs(config)), per_round=stop.seeds_per_round,
                          max_seeds=stop.max_seeds, max_rounds=stop.max_rounds, confidence_level=level)
    assert stop.ci_half_width is not None
    return WidthRule(target=stop.ci_half_width, confidence_level=level, max_seeds=stop.max_seeds)


def most_units(config: SweepConfig, plans: list[Any] | None = None) -> int:
    """The units an adaptive sweep runs at most: every cell grown every round, up to max_seeds (and, when
    rounds may add tasks, on as many tasks as it may draw)."""
    stop = config.stop_when
    plans = plans if plans is not None else resolve_plans(config, check_endpoints=False)
    if stop is None:
        return len(config.models) * sum(len(p.seeds) * sum(map(len, p.tasks_by_setting.values())) for p in plans)
    total = 0
    pools = task_pool_sizes(config, plans) if stop.grow != "seeds" else {}
    for p in plans:
        seeds = min(stop.max_seeds, len(p.seeds) + (stop.max_rounds - 1) * stop.seeds_per_round)
        for s, ids in p.tasks_by_setting.items():
            if not pools:
                total += seeds * len(ids)
                continue
            pool = pools[(p.benchmark, s)]
            total += most_cell_episodes(len(ids), len(p.seeds), max_rounds=stop.max_rounds,
                                        seeds_per_round=stop.seeds_per_round, max_seeds=stop.max_seeds,
                                        most_tasks=max(len(ids), min(stop.max_tasks or pool, pool)),
                                        tasks_per_round=stop.tasks_per_round)
    return len(config.models) * total


def task_pool_sizes(config: SweepConfig, plans: list[Any]) -> dict[Cell, int]:
    """How many tasks each cell's setting has (what a cell growing tasks may draw from)."""
    from toolsweep.cluster.run_record import load_benchmarks

    benchmarks = load_benchmarks(config)
    return {(p.benchmark, s): len(benchmarks[p.benchmark].tasks(s)) for p in plans for s in p.tasks_by_setting}


def check_stop_when(config: SweepConfig, benchmarks: Mapping[str, Any] | None = None) -> None:
    """Before anything starts: the metric exists in every cell (ConfigError naming the cell otherwise)."""
    from toolsweep.cluster.run_record import load_benchmarks

    if config.stop_when is None:
        return
    benchmarks = benchmarks if benchmarks is not None else load_benchmarks(config)
    for cell in initial_seeds(config):
        metric_for(config, benchmarks, cell)


# ----------------------------------------------------------------------------- intervals from a run directory


def judge_run_dir(run_dir: Any, config: SweepConfig, benchmarks: Mapping[str, Any],
                  confidence: Mapping[Cell, float]) -> dict[Cell, dict[str, Estimate] | CellJudgement]:
    """Each judged cell's intervals at its confidence, from the episodes of `config`'s units in the run
    directory (episodes of other units, e.g. seeds of a later round, are left out), with the summary's
    bootstrap (same resamples count, scheme and per-cell seed) per model for a width goal; per model pair
    ("A - B", paired on the (task, seed) cells both ran, `paired_interval`) for a paired goal. A width
    goal's cells come with each model's variance components (which `grow: auto` reads)."""
    from toolsweep.cluster.run_record import current_units
    from toolsweep.evaluator.rundir import unit_id_digests
    from toolsweep.evaluator.adaptive import paired_interval
    from toolsweep.evaluator.design import contributions, variance_components
    from toolsweep.evaluator.stats import summarize_metrics
    from toolsweep.evaluator.summary import CellTable, task_keys
    from toolsweep.evaluator.types import stable_seed

    cells = set(confidence)
    paired = config.stop_when is not None and config.stop_when.paired_difference is not None
    units, _ = current_units(config, dict(benchmarks))
    wanted = units.id_set()
    table = CellTable()
    columns = ["unit_id", "model", "benchmark", "setting", "task_id", "seed", "termination", "metrics"]
    for part in run_dir.iter_tables(columns=columns):
        keep = wanted.contains(unit_id_digests(part.column("unit_id")))
        if not keep.any():
            continue
        part = part.filter(keep) if not keep.all() else part
        cols = {k: part.column(k).to_pylist() for k in columns[1:]}
        mask = [(b, s) in cells for b, s in zip(cols["benchmark"], cols["setting"])]
        if not any(mask):
            continue
        table.add_columns({k: [v for v, m in zip(col, mask) if m] for k, col in cols.items()})
    out: dict[Cell, dict[str, Estimate]] = {c: {} for c in cells}
    components: dict[Cell, dict[str, Any]] = {}
    for cell in sorted(cells):
        spec = metric_for(config, benchmarks, cell)
        if paired:
            for a, b in model_pairs(config):
                ea, eb = table.cells.get((a, *cell)), table.cells.get((b, *cell))
                if ea is None or eb is None or ea.n == 0 or eb.n == 0:
                    continue
                out[cell][pair_key(a, b)] = paired_interval(
                    list(ea.task_ids), list(ea.seeds), ea.values([spec]), list(eb.task_ids), list(eb.seeds),
                    eb.values([spec]), spec, confidence[cell])
            continue
        for model in (m.name for m in config.models):
            eps = table.cells.get((model, *cell))
            if eps is None or eps.n == 0:
                continue
            values = eps.values([spec])
            est = summarize_metrics(task_keys(eps.task_ids), np.frombuffer(eps.seeds, dtype=np.int64),
                                    values, [spec], n_resamples=config.bootstrap.n_resamples,
                                    confidence=confidence[cell], seed=stable_seed(0, model, *cell),
                                    resample=config.bootstrap.resample)
            out[cell][model] = est[spec.name]
            y, entered = contributions(spec, values)
            if entered.any():
                components.setdefault(cell, {})[model] = variance_components(np.asarray(list(eps.task_ids))[entered],
                                                                             y[entered])
    if paired:
        return out
    return {cell: CellJudgement(est, components.get(cell, {})) for cell, est in out.items()}


# ----------------------------------------------------------------------------- the sweep


def adaptive_section(config: SweepConfig, benchmarks: Mapping[str, Any], result: RoundsResult,
                     units_per_round: list[int]) -> dict[str, Any]:
    """What summary.json's "adaptive" section and adaptive.json hold."""
    stop = config.stop_when
    assert stop is not None
    alpha = 1.0 - config.bootstrap.confidence
    return {
        "method": stopping_rule(config).method, "alpha": alpha, "target_half_width": stop.ci_half_width,
        "margin": stop.margin, "pairs": [pair_key(a, b) for a, b in model_pairs(config)] if stop.margin else None,
        "resample": config.bootstrap.resample,
        "stop_when": stop.model_dump(mode="json"), "rounds": result.rounds, "reason": result.reason,
        "grow": stop.grow,
        "grown_per_round": [[list(c) for c in g] for g in result.grown_per_round],
        "units_per_round": units_per_round,
        # per round, every cell's tasks and seeds in that round's config, and what a grown cell grew by
        "design_per_round": [
            {"round": r + 1, "cells": [{"benchmark": c[0], "setting": c[1], "tasks": t, "seeds": n,
                                        **({"grew": result.grown_by[r - 1][c]}
                                           if 0 < r <= len(result.grown_by) and c in result.grown_by[r - 1] else {})}
                                       for c, (t, n) in sorted(design.items())]}
            for r, design in enumerate(result.designs)],
        "cells": [rec.to_dict(cell, metric_for(config, benchmarks, cell).name)
                  for cell, rec in sorted(result.records.items())],
    }


def run_adaptive(config: SweepConfig, *, progress: bool = True, log: Callable[[str], None] | None = None,
                 extra_benchmarks: dict[str, str] | None = None) -> Any:
    """Run an adaptive sweep (`stop_when`) as rounds of `run_sweep`; returns the last round's RunOutcome
    with the adaptive table appended to its text, and writes the "adaptive" section into summary.json
    (and adaptive.json beside it). A round whose units are all recorded is judged without running
    anything, so a re-run replays the same decisions and adds nothing."""
    from toolsweep.cluster.driver import _stderr, run_sweep
    from toolsweep.cluster.ray_start import connect_ray
    from toolsweep.cluster.run_record import current_units, load_benchmarks
    from toolsweep.evaluator.registry import register_benchmark
    from toolsweep.evaluator.rundir import RunDirectory, atomic_write_text, strict_json

    log = log or _stderr
    stop = config.stop_when
    if stop is None:
        raise ValueError("run_adaptive needs a config with stop_when")
    for name, target in (extra_benchmarks or {}).items():
        register_benchmark(name, target)
    base_plans = resolve_plans(config)
    benchmarks = load_benchmarks(config)
    check_stop_when(config, benchmarks)
    initial = initial_seeds(config, base_plans)
    orders = task_orders(config, benchmarks, base_plans)
    run_dir = RunDirectory(config.run_path())
    last: dict[str, Any] = {}
    units_per_round: list[int] = []

    def measure(r: int, seeds: dict[Cell, list[int]], confidence: Mapping[Cell, float],
                tasks: dict[Cell, list[str]]):
        cells = set(confidence)
        cfg = round_config(config, seeds, base_plans, tasks)
        units, _ = current_units(cfg, benchmarks)
        units_per_round.append(len(units))
        recorded = run_dir.exists() and units.id_set() <= run_dir.finished_unit_ids()
        if not recorded:
            log(f"adaptive round {r}: {len(cells)} cell(s) to judge, {len(units)} units in all")
            if "started_ray" not in last:
                # one Ray for every round: each run_sweep finds it connected and leaves it up (an embedded
                # Ray started and stopped once a round hung in its GCS client on a busy machine)
                last["started_ray"] = connect_ray(config.ray_address, log, config.ray_start_timeout_s)
            outcome = run_sweep(cfg, progress=progress, log=log, extra_benchmarks=extra_benchmarks)
            last["outcome"] = outcome
            if outcome.interrupted or outcome.gave_up:
                return None
        last["config"] = cfg
        return judge_run_dir(run_dir, cfg, benchmarks, confidence)

    try:
        result = run_rounds(initial, rule=stopping_rule(config), max_rounds=stop.max_rounds,
                            max_seeds=stop.max_seeds, seeds_per_round=stop.seeds_per_round, measure=measure,
                            tasks=initial_tasks(config, base_plans), task_orders=orders, grow=stop.grow,
                            tasks_per_round=stop.tasks_per_round, max_tasks=stop.max_tasks)
        if result.reason == "stopped":
            return last["outcome"]
        # the last round's summary.json (a no-op when that round just ran; a re-run rebuilds it if needed)
        outcome = run_sweep(last["config"], progress=progress, log=log, extra_benchmarks=extra_benchmarks)
    finally:
        if last.get("started_ray"):
            import ray

            ray.shutdown()
    section = adaptive_section(config, benchmarks, result, units_per_round)
    section["config_sha256"] = last["config"].config_sha256()  # the last round's config: what it describes
    if outcome.interrupted or outcome.gave_up:
        return outcome
    atomic_write_text(run_dir.path / ADAPTIVE_FILE, strict_json(section, indent=2))
    attach_adaptive(run_dir)
    outcome.table_text += "\n\n" + format_adaptive(section)
    return outcome


ADAPTIVE_FILE = "adaptive.json"


def attach_adaptive(run_dir: Any) -> str | None:
    """Put the run directory's adaptive.json into summary.json as its "adaptive" section when both describe
    the same config (after a sweep, and after `toolsweep report` rebuilt the summary); returns the
    section's text, or None when there is none for this summary."""
    from toolsweep.evaluator.rundir import atomic_write_text, strict_json

    path = run_dir.path / ADAPTIVE_FILE
    if not path.exists() or not run_dir.summary_path.exists():
        return None
    section = json.loads(path.read_text())
    summary = json.loads(run_dir.summary_path.read_text())
    if section.get("config_sha256") != summary.get("config_sha256"):
        return None  # the run directory grew past the adaptive sweep: its rounds describe other cells
    if summary.get("adaptive") != section:
        summary["adaptive"] = section
        atomic_write_text(run_dir.summary_path, strict_json(summary, indent=2))
    return format_adaptive(section)
