"""PlanBench-XL's adversary search, per setting: the search space of planbench_xl/search.py (which listed
tool to prefer by a visible feature, whom to trust, repetition, the closing text) searched on a seeded
sample of each setting's tasks under a fixed budget of policies; per setting the strongest on accuracy
against the planner (the former floor). Prints the rows bounds.SEARCHED holds (--table).

    OMP_NUM_THREADS=1 python bench/planbench_xl_search.py [--tasks 12] [--budget 16] [--settings S ...] [--table]
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

SETTINGS = ["default", "ratio_0.2", "ratio_0.4", "ratio_0.6", "ratio_0.8", "one_path_mixed", "one_path_explicit",
            "one_path_implicit", "one_path_misleading", "keep_shortest", "keep_longest"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=12)
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--settings", nargs="*", default=SETTINGS)
    ap.add_argument("--table", action="store_true", help="print the rows of bounds.SEARCHED as JSON")
    args = ap.parse_args()

    from toolsweep.benchmarks.planbench_xl import PlanBenchXL
    from toolsweep.benchmarks.planbench_xl.search import SPACE, policy_name, search_setting

    bench = PlanBenchXL()
    print(f"{args.tasks} tasks per setting, budget {args.budget} of {SPACE.size} policies, load {os.getloadavg()[0]:.1f}")
    table = {}
    for setting in args.settings:
        t0 = time.perf_counter()
        result = search_setting(bench, setting, args.tasks, budget=args.budget)
        spec, value = result.best["accuracy"]
        planner = result.scores[SPACE.baseline]["accuracy"]
        table[setting] = {"accuracy": {"searched": round(value, 3), "planner": round(planner, 3),
                                       "policy": policy_name(spec)}}
        print(f"{setting:<22}{planner:8.3f}{value:8.3f}  {policy_name(spec)}  ({time.perf_counter() - t0:.0f} s)",
              flush=True)
    if args.table:
        print(json.dumps(table, indent=1))


if __name__ == "__main__":
    main()
