"""The round logic of adaptive sweeps, pure (no Ray, no config): which cells need more seeds (or tasks),
which seeds and tasks a cell gets next, the confidence each cell is judged at, and the loop itself,
which runs the same in a numpy simulation (tests, bench/adaptive_units.py) as in a sweep
(`toolsweep.cluster.adaptive`).

A cell may grow tasks as well as seeds (`run_rounds(grow=...)`): the next tasks of a fixed order (the
tasks already run, then a permutation of the setting's others seeded from the sweep and the cell,
`task_order`), chosen per cell where they shrink its widest interval more per unit than seeds do
(`choose_growth`). The width rule's nominal coverage still holds (its stopping reads only widths, the
choice only variance components, the order is fixed before the data): 94.95% over 1,000 simulated
adaptive sweeps of a task-dominated grid (tests/evaluator/test_adaptive.py). The paired rule grows
seeds only: its boundary is planned over the seeds.

Two stopping rules, each with the interval method that keeps its error rate under the optional
stopping it does (docs/adaptive.md):

- `WidthRule` (`stop_when.ci_half_width`): a cell stops once every model's interval is narrow enough.
  The rule looks at the data only through the interval's width, which says nothing about which side of
  the truth the estimate fell on; the fixed-width sequential interval (Chow & Robbins 1965) therefore
  keeps its nominal coverage asymptotically without spending any: every round is judged, and a cell is
  reported, at the nominal confidence. Measured over 1,000 simulated adaptive sweeps (one cell, and a
  grid of cells of every variance; tests/evaluator/test_adaptive.py) the reported intervals cover the
  truth 93-97% of the time. The earlier union-bound alpha spending (round r at 1 - 6 alpha / (pi r)^2)
  covered 99.45% and made adaptive sweeps dearer than a fixed design on mixed grids.
- `PairedRule` (`stop_when.paired_difference: decided`): a cell stops once every model pair's (or each
  model's against a baseline) paired interval excludes 0 (the sign is decided) or lies inside +-margin
  (equivalent within the margin). That rule stops on the estimate itself, so its intervals are
  repeated confidence intervals of a group-sequential design (Jennison & Turnbull 1989): a Pocock-type
  constant critical value c for the cell's planned looks, P(max_j |Z_j| > c) = alpha' under the truth,
  where Z_j is round j's standardised estimate and corr(Z_j, Z_k) = sqrt(I_j / I_k) (I: information).
  All of a cell's intervals then cover the truth at once with probability 1 - alpha', so any decision
  read off them, at whatever round the cell stops, errs with probability <= alpha'. The information is
  taken proportional to the seeds (I_j ~ S_j), as if all variance were within tasks: with a between-
  task share the true correlations are higher (Var_k / Var_j >= S_j / S_k), so c is conservative for
  every variance ratio and needs no estimated nuisance parameter. c is computed by a seeded Monte Carlo
  (deterministic). The intervals are est +- q SE: the paired difference's standard error clustered by
  task and q Student's t quantile (tasks - 1 degrees of freedom) at the boundary's confidence
  (`paired_interval`), not the percentile bootstrap, whose tails at that confidence (98.4% for five
  looks) are too thin with a few dozen tasks: with the bootstrap a null difference was decided 7.2% of
  the time at 40 tasks; with this interval 5.25% (2,000 simulated sweeps, alpha 5%).
  The pairs of a cell are combined by Bonferroni (alpha' = alpha / pairs): Holm's
  step-down adjusts rejections, not intervals, and a group-sequential Holm must recompute boundaries at
  each step (Ye et al. 2013); the summary's Holm/BH decisions over the grid are reported beside it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from statistics import NormalDist
from typing import Any, Protocol

import numpy as np

from toolsweep.evaluator.design import VarianceComponents, clustered_t_interval, paired_contrasts
from toolsweep.evaluator.protocols import MetricSpec
from toolsweep.evaluator.stats import Estimate
from toolsweep.evaluator.types import stable_seed

Cell = tuple[str, str]
"""(benchmark, setting): what a round grows; every model of the sweep grows with it."""

WIDTH_METHOD = ("fixed-width sequential interval (Chow & Robbins 1965): the stopping rule depends on the data "
                "only through the interval's width, so every round is judged and reported at the nominal confidence")
PAIRED_METHOD = ("repeated confidence intervals of a group-sequential design: Pocock-type constant boundary over "
                 "each cell's planned looks, information ~ seeds (conservative for any task/seed variance ratio), "
                 "Bonferroni over the cell's model pairs; task-clustered standard errors, Student's t quantile")

_MC_DRAWS = 400_000
_MC_SEED = 20260611


def half_width(est: Estimate) -> float:
    """Half the interval's width; NaN when the metric is undefined on the data."""
    return (est.ci_high - est.ci_low) / 2.0


