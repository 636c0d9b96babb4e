"""Progress a person can follow anywhere: a bar on a terminal, plain periodic lines off one (a log
file, CI, `kubectl logs`), so a long run never looks hung and never writes one giant
carriage-return line."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any


class LogProgress:
    """The subset of tqdm's interface the scheduler uses, printing a line every `every_s` seconds."""

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


def make_progress(total: int, desc: str, bar: bool, log: Callable[[str], None]) -> Any:
    """A tqdm bar when asked for one and stderr is a terminal, else periodic plain lines."""
    if bar and sys.stderr.isatty():
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit="ep", dynamic_ncols=True)
    return LogProgress(total, desc, log)
