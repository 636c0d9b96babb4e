"""The pause a full garbage collection puts in the driver's scheduling loop, and what `frozen_heap` leaves of it.

The driver imports Ray, MLflow and the benchmarks before the scheduler runs; every full collection
walks all of it. This prints the objects the collector tracks in a process that has imported what the
driver imports, and the time of a full collection (median of --repeat) without and within
`toolsweep.cluster.scheduler.frozen_heap`, which the driver enters while the scheduler runs.

    python bench/gc_pause.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time


def full_collection_ms(repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        gc.collect()
        times.append(1e3 * (time.perf_counter() - t))
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    import mlflow  # noqa: F401 - what the driver holds when MLflow is on
    import ray  # noqa: F401

    import toolsweep.cluster.driver  # noqa: F401
    from toolsweep.cluster.scheduler import frozen_heap
    from toolsweep.evaluator.registry import get_benchmark

    for name in ("toolmaze", "planbench_xl", "apb", "traject_bench"):
        try:
            get_benchmark(name)
        except Exception as exc:  # noqa: BLE001 - a benchmark whose data is missing is left out
            print(f"({name} not loaded: {type(exc).__name__})")
    tracked = len(gc.get_objects())
    before = full_collection_ms(args.repeat)
    with frozen_heap():
        within = full_collection_ms(args.repeat)
    print(f"objects the collector tracks: {tracked:,}")
    print(f"{'full collection':>22} {'ms':>8}")
    print(f"{'as it was':>22} {before:>8.1f}")
    print(f"{'within frozen_heap':>22} {within:>8.2f}")


if __name__ == "__main__":
    main()