def needs_more(estimates: Mapping[str, Estimate], target: float) -> bool:
    """A cell needs more seeds while any model's interval is wider than the target, or undefined (no
    episode entered the metric yet), or a model has no estimate at all."""
    if not estimates:
        return True
    return any(not (half_width(e) <= target) for e in estimates.values())


def decision(est: Estimate, margin: float) -> str:
    """What a paired interval of A - B decides: "a>b" or "a<b" (it excludes 0), "equivalent" (it lies
    inside +-margin), or "undecided" (also when undefined)."""
    lo, hi = est.ci_low, est.ci_high
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "undecided"
    if lo > 0:
        return "a>b"
    if hi < 0:
        return "a<b"
    if -margin <= lo and hi <= margin:
        return "equivalent"
    return "undecided"


def paired_interval(task_ids_a: Sequence[str], seeds_a: Sequence[int], values_a: Mapping[str, np.ndarray],
                    task_ids_b: Sequence[str], seeds_b: Sequence[int], values_b: Mapping[str, np.ndarray],
                    spec: MetricSpec, confidence: float) -> Estimate:
    """A - B on the (task, seed) cells both ran where both define the metric, with the paired goal's
    interval at `confidence`: task-clustered standard error, Student's t quantile. A ratio metric enters
    through its linearised per-episode terms (`design.contributions`), whose mean is the ratio."""
    tasks, diffs = paired_contrasts(task_ids_a, seeds_a, values_a, task_ids_b, seeds_b, values_b, spec)
    value, low, high = clustered_t_interval(tasks, diffs, confidence)
    return Estimate(value=value, ci_low=low, ci_high=high, n=len(diffs))


def grow_seeds(seeds: list[int], per_round: int, max_seeds: int) -> list[int]:
    """The cell's seeds with up to `per_round` new ones (the next integers above the largest, so the
    same cell grows the same way on every run), never beyond `max_seeds` in all."""
    room = max(0, max_seeds - len(seeds))
    start = max(seeds) + 1 if seeds else 0
    return list(seeds) + list(range(start, start + min(per_round, room)))


def planned_seeds(initial: int, per_round: int, max_seeds: int, max_rounds: int) -> list[int]:
    """Seeds per round of a cell that grows every round until `max_seeds` or `max_rounds`: its planned
    looks (a round that could not add a seed is no look: the loop stops there)."""
    out = [initial]
    while len(out) < max_rounds and out[-1] < max_seeds:
        out.append(min(out[-1] + per_round, max_seeds))
    return out


GROW_CHOICES = ("seeds", "tasks", "auto")


def task_order(initial: Sequence[str], pool: Sequence[str], key: str) -> list[str]:
    """The order a cell draws tasks in: the tasks the config runs first (nothing recorded is wasted),
    then the rest of the setting's tasks sorted by a hash of (`key`, task id), a deterministic
    permutation seeded from the sweep and the cell, so a re-run grows the same way. Sorting by a hash
    (not shuffling) keeps the relative order of the tasks when a benchmark gains tasks."""
    first = list(dict.fromkeys(initial))
    taken = set(first)
    rest = sorted((t for t in dict.fromkeys(pool) if t not in taken),
                  key=lambda t: (stable_seed("adaptive-tasks", key, t), t))
    return first + rest


def grow_tasks(tasks: Sequence[str], order: Sequence[str], per_round: int, max_tasks: int) -> list[str]:
    """The cell's tasks with up to `per_round` more, the next ones in its fixed `order`, never beyond
    `max_tasks` (nor the order's end) in all."""
    n = len(tasks)
    room = max(0, min(max_tasks, len(order)) - n)
    return list(tasks) + list(order[n:n + min(per_round, room)])


