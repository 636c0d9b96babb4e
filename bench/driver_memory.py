"""The driver's memory over a large scripted sweep: RSS sampled every second from plan to finish.

    python bench/driver_memory.py --units 100000 [--seeds 1] [--turns 1] [--workers 2] [--interval 1.0]

One scripted model on the fixed-latency benchmark of bench/scheduler.py with no latency, so the
sweep is as fast as the harness allows and every byte the driver holds is the harness's own. Every
unit has its own task id unless --seeds S > 1 (then units/S tasks, each run with S seeds, as real
benchmarks repeat tasks). MLflow is off, so the sink keeps no live table.

Prints RSS over time (elapsed, phase, episodes recorded, RSS MiB), the RSS at the end of each phase
(plan: the units expanded; provision: Ray, workers, run directory; run: the scheduler; finish:
summary, report, plots), the run's growth per recorded episode, the peak (and the process's
high-water mark, which no sampling interval misses), then the time and peak RSS of `toolsweep report`
re-summarising the run directory in a process of its own.
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

PHASES = ("plan", "provision", "run", "finish")

REPORT_WITH_PEAK = """
import sys
from toolsweep.cluster.cli import main
code = main(sys.argv[1:])
print(*[line for line in open("/proc/self/status") if line.startswith("VmHWM:")], file=sys.stderr)
sys.exit(code)
"""
"""`toolsweep report` in a process of its own that tells its own peak RSS (VmHWM: ru_maxrss would
also count the pages of the bench process it was forked from)."""


def _status_mib(field: str, pid: int | None = None) -> float:
    with open(f"/proc/{pid or os.getpid()}/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def rss_mib(pid: int | None = None) -> float:
    """Resident set size from /proc (MiB)."""
    return _status_mib("VmRSS", pid)


class Sampler(threading.Thread):
    """RSS of this process every `interval` seconds, with the phase and the episodes recorded so far."""

    def __init__(self, interval: float) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.samples: list[tuple[float, str, int, float]] = []
        self.phase = PHASES[0]
        self.phase_end: dict[str, float] = {}
        self.done = 0
        self._halt = threading.Event()
        self.t0 = time.perf_counter()

    def enter(self, phase: str) -> None:
        """The current phase ends (its RSS noted) and `phase` begins."""
        self.phase_end[self.phase] = rss_mib()
        self.phase = phase

    def run(self) -> None:
        while not self._halt.is_set():
            self.samples.append((time.perf_counter() - self.t0, self.phase, self.done, rss_mib()))
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join()
        self.phase_end[self.phase] = rss_mib()


def growth_per_episode(samples: list[tuple[float, str, int, float]], units: int) -> float:
    """Bytes of RSS per recorded episode over the run after its first tenth (start-up excluded)."""
    run = [s for s in samples if s[1] == "run" and s[2] >= units // 10]
    if len(run) < 2 or run[-1][2] == run[0][2]:
        return float("nan")
    return (run[-1][3] - run[0][3]) * 2**20 / (run[-1][2] - run[0][2])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--units", type=int, default=100_000)
    ap.add_argument("--seeds", type=int, default=1, help="seeds per task (units/seeds tasks)")
    ap.add_argument("--turns", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between RSS samples")
    ap.add_argument("--rows", type=int, default=30, help="rows of the RSS table (evenly spaced samples)")
    args = ap.parse_args()
    if args.units % args.seeds:
        ap.error("--units must be a multiple of --seeds")

    from scheduler import EXTRA

    from toolsweep.cluster import driver
    from toolsweep.cluster import scheduler as sched
    from toolsweep.cluster.config import SweepConfig
    from toolsweep.evaluator.registry import register_benchmark

    register_benchmark("latency", EXTRA["latency"])
    with tempfile.TemporaryDirectory() as tmp:
        cfg = SweepConfig.model_validate({
            "name": "memory", "seeds": args.seeds,
            "models": [{"name": "fixed", "kind": "scripted", "policy": "fixed_latency", "max_in_flight": 256}],
            "benchmarks": [{"name": "latency", "settings": ["chain"],
                            "options": {"n_tasks": args.units // args.seeds, "turns": args.turns, "latency_s": 0.0}}],
            "concurrency": {"workers": args.workers, "episodes_per_worker": 128},
            "bootstrap": {"n_resamples": 1000, "live_n_resamples": 100},
            "output_dir": tmp, "mlflow": False,
        })
        sampler = Sampler(args.interval)
        # Phase marks: planning ends when plan_sweep returns, provisioning when the scheduler starts,
        # the run when it returns; what follows is the finish.
        plan_sweep, run, record = driver.plan_sweep, sched.Scheduler.run, sched.Scheduler._record

        def timed_plan(*a, **kw):  # type: ignore[no-untyped-def]
            try:
                return plan_sweep(*a, **kw)
            finally:
                sampler.enter("provision")

        def timed_run(self, units):  # type: ignore[no-untyped-def]
            sampler.enter("run")
            try:
                return run(self, units)
            finally:
                sampler.enter("finish")

        def counted(self, finished, stats, start):  # type: ignore[no-untyped-def]
            record(self, finished, stats, start)
            sampler.done = stats.done

        driver.plan_sweep, sched.Scheduler.run, sched.Scheduler._record = timed_plan, timed_run, counted
        start_rss = rss_mib()
        sampler.start()
        t0 = time.perf_counter()
        out = driver.run_sweep(cfg, progress=False, extra_benchmarks=EXTRA, log=lambda m: None)
        wall = time.perf_counter() - t0
        sampler.stop()
        assert out.done == args.units, (out.done, args.units)

        print(f"driver RSS over a scripted sweep of {args.units:,} units ({args.units // args.seeds:,} tasks x "
              f"{args.seeds} seeds, {args.turns} turn each, {args.workers} workers); RSS before the sweep "
              f"{start_rss:.0f} MiB")
        print(f"{'elapsed s':>10} {'phase':>9} {'episodes':>10} {'RSS MiB':>9}")
        samples = sampler.samples
        step = max(1, len(samples) // args.rows)
        for t, phase, done, rss in samples[::step] + ([samples[-1]] if (len(samples) - 1) % step else []):
            print(f"{t:>10.1f} {phase:>9} {done:>10,} {rss:>9.0f}")
        print("RSS at the end of each phase: " + ", ".join(
            f"{p} {sampler.phase_end[p]:.0f} MiB" for p in PHASES if p in sampler.phase_end))
        peak = max(samples, key=lambda s: s[3])
        run_rss = [s[3] for s in samples if s[1] == "run"]
        print(f"during the run {min(run_rss, default=float('nan')):.0f}-{max(run_rss, default=float('nan')):.0f} MiB, "
              f"{growth_per_episode(samples, args.units):+.0f} bytes per episode after its first tenth; "
              f"{args.units / max(out.wall_s, 1e-9):,.0f} episodes/s in the run phase")
        print(f"peak {peak[3]:.0f} MiB at {peak[0]:.1f} s ({peak[1]}); high-water mark {_status_mib('VmHWM'):.0f} MiB; "
              f"sweep {wall:.0f} s")

        t1 = time.perf_counter()
        env = {**os.environ, "TOOLSWEEP_EXTRA_BENCHMARKS": f"latency={EXTRA['latency']}"}
        proc = subprocess.run([sys.executable, "-c", REPORT_WITH_PEAK, "report", str(out.run_dir.path)],
                              capture_output=True, text=True, env=env)
        peaks = [line.split()[1] for line in proc.stderr.splitlines() if line.startswith("VmHWM:")]
        report_peak = int(peaks[-1]) / 1024 if peaks else float("nan")
        print(f"`toolsweep report` on {args.units:,} rows: {time.perf_counter() - t1:.1f} s, peak RSS "
              f"{report_peak:.0f} MiB (exit {proc.returncode})")
        if proc.returncode:
            print(proc.stderr[-800:])


if __name__ == "__main__":
    main()
