"""The driver keeps full garbage collections of what it held before the scheduler ran (Ray, MLflow,
the plan) out of the scheduling loop, and gives it back to the collector afterwards."""

from __future__ import annotations

import gc

from toolsweep.cluster.scheduler import frozen_heap


def _tracked() -> int:
    """The objects a full collection walks: those in the collector's generations (frozen ones are not)."""
    return sum(len(gc.get_objects(generation=g)) for g in range(3))


def test_a_full_collection_within_the_run_does_not_walk_what_the_driver_held_before():
    # counted, not timed (bench/gc_pause.py measures the pause)
    gc.unfreeze()
    held = [[i] for i in range(300_000)]  # stands for MLflow's and Ray's objects in the driver
    gc.collect()
    outside = _tracked()
    with frozen_heap():
        assert gc.get_freeze_count() >= len(held)
        within = _tracked()
    assert outside >= len(held) and within < outside - len(held), (within, outside)
    assert gc.get_freeze_count() == 0  # a later run in this process can free what this one left
    with frozen_heap():
        garbage = [[]]
        garbage[0].append(garbage)  # a cycle made during the run is still collected
        del garbage
        assert gc.collect() >= 2
