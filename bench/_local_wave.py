"""A rollout worker that plays a whole wave of units on its own loop, with no Ray call while it plays.

bench/scheduler.py measures with it what the harness costs inside the workers, apart from what the
driver's leases, Ray's calls and the driver's recording add to a sweep."""

from __future__ import annotations

import time

from toolsweep.actors.rollout_worker import RolloutWorker
from toolsweep.evaluator.encoded import UnitWire


class LocalWaveWorker(RolloutWorker):
    async def local_wave(self, wires: list[UnitWire], chunk: int) -> float:
        """Start these units as the driver's leases do (`submit`, `chunk` at a time), wait for every
        result, and return the seconds from the first `submit` to the last result."""
        start = time.perf_counter()
        for i in range(0, len(wires), chunk):
            await self.submit(wires[i : i + chunk])
        got = 0
        while got < len(wires):
            got += len(await self.collect(1.0))
        return time.perf_counter() - start
