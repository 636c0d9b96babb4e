"""`toolsweep plan --power RUN_DIR`: how many tasks and seeds a sweep needs, from a pilot run.

Each cell's variance components (between tasks, within a task) are read from the pilot's episodes
(`evaluator.design`); for every metric asked, the table gives the interval half-width the pilot's own
design reaches, the tasks needed for the target half-width at 1, 2, 3 and 5 seeds, and the seeds
needed with the benchmark's tasks. For every pair of models on the same cell, the components of their
per-(task, seed) differences give the smallest difference the design detects at the stated power, and
the tasks needed to detect the target difference.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from toolsweep.evaluator.design import (
    VarianceComponents,
    contributions,
    detectable_difference,
    half_width,
    seeds_needed,
    tasks_needed,
    variance_components,
)

SEED_OPTIONS = (1, 2, 3, 5)


def guarded(vc: VarianceComponents) -> tuple[VarianceComponents, str]:
    """A pilot in which the metric never varied (every episode 0, or every one 1) says nothing about
    the variance a longer run meets: plan with the rule of three instead (a rate up to 3 / tasks is
    consistent with zero events, 95%), all of it between tasks, the conservative choice. So does a pilot
    of one task, whose spread between tasks is undefined (NaN)."""
    if vc.n_tasks == 0:
        return vc, ""
    p = min(0.5, 3.0 / vc.n_tasks)
    if not math.isfinite(vc.var_task):  # one task: the spread between tasks is unknown, so the largest
        return (replace(vc, var_task=p * (1 - p), var_within=vc.var_within or 0.0),
                "one task in the pilot: its spread between tasks is unknown; rule of three")
    if vc.var_task + (vc.var_within or 0.0) > 0:
        return vc, ""
    return replace(vc, var_task=p * (1 - p), var_within=0.0), "no variation in the pilot: rule of three"


def _table(run_dir: Any) -> tuple[Any, Any, str]:
    from toolsweep.cluster.run_record import config_from_run_dir, load_benchmarks, read_cells

    config = config_from_run_dir(run_dir)
    benchmarks = load_benchmarks(config)
    table, _, _ = read_cells(run_dir, None)
    # widths as the pilot's own bootstrap scheme (bootstrap.resample) will measure them
    return table, benchmarks, config.bootstrap.resample


def pilot_note(benchmarks: list[Any]) -> str:
    """How the pilot chose its tasks, per benchmark entry of its config: a seeded random sample plans for
    the whole setting; a benchmark's first tasks need not be typical of it (APB holistic: the first 15
    succeeded 0.267 against 0.148 over all 81, and the planned half-width was 0.0997 for an actual 0.080)."""
    lines = []
    for entry in benchmarks:
        t = entry.tasks
        if t.sample is not None:
            lines.append(f"pilot {entry.name}: a seeded random sample of {t.sample} tasks per setting (tasks.sample)")
        elif t.limit is not None:
            lines.append(f"pilot {entry.name}: the first {t.limit} tasks of each setting (tasks.limit), not a random "
                         f"sample: the plan may be biased; pilot with tasks.sample: {t.limit} instead")
        elif t.ids is not None:
            lines.append(f"pilot {entry.name}: {len(t.ids)} chosen tasks (tasks.ids), not a random sample")
        else:
            lines.append(f"pilot {entry.name}: every task of each setting")
    return "\n".join(lines)


def pilot_note_of(run_dir: Any) -> str:
    from toolsweep.cluster.run_record import config_from_run_dir

    return pilot_note(list(config_from_run_dir(run_dir).benchmarks))


def _metric(bench: Any, setting: str, wanted: str | None) -> Any:
    specs = list(bench.metrics(setting))
    if wanted:
        return next((s for s in specs if s.name == wanted), None)
    return specs[0] if specs else None


def power_rows(run_dir: Any, *, half: float, difference: float, power: float, confidence: float = 0.95,
               metric: str | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(cell rows, pair rows) of the power table."""
    table, benchmarks, resample = _table(run_dir)
    cells, pairs = [], []
    by_bs: dict[tuple[str, str], list[str]] = {}
    for (model, benchmark, setting), eps in sorted(table.cells.items()):
        bench = benchmarks.get(benchmark)
        spec = _metric(bench, setting, metric) if bench is not None else None
        if spec is None or eps.n == 0:
            continue
        by_bs.setdefault((benchmark, setting), []).append(model)
        y, entered = contributions(spec, eps.values([spec]))
        tasks = np.asarray(eps.task_ids)[entered]
        vc, note = guarded(variance_components(tasks, y[entered]))
        n_tasks = len(bench.tasks(setting))
        seeds_now = max(1, round(vc.mean_seeds))
        cells.append({
            "model": model, "benchmark": benchmark, "setting": setting, "metric": spec.name,
            "tasks": vc.n_tasks, "seeds": vc.mean_seeds, "var_task": vc.var_task, "var_within": vc.var_within,
            "icc": vc.icc, "half_width": half_width(vc, max(vc.n_tasks, 2), seeds_now, confidence, resample),
            "tasks_needed": {s: tasks_needed(vc, half, s, confidence, resample) for s in SEED_OPTIONS},
            "benchmark_tasks": n_tasks,
            "seeds_needed": seeds_needed(vc, half, n_tasks, confidence, resample=resample), "note": note,
        })
    for (benchmark, setting), models in by_bs.items():
        spec = _metric(benchmarks[benchmark], setting, metric)
        for i, a in enumerate(models):
            for b in models[i + 1:]:
                ea, eb = table.cells[(a, benchmark, setting)], table.cells[(b, benchmark, setting)]
                ya, in_a = contributions(spec, ea.values([spec]))
                yb, in_b = contributions(spec, eb.values([spec]))
                index_b = {(t, int(s)): j for j, (t, s) in enumerate(zip(eb.task_ids, eb.seeds))}
                tasks, diffs = [], []
                for i_a, (t, s) in enumerate(zip(ea.task_ids, ea.seeds)):
                    j = index_b.get((t, int(s)))
                    if j is not None and in_a[i_a] and in_b[j]:
                        tasks.append(t)
                        diffs.append(ya[i_a] - yb[j])
                if len(set(tasks)) < 2:
                    continue
                vc, note = guarded(variance_components(np.asarray(tasks), np.asarray(diffs)))
                seeds_now = max(1, round(vc.mean_seeds))
                mde = detectable_difference(vc, vc.n_tasks, seeds_now, alpha=1 - confidence, power=power,
                                            resample=resample)
                # tasks for the target difference: the width formula at the test's combined z
                scale = mde / difference
                pairs.append({
                    "benchmark": benchmark, "setting": setting, "model_a": a, "model_b": b, "metric": spec.name,
                    "difference": float(np.mean(diffs)), "tasks": vc.n_tasks, "seeds": vc.mean_seeds,
                    "var_task": vc.var_task, "var_within": vc.var_within, "detectable": mde,
                    "tasks_needed": max(2, int(np.ceil(vc.n_tasks * scale ** 2))), "note": note,
                })
    return cells, pairs


