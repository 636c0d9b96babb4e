"""Cell summaries: episodes grouped by (model, benchmark, setting), with bootstrap intervals.

Used live by the result sink, at the end of a sweep, by `toolsweep report` and by `sync-mlflow`,
so every path computes the same numbers from the same episodes.
"""

from __future__ import annotations

import json
import math
import sys
from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from toolsweep.evaluator.design import adjust_paired
from toolsweep.evaluator.protocols import MetricSpec
from toolsweep.evaluator.stats import cell_summary, paired_difference
from toolsweep.evaluator.types import UNSCORED, EpisodeResult, stable_seed

Cell = tuple[str, str, str]
SpecsFor = Callable[[str, str], Sequence[MetricSpec]]
"""(benchmark, setting) -> the metrics of that setting."""


_UNSCORED = frozenset(t.value for t in UNSCORED)


class _EpisodeRow:
    """One episode's metrics read from the columns (what `CellEpisodes.metrics` yields)."""

    __slots__ = ("_columns", "_i")

    def __init__(self, columns: dict[str, array], i: int) -> None:
        self._columns, self._i = columns, i

    def get(self, key: str, default: Any = None) -> Any:
        col = self._columns.get(key)
        if col is None:
            return default
        v = col[self._i]
        return default if math.isnan(v) and default is not None else v

    def __getitem__(self, key: str) -> float:
        col = self._columns.get(key)
        if col is None or math.isnan(col[self._i]):
            raise KeyError(key)
        return col[self._i]

    def __contains__(self, key: str) -> bool:
        col = self._columns.get(key)
        return col is not None and not math.isnan(col[self._i])


class CellEpisodes:
    """The scored episodes of one cell, in columns ready for the bootstrap.

    Columnar on purpose: a metric is 8 bytes per episode in an `array('d')` (NaN where an episode
    lacks it), where a dict per episode cost kilobytes, so a million-episode sweep's live table
    stays small. Task ids are interned: every seed and model of a task shares one string."""

    def __init__(self) -> None:
        self.task_ids: list[str] = []
        self.seeds: array = array("q")
        self.finished_at: array = array("d")  # when each episode was recorded (NaN if unknown)
        self.columns: dict[str, array] = {}
        self.terminations: Counter = Counter()

    def add(self, task_id: str, seed: int, termination: str, metrics: dict[str, float],
            finished_at: float | None = None) -> None:
        self.terminations[termination] += 1
        if termination in _UNSCORED:
            return  # infrastructure failures never enter a metric
        n = len(self.task_ids)
        self.task_ids.append(sys.intern(task_id))
        self.seeds.append(seed)
        self.finished_at.append(math.nan if finished_at is None else float(finished_at))
        for key, value in metrics.items():
            col = self.columns.get(key)
            if col is None:
                col = self.columns[key] = array("d", [math.nan]) * n
            col.append(float(value))
        for col in self.columns.values():
            if len(col) == n:  # a metric this episode does not have
                col.append(math.nan)

    def extend(self, task_ids: list[str], seeds: list[int], terminations: list[str],
               metrics: list[dict[str, float]], finished_at: list[float | None]) -> None:
        """Many episodes at once, as `add` would take them one by one (a part file's rows)."""
        self.terminations.update(terminations)
        if any(t in _UNSCORED for t in terminations):  # infrastructure failures never enter a metric
            scored = [i for i, t in enumerate(terminations) if t not in _UNSCORED]
            task_ids, seeds, metrics, finished_at = ([col[i] for i in scored]
                                                     for col in (task_ids, seeds, metrics, finished_at))
        n, m = self.n, len(task_ids)
        self.task_ids.extend(map(sys.intern, task_ids))
        self.seeds.extend(map(int, seeds))
        self.finished_at.extend(math.nan if t is None else float(t) for t in finished_at)
        nan = math.nan
        for key in dict.fromkeys(k for row in metrics for k in row):  # first-seen order, as `add`
            col = self.columns.get(key)
            if col is None:
                col = self.columns[key] = array("d", [nan]) * n
            col.extend(float(row.get(key, nan)) for row in metrics)
        for col in self.columns.values():
            if len(col) < n + m:  # metrics none of these episodes has
                col.extend(array("d", [nan]) * (n + m - len(col)))

    @property
    def n(self) -> int:
        return len(self.task_ids)

    @property
    def metrics(self) -> list[_EpisodeRow]:
        """Per-episode views with a dict's `get`, for tables that walk episodes one by one."""
        return [_EpisodeRow(self.columns, i) for i in range(self.n)]

    def values(self, specs: Sequence[MetricSpec]) -> dict[str, np.ndarray]:
        keys = {k for s in specs for k in s.keys()}
        nan = np.full(self.n, math.nan)
        return {k: (np.frombuffer(self.columns[k], dtype=float).copy() if k in self.columns else nan.copy())
                for k in sorted(keys)}


