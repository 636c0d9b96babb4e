"""ToolMaze's adversary search, per cell: the strongest searched policy per metric (TSR, PRR) on a
seeded sample of each std cell's tasks, against the greedy binder (the hand-picked baseline) on the
same tasks. The table behind `bounds.SEARCHED`.

    OMP_NUM_THREADS=1 python bench/toolmaze_search.py [--cells C1-P1 C2-P2] [--tasks 8] [--budget 16]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cells", nargs="*", default=None, help="e.g. C2-P2; default all 20")
    ap.add_argument("--tasks", type=int, default=8, help="tasks per cell (a seeded draw)")
    ap.add_argument("--budget", type=int, default=16, help="policies tried per cell")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from toolsweep.benchmarks.toolmaze import ToolMaze
    from toolsweep.benchmarks.toolmaze.search import SPACE, cell_sample, policy_name, score_cell, search_cell

    bench = ToolMaze()
    cells = args.cells or [f"C{c}-P{p}" for c in (1, 2, 3, 4) for p in range(5)]
    print(f"{args.tasks} tasks per cell, budget {args.budget} policies, space of {SPACE.size}")
    print(f"{'cell':<7}{'metric':<7}{'greedy':>8}{'searched':>10}  policy")
    for cell in cells:
        t0 = time.perf_counter()
        ids = cell_sample(bench, cell, args.tasks, args.seed)
        base = score_cell(bench, SPACE.baseline, cell, ids)
        result = search_cell(bench, cell, ids, budget=args.budget, seed=args.seed)
        for metric, (spec, value) in sorted(result.best.items()):
            print(f"{cell:<7}{metric:<7}{base[metric]:8.3f}{value:10.3f}  {policy_name(spec)}")
        print(f"({cell}: {len(result.scores)} policies, {time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
