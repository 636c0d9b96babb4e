"""The driver keeps full garbage collections of what it held before the scheduler ran (Ray, MLflow,
the plan) out of the scheduling loop, and gives it back to the collector afterwards."""

from __future__ import annotations

import gc
import time

from toolsweep.cluster.scheduler import frozen_heap


def _full_collection_s() -> float:
    t = time.perf_counter()
    gc.collect()
    return time.perf_counter() - t


def test_a_full_collection_within_the_run_does_not_walk_what_the_driver_held_before():
    gc.unfreeze()
    held = [[i] for i in range(300_000)]  # stands for MLflow's and Ray's objects in the driver
    outside = min(_full_collection_s() for _ in range(3))
    with frozen_heap():
        assert gc.get_freeze_count() >= len(held)
        within = min(_full_collection_s() for _ in range(3))
    assert within < outside / 5, (within, outside)
    assert gc.get_freeze_count() == 0  # a later run in this process can free what this one left
    with frozen_heap():
        garbage = [[]]
        garbage[0].append(garbage)  # a cycle made during the run is still collected
        del garbage
        assert gc.collect() >= 2
