"""The round logic of adaptive sweeps, pure (no Ray, no config): which cells need more seeds, which
seeds a cell gets next, the confidence each round spends, and the loop itself, which runs the same in a
numpy simulation (tests, bench/adaptive_units.py) as in a sweep (`toolsweep.cluster.adaptive`).

Intervals stay valid under optional stopping by alpha spending with a union bound over rounds: round r
is judged, and a cell that stops there is reported, at confidence 1 - alpha * 6 / (pi^2 r^2). A cell's
reported interval is the one of the round it stopped in; it misses the truth only if the interval of
some round missed, which has probability <= sum_r alpha * 6 / (pi^2 r^2) = alpha, whatever the stopping
rule and however many rounds are run (so `max_rounds` can be raised on a later run without spending the
guarantee again). The bound ignores that the rounds' intervals share their data, so it is conservative
(docs/adaptive.md gives the coverage measured in simulation).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolsweep.evaluator.stats import Estimate

Cell = tuple[str, str]
"""(benchmark, setting): what a round grows; every model of the sweep grows with it."""

METHOD = "alpha spending, union bound over rounds: round r at confidence 1 - alpha * 6 / (pi^2 r^2)"


def round_confidence(alpha: float, r: int) -> float:
    """The confidence round r (1-based) is judged and reported at: its share alpha * 6 / (pi^2 r^2) of
    the error, so the shares of all rounds, however many, sum to alpha."""
    if r < 1:
        raise ValueError(f"rounds count from 1, got {r}")
    return 1.0 - alpha * 6.0 / (math.pi ** 2 * r * r)


def half_width(est: Estimate) -> float:
    """Half the interval's width; NaN when the metric is undefined on the data."""
    return (est.ci_high - est.ci_low) / 2.0


def needs_more(estimates: Mapping[str, Estimate], target: float) -> bool:
    """A cell needs more seeds while any model's interval is wider than the target, or undefined (no
    episode entered the metric yet), or a model has no estimate at all."""
    if not estimates:
        return True
    return any(not (half_width(e) <= target) for e in estimates.values())


def grow_seeds(seeds: list[int], per_round: int, max_seeds: int) -> list[int]:
    """The cell's seeds with up to `per_round` new ones (the next integers above the largest, so the
    same cell grows the same way on every run), never beyond `max_seeds` in all."""
    room = max(0, max_seeds - len(seeds))
    start = max(seeds) + 1 if seeds else 0
    return list(seeds) + list(range(start, start + min(per_round, room)))


@dataclass
class CellRecord:
    """How one cell ended: the round it was last judged in, its seeds then, whether it met the target,
    and every model's interval at that round's confidence."""

    rounds: int
    seeds: int
    confidence: float
    met: bool
    estimates: dict[str, Estimate]

    def to_dict(self, cell: Cell, metric: str) -> dict[str, Any]:
        return {
            "benchmark": cell[0], "setting": cell[1], "metric": metric, "rounds": self.rounds, "seeds": self.seeds,
            "met": self.met, "confidence": self.confidence,
            "models": {m: {"value": e.value, "ci_low": e.ci_low, "ci_high": e.ci_high, "half_width": half_width(e),
                           "n": e.n} for m, e in sorted(self.estimates.items())},
        }


@dataclass
class RoundsResult:
    seeds: dict[Cell, list[int]]
    records: dict[Cell, CellRecord]
    rounds: int
    reason: str  # "met", "max_rounds", "max_seeds" or "stopped" (a round did not finish)
    grown_per_round: list[list[Cell]] = field(default_factory=list)


Measure = Callable[[int, dict[Cell, list[int]], set[Cell], float], "Mapping[Cell, Mapping[str, Estimate]] | None"]
"""(round, seeds of every cell, cells to judge, confidence) -> each judged cell's intervals per model at
that confidence, after the round's units have run; None when the round did not finish."""


def run_rounds(initial: Mapping[Cell, list[int]], *, target: float, max_rounds: int, max_seeds: int,
               seeds_per_round: int, alpha: float, measure: Measure) -> RoundsResult:
    """The adaptive loop. Round 1 judges every cell with its initial seeds; each later round judges only
    the cells grown for it. A cell stops at the first round it meets the target (its record is that
    round's intervals) or when it cannot grow (max_seeds); the loop stops when no cell grows or after
    `max_rounds`."""
    seeds = {c: list(s) for c, s in initial.items()}
    active = set(seeds)
    records: dict[Cell, CellRecord] = {}
    grown_log: list[list[Cell]] = []
    r = 0
    reason = "met"
    while active:
        r += 1
        conf = round_confidence(alpha, r)
        judged = measure(r, seeds, set(active), conf)
        if judged is None:
            return RoundsResult(seeds, records, r, "stopped", grown_log)
        need = set()
        for cell in sorted(active):
            est = dict(judged.get(cell, {}))
            met = not needs_more(est, target)
            records[cell] = CellRecord(rounds=r, seeds=len(seeds[cell]), confidence=conf, met=met, estimates=est)
            if not met:
                need.add(cell)
        if not need:
            reason = "met"
            break
        if r >= max_rounds:
            reason = "max_rounds"
            break
        grown = sorted(c for c in need if len(seeds[c]) < max_seeds)
        if not grown:
            reason = "max_seeds"
            break
        for cell in grown:
            seeds[cell] = grow_seeds(seeds[cell], seeds_per_round, max_seeds)
        grown_log.append(grown)
        active = set(grown)
    return RoundsResult(seeds, records, r, reason, grown_log)



def format_adaptive(section: Mapping[str, Any]) -> str:
    """The per-cell rounds and final intervals, as `toolsweep run` prints them at the end."""
    lines = [f"adaptive sweep: {section['rounds']} round(s), stopped: {section['reason']}; target half-width "
             f"{section['target_half_width']:g}; each cell's interval at the confidence its round spent "
             f"({section['method']})",
             f"{'benchmark':<14} {'setting':<18} {'metric':<16} {'rounds':>6} {'seeds':>5} {'met':>4} {'conf':>7}  "
             "model: value [low, high]"]
    for c in section["cells"]:
        models = "; ".join(f"{m}: {v['value']:.4g} [{v['ci_low']:.4g}, {v['ci_high']:.4g}]"
                           for m, v in c["models"].items())
        lines.append(f"{c['benchmark']:<14} {c['setting']:<18} {c['metric']:<16} {c['rounds']:>6} {c['seeds']:>5} "
                     f"{'yes' if c['met'] else 'no':>4} {c['confidence']:>7.4f}  {models}")
    return "\n".join(lines)