def equal_cost_tasks(tasks: int, seeds: int, seeds_per_round: int) -> int:
    """Tasks that cost as many units as a round of seeds: a seed costs one episode per task (T units),
    a task one per seed (S units), so T x seeds_per_round / S tasks, at least one."""
    return max(1, math.ceil(tasks * seeds_per_round / max(1, seeds)))


def variance_after(vc: VarianceComponents, tasks: int, seeds: int) -> float:
    """The estimate's variance with `tasks` tasks and `seeds` seeds each: var_task / T + var_within / (T S)
    (the cluster bootstrap's, `design.VarianceComponents.variance_of_mean`)."""
    return vc.variance_of_mean(tasks, seeds)


def choose_growth(components: Sequence[VarianceComponents], tasks: int, seeds: int, add_seeds: int,
                  add_tasks: int) -> str:
    """"tasks" or "seeds": which step shrinks the cell's widest interval more per unit spent. The
    variance of a model's estimate is var_task / T + var_within / (T S); `add_seeds` seeds cost T units
    each (one episode per task), `add_tasks` tasks cost S each. The cell's variance is its models' largest
    (the cell is met when its widest model is). Per unit, a task always shrinks it at least as much as a
    seed at the margin (a task brings both components, a seed only the within-task one), so with equal-
    cost steps "tasks" wins whenever the between-task variance is positive; a large task step can lose
    on diminishing returns. Ties, no room for tasks (add_tasks 0), or undefined components: "seeds" (the
    config's own tasks are kept where tasks would not do better)."""
    usable = [vc for vc in components if vc.n_tasks > 0 and math.isfinite(vc.var_task)]
    if add_tasks <= 0 or not usable:
        return "seeds"
    if add_seeds <= 0:
        return "tasks"

    def worst(t: int, s: int) -> float:
        return max(variance_after(vc, t, s) for vc in usable)

    now = worst(tasks, seeds)
    by_seeds = (now - worst(tasks, seeds + add_seeds)) / (tasks * add_seeds)
    by_tasks = (now - worst(tasks + add_tasks, seeds)) / (add_tasks * seeds)
    return "tasks" if by_tasks > by_seeds * (1 + 1e-9) else "seeds"


def most_cell_episodes(tasks: int, seeds: int, *, max_rounds: int, seeds_per_round: int, max_seeds: int,
                       most_tasks: int, tasks_per_round: int | None = None) -> int:
    """The most episodes (tasks x seeds) one model can run in a cell that grows in every later round,
    by seeds or by tasks (`_next_growth`'s steps), over every order of the two: the budget bound
    `toolsweep validate` prints. A dynamic programme over the number of seed rounds k keeps the most
    tasks reachable with k seed rounds (a task step grows with the tasks already run, so more tasks
    now never means fewer later)."""
    best = {0: tasks}  # seed rounds so far -> the most tasks
    for _ in range(max_rounds - 1):
        nxt: dict[int, int] = {}
        for k, t in best.items():
            s = min(max_seeds, seeds + k * seeds_per_round)
            step = tasks_per_round or equal_cost_tasks(t, s, seeds_per_round)
            for k2, t2 in ((k, min(most_tasks, t + step) if t < most_tasks else t), (k + 1, t)):
                nxt[k2] = max(nxt.get(k2, 0), t2)
        best = nxt
    return max(t * min(max_seeds, seeds + k * seeds_per_round) for k, t in best.items())