@dataclass
class ReportEpisodes:
    """One benchmark's scored episodes by (model, setting), for report tables whose composite
    intervals need per-episode data (stratified or paired bootstraps, `stats.composite_estimate`)."""

    cells: dict[tuple[str, str], CellEpisodes]
    n_resamples: int = 2000
    confidence: float = 0.95
    seed: int = 0


class CellTable:
    """Episodes of a whole sweep grouped by cell."""

    def __init__(self) -> None:
        self.cells: dict[Cell, CellEpisodes] = defaultdict(CellEpisodes)

    def add_result(self, result: EpisodeResult) -> Cell:
        u = result.unit
        self.cells[u.cell].add(u.task_id, u.seed, result.termination.value, result.metrics)
        return u.cell

    def add_rows(self, rows: Iterable[dict[str, Any]]) -> None:
        """Rows as stored in the run directory (metrics as a JSON string)."""
        rows = list(rows)
        self.add_columns({key: [r[key] for r in rows]
                          for key in ("model", "benchmark", "setting", "task_id", "seed", "termination", "metrics")}
                         | {"finished_at": [r.get("finished_at") for r in rows]})

    def add_columns(self, columns: Mapping[str, list[Any]]) -> None:
        """Episodes column by column, as a run-directory part holds them (`model`, `benchmark`,
        `setting`, `task_id`, `seed`, `termination`, `metrics` as JSON strings, and optionally
        `finished_at`): no dict per row, each distinct metrics string parsed once, each cell's
        episodes added in bulk (a million rows in 3.3 s instead of 5.6 s, with less garbage)."""
        by_cell: dict[Cell, list[int]] = defaultdict(list)
        for i, cell in enumerate(zip(columns["model"], columns["benchmark"], columns["setting"])):
            by_cell[cell].append(i)
        parsed: dict[str, dict[str, float]] = {}
        metrics = []
        for text in columns["metrics"]:
            row = parsed.get(text)
            if row is None:
                row = json.loads(text)
                if len(parsed) < 4096:  # success flags and counts repeat; measurements rarely do
                    parsed[text] = row
            metrics.append(row)
        finished_at = columns.get("finished_at") or [None] * len(metrics)
        every = (columns["task_id"], columns["seed"], columns["termination"], metrics, finished_at)
        for cell, rows in by_cell.items():
            if len(rows) == len(metrics):  # the whole part is one cell's
                self.cells[cell].extend(*every)
            else:
                self.cells[cell].extend(*([col[i] for i in rows] for col in every))

    def report_episodes(self, benchmark: str, *, n_resamples: int, confidence: float, seed: int) -> ReportEpisodes:
        """The episodes of one benchmark, as `Benchmark.report_tables` takes them."""
        own = {(m, s): eps for (m, b, s), eps in self.cells.items() if b == benchmark}
        return ReportEpisodes(own, n_resamples=n_resamples, confidence=confidence, seed=seed)

    def summarize(
        self,
        specs_for: SpecsFor,
        *,
        n_resamples: int,
        confidence: float,
        seed: int,
        only: Iterable[Cell] | None = None,
        resample: str = "tasks",
    ) -> list[dict[str, Any]]:
        """One summary dict per cell (see stats.cell_summary), in a stable order."""
        return summarize_cells(self.snapshot(specs_for, only), n_resamples=n_resamples, confidence=confidence,
                               seed=seed, resample=resample)

    def snapshot(self, specs_for: SpecsFor, only: Iterable[Cell] | None = None) -> list[CellSnapshot]:
        """What summarising the cells needs, copied, in a stable order: the result sink takes it under
        its lock and summarises outside it, so recording never waits for a bootstrap (the live
        summaries of twelve PlanBench-XL cells took 3.3 s, bench/mirror_lock.py)."""
        out = []
        for cell in sorted(self.cells) if only is None else sorted(set(only)):
            eps = self.cells[cell]
            specs = list(specs_for(cell[1], cell[2]))
            # the ids as a list (a copy of pointers): keying them (`task_keys`) is left to the summary
            out.append(CellSnapshot(cell, list(eps.task_ids), np.array(eps.seeds, dtype=np.int64),
                                    eps.values(specs), dict(eps.terminations), specs))
        return out

    def paired(
        self, specs_for: SpecsFor, *, n_resamples: int, confidence: float, seed: int, resample: str = "tasks"
    ) -> list[dict[str, Any]]:
        """Differences between every pair of models on the same (benchmark, setting), per metric,
        over the (task, seed) cells both ran."""
        by_bs: dict[tuple[str, str], list[str]] = defaultdict(list)
        for model, benchmark, setting in sorted(self.cells):
            by_bs[(benchmark, setting)].append(model)
        out = []
        for (benchmark, setting), models in by_bs.items():
            specs = list(specs_for(benchmark, setting))
            for i, a in enumerate(models):
                for b in models[i + 1 :]:
                    ea, eb = self.cells[(a, benchmark, setting)], self.cells[(b, benchmark, setting)]
                    if ea.n == 0 or eb.n == 0:
                        continue
                    va, vb = ea.values(specs), eb.values(specs)
                    for spec in specs:
                        est = paired_difference(
                            ea.task_ids, ea.seeds, va, eb.task_ids, eb.seeds, vb, spec,
                            n_resamples=n_resamples, confidence=confidence,
                            seed=stable_seed(seed, a, b, benchmark, setting, spec.name), resample=resample,
                        )
                        # from the interval's own resamples, so the two agree; NaN where both are withheld
                        p_value = est.p_value if est.p_value is not None and est.n else math.nan
                        out.append(
                            {
                                "benchmark": benchmark, "setting": setting, "model_a": a, "model_b": b,
                                "metric": spec.name, "value": est.value, "ci_low": est.ci_low,
                                "ci_high": est.ci_high, "n": est.n, "tasks": est.tasks, "p_value": p_value,
                            }
                        )
        adjust_paired(out, alpha=1 - confidence)
        return out


