"""Scheduler efficiency and environment throughput, measured through the real cluster path.

1. A model endpoint with fixed latency L per call, N episodes of T turns, concurrency K:
   the sweep's wall time against the ideal ceil(N/K)*T*L (targets: ideal/actual >= 0.95 at K = 256, >= 0.9 at K = 1,024),
   then where the time beyond the ideal went: the first wave's start, the turns, the way back; and, where
   K >= N, the wave played in the workers alone, without the driver and Ray's calls (what the harness costs there).
   Units beyond the first wave wait at the workers as spares (`--spares 0` turns them off, to compare).
2. Environment-only throughput with scripted policies (no model): episodes/s and steps/s with 1 and
   2 rollout workers, on a real benchmark.

    python bench/scheduler.py [--episodes 1024 --turns 10 --latency 0.05 --ks 16 64 256 1024] [--spares 0 auto]
                              [--benchmark toolmaze]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parent), os.environ.get("PYTHONPATH", "")])

from toolsweep.cluster.config import SweepConfig  # noqa: E402
from toolsweep.cluster.driver import run_sweep  # noqa: E402
from toolsweep.evaluator.registry import get_benchmark  # noqa: E402

EXTRA = {"latency": "_latency_bench:LatencyBench"}


def sweep(tmp: str, name: str, models: list[dict], bench: dict, workers: int, per_worker: int, seeds=1,
          spares: int | None = None, **extra) -> tuple[float, object]:
    cfg = SweepConfig.model_validate({
        "name": name, "seeds": seeds, "models": models, "benchmarks": [bench],
        "concurrency": {"workers": workers, "episodes_per_worker": per_worker, "spares_per_worker": spares},
        "bootstrap": {"n_resamples": 1000, "live_n_resamples": 100},
        "output_dir": tmp, "mlflow": False, **extra,
    })
    t0 = time.perf_counter()
    out = run_sweep(cfg, progress=False, extra_benchmarks=EXTRA, log=lambda m: None)
    return time.perf_counter() - t0, out


def time_lost(out, k: int, episode_s: float) -> list[tuple[float, float]]:
    """Median and worst of each episode's delays, from the stamps the chain environment puts in its
    metrics and the driver's `finished_at`: the sweep started `wall_s` before its last record."""
    table = out.run_dir.read_table(columns=["metrics", "finished_at"]).to_pydict()
    stamps = [json.loads(m) for m in table["metrics"]]
    start = max(table["finished_at"]) - out.wall_s
    first_wave = sorted(s["reset_at"] for s in stamps)[:k]
    parts = [
        [r - start for r in first_wave],
        [s["last_step_at"] - s["reset_at"] - episode_s for s in stamps],
        [f - s["scored_at"] for s, f in zip(stamps, table["finished_at"])],
    ]
    return [(1e3 * statistics.median(p), 1e3 * max(p)) for p in parts]


def stand_in_ceiling(episodes: int, turns: int, latency: float) -> float:
    """ideal/actual of the fixed-latency stand-in alone: `episodes` tasks that only sleep `turns` times
    `latency` on uvloop, as one worker's wave does with no harness around it. Its timers fire on the
    millisecond and late, so this is the best any harness can score against it."""
    import asyncio

    import uvloop

    async def episode() -> None:
        for _ in range(turns):
            await asyncio.sleep(latency)

    async def wave() -> float:
        t = time.perf_counter()
        await asyncio.gather(*(episode() for _ in range(episodes)))
        return time.perf_counter() - t

    return statistics.median(turns * latency / uvloop.run(wave()) for _ in range(3))