@lru_cache(maxsize=256)
def pocock_critical(information: tuple[float, ...], alpha: float) -> float:
    """The constant c with P(max_j |Z_j| > c) = alpha for standardised estimates at the given
    (increasing) information levels: Z_j = W(I_j) / sqrt(I_j) for a Brownian motion W, so
    corr(Z_j, Z_k) = sqrt(I_j / I_k). One look: the normal quantile. Several: a seeded Monte Carlo
    (400,000 paths; the critical value is reproducible, to about +-0.005)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie strictly between 0 and 1, got {alpha!r}")
    info = np.asarray(information, dtype=float)
    if info.size == 0 or np.any(np.diff(info) < 0) or info[0] <= 0:
        raise ValueError(f"information levels must be positive and non-decreasing, got {information!r}")
    if info.size == 1 or info[-1] == info[0]:
        return NormalDist().inv_cdf(1 - alpha / 2)
    rng = np.random.default_rng(_MC_SEED)
    steps = np.sqrt(np.diff(info, prepend=0.0))
    worst = np.empty(_MC_DRAWS)
    chunk = 50_000
    for start in range(0, _MC_DRAWS, chunk):
        paths = np.cumsum(rng.standard_normal((min(chunk, _MC_DRAWS - start), info.size)) * steps, axis=1)
        worst[start:start + chunk] = np.abs(paths / np.sqrt(info)).max(axis=1)
    return float(np.quantile(worst, 1 - alpha))


def boundary_confidence(seeds_by_look: Sequence[int], alpha: float) -> float:
    """The confidence of each look's interval under the Pocock-type boundary: 1 - 2 (1 - Phi(c))."""
    c = pocock_critical(tuple(float(s) for s in seeds_by_look), alpha)
    return 1.0 - 2.0 * (1.0 - NormalDist().cdf(c))


class StoppingRule(Protocol):
    method: str

    def confidence(self, cell: Cell, initial_seeds: int) -> float:
        """The confidence every interval of the cell is judged and reported at."""

    def needs_more(self, estimates: Mapping[str, Estimate]) -> bool:
        """Whether the cell's intervals (per model, or per model pair) call for another round."""

    def decisions(self, estimates: Mapping[str, Estimate]) -> dict[str, str] | None:
        """What the cell's intervals decided, where the rule decides something."""

    def futile(self, estimates: Mapping[str, Estimate], seeds: int, tasks: int = 1, most_tasks: int = 1) -> bool:
        """Whether no number of seeds (and tasks, up to `most_tasks`) within the budget can meet the rule
        (the cell then stops growing)."""


def best_half_width(est: Estimate, seeds: int, max_seeds: int, tasks: int = 1, most_tasks: int = 1) -> float:
    """The narrowest half-width `max_seeds` seeds on `most_tasks` tasks could give: the current one
    shrunk as if all the variance were within tasks (width ~ 1 / sqrt(tasks x seeds)); a between-task
    share only shrinks it less with seeds, and tasks shrink both shares as 1 / sqrt(tasks). With the
    tasks fixed (most_tasks = tasks) it is the seeds-only bound."""
    return half_width(est) * math.sqrt(seeds * tasks / (max(seeds, max_seeds) * max(tasks, most_tasks)))


@dataclass(frozen=True)
class WidthRule:
    """Stop a cell once every model's interval half-width is at most `target`; nominal confidence."""

    target: float
    confidence_level: float = 0.95
    max_seeds: int | None = None  # the budget, for `futile`; None: never futile
    method: str = WIDTH_METHOD

    def confidence(self, cell: Cell, initial_seeds: int) -> float:
        return self.confidence_level

    def needs_more(self, estimates: Mapping[str, Estimate]) -> bool:
        return needs_more(estimates, self.target)

    def decisions(self, estimates: Mapping[str, Estimate]) -> dict[str, str] | None:
        return None

    def futile(self, estimates: Mapping[str, Estimate], seeds: int, tasks: int = 1, most_tasks: int = 1) -> bool:
        """Some model's interval cannot reach the target by max_seeds (and `most_tasks` tasks, where the
        cell may draw more) even at the fastest shrink (seeds only: its between-task variance alone is
        too wide, the cell needs more tasks). The rule still reads only widths, so stopping here keeps
        the intervals' nominal coverage."""
        if self.max_seeds is None or (seeds >= self.max_seeds and tasks >= most_tasks):
            return False
        return any(best_half_width(e, seeds, self.max_seeds, tasks, most_tasks) > self.target
                   for e in estimates.values() if math.isfinite(half_width(e)) and half_width(e) > 0)


