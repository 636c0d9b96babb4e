"""Coverage of the cluster bootstrap's 95% intervals by interval method, over simulated sweeps with a
known truth: the table that chose the default (`stats.Interval`).

    python bench/interval_coverage.py                 # 1,000 sweeps per design, B = 2,000
    python bench/interval_coverage.py --sims 300      # quicker, noisier (+-2.5 points at 95%)
    python bench/interval_coverage.py --sims 4000 --design "lognormal 50x3"   # one row, +-0.7 points

Each coverage is a share of `sims` sweeps, so it carries a Monte-Carlo error: the last column gives the
95% half-width 1.96 sqrt(p (1 - p) / sims) at p = 0.95 (+-1.35 points at 1,000 sweeps, +-0.68 at 4,000).
A row within that of 93% has not shown it misses the band: it needs more sweeps, not another method.

Each row is a design (tasks x seeds and how a task's episodes are drawn); each method column gives
coverage in percent and, in brackets, the misses below / above the truth (a one-sided miss shows a
skew the interval does not follow). Both methods read the same resamples of each sweep. The designs:

- binary 60x3: success, task difficulty ~ Beta(2, 2); truth 0.5
- U-shaped binary 60x1: task difficulty ~ Beta(0.5, 0.5) (tasks nearly always or never solved); truth 0.5
- ratio 60x3: hits / calls summed, precision ~ Beta(3, 2), 1 + Poisson(Gamma(2, 2)) calls; truth 0.6
- ragged binary 60x(1-5): seeds per task drawn 1 to 5; truth 0.5
- lognormal 50x3: continuous, task effect ~ LogNormal(0, 0.5), episode noise N(0, 0.5^2); truth e^(0.5^2/2)
  (the percentile interval misses it on the long side: more misses above the truth than below)
- lognormal sigma=0.75 / sigma=1 50x3: the same with heavier tails (shown, not asserted: no method here
  reaches 93% on them at 50 tasks)
- skewed Beta 40x1: continuous, each task's value ~ Beta(0.3, 3); truth 0.3 / 3.3
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from toolsweep.evaluator.protocols import MetricSpec  # noqa: E402
from toolsweep.evaluator.stats import INTERVALS, summarize_metrics  # noqa: E402

MEAN = MetricSpec(name="y")
RATIO = MetricSpec(name="y", kind="ratio", numerator="hits", denominator="calls")

Sweep = tuple[np.ndarray, np.ndarray, dict[str, np.ndarray], float]


def _layout(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ids = np.repeat([f"t{i:03d}" for i in range(counts.size)], counts)
    return ids, np.concatenate([np.arange(c) for c in counts])


def binary(tasks: int, seeds: int | str, a: float, b: float) -> Callable[[np.random.Generator], Sweep]:
    def make(rng: np.random.Generator) -> Sweep:
        counts = rng.integers(1, 6, tasks) if seeds == "ragged" else np.full(tasks, int(seeds))
        p = rng.beta(a, b, tasks)
        ids, seed = _layout(counts)
        return ids, seed, {"y": (rng.random(ids.size) < np.repeat(p, counts)).astype(float)}, a / (a + b)
    return make


def ratio(rng: np.random.Generator, tasks: int = 60, seeds: int = 3) -> Sweep:
    counts = np.full(tasks, seeds)
    p, rate = rng.beta(3.0, 2.0, tasks), rng.gamma(2.0, 2.0, tasks)
    ids, seed = _layout(counts)
    calls = 1.0 + rng.poisson(np.repeat(rate, counts))
    hits = rng.binomial(calls.astype(int), np.repeat(p, counts)).astype(float)
    return ids, seed, {"hits": hits, "calls": calls}, 0.6


def lognormal(sigma: float, tasks: int = 50, seeds: int = 3) -> Callable[[np.random.Generator], Sweep]:
    def make(rng: np.random.Generator) -> Sweep:
        counts = np.full(tasks, seeds)
        ids, seed = _layout(counts)
        effect = np.repeat(rng.lognormal(0.0, sigma, tasks), counts)
        return ids, seed, {"y": effect + rng.normal(0.0, 0.5, ids.size)}, math.exp(sigma ** 2 / 2)
    return make


def skewed_beta(rng: np.random.Generator, tasks: int = 40) -> Sweep:
    ids, seed = _layout(np.ones(tasks, dtype=np.int64))
    return ids, seed, {"y": rng.beta(0.3, 3.0, tasks)}, 0.3 / 3.3


DESIGNS: dict[str, tuple[Callable[[np.random.Generator], Sweep], MetricSpec]] = {
    "binary 60x3": (binary(60, 3, 2.0, 2.0), MEAN),
    "U-shaped binary 60x1": (binary(60, 1, 0.5, 0.5), MEAN),
    "ratio 60x3": (ratio, RATIO),
    "ragged binary 60x(1-5)": (binary(60, "ragged", 2.0, 2.0), MEAN),
    "lognormal 50x3": (lognormal(0.5), MEAN),
    "lognormal sigma=0.75 50x3": (lognormal(0.75), MEAN),
    "lognormal sigma=1 50x3": (lognormal(1.0), MEAN),
    "skewed Beta 40x1": (skewed_beta, MEAN),
}


def coverage(design: str, sims: int, n_resamples: int = 2000, rng_seed: int = 7,
             methods: tuple[str, ...] = INTERVALS) -> dict[str, tuple[float, float, float]]:
    """{method: (coverage, share missed below the truth, share missed above)} over `sims` sweeps."""
    make, spec = DESIGNS[design]
    rng = np.random.default_rng(rng_seed)
    low = {m: 0 for m in methods}
    high = {m: 0 for m in methods}
    for i in range(sims):
        ids, seed, values, truth = make(rng)
        for m in methods:
            est = summarize_metrics(ids, seed, values, [spec], n_resamples=n_resamples, seed=i, interval=m)[spec.name]
            low[m] += truth < est.ci_low  # the interval lies above the truth
            high[m] += truth > est.ci_high
    return {m: (1 - (low[m] + high[m]) / sims, low[m] / sims, high[m] / sims) for m in methods}


def monte_carlo_error(sims: int, p: float = 0.95) -> float:
    """The 95% half-width, in points, of a coverage near `p` measured over `sims` sweeps."""
    return 100 * 1.96 * math.sqrt(p * (1 - p) / sims)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sims", type=int, default=1000)
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--design", nargs="*", default=list(DESIGNS))
    ap.add_argument("--rng-seed", type=int, default=7, help="seed of the simulated sweeps")
    ap.add_argument("--methods", nargs="*", default=list(INTERVALS), choices=INTERVALS)
    args = ap.parse_args()
    t0 = time.process_time()
    print(f"95% intervals, {args.sims} sweeps per design (seed {args.rng_seed}), B = {args.resamples}; "
          "coverage % (missed below / above)")
    print(f"{'design':26s}" + "".join(f"{m:>24s}" for m in args.methods) + f"{'MC +-':>8s}")
    for design in args.design:
        row = coverage(design, args.sims, args.resamples, rng_seed=args.rng_seed, methods=tuple(args.methods))
        cells = "".join(f"{100 * c:>10.1f} ({100 * lo:4.1f} / {100 * hi:4.1f})" for c, lo, hi in row.values())
        print(f"{design:26s}{cells}{monte_carlo_error(args.sims):>8.2f}", flush=True)
    print(f"CPU {time.process_time() - t0:.0f} s")


if __name__ == "__main__":
    main()
