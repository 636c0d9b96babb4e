"""Bootstrap confidence intervals for sweep cells (DESIGN §6).

The sampling unit of a benchmark is the task; seeds are repeated measurements nested inside a
task. The default resample (`resample="tasks"`) is the cluster bootstrap: draw tasks with
replacement, each drawn task bringing all its episodes (seeds) unchanged (Davison & Hinkley 1997,
§3.8, strategy 2). Under the random-effects model of a sweep (task effect + seed noise) it is
consistent for the variance of a cell's estimate, var_task / T + var_within / (T S), because a
task's total already carries its seeds' noise (Field & Welsh 2007, JRSS-B 69(3)). Measured over
1,000 simulated sweeps (`tests/evaluator/test_coverage.py`), its 95% intervals cover the truth
93-97% of the time with one seed, three seeds and ragged seed counts, for mean and ratio metrics.

The two-stage draw DESIGN §6 first described (`resample="tasks_then_seeds"`: tasks, then
independently for every drawn copy of a task, its seeds with replacement) is kept as an option,
not the default: it counts the within-task variance twice (once in the spread of the task means,
once more in the seed draw), so with several seeds its intervals are too wide. With 60 tasks x 3
seeds and a within-task variance four times the between-task one it covered 97.7% at 95% nominal,
its intervals about 17% wider than they should be. With one seed per task the two coincide.
Intervals are percentile intervals over `n_resamples` resamples.

Every metric of a cell is a function of per-resample *totals* of a few per-episode columns:
a `mean` metric is sum(value) / count(defined) and a `ratio` metric is sum(numerator) /
sum(denominator), both recomputed on each resample (a ratio is never averaged per episode).
So the bootstrap only needs the column totals of each resample, which it draws in vectorised
chunks (see "resampling engine" below), and evaluates every metric from them; no Python loop
runs per resample. The cluster bootstrap is the same engine on one row per task: the task's
column totals and its episode count (`_collapse_tasks`), which is exact, since a resample's
totals are sums of its drawn tasks' totals.

Results do not depend on the order of the input rows (episodes are sorted by task, then seed),
so a resumed run whose Parquet parts come back in another order gets the same intervals.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from statistics import NormalDist
from typing import Any, Literal, get_args

import numpy as np
from pydantic import BaseModel

from toolsweep.evaluator.protocols import MetricSpec

__all__ = [
    "Estimate",
    "summarize_metrics",
    "paired_difference",
    "cell_summary",
    "summarize_cell",
    "Stratum",
    "composite_estimate",
    "Resample",
    "RESAMPLE_SCHEMES",
]

Resample = Literal["tasks", "tasks_then_seeds"]
"""How a bootstrap resample is drawn: "tasks" (the cluster bootstrap, the default) or
"tasks_then_seeds" (the two-stage draw, over-covering with several seeds; see the module docstring)."""
RESAMPLE_SCHEMES: tuple[str, ...] = get_args(Resample)

Interval = Literal["studentized", "bca", "percentile", "hull"]
"""How the interval is read off the resamples: "studentized" (the default: the bootstrap-t of the
cluster bootstrap, each resample's estimate divided by its own task-clustered standard error, from the
leave-one-task-out jackknife's influence values summed over the tasks it drew), "bca" (bias-corrected
and accelerated, Efron 1987, the acceleration from the same jackknife) or "percentile". Chosen by the
coverage table of `bench/interval_coverage.py`: for a right-skewed metric at 40-60 tasks the percentile
interval misses more on the long side (a skewed Beta at 40 tasks: 91.2% covered, 7.2% above the truth and
1.6% below) and BCa only partly corrects it; the studentized interval follows the skew (its resamples that
draw the heavy tasks are also the wide ones) and holds 93-97% on the binary, ratio, ragged and skewed
designs (a lognormal task effect at 50 tasks: 93.7% over 4,000 sweeps). A rescaled
standard error (a t-quantile, sqrt(n / (n - 1))) would change nothing here: it divides the t* of every
resample as it multiplies the data's error. Under the two-stage draw ("tasks_then_seeds") a resample's
tasks are not whole, so it falls back to BCa.