def _f(v: Any, digits: int = 3) -> str:
    if v is None:
        return "–"
    return f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def format_power(cells: list[dict[str, Any]], pairs: list[dict[str, Any]], *, half: float, difference: float,
                 power: float, confidence: float) -> str:
    lines = [f"target: {confidence:.0%} interval half-width <= {half}; detect a paired difference of {difference} "
             f"with power {power:.0%} (two-sided, alpha {1 - confidence:.2f})", ""]
    head = ["model", "benchmark/setting", "metric", "tasks x seeds", "var task", "var within", "ICC",
            "half-width now"] + [f"tasks @{s} seed{'s' if s > 1 else ''}" for s in SEED_OPTIONS] + ["seeds @all tasks",
                                                                                                  "note"]
    rows = [head]
    for c in cells:
        seeds = c["seeds_needed"]
        rows.append([c["model"], f"{c['benchmark']}/{c['setting']}", c["metric"], f"{c['tasks']} x {c['seeds']:.1f}",
                     _f(c["var_task"], 4), _f(c["var_within"], 4), _f(c["icc"], 2), _f(c["half_width"]),
                     *[str(c["tasks_needed"][s]) for s in SEED_OPTIONS],
                     f"{seeds} (of {c['benchmark_tasks']} tasks)" if seeds else f"unreachable with {c['benchmark_tasks']} tasks",
                     c["note"]])
    lines += _columns(rows)
    if pairs:
        lines += ["", "paired differences (A - B on the same tasks and seeds):"]
        head = ["A", "B", "benchmark/setting", "metric", "A - B", "tasks x seeds", "detectable now", "tasks needed",
                "note"]
        rows = [head] + [[p["model_a"], p["model_b"], f"{p['benchmark']}/{p['setting']}", p["metric"],
                          _f(p["difference"]), f"{p['tasks']} x {p['seeds']:.1f}", _f(p["detectable"]),
                          str(p["tasks_needed"]), p["note"]] for p in pairs]
        lines += _columns(rows)
    lines += ["", "var within = seeds + residual (one episode per task and seed cannot tell them apart); "
              "tasks needed assume the pilot's variance components (evaluator/design.py)."]
    return "\n".join(lines)


def _columns(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