def workers_alone(k: int, workers: int, episodes: int, turns: int, latency: float, repeat: int = 3) -> float:
    """ideal/actual of a sweep's first wave (min(K, N) units, the whole sweep when K >= N) played inside the rollout workers, each its
    share on its own loop, all at once, with no driver and no Ray call while they play: what the harness
    costs in the workers. The sweep's ratio falls short of this by what the leases, Ray's calls and the
    driver's recording add. Median of `repeat` waves."""
    import ray

    from toolsweep.cluster.scheduler import SUBMIT_CHUNK
    from toolsweep.evaluator.encoded import pack_unit
    from toolsweep.evaluator.types import WorkUnit
    from toolsweep.models.config import ScriptedModelConfig

    from _local_wave import LocalWaveWorker

    models = {"fixed": ScriptedModelConfig(name="fixed", kind="scripted", policy="fixed_latency")}
    options = {"latency": {"n_tasks": episodes, "turns": turns, "latency_s": latency}}
    actors = [ray.remote(LocalWaveWorker).options(max_concurrency=10_000).remote(
        f"alone-{i}", models, options, None, EXTRA) for i in range(workers)]
    try:
        ray.get([a.warmup.remote({"latency": ["chain"]}) for a in actors])
        share = math.ceil(min(k, episodes) / workers)
        ratios = []
        for wave in range(repeat):
            units = [WorkUnit(sweep=f"alone{wave}", model="fixed", benchmark="latency", setting="chain",
                              task_id=f"e{i}", seed=0) for i in range(share * workers)]
            wires = [pack_unit(u) for u in units]
            walls = ray.get([a.local_wave.remote(wires[i * share : (i + 1) * share], SUBMIT_CHUNK)
                             for i, a in enumerate(actors)])
            ratios.append(turns * latency / max(walls))
        return statistics.median(ratios)
    finally:
        for a in actors:
            ray.kill(a)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=1024)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--ks", type=int, nargs="*", default=[16, 64, 256, 1024], help="concurrency levels")
    ap.add_argument("--workers", type=int, default=2, help="rollout workers")
    ap.add_argument("--repeat", type=int, default=1, help="runs per K (the machine is noisy)")
    ap.add_argument("--spares", nargs="*", default=[None], type=lambda v: None if v == "auto" else int(v),
                    help="spares per worker to compare, run alternately: a number, or auto (the config's "
                         "default, as many as the episodes per worker); e.g. --spares 0 auto")
    ap.add_argument("--benchmark", default="toolmaze", help="benchmark for the environment-only table")
    ap.add_argument("--env-tasks", type=int, default=100, help="tasks of the environment-only table (0: skip it)")
    args = ap.parse_args()

    import ray

    from toolsweep.evaluator.registry import register_benchmark

    register_benchmark("latency", EXTRA["latency"])
    from toolsweep.cluster.ray_start import start_embedded_ray

    # a busy machine's Ray start can time out (Ray waits 30 s for its raylet): retried for 120 s
    start_embedded_ray(120, print, init=lambda: ray.init(
        address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False))
    with tempfile.TemporaryDirectory() as tmp:
        print(f"scheduler efficiency: N={args.episodes} episodes x T={args.turns} turns, L={args.latency*1000:.0f} ms per call")
        print("  sweep s = first lease to last result (workers warmed up); total s = the whole run_sweep call,")
        print("  including validation, worker start, the final 10,000-resample bootstrap and the report")
        losses = []
        print(f"{'K':>5} {'workers':>8} {'spares':>7} {'ideal s':>9} {'sweep s':>9} {'ideal/sweep':>12} {'total s':>9}")
        runs = [(k, args.workers, spares) for k in args.ks for _ in range(args.repeat) for spares in args.spares]
        for k, workers, spares in runs:
            bench = {"name": "latency", "settings": ["chain"],
                     "options": {"n_tasks": args.episodes, "turns": args.turns, "latency_s": args.latency}}
            models = [{"name": "fixed", "kind": "scripted", "policy": "fixed_latency", "max_in_flight": k}]
            per_worker = math.ceil(k / workers)
            total, out = sweep(tmp, f"lat{k}w{workers}{uuid.uuid4().hex[:6]}", models, bench, workers, per_worker,
                               spares=spares)
            ideal = math.ceil(args.episodes / k) * args.turns * args.latency
            assert out.done == args.episodes
            shown = per_worker if spares is None else spares
            print(f"{k:>5} {workers:>8} {shown:>7} {ideal:>9.2f} {out.wall_s:>9.2f} {ideal / out.wall_s:>12.3f} {total:>9.2f}")
            losses.append((f"{k}/{shown}", time_lost(out, k, args.turns * args.latency)))

        print("\nwhere the time beyond ideal went (ms, median / max over episodes): start = the first wave's")
        print("  episodes from the first lease to reset; turns = reset to last step beyond T*L (the stand-in's")
        print("  timers fire up to 1 ms late, and a wave's steps queue behind each other); after = from being")
        print("  scored in the worker to being recorded by the driver")
        print(f"{'K/spares':>10} {'start':>13} {'turns':>13} {'after':>13}")
        for k, parts in losses:
            print(f"{k:>10} " + " ".join(f"{med:>6.1f}/{worst:<6.1f}" for med, worst in parts))

        one_wave = [k for k in args.ks if k >= args.episodes]
        if one_wave:  # with K < N the sweep's waves overlap (spares), which one wave alone does not show
            print("\nthe harness alone in the workers, where K >= N (one wave): the wave played in the rollout workers with")
            print("  no driver and no Ray call while it plays (median of 3 waves); the sweep falls short of it by what")
            print("  the leases, Ray's calls and the driver's recording add")
            print(f"{'K':>5} {'workers':>8} {'ideal/actual':>13}")
            for k in one_wave:
                alone = workers_alone(k, args.workers, args.episodes, args.turns, args.latency)
                print(f"{k:>5} {args.workers:>8} {alone:>13.3f}")

        per_worker = math.ceil(max(args.ks) / args.workers)
        print(f"\nthe stand-in alone, {per_worker} episodes sleeping {args.turns} x {args.latency*1000:.0f} ms on one loop "
              f"(no harness): ideal/actual {stand_in_ceiling(per_worker, args.turns, args.latency):.3f}, the ceiling")

        name = args.benchmark
        if not args.env_tasks:
            ray.shutdown()
            return
        try:
            b = get_benchmark(name)
            setting = next(iter(b.settings()))
        except Exception as exc:  # noqa: BLE001
            print(f"\n(environment-only table skipped: {name}: {exc})")
            return
        print(f"\nenvironment-only throughput: {name} / {setting}, oracle, {args.env_tasks} tasks x 2 seeds")
        print(f"{'workers':>8} {'episodes':>9} {'steps':>7} {'sweep s':>8} {'episodes/s':>11} {'steps/s':>9}")
        for workers in (1, 2):
            bench = {"name": name, "settings": [setting], "tasks": {"limit": args.env_tasks}}
            models = [{"name": "oracle", "kind": "scripted", "policy": "oracle"}]
            _, out = sweep(tmp, f"env{workers}", models, bench, workers, 64, seeds=2)
            wall = out.wall_s
            steps = sum(out.run_dir.read_table(columns=["num_turns"]).column("num_turns").to_pylist())
            print(f"{workers:>8} {out.done:>9} {steps:>7} {wall:>8.2f} {out.done / wall:>11.1f} {steps / wall:>9.0f}")
    ray.shutdown()


if __name__ == "__main__":
    main()