"hull" (the paired difference's default) is the smallest interval holding both the studentized and
the BCa interval, its p-value the larger of theirs (so the two still agree). Two models compared on the
same tasks and seeds share most of their luck: where one episode's outcome decides both (a common random
number), most per-task differences are exactly 0 and the few that are not make the difference's
bootstrap distribution a skewed count, on which the studentized interval is too short on the upper side
(40 tasks x 2 seeds, true difference .05: 88.9% covered) while BCa holds (96.2%); drawn independently, BCa
is the one that runs short (30 tasks x 3 seeds: 92.1-92.6%) and the studentized one holds. The hull
covered 93.0-98.1% on shared draws where at least three episodes are expected to differ, 94.0-96.5% on
independent ones (`bench/paired_coverage.py`, 1,000 sweeps a design). Where too few episodes differ
(fewer than about four expected) no bootstrap interval can cover: every resample of a difference seen
nowhere is 0."""
INTERVALS: tuple[str, ...] = get_args(Interval)


def min_tasks_for_interval(confidence: float) -> int:
    """The fewest tasks a cluster-bootstrap interval can stand on: with k tasks, a resample is one task
    drawn k times with probability k^(1-k), and while that exceeds the tail (1 - confidence) / 2 the
    interval's ends are single tasks' values, not a sampling distribution (4 tasks at 95%, 5 at 99%).
    Below it, intervals of paired differences and their p-values are withheld: no decision is made."""
    tail = (1.0 - confidence) / 2.0
    k = 2
    while k ** (1 - k) >= tail:
        k += 1
    return k

# Draws per chunk of resamples: large enough to amortise numpy's per-call overhead, small enough
# that a chunk's index arrays stay in L2/L3 cache (2^18 was fastest of 2^14..2^22 here).
_CHUNK_DRAWS = 1 << 18
# Balanced tasks with s seeds draw a task and its s seed positions in one integer when s^s is
# at most this (s <= 6); the digit table stays small enough to sit in cache.
_MAX_DIGIT_CODES = 1 << 16
# Beyond this many distinct seed counts per task, the per-group loop costs more than drawing
# every resample as one flat ragged array.
_MAX_SIZE_GROUPS = 12


class Estimate(BaseModel):
    """A point estimate with its bootstrap percentile interval.

    `n` counts the episodes that entered the estimate (for a `mean` metric, those where the value
    is defined; for a `ratio` metric, those with both numerator and denominator defined). All
    three numbers are NaN when the metric is undefined on the data (no episode entered, or a ratio
    whose denominators sum to zero)."""

    value: float
    ci_low: float
    ci_high: float
    n: int
    p_value: float | None = None
    """For a paired difference: the two-sided p-value of "no difference", read off the same resamples as
    the interval (it is below 1 - confidence exactly when the interval excludes 0). None elsewhere;
    NaN where the interval is withheld (too few tasks)."""
    tasks: int | None = None
    """For a paired difference: the tasks that entered it (fewer than `min_tasks_for_interval` and the
    interval and p-value are withheld, which the report says). None elsewhere."""


# ----------------------------------------------------------------------------- layout of tasks


@dataclass(frozen=True)
class _Layout:
    """Episodes sorted by (task, seed): task t owns rows offsets[t] : offsets[t] + sizes[t]."""

    order: np.ndarray  # permutation of the input rows into sorted order
    sizes: np.ndarray  # episodes per task, int64, all >= 1
    offsets: np.ndarray  # first sorted row of each task

    @property
    def n_tasks(self) -> int:
        return int(self.sizes.size)

    @property
    def n_episodes(self) -> int:
        return int(self.order.size)


def _as_str_array(task_ids: Sequence[str] | np.ndarray) -> np.ndarray:
    arr = np.asarray(task_ids)
    if arr.dtype.kind not in "US":
        arr = np.asarray([str(t) for t in arr], dtype=np.str_)
    return arr


def _layout(task_ids: Sequence[str] | np.ndarray, seeds: Sequence[int] | np.ndarray) -> _Layout:
    tasks = _as_str_array(task_ids)
    seeds_arr = np.asarray(seeds, dtype=np.int64)
    if tasks.ndim != 1 or seeds_arr.ndim != 1 or tasks.size != seeds_arr.size:
        raise ValueError(
            f"task_ids and seeds must be 1-D and of equal length, got {tasks.shape} and "
            f"{seeds_arr.shape}"
        )
    if tasks.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return _Layout(order=empty, sizes=empty, offsets=empty)
    _, codes = np.unique(tasks, return_inverse=True)
    codes = codes.reshape(-1)
    order = np.lexsort((seeds_arr, codes))
    sizes = np.bincount(codes).astype(np.int64)
    offsets = np.zeros_like(sizes)
    np.cumsum(sizes[:-1], out=offsets[1:])
    return _Layout(order=order, sizes=sizes, offsets=offsets)


# ----------------------------------------------------------------------------- resampling engine
#
# The engine draws the two-stage bootstrap on a layout of episodes; the cluster bootstrap is the
# same engine on a layout of one row per task (`_collapse_tasks`), where the two stages coincide.
# Two exact ways to draw it:
# - by index: draw task indices, then seed indices inside every drawn task, and sum each column
#   at the drawn episodes (cost ~ episodes per resample);
# - by type: when episodes take few distinct column values (success flags, small counts), tasks
#   with the same multiset of episode values are interchangeable, so a resample is a multinomial
#   count of each task type, then a multinomial count of each episode value inside the drawn copies
#   of a type (cost ~ number of types, independent of the number of episodes).
# `_resampled_totals` picks the cheaper one from measured per-draw costs.

# Rough per-draw costs on one core (ns), measured with numpy 2.x: a bounded integer, one gathered
# and summed float, one binomial step of a multinomial draw.
_NS_INTEGER = 6.0
_NS_GATHER = 3.0
_NS_BINOMIAL = 110.0
# Beyond this many task types the per-type Python calls dominate; use indices.
_MAX_TASK_TYPES = 512


def _resampled_totals(
    layout: _Layout,
    columns: np.ndarray,
    n_resamples: int,
    rng: np.random.Generator,
    method: str = "auto",
) -> tuple[np.ndarray, np.ndarray]:
    """Column totals of every two-stage resample of `layout` (tasks, then seeds within each copy).

    `columns` is (n_episodes, k) in sorted order. Returns (totals (B, k), drawn (B,)), where
    drawn[b] is the number of episodes in resample b (it varies when tasks differ in seed count).
    `method` is "auto", "index" or "type" (the last two exist for tests and benchmarks).
    """
    if method not in ("auto", "index", "type"):
        raise ValueError(f"method must be 'auto', 'index' or 'type', got {method!r}")
    if method != "index":
        plan = _TypePlan.build(layout, columns)
        if plan is not None and (method == "type" or plan.cheaper_than_index(layout, columns)):
            return plan.totals(n_resamples, rng)
        if method == "type":
            raise ValueError("too many distinct episode values for the by-type bootstrap")
    return _index_totals(layout, columns, n_resamples, rng)


@dataclass(frozen=True)
class _TaskType:
    count: int  # tasks of this type
    size: int  # episodes per task of this type
    probs: np.ndarray  # share of each distinct episode row inside the task
    rows: np.ndarray  # (distinct rows, k) column values of those episodes


@dataclass(frozen=True)
class _TypePlan:
    types: list[_TaskType]
    n_tasks: int

    @staticmethod
    def build(layout: _Layout, columns: np.ndarray) -> _TypePlan | None:
        n_tasks, n_eps = layout.n_tasks, layout.n_episodes
        if n_eps == 0:
            return None
        s_max = int(layout.sizes.max())
        if n_tasks * s_max > 4 * n_eps + 1024:  # very ragged: the signature matrix would explode
            return None
        rows, etype = np.unique(columns, axis=0, return_inverse=True)
        etype = etype.reshape(-1)
        if rows.shape[0] > _MAX_TASK_TYPES:
            return None
        # A task's signature: its episodes' row ids, sorted, padded with -1 to s_max.
        task_of = np.repeat(np.arange(n_tasks), layout.sizes)
        pos = np.arange(n_eps) - np.repeat(layout.offsets, layout.sizes)
        by_type = np.lexsort((etype, task_of))
        sig = np.full((n_tasks, s_max), -1, dtype=np.int64)
        sig[task_of, pos] = etype[by_type]
        sigs, counts = np.unique(sig, axis=0, return_counts=True)
        if sigs.shape[0] > _MAX_TASK_TYPES:
            return None
        types = []
        for sig_row, count in zip(sigs, counts.tolist()):
            ids, per = np.unique(sig_row[sig_row >= 0], return_counts=True)
            size = int(per.sum())
            types.append(_TaskType(count=count, size=size, probs=per / size, rows=rows[ids]))
        return _TypePlan(types=types, n_tasks=n_tasks)

    def cheaper_than_index(self, layout: _Layout, columns: np.ndarray) -> bool:
        draws = len(self.types) + sum(t.rows.shape[0] for t in self.types if t.rows.shape[0] > 1)
        by_type = _NS_BINOMIAL * draws
        slots = layout.n_episodes if int(layout.sizes.max()) > 1 else 0
        by_index = _NS_INTEGER * (layout.n_tasks + slots) + _NS_GATHER * layout.n_episodes * max(
            1, columns.shape[1]
        )
        return by_type < by_index

    def totals(self, n_resamples: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        k = self.types[0].rows.shape[1]
        type_p = np.array([t.count for t in self.types], dtype=np.float64) / self.n_tasks
        copies = rng.multinomial(self.n_tasks, type_p, size=n_resamples)  # (B, task types)
        totals = np.zeros((n_resamples, k), dtype=np.float64)
        drawn = np.zeros(n_resamples, dtype=np.float64)
        for j, t in enumerate(self.types):
            n_draws = copies[:, j] * t.size
            drawn += n_draws
            if t.rows.shape[0] == 1:
                counts = n_draws[:, None]
            else:
                counts = rng.multinomial(n_draws, t.probs)
            totals += counts.astype(np.float64) @ t.rows
        return totals, drawn


def _index_totals(
    layout: _Layout, columns: np.ndarray, n_resamples: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """The bootstrap by index arrays, in chunks of resamples.

    Tasks are grouped by seed count s. A resample first splits its n_tasks task draws among the
    groups (a multinomial count c_s), then draws copies within each group as if it were balanced:
    m_s = max over the chunk of c_s copies per resample, of which the first c_s are kept (the
    others point at an all-zero block). Copies are independent, so keeping the first c_s is
    exactly c_s draws. A copy's task and all its seed positions come from one integer when s^s is
    small (its base-s digits are the positions).
    """
    n_tasks, n_eps = layout.n_tasks, layout.n_episodes
    k = columns.shape[1]
    sizes, offsets = layout.sizes, layout.offsets
    groups = np.unique(sizes)
    if groups.size > _MAX_SIZE_GROUPS:
        return _flat_index_totals(layout, columns, n_resamples, rng)
    single = groups.size == 1
    s_max = int(groups[-1])
    # One contiguous array per column (gathering from 1-D arrays is several times faster than
    # gathering rows of a 2-D one), followed by s_max zeros for the copies a resample drops.
    cols = [np.concatenate([columns[:, j], np.zeros(s_max)]) for j in range(k)]
    group_offsets = [offsets[sizes == s] for s in groups.tolist()]
    group_p = np.array([g.size for g in group_offsets], dtype=np.float64) / n_tasks
    digit_tables = {
        s: np.stack([(np.arange(s**s) // s**j) % s for j in range(s)])
        for s in groups.tolist()
        if 1 < s and s**s <= _MAX_DIGIT_CODES
    }
    chunk = max(1, _CHUNK_DRAWS // max(1, n_eps))

    totals = np.zeros((n_resamples, k), dtype=np.float64)
    drawn = np.empty(n_resamples, dtype=np.float64)
    for start in range(0, n_resamples, chunk):
        b = min(chunk, n_resamples - start)
        out = totals[start : start + b]
        if single:
            counts = np.full((b, 1), n_tasks, dtype=np.int64)
        else:
            counts = rng.multinomial(n_tasks, group_p, size=b)
        drawn[start : start + b] = counts @ groups
        for gi, s in enumerate(groups.tolist()):
            c = counts[:, gi]
            m = int(c.max())
            if m == 0:
                continue
            offs = group_offsets[gi]
            digits = digit_tables.get(s)
            if digits is not None:
                r = rng.integers(0, offs.size * digits.shape[1], size=(b, m))
                local, code = np.divmod(r, digits.shape[1])
            else:
                local = rng.integers(0, offs.size, size=(b, m))
            # Balanced single-seed tasks: the offsets are 0..n-1, so the draw is the index.
            base = local if single and s == 1 else np.take(offs, local)
            if not single:
                base[np.arange(m)[None, :] >= c[:, None]] = n_eps  # dropped copies: zero block
            if s == 1:
                eidx = base
            else:
                eidx = np.empty((b, m, s), dtype=np.int64)
                if digits is not None:
                    for j in range(s):
                        np.add(base, np.take(digits[j], code), out=eidx[:, :, j])
                else:
                    np.add(base[:, :, None], rng.integers(0, s, size=(b, m, s)), out=eidx)
                eidx = eidx.reshape(b, m * s)
            for j, col in enumerate(cols):
                out[:, j] += np.take(col, eidx).sum(axis=1)
    return totals, drawn


def _flat_index_totals(
    layout: _Layout, columns: np.ndarray, n_resamples: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """The bootstrap by index arrays for tasks with many different seed counts: every resample's
    episodes in one flat array, summed per resample with reduceat."""
    n_tasks, n_eps = layout.n_tasks, layout.n_episodes
    sizes, offsets = layout.sizes, layout.offsets
    cols = [np.ascontiguousarray(columns[:, j]) for j in range(columns.shape[1])]
    chunk = max(1, _CHUNK_DRAWS // max(1, n_eps))
    totals = np.empty((n_resamples, len(cols)), dtype=np.float64)
    drawn = np.empty(n_resamples, dtype=np.float64)
    for start in range(0, n_resamples, chunk):
        b = min(chunk, n_resamples - start)
        tidx = rng.integers(0, n_tasks, size=(b, n_tasks))
        tsz = sizes[tidx].reshape(-1)
        row_len = tsz.reshape(b, n_tasks).sum(axis=1)
        drawn[start : start + b] = row_len
        rep_sz = np.repeat(tsz, tsz)
        eidx = np.repeat(offsets[tidx].reshape(-1), tsz)
        # Seed positions as floor(u * s) from 53-bit uniform floats: uniform to within 2^-53 and
        # several times faster than numpy's array-bounded integers.
        eidx += (rng.random(rep_sz.shape) * rep_sz).astype(np.int64)
        row_starts = np.zeros(b, dtype=np.int64)
        np.cumsum(row_len[:-1], out=row_starts[1:])
        for j, col in enumerate(cols):
            totals[start : start + b, j] = np.add.reduceat(np.take(col, eidx), row_starts)
    return totals, drawn


def _collapse_tasks(layout: _Layout, columns: np.ndarray) -> tuple[_Layout, np.ndarray]:
    """One row per task for the cluster bootstrap: the task's column totals, then its episode count
    as a last column. Drawing these rows with replacement is drawing tasks with all their seeds, and
    a resample's episode count is the sum of the last column (tasks may differ in seed count)."""
    n_tasks = layout.n_tasks
    if n_tasks == 0:
        sums = np.zeros((0, columns.shape[1]), dtype=np.float64)
    elif columns.shape[1] == 0:
        sums = np.zeros((n_tasks, 0), dtype=np.float64)
    else:
        sums = np.add.reduceat(columns, layout.offsets, axis=0)
    rows = np.column_stack([sums, layout.sizes.astype(np.float64)])
    ones = np.ones(n_tasks, dtype=np.int64)
    return _Layout(order=np.arange(n_tasks), sizes=ones, offsets=np.arange(n_tasks)), rows