@dataclass
class CellSnapshot:
    """A cell's episodes as `cell_summary` takes them, copied out of the live table."""

    cell: Cell
    task_ids: list[str]
    seeds: np.ndarray
    values: dict[str, np.ndarray]
    terminations: dict[str, int]
    specs: list[MetricSpec]


def summarize_cells(cells: Iterable[CellSnapshot], *, n_resamples: int, confidence: float,
                    seed: int, resample: str = "tasks") -> list[dict[str, Any]]:
    """One summary dict per snapshot (see stats.cell_summary). Task keys give the same intervals as
    the ids, from less memory; they are made here, outside the sink's lock (a million-episode cell's
    take 0.16 s)."""
    return [
        cell_summary(*c.cell, task_keys(c.task_ids), c.seeds, c.values, c.terminations, c.specs,
                     n_resamples=n_resamples, confidence=confidence, seed=stable_seed(seed, *c.cell),
                     resample=resample)
        for c in cells
    ]


def task_keys(task_ids: Sequence[str]) -> np.ndarray:
    """Each episode's task as a 4-byte key that sorts like its task id (the task's rank among the
    cell's tasks, big-endian), to hand `cell_summary` instead of the ids. The bootstrap lays episodes
    out by sorted task, so the layout and every interval come out the same as with the ids; but
    numpy sorts the keys of a million episodes in 0.16 s where it takes 0.9 s and a 28 MB string
    array for the ids, which counts for the convergence charts (a summary per prefix of a cell)."""
    try:
        ids = np.asarray(task_ids, dtype=np.bytes_)  # ASCII: a quarter of a str array, sorted alike
    except UnicodeEncodeError:
        ids = np.asarray(task_ids, dtype=np.str_)
    _, rank = np.unique(ids, return_inverse=True)
    return rank.reshape(-1).astype(">u4").view("S4")


