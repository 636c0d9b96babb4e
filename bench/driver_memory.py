"""The driver's memory over a large scripted sweep: RSS sampled every second from plan to finish.

    python bench/driver_memory.py --units 100000 [--turns 1] [--workers 2] [--interval 1.0]

One scripted model on the fixed-latency benchmark of bench/scheduler.py with no latency, so the
sweep is as fast as the harness allows and every byte the driver holds is the harness's own. Prints
RSS over time (elapsed, episodes recorded, RSS MiB), the peak and in which phase it happened, then
the time `toolsweep report` takes to re-summarise the run directory.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])


def rss_mib(pid: int | None = None) -> float:
    """Resident set size from /proc (MiB)."""
    with open(f"/proc/{pid or os.getpid()}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class Sampler(threading.Thread):
    """RSS of this process every `interval` seconds, with the phase and the episodes recorded so far."""

    def __init__(self, interval: float, run_dir: Path) -> None:
        super().__init__(daemon=True)
        self.interval, self.run_dir = interval, run_dir
        self.samples: list[tuple[float, str, int, float]] = []
        self.phase = "plan"
        self.done = 0
        self._halt = threading.Event()
        self.t0 = time.perf_counter()

    def run(self) -> None:
        while not self._halt.is_set():
            self.samples.append((time.perf_counter() - self.t0, self.phase, self.done, rss_mib()))
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--units", type=int, default=100_000)
    ap.add_argument("--turns", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between RSS samples")
    ap.add_argument("--rows", type=int, default=30, help="rows of the RSS table (evenly spaced samples)")
    args = ap.parse_args()

    from scheduler import EXTRA

    from toolsweep.cluster import driver
    from toolsweep.cluster import scheduler as sched
    from toolsweep.cluster.config import SweepConfig
    from toolsweep.evaluator.registry import register_benchmark

    register_benchmark("latency", EXTRA["latency"])
    with tempfile.TemporaryDirectory() as tmp:
        cfg = SweepConfig.model_validate({
            "name": "memory", "seeds": 1,
            "models": [{"name": "fixed", "kind": "scripted", "policy": "fixed_latency", "max_in_flight": 256}],
            "benchmarks": [{"name": "latency", "settings": ["chain"],
                            "options": {"n_tasks": args.units, "turns": args.turns, "latency_s": 0.0}}],
            "concurrency": {"workers": args.workers, "episodes_per_worker": 128},
            "bootstrap": {"n_resamples": 1000, "live_n_resamples": 100},
            "output_dir": tmp, "mlflow": False,
        })
        sampler = Sampler(args.interval, Path(tmp))
        # Phase marks: the scheduler's run is "run", what follows it "finish".
        run = sched.Scheduler.run
        record = sched.Scheduler._record

        def timed_run(self, units):  # type: ignore[no-untyped-def]
            sampler.phase = "run"
            try:
                return run(self, units)
            finally:
                sampler.phase = "finish"

        def counted(self, finished, stats, start):  # type: ignore[no-untyped-def]
            record(self, finished, stats, start)
            sampler.done = stats.done

        sched.Scheduler.run, sched.Scheduler._record = timed_run, counted
        start_rss = rss_mib()
        sampler.start()
        t0 = time.perf_counter()
        out = driver.run_sweep(cfg, progress=False, extra_benchmarks=EXTRA, log=lambda m: None)
        wall = time.perf_counter() - t0
        sampler.stop()
        assert out.done == args.units, (out.done, args.units)

        print(f"driver RSS over a scripted sweep of {args.units:,} units ({args.turns} turn each, "
              f"{args.workers} workers); RSS before the sweep {start_rss:.0f} MiB")
        print(f"{'elapsed s':>10} {'phase':>7} {'episodes':>10} {'RSS MiB':>9}")
        samples = sampler.samples
        step = max(1, len(samples) // args.rows)
        for t, phase, done, rss in samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else []):
            print(f"{t:>10.1f} {phase:>7} {done:>10,} {rss:>9.0f}")
        peak = max(samples, key=lambda s: s[3])
        run_rss = [s[3] for s in samples if s[1] == "run"]
        print(f"peak {peak[3]:.0f} MiB at {peak[0]:.1f} s ({peak[1]}); during the run "
              f"{min(run_rss, default=float('nan')):.0f}-{max(run_rss, default=float('nan')):.0f} MiB; "
              f"sweep {wall:.0f} s, {args.units / max(out.wall_s, 1e-9):,.0f} episodes/s in the run phase")

        t1 = time.perf_counter()
        env = {**os.environ, "TOOLSWEEP_EXTRA_BENCHMARKS": f"latency={EXTRA['latency']}"}
        proc = subprocess.run([sys.executable, "-m", "toolsweep.cluster.cli", "report", str(out.run_dir.path)],
                              capture_output=True, text=True, env=env)
        print(f"`toolsweep report` on {args.units:,} rows: {time.perf_counter() - t1:.1f} s (exit {proc.returncode})")
        if proc.returncode:
            print(proc.stderr[-800:])


if __name__ == "__main__":
    main()
