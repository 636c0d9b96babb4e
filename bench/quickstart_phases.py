"""The quick start's time per phase, two versions of toolsweep side by side.

Runs `toolsweep run configs/sweeps/quickstart.yaml` (900 units: scripted policies and each benchmark's
floor, an embedded Ray, a fresh run directory and sqlite MLflow store each time) with each code tree in
turn, alternating (`--repeat` rounds), and prints the phase times the run itself prints (`time per
phase: ...`) as a table: the median of each phase per tree, the MLflow phase's share of the total,
and the machine's load average when each run started (the figures move with it).

    python bench/quickstart_phases.py --old /path/to/old/checkout --new . [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PHASES = ["plan", "Ray, models and workers", "episodes", "summary, report and plots", "MLflow", "shutdown", "total"]


def run_once(tree: Path, config: Path, work: Path) -> tuple[dict[str, float], float]:
    """One quick start with `tree`'s toolsweep; returns its phase times and the load when it began."""
    load = os.getloadavg()[0]
    out = work / f"runs-{time.time_ns()}"
    env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
    proc = subprocess.run(
        [sys.executable, "-m", "toolsweep.cluster.cli", "run", str(config), "--no-progress",
         "--output-dir", str(out), "--tracking-uri", f"sqlite:///{out}.db"],
        env=env, capture_output=True, text=True, cwd=tree,
    )
    line = next((x for x in proc.stderr.splitlines() if x.startswith("time per phase:")), None)
    if proc.returncode != 0 or line is None:
        raise SystemExit(f"the quick start failed with {tree} (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    times = {name: float(v) for name, v in re.findall(r"([A-Za-z ,]+?) ([\d.]+) s", line.split(":", 1)[1])}
    times = {k.strip(", ").removeprefix("(").strip(): v for k, v in times.items()}
    return times, load


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", type=Path, required=True, help="checkout of the version to compare against")
    ap.add_argument("--new", type=Path, default=Path("."), help="checkout of this version (default: .)")
    ap.add_argument("--repeat", type=int, default=1, help="rounds, each running both trees (default 1)")
    ap.add_argument("--config", type=Path, default=Path("configs/sweeps/quickstart.yaml"))
    ap.add_argument("--keep", type=Path, default=None,
                    help="keep each run's directory and MLflow store under this folder (to compare their content)")
    args = ap.parse_args()
    trees = {"old": args.old, "new": args.new}
    results: dict[str, list[dict[str, float]]] = {k: [] for k in trees}
    loads: dict[str, list[float]] = {k: [] for k in trees}
    with tempfile.TemporaryDirectory(prefix="quickstart-phases-") as tmp:
        work = args.keep.resolve() if args.keep else Path(tmp)
        for _ in range(args.repeat):
            for label, tree in trees.items():
                (work / label).mkdir(parents=True, exist_ok=True)
                times, load = run_once(tree, args.config.resolve(), work / label)
                results[label].append(times)
                loads[label].append(load)
                print(f"{label}: {times} (load {load:.1f})", file=sys.stderr)
    print(f"quick start, {args.repeat} round(s), median seconds per phase")
    print(f"{'phase':<28}{'old':>10}{'new':>10}")
    for phase in PHASES:
        old, new = (statistics.median(r.get(phase, 0.0) for r in results[k]) for k in ("old", "new"))
        print(f"{phase:<28}{old:>10.1f}{new:>10.1f}")
    for label in ("old", "new"):
        share = statistics.median(r.get("MLflow", 0.0) / r["total"] for r in results[label])
        print(f"MLflow share of total ({label}): {100 * share:.0f}%   load at start: "
              + ", ".join(f"{x:.1f}" for x in loads[label]))


if __name__ == "__main__":
    main()