def _drawn_totals(
    layout: _Layout,
    columns: np.ndarray,
    n_resamples: int,
    rng: np.random.Generator,
    method: str,
    resample: str,
) -> tuple[np.ndarray, np.ndarray]:
    """Column totals and episode counts of every resample under the given scheme."""
    if resample == "tasks_then_seeds":
        return _resampled_totals(layout, columns, n_resamples, rng, method)
    task_layout, rows = _collapse_tasks(layout, columns)
    totals, _ = _resampled_totals(task_layout, rows, n_resamples, rng, method)
    return totals[:, :-1], totals[:, -1]


def _check_resample(resample: str) -> None:
    if resample not in RESAMPLE_SCHEMES:
        raise ValueError(
            f"resample must be one of {', '.join(map(repr, RESAMPLE_SCHEMES))}, got {resample!r}: "
            "'tasks' (the cluster bootstrap, the default) or 'tasks_then_seeds' (the two-stage draw)"
        )


# ----------------------------------------------------------------------------- metrics


def _spec_columns(
    spec: MetricSpec, values: Mapping[str, np.ndarray], n: int
) -> tuple[list[np.ndarray], np.ndarray]:
    """Per-episode arrays a metric reads, and which episodes enter it (all arrays defined)."""
    arrays = []
    for key in spec.keys():
        if key not in values:
            raise ValueError(
                f"metric {spec.name!r} needs the per-episode key {key!r}, which is not among "
                f"the episode values {sorted(values)}"
            )
        arr = np.asarray(values[key], dtype=np.float64).reshape(-1)
        if arr.size != n:
            raise ValueError(
                f"per-episode values {key!r} have {arr.size} entries but there are {n} episodes"
            )
        arrays.append(arr)
    entered = np.logical_and.reduce([np.isfinite(a) for a in arrays])
    return arrays, entered


