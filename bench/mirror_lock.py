"""How long recording a result can wait for the live MLflow summaries.

With MLflow on, the result sink re-summarises the cells that changed every `flush_interval_s` (2 s)
on a thread of its own, while the scheduler records results through `ResultSink.add`; both use the
live table under one lock. This prints, for each benchmark's real metric specs, 3 models x 4
settings x `--episodes` episodes a cell and `--resamples` live resamples:
  - summarise: the whole live summary; the scheduler's longest wait while the summary was computed
    under the lock (as before);
  - copy: the part now taken under the lock (the cells' episodes copied), the rest computed outside;
  - longest add: the longest `add` of 64 results measured while a real flush runs in the background
    (now), against the median `add` with no flush under way;
  - mirror's core: the share of a core the mirror thread takes while 64 results arrive every 50 ms
    for --seconds, with no rest after a flush (as before) and with `MIRROR_REST` (now).

    python bench/mirror_lock.py [--episodes 3000 --resamples 1000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path

from toolsweep.actors import result_sink
from toolsweep.actors.result_sink import ResultSink
from toolsweep.evaluator.registry import get_benchmark
from toolsweep.evaluator.rundir import RunDirectory
from toolsweep.evaluator.types import EpisodeResult, TerminationReason, WorkUnit


class _NoMirror:
    """Stands in for MLflow: the bench measures the sink's lock, not the tracking server."""

    tracking_uri = "none"

    def log_summaries(self, summaries):
        pass

    def log_artifacts(self, run_dir, summaries):
        pass

    def finish(self, status):
        pass


def fill(sink: ResultSink, name: str, settings: list[str], keys: list[str], episodes: int) -> None:
    rnd = random.Random(0)
    for model in ("m1", "m2", "m3"):
        for setting in settings:
            cell = sink.table.cells[(model, name, setting)]
            for i in range(episodes):
                cell.add(f"t{i % 300}", i // 300, "answered", {k: float(rnd.random() < 0.5) for k in keys})
            sink._dirty.add((model, name, setting))


def add_ms(sink: ResultSink, batch: list[EpisodeResult]) -> float:
    t = time.perf_counter()
    sink.add(batch)
    return 1e3 * (time.perf_counter() - t)


def mirror_share(sink: ResultSink, batch, seconds: float, rest: float) -> float:
    """The mirror thread's CPU over `seconds` of results arriving, as a share of one core."""
    result_sink.MIRROR_REST = rest
    sink.flush_interval_s = 0.5
    sink.start()
    clock = time.pthread_getcpuclockid(sink._thread.ident)
    cpu, start = time.clock_gettime(clock), time.monotonic()
    while time.monotonic() - start < seconds:
        sink.add(batch())
        time.sleep(0.05)
    share = (time.clock_gettime(clock) - cpu) / (time.monotonic() - start)
    sink._stop_mirror_thread()
    return share


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=3000, help="episodes per cell")
    ap.add_argument("--resamples", type=int, default=1000, help="the live bootstrap's resamples")
    ap.add_argument("--seconds", type=float, default=20.0, help="how long results arrive for the core share")
    args = ap.parse_args()
    print(f"12 cells x {args.episodes} episodes, {args.resamples} resamples (ms)")
    print(f"{'benchmark':>14} {'keys':>5} {'summarise':>10} {'copy':>6} {'add, idle':>10} {'longest add':>12}"
          f" {'core, before':>13} {'core, now':>10}")
    for name in ("toolmaze", "apb", "planbench_xl"):
        bench = get_benchmark(name)
        settings = list(bench.settings())[:4]
        specs = {s: bench.metrics(s) for s in settings}
        keys = sorted({k for s in settings for spec in specs[s] for k in spec.keys()})
        cells = [(m, s) for m in ("m1", "m2", "m3") for s in settings]
        # more seeds of the cells' tasks, a batch to each cell in turn, as a sweep's results arrive
        units = iter(WorkUnit(sweep="s", model=cells[i % 12][0], benchmark=name, setting=cells[i % 12][1],
                              task_id=f"t{(i // 12) % 300}", seed=1000 + i // 3600) for i in range(10**8))

        def batch() -> list[EpisodeResult]:
            return [EpisodeResult(unit=next(units), termination=TerminationReason.ANSWERED,
                                  metrics={k: 1.0 for k in keys}) for _ in range(64)]

        def filled_sink(tmp: str) -> ResultSink:
            sink = ResultSink(RunDirectory(Path(tmp) / "run"), lambda b, s: specs[s], mirror=_NoMirror(),
                              live_n_resamples=args.resamples)
            fill(sink, name, settings, keys, args.episodes)
            return sink

        with tempfile.TemporaryDirectory() as tmp:
            sink = filled_sink(tmp)
            t = time.perf_counter()
            sink.table.summarize(sink.specs_for, n_resamples=args.resamples, confidence=0.95, seed=0)
            whole = 1e3 * (time.perf_counter() - t)
            t = time.perf_counter()
            sink.table.snapshot(sink.specs_for)
            copy = 1e3 * (time.perf_counter() - t)
            idle = statistics.median(add_ms(sink, batch()) for _ in range(20))
            flush = threading.Thread(target=sink._flush_mirror, args=(args.resamples,))
            sink._dirty = set(sink.table.cells)
            flush.start()
            during = []
            while flush.is_alive():
                during.append(add_ms(sink, batch()))
                time.sleep(0.005)
            flush.join()
            sink.close(None)
        shares = []
        for rest in (0.0, result_sink.MIRROR_REST):
            with tempfile.TemporaryDirectory() as tmp:
                sink = filled_sink(tmp)
                shares.append(mirror_share(sink, batch, args.seconds, rest))
                sink.close(None)
        before, now = shares
        print(f"{name:>14} {len(keys):>5} {whole:>10.0f} {copy:>6.1f} {idle:>10.2f} {max(during):>12.1f}"
              f" {before:>13.2f} {now:>10.2f}")


if __name__ == "__main__":
    main()
