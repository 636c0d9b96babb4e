"""PlanBench-XL's adversary search, per setting, on whole settings: the search space of planbench_xl/search.py
(which listed tool to prefer by a visible feature, whom to trust, repetition, the closing text) searched
on a seeded tuning half of each setting's tasks under a budget of policies; the strongest on accuracy
and the planner (the former floor) are then played on the other half, the figure reported, with its 95%
Wilson interval. Prints the rows bounds.SEARCHED holds (--table) and the docs table (--markdown).

    OMP_NUM_THREADS=1 python bench/planbench_xl_search.py [--budget 16] [--settings S ...] [--table] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

SETTINGS = ["default", "ratio_0.2", "ratio_0.4", "ratio_0.6", "ratio_0.8", "one_path_mixed", "one_path_explicit",
            "one_path_implicit", "one_path_misleading", "keep_shortest", "keep_longest"]


def _fmt(row) -> str:
    mean, low, high, n = row
    return f"{mean:.3f} [{low:.2f}, {high:.2f}] ({n})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--settings", nargs="*", default=SETTINGS)
    ap.add_argument("--table", action="store_true", help="print the rows of bounds.SEARCHED as JSON")
    ap.add_argument("--markdown", action="store_true", help="print the table docs/planbench_xl.md shows")
    args = ap.parse_args()

    from toolsweep.benchmarks.planbench_xl import PlanBenchXL
    from toolsweep.benchmarks.planbench_xl.search import (
        SPACE,
        held_out_score,
        policy_name,
        search_setting,
        setting_halves,
    )

    bench = PlanBenchXL()
    print(f"tuning half / held-out half of each setting, budget {args.budget} of {SPACE.size} policies, "
          f"load {os.getloadavg()[0]:.1f}")
    table = {}
    for setting in args.settings:
        t0 = time.perf_counter()
        tuning, held = setting_halves(bench, setting)
        result = search_setting(bench, setting, budget=args.budget, task_ids=tuning)
        spec, value = result.best["accuracy"]
        planner = result.scores[SPACE.baseline]["accuracy"]
        held_spec = held_out_score(bench, spec, setting, held)
        held_planner = held_out_score(bench, SPACE.baseline, setting, held)
        table[setting] = {"accuracy": {
            "searched": round(value, 3), "planner": round(planner, 3), "policy": policy_name(spec),
            "held_out": [round(x, 3) for x in held_spec[:3]] + [held_spec[3]],
            "held_out_planner": [round(x, 3) for x in held_planner[:3]] + [held_planner[3]]}}
        print(f"{setting:<22} tuning {planner:.3f} -> {value:.3f}  held out {_fmt(held_spec)}  planner "
              f"{_fmt(held_planner)}  {policy_name(spec)}  ({len(tuning)}+{len(held)} tasks, "
              f"{time.perf_counter() - t0:.0f} s)", flush=True)
    if args.table:
        print(json.dumps(table, indent=1))
    if args.markdown:
        print("\n| setting | planner, held out [95%] (n) | floor, held out [95%] (n) | picked on the tuning half |")
        print("|---|---|---|---|")
        for setting, row in table.items():
            r = row["accuracy"]
            parts = r["policy"].split(":", 1)[1].split(",")
            options = ", ".join(p for p in parts if tuple(p.split("=", 1)) not in SPACE.baseline)
            floor = r["held_out"] if r["searched"] > r["planner"] else r["held_out_planner"]
            print(f"| {setting} | {_fmt(r['held_out_planner'])} | {_fmt(floor)} | "
                  f"{options if r['searched'] > r['planner'] else 'the planner'} |")


if __name__ == "__main__":
    main()
