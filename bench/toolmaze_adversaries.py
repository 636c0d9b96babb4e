"""ToolMaze adversaries and positive controls, per cell: TSR, PRR, RC and exposure of each scripted
policy on every task of every std cell (C1-C4 x P0-P4), the table behind the exploit suite's
per-cell bounds.

    OMP_NUM_THREADS=1 python bench/toolmaze_adversaries.py [--policies greedy_binder random ...]
        [--tasks 100] [--cells C2-P2 C3-P2] [--options '{"require_failure_ack": false}']
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

DEFAULT = ["greedy_binder", "call_all_members", "abort_first_error", "random", "retry_then_switch",
           "retry", "oracle"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policies", nargs="*", default=DEFAULT)
    ap.add_argument("--tasks", type=int, default=100, help="tasks per cell (spread over the cell's order)")
    ap.add_argument("--cells", nargs="*", default=None, help="e.g. C2-P2 (std prompt); default all 20")
    ap.add_argument("--options", default="{}", help="ToolMaze options as JSON")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from toolsweep.benchmarks.toolmaze import ToolMaze
    from toolsweep.evaluator.exploits import aggregate, play, sample_tasks

    bench = ToolMaze(**json.loads(args.options))
    cells = args.cells or [f"C{c}-P{p}" for c in (1, 2, 3, 4) for p in range(5)]
    print(f"toolmaze options {bench.options.model_dump()}  ({args.tasks} tasks per cell, seed {args.seed})")
    for policy in args.policies:
        t0 = time.perf_counter()
        print(f"\n{policy}")
        print(f"{'cell':<8}{'n':>5}{'exposed':>9}{'recov':>7}{'TSR':>8}{'PRR':>8}{'RC':>8}")
        for cell in cells:
            setting = f"{cell}-std"
            ids = sample_tasks(bench.tasks(setting), args.tasks)
            results = asyncio.run(play(bench, policy, setting, ids, seed=args.seed))
            v = aggregate(bench.metrics(setting), results)
            exposed = sum(1 for r in results if r.metrics.get("exposed") == 1.0)
            recov = sum(1 for r in results if r.metrics.get("prr") == 1.0)

            def f(k: str) -> str:
                x = v.get(k, math.nan)
                return "     —" if not math.isfinite(x) else f"{x:8.3f}"
            print(f"{cell:<8}{len(results):>5}{exposed:>9}{recov:>7}{f('tsr')}{f('prr')}{f('rc')}")
        print(f"({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