class _Columns:
    """Deduplicated per-episode columns (in sorted episode order) whose totals the metrics need."""

    def __init__(self, order: np.ndarray) -> None:
        self._order = order
        self._cols: list[np.ndarray] = []
        self._index: dict[bytes, int] = {}

    def add(self, arr: np.ndarray) -> int:
        col = np.ascontiguousarray(arr[self._order], dtype=np.float64)
        key = col.tobytes()
        if key not in self._index:
            self._index[key] = len(self._cols)
            self._cols.append(col)
        return self._index[key]

    def matrix(self) -> np.ndarray:
        n = self._order.size
        if not self._cols:
            return np.zeros((n, 0), dtype=np.float64)
        return np.stack(self._cols, axis=1)


# A statistic maps (totals (B, k), drawn (B,)) to one value per resample.
_Statistic = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den != 0, num / np.where(den != 0, den, 1.0), np.nan)


def _metric_statistic(
    spec: MetricSpec, arrays: list[np.ndarray], entered: np.ndarray, cols: _Columns
) -> _Statistic:
    """The metric as a function of column totals; excluded episodes contribute zero."""
    zeroed = [np.where(entered, a, 0.0) for a in arrays]
    if spec.kind == "ratio":
        i_num, i_den = cols.add(zeroed[0]), cols.add(zeroed[1])
        return _ratio_of_columns(i_num, i_den)
    i_val = cols.add(zeroed[0])
    if entered.all():  # the count is the number of drawn episodes: no column needed
        return _ratio_of_columns(i_val, None)
    return _ratio_of_columns(i_val, cols.add(entered.astype(np.float64)))


