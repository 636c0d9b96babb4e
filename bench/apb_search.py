"""APB's adversary search, per setting: the search space of apb/search.py (which tool a clause gets, order,
argument binding, when to refuse, which tool replaces a broken one) searched on a seeded sample of each
setting's tasks under a fixed budget of policies; per setting the strongest on `correct` against the
heuristic (the former floor). Prints the rows bounds.SEARCHED holds (--table), then, per refusal
option, the calibration across settings (§7.5: TRR over the Unsolvable kinds, FRR on the solvable
controls): the refusal decision is one policy over both, which no single setting's search can score.

    OMP_NUM_THREADS=1 python bench/apb_search.py [--tasks 20] [--budget 24] [--settings S ...] [--table]
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

SETTINGS = ["holistic", "stepwise_k1", "stepwise_k3", "broken", "unsolvable_conflict", "unsolvable_info",
            "unsolvable_tool", "unsolvable_visual", "unsolvable_control", "extraneous_holistic_n4",
            "extraneous_stepwise_n4", "efficiency"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=20)
    ap.add_argument("--budget", type=int, default=24)
    ap.add_argument("--settings", nargs="*", default=SETTINGS)
    ap.add_argument("--table", action="store_true", help="print the rows of bounds.SEARCHED as JSON")
    args = ap.parse_args()

    from toolsweep.benchmarks.apb import APB
    from toolsweep.benchmarks.apb.search import SPACE, policy_name, search_setting

    bench = APB()
    print(f"{args.tasks} tasks per setting, budget {args.budget} of {SPACE.size} policies, load {os.getloadavg()[0]:.1f}")
    table = {}
    for setting in args.settings:
        t0 = time.perf_counter()
        result = search_setting(bench, setting, args.tasks, budget=args.budget)
        spec, value = result.best["correct"]
        base = result.scores[SPACE.baseline]["correct"]
        table[setting] = {"correct": {"searched": round(value, 3), "heuristic": round(base, 3),
                                      "policy": policy_name(spec)}}
        print(f"{setting:<26}{base:8.3f}{value:8.3f}  {policy_name(spec)}  ({time.perf_counter() - t0:.0f} s)",
              flush=True)
    if args.table:
        print(json.dumps(table, indent=1))
    calibration_rows(bench, args.tasks)


def calibration_rows(bench, n_tasks: int) -> None:
    """Each refusal option with the heuristic's other choices, on the same seeded samples (bounds.CALIBRATION)."""
    from toolsweep.benchmarks.apb.search import SPACE, UNSOLVABLE, refusal_calibration

    print(f"{'refuse':<14}" + "".join(f"{k.removeprefix('unsolvable_'):>10}" for k in UNSOLVABLE)
          + f"{'TRR':>8}{'FRR':>8}{'Calibration':>13}")
    for option in dict(SPACE.primitives)["refuse"]:
        r = refusal_calibration(bench, option, n_tasks)
        print(f"{option:<14}" + "".join(f"{r['by_kind'][k]:10.3f}" for k in UNSOLVABLE)
              + f"{r['TRR']:8.3f}{r['FRR']:8.3f}{r['Calibration']:13.3f}", flush=True)


if __name__ == "__main__":
    main()
