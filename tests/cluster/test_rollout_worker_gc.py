"""A warmed-up rollout worker keeps Python's cycle collector from pausing its episodes: everything
built before the first episode is frozen out of full collections, and young collections are rare."""

from __future__ import annotations

import asyncio
import gc

from toolsweep.actors.rollout_worker import RolloutWorker


def test_warmup_freezes_what_it_built_and_collects_the_young_generation_rarely():
    threshold = gc.get_threshold()
    gc.unfreeze()
    try:
        worker = RolloutWorker("w0", {}, {})
        long_lived = [[i] for i in range(1000)]  # stands for a benchmark's world, built before episodes
        asyncio.run(worker.warmup({}))
        assert gc.get_freeze_count() >= len(long_lived)  # never walked by a full collection again
        assert gc.get_threshold()[0] == 20_000 and gc.get_threshold()[1:] == threshold[1:]
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
