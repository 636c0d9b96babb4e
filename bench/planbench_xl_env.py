"""PlanBench-XL environment performance: world build, memory, and episode steps/s on one core.

    OMP_NUM_THREADS=1 python bench/planbench_xl_env.py [--tasks N]

Prints a table: world and task generation time, the memory one world holds (tracemalloc), the
one-time cost of the path families and blocker choices, and steps/s of scripted episodes (oracle and
planner) driven through run_episode, including retrieval, validation and scoring.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import time
import tracemalloc


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=327, help="tasks per measured episode batch")
    args = ap.parse_args()
    rows: list[tuple[str, str]] = []

    t0 = time.perf_counter()
    from toolsweep.benchmarks.planbench_xl.tasks import build_tasks
    from toolsweep.benchmarks.planbench_xl.world import build_world

    world = build_world()
    t_world = time.perf_counter() - t0
    t1 = time.perf_counter()
    ts = build_tasks(world, n_cases=8)  # the same cache key the benchmark uses
    t_tasks = time.perf_counter() - t1
    t2 = time.perf_counter()
    for t in ts.tasks:
        t.minimal_sets  # noqa: B018 - force the lazy path families
        t.d_gt  # noqa: B018
    t_paths = time.perf_counter() - t2
    rows += [
        ("world build (56 datatypes, 1,665 tools, 8 cases)", f"{t_world:.2f} s"),
        ("task build (426 candidates -> 327 tasks + 185 single-step)", f"{t_tasks:.2f} s"),
        ("path families M_i of all 327 tasks (lazy, once per process)", f"{t_paths:.2f} s"),
    ]
    # Memory of one more world, built uncached under tracemalloc (tracing slows the build ~5x, so
    # the times above are measured without it).
    gc.collect()
    tracemalloc.start()
    w2 = build_world.__wrapped__()
    mem_world = tracemalloc.get_traced_memory()[0]
    ts2 = build_tasks.__wrapped__(w2)
    mem_tasks = tracemalloc.get_traced_memory()[0]
    for t in ts2.tasks:
        t.minimal_sets  # noqa: B018
    mem_paths = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del w2, ts2
    rows += [
        ("memory: world", f"{mem_world / 2**20:.1f} MiB"),
        ("memory: world + tasks", f"{mem_tasks / 2**20:.1f} MiB"),
        ("memory: world + tasks + path families (+ memos)", f"{mem_paths / 2**20:.1f} MiB"),
    ]

    from toolsweep.benchmarks.planbench_xl import PlanBenchXL
    from toolsweep.benchmarks.planbench_xl.blocking import SETTINGS
    from toolsweep.evaluator.episode import run_episode
    from toolsweep.evaluator.types import WorkUnit

    b = PlanBenchXL()
    for setting in ("one_path_mixed", "ratio_0.4", "keep_shortest"):
        t = time.perf_counter()
        for task in ts.tasks:
            b.blocker.choose(task, SETTINGS[setting], 42)
        rows.append((f"blocker choice, {setting}, 327 tasks (once per process and seed)",
                     f"{time.perf_counter() - t:.2f} s"))

    async def batch(setting: str, policy: str, ids: list[str], concurrent: bool) -> tuple[int, float, float]:
        async def one(tid: str):
            env = b.make_env(tid, setting, 42)
            pol = b.make_scripted_policy(policy, env, 7)
            unit = WorkUnit(sweep="bench", model=policy, benchmark="planbench_xl", setting=setting, task_id=tid, seed=42)
            return await run_episode(env, pol, unit, max_turns=b.max_turns(setting))

        start = time.perf_counter()
        if concurrent:
            res = await asyncio.gather(*(one(t) for t in ids))
        else:
            res = [await one(t) for t in ids]
        wall = time.perf_counter() - start
        return sum(len(r.trajectory.steps) for r in res), wall, sum(r.metrics["accuracy"] for r in res) / len(res)

    ids = b.tasks("default")[: args.tasks]
    for setting, policy in (("default", "oracle"), ("one_path_mixed", "oracle"), ("default", "planner"),
                            ("one_path_mixed", "planner"), ("default", "random")):
        steps, wall, acc = asyncio.run(batch(setting, policy, ids, concurrent=False))
        steps2, wall2, _ = asyncio.run(batch(setting, policy, ids, concurrent=False))
        rows.append((f"{policy} on {setting}: {len(ids)} episodes, {steps} steps (acc {acc:.3f}), first pass",
                     f"{steps / wall:,.0f} steps/s"))
        rows.append((f"{policy} on {setting}: same episodes again (warm caches)", f"{steps2 / wall2:,.0f} steps/s"))
    steps, wall, _ = asyncio.run(batch("one_path_mixed", "planner", ids, concurrent=True))
    rows.append((f"planner on one_path_mixed, {len(ids)} episodes in flight at once", f"{steps / wall:,.0f} steps/s"))

    width = max(len(k) for k, _ in rows)
    print(f"PlanBench-XL environment benchmark (pid {os.getpid()}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')})")
    for k, v in rows:
        print(f"  {k:<{width}}  {v:>14}")


if __name__ == "__main__":
    main()
