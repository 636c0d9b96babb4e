"""TRAJECT-Bench's adversary search, per setting: every policy of the search space (policies.search_space:
all tools, keyword top-k, name top-k) on a seeded sample of the setting's tasks, and per metric the
strongest, against `all_tools` (the former documented floor). Scoring under the default `paper_compat` (--mode).

    OMP_NUM_THREADS=1 python bench/traject_search.py [--tasks 20] [--settings S ...]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

SETTINGS = ["par-simple/domain/direct", "par-hard/domain/direct", "seq/domain/direct",
            "seq/domain/native", "par-simple/retrieval/direct", "par-hard/retrieval-all/direct"]
METRICS = ("inclusion", "usage", "traj_satisfy_proxy")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=20)
    ap.add_argument("--settings", nargs="*", default=SETTINGS)
    ap.add_argument("--data", default=os.environ.get("TOOLSWEEP_TRAJECT_DATA",
                                                     str(Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets" / "traject_bench")))
    ap.add_argument("--mode", default="off", help="paper_compat: off (the project default), exact, corrected")
    args = ap.parse_args()

    from toolsweep.benchmarks.traject_bench import TrajectBench
    from toolsweep.benchmarks.traject_bench.bounds import cell_sample
    from toolsweep.benchmarks.traject_bench.policies import SEARCH_PREFIX, search_space
    from toolsweep.evaluator.adversary import search
    from toolsweep.evaluator.exploits import aggregate, play

    bench = TrajectBench(data_dir=args.data, paper_compat=args.mode)
    space = search_space()
    print(f"paper_compat={args.mode}, {args.tasks} tasks per setting, {space.size} policies")
    print(f"{'setting':<32}{'metric':<20}{'all_tools':>10}{'best':>8}  policy")
    for setting in args.settings:
        t0 = time.perf_counter()
        ids = cell_sample(bench.tasks(setting), args.tasks, setting)

        def score(spec):
            name = SEARCH_PREFIX + ",".join(f"{k}={v}" for k, v in spec)
            return aggregate(bench.metrics(setting), asyncio.run(play(bench, name, setting, ids)))
        result = search(space, score, {m: True for m in METRICS}, budget=space.size)
        base = result.scores[space.baseline]
        for metric in METRICS:
            spec, value = result.best[metric]
            print(f"{setting:<32}{metric:<20}{base[metric]:10.3f}{value:8.3f}  {dict(spec)['tools']}")
        print(f"({time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
