"""TRAJECT-Bench's adversary search, per setting: the search space of traject_bench/search.py (which tools,
argument binding, optional parameters, order, a second binding) searched on a seeded sample of each
setting's tasks under a fixed budget of policies, and per metric the strongest against `all_tools` (the
former documented floor). Prints the table bounds.SEARCHED holds (--table) or a readable one.

    OMP_NUM_THREADS=1 python bench/traject_search.py [--tasks 12] [--budget 24] [--settings S ...] [--table]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

SETTINGS = [f"{split}/{pool}/direct" for split in ("par-simple", "par-hard", "seq")
            for pool in ("domain", "all", "retrieval", "retrieval-all", "fixed-k")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=12)
    ap.add_argument("--budget", type=int, default=24)
    ap.add_argument("--settings", nargs="*", default=SETTINGS)
    ap.add_argument("--table", action="store_true", help="print the rows of bounds.SEARCHED as JSON")
    ap.add_argument("--data", default=os.environ.get("TOOLSWEEP_TRAJECT_DATA",
                                                     str(Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets" / "traject_bench")))
    args = ap.parse_args()

    from toolsweep.benchmarks.traject_bench import TrajectBench
    from toolsweep.benchmarks.traject_bench.search import METRICS, SPACE, policy_name, search_setting

    bench = TrajectBench(data_dir=args.data)
    print(f"{args.tasks} tasks per setting, budget {args.budget} of {SPACE.size} policies, load {os.getloadavg()[0]:.1f}")
    table = {}
    for setting in args.settings:
        t0 = time.perf_counter()
        result = search_setting(bench, setting, args.tasks, budget=args.budget)
        base = result.scores[SPACE.baseline]
        table[setting] = {m: {"searched": round(v, 3), "all_tools": round(base[m], 3), "policy": policy_name(s)}
                          for m, (s, v) in sorted(result.best.items()) if m in METRICS}
        for metric, row in table[setting].items():
            print(f"{setting:<32}{metric:<20}{row['all_tools']:8.3f}{row['searched']:8.3f}  {row['policy']}")
        print(f"({time.perf_counter() - t0:.0f} s)", flush=True)
    if args.table:
        print(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