def _ratio_of_columns(i_num: int, i_den: int | None) -> _Statistic:
    """sum(numerator) / sum(denominator) of a resample (`i_den` None: over the episodes drawn). Its two
    columns are kept on the function: the studentized interval recomputes the clustered error from them."""
    def stat(t: np.ndarray, d: np.ndarray) -> np.ndarray:
        return _ratio(t[:, i_num], d if i_den is None else t[:, i_den])

    stat.columns = (i_num, i_den)  # type: ignore[attr-defined]
    return stat


def _percentile_interval(stats: np.ndarray, confidence: float) -> tuple[float, float]:
    """Percentile interval over the resamples where the statistic is defined."""
    finite = stats[np.isfinite(stats)]
    if finite.size == 0:
        return math.nan, math.nan
    alpha = 1.0 - confidence
    lo, hi = np.percentile(finite, [100.0 * alpha / 2.0, 100.0 * (1.0 - alpha / 2.0)])
    return float(lo), float(hi)


_NORMAL = NormalDist()


@dataclass(frozen=True)
class _BCa:
    """The two constants of a BCa interval: the bias correction z0 (where the point estimate sits in the
    resamples) and the acceleration a (the skewness of the leave-one-task-out jackknife)."""

    z0: float
    a: float

    @staticmethod
    def fit(finite: np.ndarray, point: float, jackknife: np.ndarray) -> _BCa | None:
        below = (np.count_nonzero(finite < point) + 0.5 * np.count_nonzero(finite == point)) / finite.size
        jack = jackknife[np.isfinite(jackknife)]
        if not 0.0 < below < 1.0 or jack.size < 2:
            return None  # every resample on one side of the estimate: no bias correction can be read
        dev = jack.mean() - jack
        spread = float((dev ** 2).sum())
        a = float((dev ** 3).sum()) / (6.0 * spread ** 1.5) if spread > 0 else 0.0
        return _BCa(_NORMAL.inv_cdf(below), a)

    def level(self, nominal: float) -> float:
        """The percentile level BCa reads for a nominal one."""
        z = self.z0 + _NORMAL.inv_cdf(nominal)
        denom = 1.0 - self.a * z
        if denom <= 0:
            return 1.0 if z > 0 else 0.0
        return _NORMAL.cdf(self.z0 + z / denom)

    def nominal(self, level: float) -> float:
        """The inverse of `level`: the nominal level at which BCa reads the `level` percentile."""
        w = _NORMAL.inv_cdf(min(max(level, 1e-300), 1.0 - 1e-16)) - self.z0
        denom = 1.0 + self.a * w
        if denom <= 0:
            return 1.0 if w > 0 else 0.0
        return _NORMAL.cdf(w / denom - self.z0)


def _interval(
    stats: np.ndarray, point: float, jackknife: np.ndarray, confidence: float, interval: str,
    null: float | None = None,
) -> tuple[float, float, float | None]:
    """(low, high, p-value of `null` or None) over the resamples where the statistic is defined. The
    p-value is the interval inverted: the smallest 1 - confidence whose interval leaves `null` out, so
    the two always agree."""
    finite = stats[np.isfinite(stats)]
    if finite.size == 0:
        return math.nan, math.nan, (math.nan if null is not None else None)
    bca = _BCa.fit(finite, point, jackknife) if interval == "bca" else None
    if bca is None:
        lo, hi = _percentile_interval(finite, confidence)
    else:
        alpha = 1.0 - confidence
        lo, hi = np.percentile(finite, [100.0 * bca.level(alpha / 2.0), 100.0 * bca.level(1.0 - alpha / 2.0)])
    p = None
    if null is not None:
        below = (np.count_nonzero(finite < null) + 0.5 * np.count_nonzero(finite == null)) / finite.size
        if below <= 0.0 or below >= 1.0:
            p = min(1.0, 2.0 / (finite.size + 1))  # every resample on one side of the null
        else:
            beta = bca.nominal(below) if bca is not None else below
            p = min(1.0, 2.0 * min(beta, 1.0 - beta))
    return float(lo), float(hi), p


def _check_interval(interval: str) -> None:
    if interval not in INTERVALS:
        raise ValueError(f"interval must be one of {', '.join(map(repr, INTERVALS))}, got {interval!r}")


def _check_options(n_resamples: int, confidence: float) -> None:
    if not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")


