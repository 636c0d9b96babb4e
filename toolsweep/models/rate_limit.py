"""Requests in flight to one endpoint, adapted to its rate limit (AIMD, as TCP's congestion control).

A hosted API answers 429 when it gets more than its quota: the endpoint is busy, not broken. So a 429
is a condition the client adapts to, never a reason to give a unit up. The limit on requests in flight
is judged once per window: the answers to `slots` requests sent since its last change (a round trip's
worth, as TCP changes its window once per round trip). A window whose 429s outnumber its successes
halves the limit (multiplicative decrease, never below 1); a window with no 429 raises it by one
(additive increase, never above the configured `max_in_flight`); a window with some 429s, fewer than
its successes, holds it. Answers to requests sent before the last change belong to an older window
and count in none, so a burst of 429s halves the limit once.

Why a majority, not any 429: an API shared with other users answers a share of requests 429 whatever
this client sends, and halving on each window that holds one kept 1.3 of 16 requests in flight at 30%
429s (`bench/rate_limit.py --random-429 0.3`): halving did not lower the share, it only starved the
sweep. Letting up to as many rejections as acceptances through is the adaptive throttling of Google's
SRE book (K = 2); over a quota of Q the limit settles between Q and 2Q, and a 429 storm still drives
it to 1. Each change of the whole number of slots is kept in `history` (time, slots) and, when a `log`
is given, reported as one line, so a run shows its concurrency over time.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
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
        self._window_start = float("-inf")  # when the limit last changed: the current window's requests
        self._limited = 0  # 429s answered to the current window's requests
        self._succeeded = 0  # and successes
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
        """A request sent at `started` was answered 429."""
        self._answered(started, limited=True)

    def succeeded(self, started: float) -> None:
        """A request sent at `started` was answered."""
        self._answered(started, limited=False)

    def _answered(self, started: float, *, limited: bool) -> None:
        if started < self._window_start:
            return  # sent under an earlier limit: that window is judged
        if limited:
            self._limited += 1
        else:
            self._succeeded += 1
        if self._limited + self._succeeded < self.slots:
            return  # the window is not complete
        if self._limited > self._succeeded:
            self._set(max(1.0, self.limit / 2))
        elif self._limited == 0 and self.slots < self.ceiling:
            self._set(float(self.slots + 1))
        else:
            self._new_window()

    def _set(self, limit: float) -> None:
        before = self.slots
        self.limit = limit
        self._new_window()
        if self.slots != before:
            self.history.append((self.clock(), self.slots))
            if self.log is not None:
                why = "most requests rate limited (429)" if self.slots < before else "requests succeed"
                self.log(limit_notice(self.name, self.slots, before, why))
        self._wake()

    def _new_window(self) -> None:
        self._window_start = self.clock()
        self._limited = self._succeeded = 0

    def _wake(self) -> None:
        free = self.slots - self.in_use
        while free > 0 and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                free -= 1


def limit_notice(model: str, slots: int, before: int, why: str) -> str:
    """The line a change of a model's requests in flight writes to the run's output."""
    return f"model {model}: {slots} requests in flight (was {before}; {why})"


_NOTICE = re.compile(r"model (?P<model>.+?): (?P<slots>\d+) requests in flight \(was \d+; ")


def read_limit_notice(line: str) -> tuple[str, int] | None:
    """(model, requests in flight) of a `limit_notice` line (a worker may prefix it), else None: what the
    driver's progress line shows of each rate-limited model."""
    found = _NOTICE.search(line)
    return (found["model"], int(found["slots"])) if found else None