def convergence_from_table(
    table: CellTable,
    specs_for: SpecsFor,
    *,
    checkpoints: int = 12,
    n_resamples: int = 300,
    confidence: float = 0.95,
    max_cells: int | None = None,
    resample: str = "tasks",
) -> dict[Cell, tuple[str, list[dict[str, float]]]]:
    """How each cell's headline metric and its interval evolved as episodes finished: cell -> (metric,
    points {n, value, ci_low, ci_high}), from a table built with `finished_at` (the run directory read
    once, in columns): each cell's scored episodes in the order they were recorded, summarised on
    growing prefixes. Nothing is parsed twice and no row is kept."""
    cells = sorted(c for c, e in table.cells.items() if e.n)
    if max_cells is not None:
        cells = cells[:max_cells]
    out: dict[Cell, tuple[str, list[dict[str, float]]]] = {}
    for cell in cells:
        eps = table.cells[cell]
        specs = list(specs_for(cell[1], cell[2]))[:1]
        if not specs:
            continue
        order = np.argsort(np.frombuffer(eps.finished_at, dtype=float), kind="stable")
        tasks = task_keys(eps.task_ids)[order]
        seeds = np.frombuffer(eps.seeds, dtype=np.int64)[order]
        values = {k: v[order] for k, v in eps.values(specs).items()}
        every = max(1, eps.n // checkpoints)
        ends = list(range(every, eps.n + 1, every))
        if ends[-1] != eps.n:
            ends.append(eps.n)
        points = []
        for k in ends:
            summary = cell_summary(*cell, tasks[:k], seeds[:k], {key: v[:k] for key, v in values.items()}, {},
                                   specs, n_resamples=n_resamples, confidence=confidence, seed=stable_seed(0, *cell),
                                   resample=resample)
            est = summary["metrics"].get(specs[0].name)
            if est is not None:
                points.append({"n": float(k), **{f: est[f] for f in ("value", "ci_low", "ci_high")}})
        if points:
            out[cell] = (specs[0].name, points)
    return out


def convergence_label(cell: Cell, metric: str) -> str:
    return f"{cell[0]} | {cell[1]} | {cell[2]} — {metric}"


def convergence_points(
    rows: Iterable[dict[str, Any]],
    specs_for: SpecsFor,
    *,
    checkpoints: int = 12,
    n_resamples: int = 300,
    confidence: float = 0.95,
    max_cells: int | None = 24,
) -> dict[str, list[dict[str, float]]]:
    """The convergence of run-directory rows (with `finished_at`), keyed by a label "model | benchmark
    | setting — metric": the report's convergence charts."""
    table = CellTable()
    table.add_rows(rows)
    by_cell = convergence_from_table(
        table, specs_for, checkpoints=checkpoints, n_resamples=n_resamples, confidence=confidence, max_cells=max_cells
    )
    return {convergence_label(cell, metric): pts for cell, (metric, pts) in by_cell.items()}