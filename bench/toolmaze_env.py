"""ToolMaze environment throughput on one core: corpus / task / profile build times, and
steps/s and episodes/s of oracle episodes driven through run_episode (scoring included).

    OMP_NUM_THREADS=1 python bench/toolmaze_env.py [--tasks-per-cell 100] [--tool-view domain|task]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tasks-per-cell", type=int, default=100)
    ap.add_argument("--policy", default="oracle")
    ap.add_argument("--tool-view", default="domain", choices=("domain", "task"),
                    help="the tools each episode shows (ToolMaze option tool_view)")
    args = ap.parse_args()

    t0 = time.perf_counter()
    from toolsweep.benchmarks.toolmaze import ToolMaze
    from toolsweep.benchmarks.toolmaze.tools import build_corpus
    from toolsweep.evaluator.episode import run_episode
    from toolsweep.evaluator.types import WorkUnit

    t_import = time.perf_counter() - t0
    t0 = time.perf_counter()
    corpus = build_corpus()
    t_corpus = time.perf_counter() - t0
    bench = ToolMaze(tool_view=args.tool_view)
    level_times = {}
    for c in (1, 2, 3, 4):
        t0 = time.perf_counter()
        bench.data.level(c)
        level_times[c] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for c in (1, 2, 3, 4):
        for tid in bench.tasks(f"C{c}-P0-std"):
            for p in ("P1", "P2", "P3", "P4"):
                bench.profile(tid, p)
    t_prof = time.perf_counter() - t0

    print("ToolMaze environment benchmark (one process, one core)")
    print(f"{'stage':<34}{'seconds':>10}")
    print(f"{'import':<34}{t_import:>10.3f}")
    print(f"{'corpus (270 tools, 126 groups)':<34}{t_corpus:>10.3f}   ({len(corpus.tools)} tools)")
    for c, t in level_times.items():
        print(f"{f'tasks C{c} (100)':<34}{t:>10.3f}")
    print(f"{'fault profiles (400 x P1-P4)':<34}{t_prof:>10.3f}")
    print()

    async def cell(setting: str, ids: list[str]) -> tuple[int, int, int, float]:
        steps = calls = 0
        start = time.perf_counter()
        for tid in ids:
            env = bench.make_env(tid, setting, 0)
            pol = bench.make_scripted_policy(args.policy, env, 0)
            unit = WorkUnit(sweep="bench", model=args.policy, benchmark="toolmaze", setting=setting,
                            task_id=tid, seed=0)
            res = await run_episode(env, pol, unit, max_turns=bench.max_turns(setting))
            steps += res.num_turns
            calls += int(res.metrics["n_tool_calls"])
        return len(ids), steps, calls, time.perf_counter() - start

    print(f"{args.policy} episodes, std prompt, {args.tasks_per_cell} tasks per cell")
    print(f"{'level':<7}{'episodes':>9}{'steps':>8}{'calls':>8}{'seconds':>9}{'episodes/s':>12}{'steps/s':>10}")
    tot = [0, 0, 0, 0.0]
    for c in (1, 2, 3, 4):
        agg = [0, 0, 0, 0.0]
        for p in ("P0", "P1", "P2", "P3", "P4"):
            s = f"C{c}-{p}-std"
            r = asyncio.run(cell(s, bench.tasks(s)[: args.tasks_per_cell]))
            agg = [a + b for a, b in zip(agg, r)]
        tot = [a + b for a, b in zip(tot, agg)]
        print(f"C{c:<6}{agg[0]:>9}{agg[1]:>8}{agg[2]:>8}{agg[3]:>9.2f}{agg[0] / agg[3]:>12.1f}{agg[1] / agg[3]:>10.1f}")
    print(f"{'all':<7}{tot[0]:>9}{tot[1]:>8}{tot[2]:>8}{tot[3]:>9.2f}{tot[0] / tot[3]:>12.1f}{tot[1] / tot[3]:>10.1f}")


if __name__ == "__main__":
    main()
