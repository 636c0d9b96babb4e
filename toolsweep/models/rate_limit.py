"""Requests in flight to one endpoint, adapted to its rate limit (AIMD, as TCP's congestion control).

A hosted API answers 429 when it gets more than its quota: the endpoint is busy, not broken. So a 429
is a condition the client adapts to, never a reason to give a unit up: the limit on requests in flight
is halved (multiplicative decrease, never below 1) and raised by one for every `slots` requests in a
row that succeed (additive increase, never above the configured `max_in_flight`). A burst of 429s answered to
requests sent under the same limit halves it once: only a request sent after the last cut can cut it
again. Each change of the whole number of slots is kept in `history` (time, slots) and, when a
`log` is given, reported as one line, so a run shows its concurrency over time.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any


class AdaptiveLimit:
    """A semaphore whose size follows the endpoint's answers (one per event loop and endpoint)."""

    def __init__(self, ceiling: int, *, clock: Callable[[], float] = time.monotonic,
                 log: Callable[[str], Any] | None = None, name: str = "") -> None:
        self.ceiling = max(1, ceiling)
        self.limit = float(self.ceiling)
        self.in_use = 0
        self.clock = clock
        self.log = log
        self.name = name
        self.history: list[tuple[float, int]] = [(clock(), self.ceiling)]
        self._last_cut = float("-inf")
        self._successes = 0  # since the last change
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def slots(self) -> int:
        return max(1, int(self.limit))

    async def acquire(self) -> float:
        """Wait for a free slot; returns when the request starts (what `rate_limited` compares)."""
        while self.in_use >= self.slots:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    self._wake()  # it was woken, then cancelled: hand its turn on
                raise
        self.in_use += 1
        return self.clock()

    def release(self) -> None:
        self.in_use -= 1
        self._wake()

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[float]:
        started = await self.acquire()
        try:
            yield started
        finally:
            self.release()

    def rate_limited(self, started: float) -> None:
        """A request sent at `started` was answered 429: halve the limit, once per window."""
        if started < self._last_cut:
            return  # sent before the last cut: that cut already answered this burst
        self._last_cut = self.clock()
        self._set(max(1.0, self.limit / 2))
        self._successes = 0

    def succeeded(self) -> None:
        """One more slot for every `slots` successes in a row, up to the ceiling."""
        if self.slots >= self.ceiling:
            return
        self._successes += 1
        if self._successes >= self.slots:
            self._set(float(min(self.ceiling, self.slots + 1)))

    def _set(self, limit: float) -> None:
        before = self.slots
        self.limit = limit
        self._successes = 0
        if self.slots != before:
            self.history.append((self.clock(), self.slots))
            if self.log is not None:
                why = "rate limited (429)" if self.slots < before else "requests succeed"
                self.log(f"model {self.name}: {self.slots} requests in flight (was {before}; {why})")
        self._wake()

    def _wake(self) -> None:
        free = self.slots - self.in_use
        while free > 0 and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                free -= 1
