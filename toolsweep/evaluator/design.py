"""The design of a sweep, read from its data: how much of a cell's variance is between tasks and how
much within a task (across seeds), how many tasks and seeds a target interval or a detectable paired
difference needs, which differences of a grid survive a multiplicity correction, and how consistent a
model is across seeds (pass^k).

Variance components follow the nested design of the bootstrap (`stats`): seeds within tasks. With one
episode per (task, seed), the seed's own effect and the residual (the model's sampling) cannot be told
apart: the within-task component is their sum, and is reported so. Components are the one-way
random-effects method-of-moments estimates (unbalanced ANOVA; Searle, Casella & McCulloch 1992, §3.5),
on the metric's per-episode contribution: its value for a `mean` metric, its linearised term
(numerator - R * denominator) / mean(denominator) for a `ratio` metric (the delta method), so that
Var(estimate) ~= var_task / T + var_within / (T * S) holds for both. That is also the variance the
default cluster bootstrap (`stats`, resample="tasks") estimates; the two-stage draw
("tasks_then_seeds") adds the within-task variance again, var_task / T + var_within (2S - 1) / (T S^2),
and planning for it uses that (`within_factor`). Power planning solves the formula; it is checked
against the bootstrap's interval widths on held-out seeds in the tests.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from toolsweep.evaluator.protocols import MetricSpec

Z = NormalDist().inv_cdf


@dataclass(frozen=True)
class VarianceComponents:
    """One metric of one cell: variance between tasks and within a task (seeds + residual)."""

    n_episodes: int
    n_tasks: int
    mean_seeds: float  # episodes per task, on average
    var_task: float  # NaN: one task, so the spread between tasks is not identifiable
    var_within: float | None  # None: every task has one episode, so it is not identifiable

    @property
    def icc(self) -> float | None:
        """Intra-class correlation: the share of the variance that is between tasks. None where it is
        undefined: a part not identifiable, or no variance at all (a metric every episode scores alike has
        no share to split; 0 would read as "the tasks agree and the seeds differ")."""
        if self.var_within is None:
            return None
        total = self.var_task + self.var_within
        # `total > 0` fails both for NaN (one task: no spread between tasks) and for 0 (no variance at all)
        return self.var_task / total if total > 0 else None

    @property
    def design_effect(self) -> float | None:
        icc = self.icc
        return None if icc is None else 1.0 + (self.mean_seeds - 1.0) * icc

    @property
    def effective_n(self) -> float | None:
        """Independent episodes the cell is worth: episodes / design effect (tasks when seeds agree)."""
        deff = self.design_effect
        return None if deff is None or deff <= 0 else self.n_episodes / deff

    def variance_of_mean(self, tasks: int, seeds: float, resample: str = "tasks") -> float:
        """Var of the cell's estimate with `tasks` tasks and `seeds` episodes each, as the bootstrap
        scheme `resample` measures it (see `within_factor`)."""
        within = (self.var_within or 0.0) * within_factor(seeds, resample)
        return self.var_task / tasks + within / (tasks * seeds)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(icc=self.icc, design_effect=self.design_effect, effective_n=self.effective_n)
        return out


def within_factor(seeds: float, resample: str = "tasks") -> float:
    """How many times the bootstrap scheme counts the within-task term var_within / (T S): once for the
    cluster bootstrap ("tasks"); (2S - 1) / S for the two-stage draw ("tasks_then_seeds"), whose task
    means already carry var_within / S and whose seed redraw adds the within-task spread (ddof 0,
    var_within (S - 1) / S) once more."""
    if resample == "tasks":
        return 1.0
    if resample == "tasks_then_seeds":
        return (2.0 * seeds - 1.0) / seeds
    raise ValueError(f"resample must be 'tasks' or 'tasks_then_seeds', got {resample!r}")


def contributions(spec: MetricSpec, values: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(per-episode contribution, entered mask) of a metric: values for a mean, the linearised ratio
    term for a ratio (an episode enters a ratio when its denominator is positive)."""
    if spec.kind == "ratio":
        num_key, den_key = spec.keys()
        num = np.nan_to_num(np.asarray(values[num_key], dtype=float))
        den = np.nan_to_num(np.asarray(values[den_key], dtype=float))
        entered = np.ones(len(num), dtype=bool)
        total_den = den.sum()
        if total_den <= 0:
            return np.zeros(len(num)), np.zeros(len(num), dtype=bool)
        ratio = num.sum() / total_den
        return (num - ratio * den) / den.mean() + ratio, entered
    v = np.asarray(values[spec.name], dtype=float)
    entered = np.isfinite(v)
    return np.where(entered, v, 0.0), entered