@dataclass(frozen=True)
class PairedRule:
    """Stop a cell once every paired interval (keys "A - B") is decided (`decision`); the confidence
    comes from the Pocock-type boundary over the cell's planned looks, Bonferroni over `pairs`."""

    margin: float
    pairs: int
    per_round: int
    max_seeds: int
    max_rounds: int
    confidence_level: float = 0.95
    method: str = PAIRED_METHOD

    def confidence(self, cell: Cell, initial_seeds: int) -> float:
        alpha = (1.0 - self.confidence_level) / max(1, self.pairs)
        looks = planned_seeds(initial_seeds, self.per_round, self.max_seeds, self.max_rounds)
        return boundary_confidence(looks, alpha)

    def needs_more(self, estimates: Mapping[str, Estimate]) -> bool:
        if not estimates:
            return True
        return any(decision(e, self.margin) == "undecided" for e in estimates.values())

    def decisions(self, estimates: Mapping[str, Estimate]) -> dict[str, str] | None:
        return {k: decision(e, self.margin) for k, e in sorted(estimates.items())}

    def futile(self, estimates: Mapping[str, Estimate], seeds: int, tasks: int = 1, most_tasks: int = 1) -> bool:
        """No undecided pair can be decided by max_seeds (`futile_pairs`): a futile pair stops only itself,
        and the cell grows while a pair it could still decide remains (with one futile pair stopping the
        cell, 3-model cells decided their decidable pairs far less often than 2-model cells)."""
        if seeds >= self.max_seeds:
            return False
        undecided = [k for k, e in estimates.items() if decision(e, self.margin) == "undecided"]
        return bool(undecided) and set(undecided) <= set(self.futile_pairs(estimates, seeds))

    def futile_pairs(self, estimates: Mapping[str, Estimate], seeds: int) -> list[str]:
        """The undecided pairs max_seeds cannot decide, judged at the fastest shrink: the interval could
        not fit inside +-margin, and the estimate lies within a quarter of that narrowest half-width of 0
        (it would have to grow fourfold to exclude 0). Stopping undecided never decides a sign, so this (non-binding futility)
        cannot raise the wrong-sign error; it spends no more seeds on a pair whose between-task spread
        needs more tasks, not seeds."""
        out = []
        for key, e in sorted(estimates.items()):
            if decision(e, self.margin) != "undecided" or not math.isfinite(half_width(e)):
                continue
            best = best_half_width(e, seeds, self.max_seeds)
            if best > self.margin and abs(e.value) < best / 4:
                out.append(key)
        return out


@dataclass
class CellRecord:
    """How one cell ended: the round it was last judged in, its seeds and tasks then, whether it met the
    rule, its intervals (per model, or per model pair) at the cell's confidence, and what they decided."""

    rounds: int
    seeds: int
    confidence: float
    met: bool
    estimates: dict[str, Estimate]
    decisions: dict[str, str] | None = None
    futile: bool = False  # stopped because the budget's seeds (and tasks) could not meet the rule
    tasks: int = 0  # tasks the cell ran when last judged (0: the caller did not say)

    def to_dict(self, cell: Cell, metric: str) -> dict[str, Any]:
        out = {
            "benchmark": cell[0], "setting": cell[1], "metric": metric, "rounds": self.rounds, "seeds": self.seeds,
            "tasks": self.tasks, "met": self.met, "futile": self.futile, "confidence": self.confidence,
            "models": {m: {"value": e.value, "ci_low": e.ci_low, "ci_high": e.ci_high, "half_width": half_width(e),
                           "n": e.n} for m, e in sorted(self.estimates.items())},
        }
        if self.decisions is not None:
            out["decisions"] = dict(self.decisions)
        return out


@dataclass(frozen=True)
class CellJudgement:
    """A measure's answer for one cell: its intervals, and each model's variance components (which
    `grow: auto` reads to choose between seeds and tasks; a measure may leave them out)."""

    estimates: Mapping[str, Estimate]
    components: Mapping[str, VarianceComponents] = field(default_factory=dict)


def as_judgement(judged: Any) -> CellJudgement:
    """A measure's answer for a cell, either a CellJudgement or a plain {key: Estimate}."""
    if isinstance(judged, CellJudgement):
        return judged
    return CellJudgement(dict(judged or {}))


