"""TRAJECT-Bench environment throughput: data load time, then oracle episodes/s and steps/s per
setting on one core.

Run: OMP_NUM_THREADS=1 python bench/traject_bench_env.py [--data DIR] [--limit N] [--settings all|main]
Episodes go through `toolsweep.evaluator.run_episode` exactly as in a rollout worker (no Ray, no
model). Rates are per second of process CPU time (the machine may be shared) and of wall time.
The first pass over a setting warms per-process caches (rendered pools, retrieval results); with
--warm the table reports a second pass.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

MAIN = [
    "par-simple/domain/direct", "par-hard/domain/direct", "seq/domain/direct",
    "par-simple/domain/cot", "seq/domain/cot",
    "par-simple/retrieval/direct", "par-simple/retrieval-all/direct", "par-simple/fixed-k/direct",
    "par-simple/domain/native", "seq/domain/native", "par-hard/all/native",
    "par-simple/domain/react-domain", "seq/domain/react-domain",
    "par-hard/retrieval/react-static", "par-hard/retrieval/react-dynamic", "seq/retrieval/react-dynamic",
]  # fmt: skip


def main() -> None:
    repo = Path(__file__).resolve().parents[1]
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.environ.get("TOOLSWEEP_TRAJECT_DATA", str(repo / ".." / "shared" / "datasets" / "traject_bench")))
    ap.add_argument("--limit", type=int, default=0, help="max tasks per setting (0 = all)")
    ap.add_argument("--settings", default="main", help="'main' (16 representative settings) or 'all'")
    ap.add_argument("--warm", action="store_true", help="time a second pass (caches warm)")
    args = ap.parse_args()

    from toolsweep.benchmarks.traject_bench import TrajectBench
    from toolsweep.benchmarks.traject_bench.data import load_dataset
    from toolsweep.evaluator.episode import run_episode
    from toolsweep.evaluator.types import WorkUnit

    c0, w0 = time.process_time(), time.perf_counter()
    ds = load_dataset(args.data)
    load_cpu, load_wall = time.process_time() - c0, time.perf_counter() - w0
    c1, w1 = time.process_time(), time.perf_counter()
    bench = TrajectBench(data_dir=args.data)
    idx_cpu, idx_wall = time.process_time() - c1, time.perf_counter() - w1
    n_tasks = {s: len(v) for s, v in ds.tasks.items()}
    print(f"data load: {len(ds.domains)} domains {ds.domains}, tasks {n_tasks}, {len(ds.catalog)} tools "
          f"in {load_cpu:.2f} s CPU / {load_wall:.2f} s wall; replay index {idx_cpu:.2f} s CPU / {idx_wall:.2f} s wall")

    async def run(setting: str, ids: list[str]) -> tuple[int, int]:
        ok = steps = 0
        for tid in ids:
            env = bench.make_env(tid, setting, 0)
            pol = bench.make_scripted_policy("oracle", env, 0)
            unit = WorkUnit(sweep="bench", model="oracle", benchmark="traject_bench", setting=setting, task_id=tid, seed=0)
            r = await run_episode(env, pol, unit, max_turns=bench.max_turns(setting))
            m = r.metrics
            ok += int(m["em"] == m["inclusion"] == m["acc"] == 1.0 and m["usage_num"] == m["usage_den"])
            steps += r.num_turns
        return ok, steps

    settings = list(bench.settings()) if args.settings == "all" else [s for s in MAIN if s in bench.settings()]
    print(f"{'setting':34s} {'episodes':>8s} {'oracle ok':>9s} {'eps/s CPU':>10s} {'steps/s CPU':>11s} {'eps/s wall':>10s}")
    tot_n = tot_steps = tot_cpu = tot_wall = 0.0
    for setting in settings:
        ids = bench.tasks(setting)
        if args.limit:
            ids = ids[: args.limit]
        if args.warm:
            asyncio.run(run(setting, ids))
        c, w = time.process_time(), time.perf_counter()
        ok, steps = asyncio.run(run(setting, ids))
        dc, dw = time.process_time() - c, time.perf_counter() - w
        tot_n += len(ids)
        tot_steps += steps
        tot_cpu += dc
        tot_wall += dw
        print(f"{setting:34s} {len(ids):8d} {ok:9d} {len(ids) / dc:10.0f} {steps / dc:11.0f} {len(ids) / dw:10.0f}")
    print(f"{'TOTAL':34s} {int(tot_n):8d} {'':9s} {tot_n / tot_cpu:10.0f} {tot_steps / tot_cpu:11.0f} {tot_n / tot_wall:10.0f}")


if __name__ == "__main__":
    main()
