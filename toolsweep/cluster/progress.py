"""Progress a person can follow anywhere: a bar on a terminal, plain periodic lines off one (a log
file, CI, `kubectl logs`), so a long run never looks hung and never writes one giant
carriage-return line. Off a terminal a line comes at least every `every_s` seconds while units run,
also when none finishes (a heartbeat that says what is in flight): with lines only at finished
units, a sweep of slow episodes printed nothing for 16 minutes."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any


class LogProgress:
    """The subset of tqdm's interface the scheduler uses, printing a line every `every_s` seconds:
    when units finish (`update`), and when none did for that long (`heartbeat`)."""

    def __init__(self, total: int, desc: str, log: Callable[[str], None], every_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self.desc, self.log, self.every_s, self.clock = total, desc, log, every_s, clock
        self.n = 0
        self.postfix: dict[str, Any] = {}
        self.start = self.last = clock()

    def update(self, n: int = 1) -> None:
        self.n += n
        now = self.clock()
        if now - self.last >= self.every_s or self.n >= self.total:
            self.last = now
            self.log(self.line(now))

    def due(self) -> bool:
        """Whether no line was printed for `every_s` seconds (the scheduler then gathers `heartbeat`'s status)."""
        return self.clock() - self.last >= self.every_s

    def heartbeat(self, status: dict[str, Any]) -> None:
        """A line though no unit finished: the counts, and what is in flight (`in_flight_text`)."""
        now = self.clock()
        if now - self.last < self.every_s:
            return
        self.last = now
        self.log(f"{self.line(now)}; {in_flight_text(status, self.total - self.n)}")

    def set_description(self, desc: str, refresh: bool = True) -> None:
        """The run's name and, in a sweep that runs in waves, the wave now running (tqdm's method)."""
        self.desc = desc

    def set_postfix(self, values: dict[str, Any], refresh: bool = True) -> None:
        self.postfix = dict(values)

    def line(self, now: float) -> str:
        elapsed = max(now - self.start, 1e-9)
        rate = self.n / elapsed
        eta = (self.total - self.n) / rate if rate > 0 else float("inf")
        extra = "".join(f", {k} {v}" for k, v in self.postfix.items())
        eta_text = f"{eta / 60:.1f} min" if eta != float("inf") else "?"
        return f"{self.desc}: {self.n}/{self.total} units ({100 * self.n / max(self.total, 1):.0f}%), " \
               f"{elapsed / 60:.1f} min elapsed, ETA {eta_text}{extra}"

    def __enter__(self) -> LogProgress:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def _age(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def in_flight_text(status: dict[str, Any], left: int) -> str:
    """What the scheduler has in flight, from its `status()`: episodes running (and the oldest one's
    age), units queued (not started: at the workers, waiting for a retry, or not leased yet), units
    given up, and each model whose endpoint is being checked or was given up."""
    running = int(status.get("running", 0))
    gave_up = int(status.get("gave_up", 0))
    queued = max(0, left - running - gave_up)
    parts = [f"running {running}" + (f" (oldest {_age(status['oldest_s'])})" if running and "oldest_s" in status else ""),
             f"queued {queued}"]
    if gave_up:
        parts.append(f"given up {gave_up}")
    for model in status.get("checking", ()):
        parts.append(f"model {model}: endpoint being checked, its units wait")
    for model in status.get("abandoned", ()):
        parts.append(f"model {model}: endpoint down past outage_budget_s, its units given up")
    return ", ".join(parts)


def rate_limit_postfix(limits: dict[str, dict[int, int]]) -> dict[str, str]:
    """The progress line's part for rate-limited models: per model, the requests in flight each worker's
    rate limit now allows (worker by worker, joined by '+'), from the changes the workers reported."""
    return {f"{model} in flight": "+".join(str(per_worker[w]) for w in sorted(per_worker))
            for model, per_worker in sorted(limits.items()) if per_worker}


def make_progress(total: int, desc: str, bar: bool, log: Callable[[str], None], every_s: float = 30.0) -> Any:
    """A tqdm bar when asked for one and stderr is a terminal, else plain lines at least every `every_s` s."""
    if bar and sys.stderr.isatty():
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit="ep", dynamic_ncols=True)
    return LogProgress(total, desc, log, every_s=every_s)
