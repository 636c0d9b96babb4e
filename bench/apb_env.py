"""APB environment throughput: case generation time and oracle episodes/s per setting on one core.

Run: OMP_NUM_THREADS=1 python bench/apb_env.py [--limit N]
Episodes go through `toolsweep.evaluator.run_episode` exactly as in a rollout worker (no Ray, no model).
Times are process CPU time (the machine may be shared) and wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=0, help="max tasks per setting (0 = all)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from toolsweep.benchmarks.apb import APB
    from toolsweep.benchmarks.apb.generator import generate
    from toolsweep.evaluator.episode import run_episode
    from toolsweep.evaluator.types import WorkUnit

    c0, w0 = time.process_time(), time.perf_counter()
    ds = generate(args.seed)
    gen_cpu, gen_wall = time.process_time() - c0, time.perf_counter() - w0
    n_cases = sum(len(v) for v in ds.tasks.values())
    print(f"case generation (gen_seed={args.seed}): {n_cases} cases over {len(ds.tasks)} settings "
          f"({len(ds.bases)} bases) in {gen_cpu:.2f} s CPU / {gen_wall:.2f} s wall")

    bench = APB(gen_seed=args.seed)
    import scipy.optimize  # noqa: F401 - one-time import, not part of the per-episode cost

    async def run(setting: str, ids: list[str]) -> tuple[int, float]:
        ok = 0
        for tid in ids:
            env = bench.make_env(tid, setting, 0)
            pol = bench.make_scripted_policy("oracle", env, 0)
            unit = WorkUnit(sweep="bench", model="oracle", benchmark="apb", setting=setting, task_id=tid, seed=0)
            r = await run_episode(env, pol, unit, max_turns=bench.max_turns(setting))
            key = "pass" if "pass" in r.metrics else "correct"
            ok += int(r.metrics[key] == 1.0)
        return ok, 0.0

    print(f"{'setting':28s} {'episodes':>8s} {'oracle ok':>9s} {'eps/s (CPU)':>12s} {'eps/s (wall)':>12s}")
    tot_n = tot_cpu = tot_wall = 0.0
    for setting in bench.settings():
        ids = bench.tasks(setting)
        if args.limit:
            ids = ids[: args.limit]
        c, w = time.process_time(), time.perf_counter()
        ok, _ = asyncio.run(run(setting, ids))
        dc, dw = time.process_time() - c, time.perf_counter() - w
        tot_n += len(ids)
        tot_cpu += dc
        tot_wall += dw
        print(f"{setting:28s} {len(ids):8d} {ok:9d} {len(ids) / dc:12.0f} {len(ids) / dw:12.0f}")
    print(f"{'TOTAL':28s} {int(tot_n):8d} {'':9s} {tot_n / tot_cpu:12.0f} {tot_n / tot_wall:12.0f}")


if __name__ == "__main__":
    main()
