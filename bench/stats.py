"""Bootstrap speed: seconds for B resamples of N episodes, by data shape and metric kind.

    python bench/stats.py            # the full table
    python bench/stats.py --quick    # B <= 10,000, N <= 10,000

Prints CPU seconds (process time, best of --repeat runs; wall time on a shared machine mostly
measures the neighbours) and which resampling path `summarize_metrics` took for each metric:
`type` (multinomial counts over distinct episode values: success flags, small counts) or `index`
(gathered index arrays: continuous values).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from toolsweep.evaluator import stats  # noqa: E402
from toolsweep.evaluator.protocols import MetricSpec  # noqa: E402

SHAPES = {
    "1 seed/task": lambda n, rng: np.ones(n, dtype=np.int64),
    "3 seeds/task": lambda n, rng: np.full(max(1, n // 3), 3, dtype=np.int64),
    "1-5 seeds/task": lambda n, rng: rng.integers(1, 6, size=max(1, n // 3)),
}

METRICS = {
    "binary mean": [MetricSpec(name="success")],
    "continuous mean": [MetricSpec(name="score")],
    "count ratio": [MetricSpec(name="itcr", kind="ratio", numerator="bad", denominator="calls")],
    "float ratio": [MetricSpec(name="prec", kind="ratio", numerator="hits", denominator="retrieved")],
    "all four": None,
}
METRICS["all four"] = [s for k, v in METRICS.items() if v for s in v]


def episodes(shape: str, n: int, rng: np.random.Generator):
    sizes = SHAPES[shape](n, rng)
    task_ids = np.repeat(np.array([f"task-{i:06d}" for i in range(sizes.size)]), sizes)
    seeds = np.concatenate([np.arange(s) for s in sizes])
    m = task_ids.size
    values = {
        "success": (rng.random(m) < 0.6).astype(float),
        "score": rng.normal(0.5, 0.2, m),
        "bad": rng.integers(0, 4, m).astype(float),
        "calls": rng.integers(1, 6, m).astype(float),
        "hits": rng.random(m) * 3,
        "retrieved": rng.random(m) * 5 + 1,
    }
    return task_ids, seeds, values


def path_taken(task_ids, seeds, values, spec: MetricSpec) -> str:
    layout = stats._layout(task_ids, seeds)
    cols = stats._Columns(layout.order)
    stats._metric_statistic(spec, *stats._spec_columns(spec, values, layout.n_episodes), cols)
    return "type" if stats._by_type_is_cheaper(layout, cols) else "index"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="skip N = 100,000")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    grid_n = [1_000, 10_000] if args.quick else [1_000, 10_000, 100_000]
    grid_b = [1_000, 10_000]
    print(f"{'shape':<16}{'metrics':<17}{'N':>8}{'B':>8}{'cpu s':>9}{'wall s':>9}  path")
    print("-" * 80)
    for shape in SHAPES:
        for n in grid_n:
            task_ids, seeds, values = episodes(shape, n, rng)
            for mname, specs in METRICS.items():
                paths = ",".join(path_taken(task_ids, seeds, values, s) for s in specs)
                for b in grid_b:
                    if n * b > 2e8 and "index" in paths:
                        continue  # 1e9 index draws: ~5 s each, not informative beyond the trend
                    best_cpu = best_wall = float("inf")
                    for _ in range(args.repeat):
                        c0, w0 = time.process_time(), time.perf_counter()
                        stats.summarize_metrics(task_ids, seeds, values, specs, n_resamples=b, seed=1)
                        best_cpu = min(best_cpu, time.process_time() - c0)
                        best_wall = min(best_wall, time.perf_counter() - w0)
                    print(
                        f"{shape:<16}{mname:<17}{task_ids.size:>8}{b:>8}{best_cpu:>9.3f}{best_wall:>9.3f}  {paths}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