@dataclass
class RoundsResult:
    seeds: dict[Cell, list[int]]
    records: dict[Cell, CellRecord]
    rounds: int
    reason: str  # "met", "max_rounds", "max_seeds", "max_size", "futile" or "stopped" (a round did not finish)
    grown_per_round: list[list[Cell]] = field(default_factory=list)
    tasks: dict[Cell, list[str]] = field(default_factory=dict)
    designs: list[dict[Cell, tuple[int, int]]] = field(default_factory=list)  # per round: every cell's (tasks, seeds)
    grown_by: list[dict[Cell, str]] = field(default_factory=list)  # per later round: each grown cell's "seeds"/"tasks"


Measure = Callable[[int, dict[Cell, list[int]], Mapping[Cell, float], dict[Cell, list[str]]],
                   "Mapping[Cell, Mapping[str, Estimate] | CellJudgement] | None"]
"""(round, seeds of every cell, {cell to judge: its confidence}, tasks of every cell) -> each judged cell's
intervals (per model, or per model pair for the paired rule) at its confidence, after the round's units
have run, optionally with variance components (`CellJudgement`); None when the round did not finish."""


def run_rounds(initial: Mapping[Cell, list[int]], *, rule: StoppingRule, max_rounds: int, max_seeds: int,
               seeds_per_round: int, measure: Measure, tasks: Mapping[Cell, Sequence[str]] | None = None,
               task_orders: Mapping[Cell, Sequence[str]] | None = None, grow: str = "seeds",
               tasks_per_round: int | None = None, max_tasks: int | None = None) -> RoundsResult:
    """The adaptive loop. Round 1 judges every cell with its initial seeds and tasks; each later round
    judges only the cells grown for it. A cell stops at the first round it meets the rule (its record is
    that round's intervals), when the rule finds it futile (no seeds, nor tasks where it may draw more,
    within the budget can meet it), or when it cannot grow; the loop stops when no cell grows or after
    `max_rounds`. A cell's confidence is fixed before round 1 from its initial seeds (the rule's plan).

    How a cell grows (`grow`): "seeds" adds `seeds_per_round` seeds; "tasks" adds the next
    `tasks_per_round` tasks of its fixed `task_orders` order (default: as many units as a round of
    seeds, `equal_cost_tasks`) while any remain (up to `max_tasks`), then seeds; "auto" picks, per cell
    and round, whichever shrinks its widest interval more per unit (`choose_growth`, from the variance
    components the measure returns). A cell whose order holds no more tasks than it runs grows seeds."""
    if grow not in GROW_CHOICES:
        raise ValueError(f"grow must be one of {', '.join(GROW_CHOICES)}, got {grow!r}")
    seeds = {c: list(s) for c, s in initial.items()}
    cell_tasks = {c: list((tasks or {}).get(c, ())) for c in seeds}
    orders = {c: list((task_orders or {}).get(c, cell_tasks[c])) for c in seeds}
    most_tasks = {c: len(cell_tasks[c]) if grow == "seeds" else
                  max(len(cell_tasks[c]), min(max_tasks or len(orders[c]), len(orders[c]))) for c in seeds}
    confidence = {c: rule.confidence(c, len(s)) for c, s in seeds.items()}
    active = set(seeds)
    records: dict[Cell, CellRecord] = {}
    grown_log: list[list[Cell]] = []
    designs: list[dict[Cell, tuple[int, int]]] = []
    grown_by: list[dict[Cell, str]] = []
    components: dict[Cell, Mapping[str, VarianceComponents]] = {}
    r = 0
    reason = "met"

    def result(why: str) -> RoundsResult:
        return RoundsResult(seeds, records, r, why, grown_log, cell_tasks, designs, grown_by)

    while active:
        r += 1
        designs.append({c: (len(cell_tasks[c]), len(seeds[c])) for c in sorted(seeds)})
        judged = measure(r, seeds, {c: confidence[c] for c in sorted(active)}, cell_tasks)
        if judged is None:
            return result("stopped")
        need = set()
        for cell in sorted(active):
            j = as_judgement(judged.get(cell))
            est = dict(j.estimates)
            components[cell] = j.components
            n_tasks = len(cell_tasks[cell])
            met = not rule.needs_more(est)
            futile = not met and rule.futile(est, len(seeds[cell]), max(1, n_tasks), max(1, most_tasks[cell]))
            records[cell] = CellRecord(rounds=r, seeds=len(seeds[cell]), confidence=confidence[cell], met=met,
                                       estimates=est, decisions=rule.decisions(est), futile=futile, tasks=n_tasks)
            if not met and not futile:
                need.add(cell)
        if not need:
            reason = "met" if all(rec.met for rec in records.values()) else "futile"
            break
        if r >= max_rounds:
            reason = "max_rounds"
            break
        steps: dict[Cell, tuple[str, int]] = {}
        for cell in sorted(need):
            how = _next_growth(grow, cell_tasks[cell], seeds[cell], orders[cell], most_tasks[cell], max_seeds,
                               seeds_per_round, tasks_per_round, components.get(cell, {}))
            if how is not None:
                steps[cell] = how
        if not steps:
            reason = "max_seeds" if grow == "seeds" else "max_size"
            break
        for cell, (how, add) in steps.items():
            if how == "tasks":
                cell_tasks[cell] = grow_tasks(cell_tasks[cell], orders[cell], add, most_tasks[cell])
            else:
                seeds[cell] = grow_seeds(seeds[cell], add, max_seeds)
        grown_log.append(sorted(steps))
        grown_by.append({c: how for c, (how, _) in sorted(steps.items())})
        active = set(steps)
    return result(reason)


