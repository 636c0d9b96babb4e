"""ToolMaze's adversary search, per cell, on whole cells: the search picks each metric's strongest policy
on a seeded tuning half of the std cell's tasks (budget 24 policies), and the picked policy and the greedy
binder (the hand-picked baseline) are then played on the other half, the figure reported, with its 95%
Wilson interval. The table behind `bounds.SEARCHED` (`--json` writes it) and docs/toolmaze.md
(`--markdown` prints it).

    OMP_NUM_THREADS=1 python bench/toolmaze_search.py [--cells C1-P1 C2-P2] [--budget 24]
        [--json searched.json] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")


def _fmt(row) -> str:
    mean, low, high, n = row
    return f"{mean:.3f} [{low:.2f}, {high:.2f}] ({n})" if n else "— (0)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cells", nargs="*", default=None, help="e.g. C2-P2; default all 20")
    ap.add_argument("--budget", type=int, default=24, help="policies tried per cell")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="write the table (bounds.SEARCHED's form) to this file")
    ap.add_argument("--markdown", action="store_true", help="print the table as docs/toolmaze.md shows it")
    args = ap.parse_args()

    from toolsweep.benchmarks.toolmaze import ToolMaze
    from toolsweep.benchmarks.toolmaze.search import (
        SPACE,
        cell_halves,
        held_out_score,
        policy_name,
        score_cell,
        search_cell,
    )

    bench = ToolMaze()
    cells = args.cells or [f"C{c}-P{p}" for c in (1, 2, 3, 4) for p in range(5)]
    print(f"tuning half / held-out half of each cell, budget {args.budget} policies, space of {SPACE.size}")
    print(f"{'cell':<7}{'metric':<7}{'tuning: greedy':>15}{'searched':>10}   held out: searched [95%] (n)"
          f"   greedy [95%] (n)   policy")
    table: dict = {}
    for cell in cells:
        t0 = time.perf_counter()
        tuning, held = cell_halves(bench, cell, args.seed)
        base = score_cell(bench, SPACE.baseline, cell, tuning)
        result = search_cell(bench, cell, tuning, budget=args.budget, seed=args.seed)
        base_held = held_out_score(bench, SPACE.baseline, cell, held)
        for metric, (spec, value) in sorted(result.best.items()):
            held_row = held_out_score(bench, spec, cell, held)[metric]
            table.setdefault(cell, {})[metric] = {
                "searched": round(value, 3), "greedy": round(base[metric], 3), "policy": policy_name(spec),
                "held_out": [round(x, 3) for x in held_row[:3]] + [held_row[3]],
                "held_out_greedy": [round(x, 3) for x in base_held[metric][:3]] + [base_held[metric][3]],
            }
            print(f"{cell:<7}{metric:<7}{base[metric]:15.3f}{value:10.3f}   {_fmt(held_row):<28}"
                  f"{_fmt(base_held[metric]):<26}{policy_name(spec)}")
        print(f"({cell}: {len(result.scores)} policies on {len(tuning)} tasks, "
              f"held out {len(held)}, {time.perf_counter() - t0:.0f} s)", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(table, f, indent=1)
    if args.markdown:
        print("\n| cell | metric | held out: floor [95%] (n) | greedy binder [95%] (n) | picked on the tuning half |")
        print("|---|---|---|---|---|")
        for cell, metrics in table.items():
            for metric, row in sorted(metrics.items()):
                parts = row["policy"].split(":", 1)[1].split(",")
                options = ", ".join(p for p in parts if tuple(p.split("=", 1)) not in SPACE.baseline)
                floor = row["held_out"] if row["searched"] > row["greedy"] else row["held_out_greedy"]
                print(f"| {cell} | {metric.upper()} | {_fmt(floor)} | {_fmt(row['held_out_greedy'])} | "
                      f"{options or 'the greedy binder'} |")


if __name__ == "__main__":
    main()
