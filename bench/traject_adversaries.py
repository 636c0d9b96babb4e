"""TRAJECT-Bench adversaries per cell: what each scripted policy that does not solve the task
scores, per setting, under a `paper_compat` mode (default: exact, the authors' scoring).

    OMP_NUM_THREADS=1 python bench/traject_adversaries.py [--mode exact] [--tasks N] [--settings main|all|S ...]
        [--policies all_tools keyword prose_echo prose_echo_query echo_outputs no_tools random oracle]

--tasks 0 plays every task. The per-cell bounds the tests check are in bounds.py.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

MAIN = ["par-simple/domain/direct", "par-hard/domain/direct", "seq/domain/direct",
        "par-simple/domain/native", "seq/domain/native", "par-simple/retrieval/direct",
        "par-hard/retrieval-all/direct", "par-simple/domain/react-domain", "seq/retrieval/react-static"]
KEYS = ("em", "inclusion", "usage", "traj_satisfy_proxy", "answer_facts", "retrieval_rate")


def main() -> None:
    repo = Path(__file__).resolve().parents[1]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.environ.get("TOOLSWEEP_TRAJECT_DATA", str(repo / ".." / "shared" / "datasets" / "traject_bench")))
    ap.add_argument("--mode", default="exact")
    ap.add_argument("--tasks", type=int, default=60)
    ap.add_argument("--settings", nargs="*", default=["main"])
    ap.add_argument("--policies", nargs="*", default=["all_tools", "keyword", "prose_echo", "prose_echo_query", "random", "oracle"])
    args = ap.parse_args()

    from toolsweep.benchmarks.traject_bench import TrajectBench
    from toolsweep.benchmarks.traject_bench.bounds import cell_sample
    from toolsweep.evaluator.exploits import aggregate, play

    bench = TrajectBench(data_dir=args.data, paper_compat=args.mode)
    settings = []
    for s in args.settings:
        settings += MAIN if s == "main" else list(bench.settings()) if s == "all" else [s]
    print(f"paper_compat={args.mode}, {args.tasks or 'all'} tasks per setting")
    print(f"{'setting':<34}{'policy':<18}{'n':>5}" + "".join(f"{k[:12]:>13}" for k in KEYS))
    for setting in settings:
        ids = bench.tasks(setting)
        ids = cell_sample(ids, args.tasks, setting)  # the tests' seeded sample (all when --tasks 0)
        for pol in args.policies:
            t0 = time.perf_counter()
            results = asyncio.run(play(bench, pol, setting, ids))
            v = aggregate(bench.metrics(setting), results)
            cells = "".join(f"{v.get(k, math.nan):>13.3f}" for k in KEYS)
            print(f"{setting:<34}{pol:<18}{len(results):>5}{cells}   {time.perf_counter() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    main()