def _next_growth(grow: str, tasks: Sequence[str], seeds: Sequence[int], order: Sequence[str], most_tasks: int,
                 max_seeds: int, seeds_per_round: int, tasks_per_round: int | None,
                 components: Mapping[str, VarianceComponents]) -> tuple[str, int] | None:
    """("seeds" | "tasks", how many) a cell that needs more grows by this round; None when it cannot grow."""
    add_seeds = min(seeds_per_round, max(0, max_seeds - len(seeds)))
    room = max(0, most_tasks - len(tasks)) if grow != "seeds" else 0
    step = tasks_per_round or equal_cost_tasks(max(1, len(tasks)), max(1, len(seeds)), seeds_per_round)
    add_tasks = min(step, room)
    if add_tasks and (grow == "tasks" or not add_seeds):
        return ("tasks", add_tasks)
    if add_tasks and grow == "auto":
        how = choose_growth(list(components.values()), len(tasks), len(seeds), add_seeds, add_tasks)
        return (how, add_tasks if how == "tasks" else add_seeds)
    return ("seeds", add_seeds) if add_seeds else None


def format_adaptive(section: Mapping[str, Any]) -> str:
    """The per-cell rounds and final intervals, as `toolsweep run` prints them at the end."""
    if section.get("margin") is not None:
        goal = f"paired differences decided (margin {section['margin']:g})"
    else:
        goal = f"target half-width {section['target_half_width']:g}"
    if section.get("grow", "seeds") != "seeds":
        goal += f", rounds grow {section['grow']}"
    lines = [f"adaptive sweep: {section['rounds']} round(s), stopped: {section['reason']}; {goal}; each cell's "
             f"interval at its confidence ({section['method']})",
             f"{'benchmark':<14} {'setting':<18} {'metric':<16} {'rounds':>6} {'tasks':>5} {'seeds':>5} {'met':>4} "
             f"{'conf':>7}  interval: value [low, high]"]
    for c in section["cells"]:
        decided = c.get("decisions") or {}
        models = "; ".join(f"{m}: {v['value']:.4g} [{v['ci_low']:.4g}, {v['ci_high']:.4g}]"
                           + (f" {decided[m]}" if m in decided else "")
                           for m, v in c["models"].items())
        lines.append(f"{c['benchmark']:<14} {c['setting']:<18} {c['metric']:<16} {c['rounds']:>6} "
                     f"{c.get('tasks', ''):>5} {c['seeds']:>5} "
                     f"{'yes' if c['met'] else 'no':>4} {c['confidence']:>7.4f}  {models}")
    return "\n".join(lines)