def _estimates(
    layout: _Layout,
    cols: _Columns,
    statistics: list[tuple[_Statistic, int]],
    n_resamples: int,
    confidence: float,
    seed: int,
    method: str = "auto",
    resample: str = "tasks",
    interval: str = "studentized",
    null: float | None = None,
) -> list[Estimate]:
    """Point estimates on the data and intervals over shared resamples (with `null`, also the p-value
    of that value from the same resamples)."""
    matrix = cols.matrix()
    n = layout.n_episodes
    point_totals = matrix.sum(axis=0, keepdims=True)
    point_drawn = np.array([float(n)])
    points = [
        float(stat(point_totals, point_drawn)[0]) if n_entered > 0 else math.nan
        for stat, n_entered in statistics
    ]
    if interval in ("studentized", "hull") and resample != "tasks":
        interval = "bca"  # a two-stage resample does not draw whole tasks: no clustered error per resample
    jacks: list[np.ndarray] = [np.zeros(0)] * len(statistics)
    k = layout.n_tasks
    if interval != "percentile" and k > 0:
        # leave one task out: the data's totals less that task's (its seeds go with it)
        _, task_rows = _collapse_tasks(layout, matrix)
        jack_totals, jack_drawn = point_totals - task_rows[:, :-1], float(n) - task_rows[:, -1]
        with np.errstate(divide="ignore", invalid="ignore"):
            jacks = [stat(jack_totals, jack_drawn) for stat, _ in statistics]
    studentizers: list[_Studentizer | None] = [None] * len(statistics)
    if interval in ("studentized", "hull") and k > 1:
        # per-task columns written on each task's first episode, so that a resample's totals of them give
        # its own task-clustered variance: for a ratio of sums its tasks' Y^2, YN and N^2 (the variance
        # recomputed at the resample's own estimate); otherwise the jackknife influence L and L^2
        _, task_rows = _collapse_tasks(layout, matrix)
        extra: list[np.ndarray] = []
        first = matrix.shape[1]
        for i, ((stat, _), jack) in enumerate(zip(statistics, jacks)):
            parts = getattr(stat, "columns", None)
            if parts is not None:
                y = task_rows[:, parts[0]]
                m = task_rows[:, -1] if parts[1] is None else task_rows[:, parts[1]]
                studentizers[i] = _Studentizer(first + len(extra), parts[1], y, m)
                per_task = [y * y, y * m, m * m]
            elif np.isfinite(jack).all():
                infl = (k - 1) * (jack.mean() - jack)
                studentizers[i] = _Studentizer(first + len(extra), None, infl, None)
                per_task = [infl, infl * infl]
            else:
                continue
            for col in per_task:
                full = np.zeros(n)
                full[layout.offsets] = col
                extra.append(full)
        if extra:
            matrix = np.column_stack([matrix, *extra])
            method = "index"
    totals = drawn = None
    if any(math.isfinite(v) for v in points):
        rng = np.random.default_rng(seed)
        totals, drawn = _drawn_totals(layout, matrix, int(n_resamples), rng, method, resample)
    out = []
    for (stat, n_entered), value, jack, st in zip(statistics, points, jacks, studentizers):
        if not math.isfinite(value) or totals is None or drawn is None:
            out.append(Estimate(value=math.nan, ci_low=math.nan, ci_high=math.nan, n=n_entered,
                                p_value=math.nan if null is not None else None))
            continue
        stats = stat(totals, drawn)
        if st is not None:
            se, se_star = st.errors(value, stats, totals, drawn, k)
            lo, hi, p = _studentized(stats, value, se, se_star, confidence, null)
            if interval == "hull":
                lo, hi, p = _hull((lo, hi, p), _interval(stats, value, jack, confidence, "bca", null))
        else:
            method_here = "bca" if interval in ("studentized", "hull") else interval
            lo, hi, p = _interval(stats, value, jack, confidence, method_here, null)
        out.append(Estimate(value=value, ci_low=lo, ci_high=hi, n=n_entered, p_value=p))
    return out


def _hull(first: tuple[float, float, float | None],
          second: tuple[float, float, float | None]) -> tuple[float, float, float | None]:
    """The smallest interval holding both, and the larger p-value: the hull leaves a value out only
    where both intervals do."""
    p = None if first[2] is None or second[2] is None else max(first[2], second[2])
    return min(first[0], second[0]), max(first[1], second[1]), p


@dataclass(frozen=True)
class _Studentizer:
    """Where a statistic's per-task variance columns sit in the resampled totals, and what they hold:
    for a ratio of sums (`m` set) its tasks' numerator y and denominator m (columns y^2, ym, m^2; `den`
    the denominator's own column, None = the episodes drawn); otherwise its jackknife influence values
    (`y`; columns L, L^2)."""

    column: int
    den: int | None
    y: np.ndarray
    m: np.ndarray | None

    def errors(self, point: float, stats: np.ndarray, totals: np.ndarray, drawn: np.ndarray,
               k: int) -> tuple[float, np.ndarray]:
        """(standard error of the data's estimate, that of every resample), clustered by task."""
        c = self.column
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.m is None:
                se = math.sqrt(float((self.y ** 2).sum())) / k
                return se, np.sqrt(np.maximum(totals[:, c + 1] - totals[:, c] ** 2 / k, 0.0)) / k
            resid = self.y - point * self.m
            se = math.sqrt(float((resid ** 2).sum())) / float(self.m.sum())
            den = drawn if self.den is None else totals[:, self.den]
            ss = totals[:, c] - 2.0 * stats * totals[:, c + 1] + stats ** 2 * totals[:, c + 2]
            return se, np.sqrt(np.maximum(ss, 0.0)) / den