def variance_components(task_ids: Sequence[str] | np.ndarray, y: np.ndarray) -> VarianceComponents:
    """Method-of-moments components of `y` grouped by task (unbalanced one-way random effects)."""
    y = np.asarray(y, dtype=float)
    _, task = np.unique(np.asarray(task_ids), return_inverse=True)
    k = int(task.max()) + 1 if len(task) else 0
    n = len(y)
    if n == 0:
        return VarianceComponents(0, 0, 0.0, math.nan, None)
    counts = np.bincount(task, minlength=k).astype(float)
    means = np.bincount(task, weights=y, minlength=k) / counts
    grand = y.mean()
    if k < 2:  # one task: no spread between tasks to read (NaN, never a 0 that reads as "no spread")
        within = float(((y - means[task]) ** 2).sum() / (n - k)) if n > k else None
        return VarianceComponents(n, k, n / max(k, 1), math.nan, within)
    msb = float((counts * (means - grand) ** 2).sum() / (k - 1))
    if n == k:  # one episode per task: the total variance, all of it attributed to tasks
        return VarianceComponents(n, k, 1.0, msb, None)
    msw = float(((y - means[task]) ** 2).sum() / (n - k))
    n0 = (n - (counts ** 2).sum() / n) / (k - 1)
    var_task = max(0.0, (msb - msw) / n0)
    return VarianceComponents(n, k, n / k, var_task, msw)


def cell_variance(task_ids: Sequence[str] | np.ndarray, values: Mapping[str, np.ndarray],
                  specs: Sequence[MetricSpec]) -> dict[str, dict[str, Any]]:
    """Per metric of a cell: its variance components as summary.json stores them."""
    tasks = np.asarray(task_ids)
    out = {}
    for spec in specs:
        if not all(k in values for k in spec.keys()):
            continue
        y, entered = contributions(spec, values)
        if not entered.any():
            continue
        out[spec.name] = variance_components(tasks[entered], y[entered]).to_dict()
    return out


# ----------------------------------------------------------------------------- power before the run


@dataclass(frozen=True)
class DesignOption:
    tasks: int
    seeds: int
    half_width: float


def half_width(vc: VarianceComponents, tasks: int, seeds: int, confidence: float = 0.95,
               resample: str = "tasks") -> float:
    return Z(0.5 + confidence / 2) * math.sqrt(vc.variance_of_mean(tasks, seeds, resample))


def tasks_needed(vc: VarianceComponents, target: float, seeds: int, confidence: float = 0.95,
                 resample: str = "tasks") -> int:
    """Tasks for an interval half-width <= target with `seeds` seeds per task."""
    z = Z(0.5 + confidence / 2)
    per_task = vc.var_task + (vc.var_within or 0.0) * within_factor(seeds, resample) / seeds
    return max(2, math.ceil(per_task * (z / target) ** 2))


def seeds_needed(vc: VarianceComponents, target: float, tasks: int, confidence: float = 0.95,
                 max_seeds: int = 1000, resample: str = "tasks") -> int | None:
    """Seeds per task for a half-width <= target with `tasks` tasks; None when no number of seeds
    reaches it (the between-task variance alone is too large: more tasks are needed)."""
    z = Z(0.5 + confidence / 2)
    room = (target / z) ** 2 * tasks - vc.var_task
    if room <= 0:
        return None
    within = vc.var_within or 0.0
    if within <= 0:
        return 1
    seeds = max(1, math.ceil(within / room))  # the cluster bootstrap's: within / S <= room
    while seeds <= max_seeds and within * within_factor(seeds, resample) / seeds > room:
        seeds += 1  # the two-stage draw's term shrinks more slowly: (2S - 1) / S^2
    return seeds if seeds <= max_seeds else None


