"""A line at least every `progress_interval_s` through every phase of a run, off a terminal.

The scheduler's progress lines (`progress.LogProgress`) cover the episodes, but before them (Ray, the
model servers, the workers' warm-up), between waves (the next wave's servers) and after them (the
summary, MLflow) nothing was printed: the first line of a SmolLM2 sweep came at 5.3 min, and the MLflow
phase was silent for ~120 s under load, so a log read as hung. The heartbeat watches every line the run
prints and, when none came for `every_s` seconds, prints which phase the run is in and what it said last.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

Log = Callable[[str], None]


def _age(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


class Heartbeat:
    """Wraps a run's `log`; while started, a thread prints `<name>: still working (<phase> ...)` whenever
    no line was printed for `every_s` seconds. `phase()` names the phase in progress."""

    def __init__(self, name: str, log: Log, every_s: float, phase: Callable[[], str],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.name, self._log, self.every_s, self.phase, self.clock = name, log, every_s, phase, clock
        self.last_at = self.started_at = self.line_at = clock()  # any line / the run's own last line
        self.last_line = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def log(self, msg: str) -> None:
        with self._lock:
            self.last_at = self.line_at = self.clock()
            self.last_line = msg
        self._log(msg)

    def beat(self) -> bool:
        """Print a line when none came for `every_s` seconds; returns whether it did."""
        now = self.clock()
        with self._lock:
            if now - self.last_at < self.every_s:
                return False
            quiet = now - self.line_at
            last = self.last_line.splitlines()[0][:160] if self.last_line else ""
        line = (f"{self.name}: still working (phase: {self.phase()}, {_age(now - self.started_at)} since the start; "
                f"last line {_age(quiet)} ago" + (f": {last}" if last else "") + ")")
        with self._lock:
            self.last_at = self.clock()  # the next in `every_s`; the run's own last line stays the one quoted
        self._log(line)
        return True

    def _run(self) -> None:
        while not self._stop.wait(min(1.0, self.every_s / 4)):
            try:
                self.beat()
            except Exception:  # noqa: BLE001 - a closed stream must not end the run
                pass

    def __enter__(self) -> Heartbeat:
        self._thread = threading.Thread(target=self._run, name="toolsweep-heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