def _studentized(
    stats: np.ndarray, point: float, se: float, se_star: np.ndarray, confidence: float, null: float | None,
) -> tuple[float, float, float | None]:
    """The bootstrap-t interval: t* = (estimate* - estimate) / se*, with se* each resample's own
    task-clustered standard error, and the interval estimate - t*(1 - a/2) se, estimate - t*(a/2) se.
    With `null`, the p-value of that value: where the observed t falls among the t*, so it agrees with
    the interval."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t_star = (stats - point) / se_star
    t_star = t_star[np.isfinite(t_star)]
    if se == 0 or t_star.size == 0:
        return _interval(stats, point, np.zeros(0), confidence, "percentile", null)
    alpha = 1.0 - confidence
    t_lo, t_hi = np.percentile(t_star, [100.0 * alpha / 2.0, 100.0 * (1.0 - alpha / 2.0)])
    # an end beyond every resample's estimate is beyond what the data can give (a success rate over 1)
    finite = stats[np.isfinite(stats)]
    lowest, highest = float(finite.min()), float(finite.max())
    lo, hi = max(point - t_hi * se, lowest), min(point - t_lo * se, highest)
    p = None
    if null is not None:
        t_obs = (point - null) / se
        above = (np.count_nonzero(t_star > t_obs) + 0.5 * np.count_nonzero(t_star == t_obs)) / t_star.size
        p = min(1.0, max(2.0 * min(above, 1.0 - above), 2.0 / (t_star.size + 1)))
        if not lowest <= null <= highest:  # every resample on one side, as the clipped interval says
            p = min(p, 2.0 / (finite.size + 1))
    return float(lo), float(hi), p


def _by_type_is_cheaper(layout: _Layout, cols: _Columns, resample: str = "tasks") -> bool:
    matrix = cols.matrix()
    if resample == "tasks":
        layout, matrix = _collapse_tasks(layout, matrix)
    plan = _TypePlan.build(layout, matrix)
    return plan is not None and plan.cheaper_than_index(layout, matrix)


def summarize_metrics(
    task_ids: Sequence[str],
    seeds: Sequence[int],
    values: Mapping[str, np.ndarray],
    specs: Sequence[MetricSpec],
    *,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
    resample: Resample = "tasks",
    interval: Interval = "studentized",
) -> dict[str, Estimate]:
    """Each metric's point estimate and bootstrap interval (studentized by default, see `Interval`).

    `values` maps per-episode keys to arrays aligned with `task_ids`/`seeds`; NaN means the value
    is not defined for that episode, which then does not enter metrics reading that key.
    Resamples are drawn from `np.random.default_rng(seed)` under `resample` (the module docstring
    says why the cluster bootstrap, "tasks", is the default). Metrics with few distinct values
    (success flags, small counts) are each bootstrapped by type, the others together by index;
    every metric's interval is the full bootstrap of the scheme either way.
    """
    _check_options(n_resamples, confidence)
    _check_resample(resample)
    _check_interval(interval)
    layout = _layout(task_ids, seeds)
    n = layout.n_episodes
    inputs = [(spec, *_spec_columns(spec, values, n)) for spec in specs]

    def group(members: list[tuple[MetricSpec, list[np.ndarray], np.ndarray]]):
        cols = _Columns(layout.order)
        stats = [
            (_metric_statistic(sp, arrays, entered, cols), int(entered.sum()))
            for sp, arrays, entered in members
        ]
        return cols, stats

    result: dict[str, Estimate] = {}
    cols, stats = group(inputs)
    if len(inputs) <= 1 or _by_type_is_cheaper(layout, cols, resample):
        estimates = _estimates(layout, cols, stats, n_resamples, confidence, seed, resample=resample,
                               interval=interval)
        return {spec.name: est for (spec, _, _), est in zip(inputs, estimates)}
    rest = []
    for member in inputs:
        cols, stats = group([member])
        if _by_type_is_cheaper(layout, cols, resample):
            (result[member[0].name],) = _estimates(
                layout, cols, stats, n_resamples, confidence, seed, method="type", resample=resample,
                interval=interval,
            )
        else:
            rest.append(member)
    if rest:
        cols, stats = group(rest)
        estimates = _estimates(
            layout, cols, stats, n_resamples, confidence, seed, method="index", resample=resample,
            interval=interval,
        )
        result.update({spec.name: est for (spec, _, _), est in zip(rest, estimates)})
    return {spec.name: result[spec.name] for spec in specs}


def _cell_keys(
    task_ids: Sequence[str], seeds: Sequence[int], which: str
) -> dict[tuple[str, int], int]:
    tasks = _as_str_array(task_ids).tolist()
    seeds_list = np.asarray(seeds, dtype=np.int64).tolist()
    if len(tasks) != len(seeds_list):
        raise ValueError(f"model {which}: task_ids and seeds differ in length")
    index: dict[tuple[str, int], int] = {}
    for i, cell in enumerate(zip(tasks, seeds_list)):
        if cell in index:
            raise ValueError(
                f"model {which} has two episodes for task {cell[0]!r}, seed {cell[1]}; a paired "
                "comparison needs one episode per (task, seed)"
            )
        index[cell] = i
    return index


def paired_difference(
    task_ids_a: Sequence[str],
    seeds_a: Sequence[int],
    values_a: Mapping[str, np.ndarray],
    task_ids_b: Sequence[str],
    seeds_b: Sequence[int],
    values_b: Mapping[str, np.ndarray],
    spec: MetricSpec,
    *,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
    resample: Resample = "tasks",
    interval: Interval = "hull",
) -> Estimate:
    """Metric of model A minus metric of model B on the (task, seed) cells both ran.

    A cell enters when the metric is defined there for both models, so both sides are computed
    on exactly the same episodes. The bootstrap resamples cells jointly (the same tasks, and under
    "tasks_then_seeds" the same seeds, for A and B), which is what makes the difference paired.
    `n` counts the cells that entered. The interval is the "hull" of the studentized and BCa ones (see
    `Interval`: with shared seeds the studentized one alone covered 88.9%). `p_value` (of no difference)
    comes from the same resamples as the interval, so the two agree; on fewer tasks than `min_tasks_for_interval` both are withheld (NaN).
    """
    _check_options(n_resamples, confidence)
    _check_resample(resample)
    _check_interval(interval)
    index_a = _cell_keys(task_ids_a, seeds_a, "A")
    index_b = _cell_keys(task_ids_b, seeds_b, "B")
    shared = sorted(index_a.keys() & index_b.keys())
    ia = np.asarray([index_a[c] for c in shared], dtype=np.int64)
    ib = np.asarray([index_b[c] for c in shared], dtype=np.int64)
    arrays_a, entered_a = _spec_columns(spec, values_a, len(index_a))
    arrays_b, entered_b = _spec_columns(spec, values_b, len(index_b))
    entered = entered_a[ia] & entered_b[ib]
    layout = _layout([c[0] for c in shared], [c[1] for c in shared])
    cols = _Columns(layout.order)
    stat_a = _metric_statistic(spec, [a[ia] for a in arrays_a], entered, cols)
    stat_b = _metric_statistic(spec, [b[ib] for b in arrays_b], entered, cols)

    def difference(t: np.ndarray, d: np.ndarray) -> np.ndarray:
        return stat_a(t, d) - stat_b(t, d)

    statistics = [(difference, int(entered.sum()))]
    (est,) = _estimates(layout, cols, statistics, n_resamples, confidence, seed, resample=resample,
                        interval=interval, null=0.0)
    tasks_entered = len({c[0] for c, e in zip(shared, entered) if e})
    if tasks_entered < min_tasks_for_interval(confidence):
        return est.model_copy(update={"ci_low": math.nan, "ci_high": math.nan, "p_value": math.nan,
                                      "tasks": tasks_entered})
    return est.model_copy(update={"tasks": tasks_entered})


# ----------------------------------------------------------------------------- cell summaries


def _termination_counts(terminations: Mapping[str, int] | Iterable[Any]) -> dict[str, int]:
    def name(reason: Any) -> str:
        return str(reason.value) if isinstance(reason, Enum) else str(reason)

    if isinstance(terminations, Mapping):
        return {name(k): int(v) for k, v in terminations.items()}
    return dict(Counter(name(r) for r in terminations))


def cell_summary(
    model: str,
    benchmark: str,
    setting: str,
    task_ids: Sequence[str],
    seeds: Sequence[int],
    values: Mapping[str, np.ndarray],
    terminations: Mapping[str, int] | Iterable[Any],
    specs: Sequence[MetricSpec],
    **kwargs: Any,
) -> dict[str, Any]:
    """The summary of one (model, benchmark, setting) cell, as `Benchmark.report_tables` and
    summary.json take it. `terminations` is either one reason per episode or {reason: count};
    `kwargs` go to `summarize_metrics` (n_resamples, confidence, seed, resample). Values are unscaled."""
    from toolsweep.evaluator.design import cell_variance, pass_k_curve

    estimates = summarize_metrics(task_ids, seeds, values, specs, **kwargs)
    return {
        "model": model,
        "benchmark": benchmark,
        "setting": setting,
        "n": len(task_ids),
        "terminations": _termination_counts(terminations),
        "metrics": {
            name: {"value": e.value, "ci_low": e.ci_low, "ci_high": e.ci_high}
            for name, e in estimates.items()
        },
        # what the next sweep's design needs (`design`): task vs within-task variance, ICC, effective n
        "variance": cell_variance(task_ids, values, specs),
        # consistency across seeds, for success-like metrics (tau-bench's pass^k)
        "pass_k": pass_k_curve(task_ids, values, specs),
    }


# The name `Benchmark.report_tables` refers to.
summarize_cell = cell_summary


# ----------------------------------------------------------------------------- composites of several cells


@dataclass(frozen=True)
class Stratum:
    """The episodes of one cell that enter a composite: each episode's resampling unit (`keys`: a
    task, or a base case several settings share) and its value of a `mean` metric (NaN = left out)."""

    keys: Sequence[str]
    values: Sequence[float]


def _cluster_totals(stratum: Stratum, universe: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    sums = np.zeros(len(universe))
    counts = np.zeros(len(universe))
    values = np.asarray(stratum.values, dtype=float)
    if len(values) != len(stratum.keys):
        raise ValueError("a stratum needs one key per value")
    defined = np.isfinite(values)
    idx = np.asarray([universe[k] for k in stratum.keys], dtype=np.int64)
    np.add.at(sums, idx[defined], values[defined])
    np.add.at(counts, idx[defined], 1.0)
    return sums, counts


def composite_estimate(
    strata: Sequence[Stratum],
    combine: Callable[[np.ndarray], np.ndarray],
    *,
    paired: bool = False,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Estimate:
    """A statistic of several cells' means (a mean over horizons, a half-and-half mean, a difference
    between settings) with a bootstrap percentile interval.

    `combine` maps an array of per-stratum means, shape (len(strata), B), to shape (B,).
    Stratified (`paired=False`): every stratum resamples its own keys independently, as for cells
    drawn independently. Paired (`paired=True`): one draw of keys from the union of all strata is
    shared by every stratum, so a base case counts in all settings at once (a difference between
    settings on the same bases). A key's episodes (its seeds) move together.
    """
    _check_options(n_resamples, confidence)
    if not strata:
        raise ValueError("a composite needs at least one stratum")
    rng = np.random.default_rng(seed)
    if paired:
        universe = {k: i for i, k in enumerate(sorted({k for st in strata for k in st.keys}))}
        universes = [universe] * len(strata)
    else:
        universes = [{k: i for i, k in enumerate(sorted(set(st.keys)))} for st in strata]
    totals = [_cluster_totals(st, u) for st, u in zip(strata, universes)]
    with np.errstate(invalid="ignore", divide="ignore"):
        point_means = np.array([[s.sum() / c.sum() if c.sum() else math.nan] for s, c in totals])
        point = float(combine(point_means)[0])
    n = int(sum(c.sum() for _, c in totals))
    if not math.isfinite(point):
        return Estimate(value=math.nan, ci_low=math.nan, ci_high=math.nan, n=n)
    stats = np.empty(n_resamples)
    chunk = max(1, _CHUNK_DRAWS // (max(len(u) for u in universes) or 1))
    done = 0
    while done < n_resamples:
        b = min(n_resamples - done, chunk)
        shared = rng.integers(0, len(universes[0]), (b, len(universes[0]))) if paired else None
        means = np.empty((len(strata), b))
        for i, ((sums, counts), u) in enumerate(zip(totals, universes)):
            idx = shared if paired else rng.integers(0, max(len(u), 1), (b, len(u)))
            with np.errstate(invalid="ignore", divide="ignore"):
                means[i] = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)
        stats[done : done + b] = combine(means)
        done += b
    lo, hi = _percentile_interval(stats, confidence)
    return Estimate(value=point, ci_low=lo, ci_high=hi, n=n)