def detectable_difference(vc_diff: VarianceComponents, tasks: int, seeds: int, *, alpha: float = 0.05,
                          power: float = 0.8, resample: str = "tasks") -> float:
    """The smallest paired difference a two-sided test at `alpha` detects with `power`, from the
    variance components of the per-(task, seed) differences."""
    return (Z(1 - alpha / 2) + Z(power)) * math.sqrt(vc_diff.variance_of_mean(tasks, seeds, resample))


# ----------------------------------------------------------------------------- many comparisons


def paired_p_value(task_ids: Sequence[str] | np.ndarray, differences: np.ndarray) -> float:
    """Two-sided p-value of a mean paired difference, its standard error clustered by task (the
    sampling unit), against Student's t with tasks - 1 degrees of freedom (the normal tail made Holm's
    family-wise error 7% at 40 tasks in simulation). Ties (all differences zero) give 1."""
    from scipy.stats import t as student
    d = np.asarray(differences, dtype=float)
    _, task = np.unique(np.asarray(task_ids), return_inverse=True)
    k = int(task.max()) + 1 if len(d) else 0
    if k < 2:
        return 1.0
    # the estimate weighs episodes equally; its clustered variance sums each task's total deviation
    resid = np.bincount(task, weights=d - d.mean(), minlength=k)
    se = math.sqrt((resid ** 2).sum() * k / (k - 1)) / len(d)
    if se == 0:
        return 1.0 if d.mean() == 0 else 0.0
    return float(2 * student.sf(abs(d.mean()) / se, k - 1))


def paired_contrasts(task_ids_a: Sequence[str], seeds_a: Sequence[int], values_a: Mapping[str, np.ndarray],
                     task_ids_b: Sequence[str], seeds_b: Sequence[int], values_b: Mapping[str, np.ndarray],
                     spec: MetricSpec) -> tuple[np.ndarray, np.ndarray]:
    """(task of each cell, A's contribution minus B's) on the (task, seed) cells both ran where the
    metric entered for both (the cells `stats.paired_difference` uses)."""
    ya, ea = contributions(spec, values_a)
    yb, eb = contributions(spec, values_b)
    index_b = {(t, int(s)): i for i, (t, s) in enumerate(zip(task_ids_b, seeds_b))}
    tasks, diffs = [], []
    for i, (t, s) in enumerate(zip(task_ids_a, seeds_a)):
        j = index_b.get((t, int(s)))
        if j is not None and ea[i] and eb[j]:
            tasks.append(t)
            diffs.append(ya[i] - yb[j])
    return np.asarray(tasks), np.asarray(diffs, dtype=float)


def paired_test(task_ids_a: Sequence[str], seeds_a: Sequence[int], values_a: Mapping[str, np.ndarray],
                task_ids_b: Sequence[str], seeds_b: Sequence[int], values_b: Mapping[str, np.ndarray],
                spec: MetricSpec) -> float:
    """The p-value of A - B on the (task, seed) cells both ran where the metric entered for both (the
    cells `stats.paired_difference` uses), from the per-episode contributions' differences."""
    tasks, diffs = paired_contrasts(task_ids_a, seeds_a, values_a, task_ids_b, seeds_b, values_b, spec)
    return paired_p_value(tasks, diffs) if len(diffs) else 1.0


def clustered_t_interval(task_ids: Sequence[str] | np.ndarray, differences: np.ndarray,
                         confidence: float) -> tuple[float, float, float]:
    """(mean, low, high) of a mean paired difference: its standard error clustered by task, the
    quantile Student's t with tasks - 1 degrees of freedom (as `paired_p_value`). NaNs when fewer than
    two tasks. The adaptive sweep's paired goal reads its group-sequential intervals from this: at the
    boundary's high confidence (98.4% for five looks) the percentile bootstrap's tails are too thin
    with a few dozen tasks (a null difference decided 7.2% of the time at 40 tasks, against 5.25% here;
    tests/evaluator/test_adaptive.py)."""
    from scipy.stats import t as student
    d = np.asarray(differences, dtype=float)
    if len(d) == 0:
        return math.nan, math.nan, math.nan
    _, task = np.unique(np.asarray(task_ids), return_inverse=True)
    k = int(task.max()) + 1
    mean = float(d.mean())
    if k < 2:
        return mean, math.nan, math.nan
    resid = np.bincount(task, weights=d - mean, minlength=k)
    se = math.sqrt((resid ** 2).sum() * k / (k - 1)) / len(d)
    q = float(student.ppf(0.5 + confidence / 2, k - 1))
    return mean, mean - q * se, mean + q * se


def adjust_paired(paired: list[dict[str, Any]], alpha: float = 0.05) -> None:
    """Add each paired difference's multiplicity decisions in place: the family is every difference of
    the same benchmark and metric (all its settings and model pairs); `holm` controls the family-wise
    error, `bh` the false discovery rate, both at `alpha`."""
    families: dict[tuple[str, str], list[int]] = {}
    for i, row in enumerate(paired):
        if isinstance(row.get("p_value"), float) and math.isfinite(row["p_value"]):
            families.setdefault((row["benchmark"], row["metric"]), []).append(i)
    for members in families.values():
        ps = [paired[i]["p_value"] for i in members]
        for i, h, b in zip(members, holm(ps, alpha), benjamini_hochberg(ps, alpha)):
            paired[i].update(family=len(members), holm=h, bh=b)


def holm(p_values: Sequence[float], alpha: float = 0.05) -> list[bool]:
    """Holm's step-down rejections: family-wise error <= alpha under any dependence."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    m = len(p_values)
    reject = [False] * m
    for rank, i in enumerate(order):
        if p_values[i] <= alpha / (m - rank):
            reject[i] = True
        else:
            break
    return reject


def benjamini_hochberg(p_values: Sequence[float], alpha: float = 0.05) -> list[bool]:
    """Benjamini-Hochberg step-up rejections: false discovery rate <= alpha (independent or positively
    dependent tests)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    cutoff = -1
    for rank, i in enumerate(order, start=1):
        if p_values[i] <= alpha * rank / m:
            cutoff = rank
    reject = [False] * m
    for rank, i in enumerate(order, start=1):
        if rank <= cutoff:
            reject[i] = True
    return reject


def bonferroni_confidence(confidence: float, family: int) -> float:
    """The per-interval confidence that gives simultaneous coverage >= `confidence` over `family`."""
    return 1 - (1 - confidence) / max(family, 1)


# ----------------------------------------------------------------------------- consistency across seeds


def pass_hat_k(task_ids: Sequence[str] | np.ndarray, successes: np.ndarray, k: int) -> float | None:
    """pass^k (tau-bench): the chance that k episodes of a task drawn without replacement from its
    seeds all succeed, averaged over the tasks with at least k seeds; the unbiased estimate
    C(c, k) / C(n, k) per task. None when no task has k seeds."""
    s = np.asarray(successes, dtype=float)
    _, task = np.unique(np.asarray(task_ids), return_inverse=True)
    if len(s) == 0:
        return None
    k_tasks = int(task.max()) + 1
    n = np.bincount(task, minlength=k_tasks)
    c = np.bincount(task, weights=s, minlength=k_tasks).round().astype(int)
    eligible = n >= k
    if not eligible.any():
        return None
    n, c = n[eligible].astype(float), c[eligible].astype(float)
    # C(c, k) / C(n, k) = prod_{j<k} (c - j) / (n - j), zero once c < k
    ratio = np.ones_like(n)
    for j in range(k):
        ratio *= np.clip(c - j, 0, None) / (n - j)
    return float(ratio.mean())


def pass_k_curve(task_ids: Sequence[str] | np.ndarray, values: Mapping[str, np.ndarray],
                 specs: Sequence[MetricSpec]) -> dict[str, dict[str, float]]:
    """pass^k for k = 1.. max seeds, for every mean metric whose values are all 0 or 1 (a success)."""
    tasks = np.asarray(task_ids)
    out: dict[str, dict[str, float]] = {}
    if len(tasks) == 0:
        return out
    max_seeds = int(np.unique(tasks, return_counts=True)[1].max())
    if max_seeds < 2:
        return out
    for spec in specs:
        if spec.kind != "mean" or spec.name not in values:
            continue
        v = np.asarray(values[spec.name], dtype=float)
        ok = np.isfinite(v)
        if not ok.any() or not np.isin(v[ok], (0.0, 1.0)).all():
            continue
        curve = {str(k): pass_hat_k(tasks[ok], v[ok], k) for k in range(1, max_seeds + 1)}
        out[spec.name] = {k: p for k, p in curve.items() if p is not None}
    return out
