"""Model waves on the stand-in server: what a wave switch costs and the share of a sweep with no model
serving (DESIGN §8: a switch costs no more than the server start it needs; idle share <= 5%).

A Ray cluster that declares 1 GPU (ray.cluster_utils.Cluster), M vLLM models behind the stand-in
server (tests/models/models_fake_vllm.py, started by the real launcher in the real ModelServer actor
and placement group), the fake benchmark with a fixed model latency. One sweep, M waves. Printed:

1. the server start alone (ModelRuntime.start_models of one model on the idle cluster, then its stop),
   repeated: the floor a switch is compared with;
2. the sweep's wave timeline: each wave's server start, serving time and stop, each switch (last unit
   of a wave recorded -> every server of the next wave healthy and its preflight done), and the share
   of the run (first wave's start to last wave's end) with no wave serving.

    python bench/wave_switch.py [--models 3 --tasks 150 --latency 0.2 --per-worker 16]
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAKES = ROOT / "tests" / "fakes"
STAND_IN = ROOT / "tests" / "models" / "models_fake_vllm.py"
sys.path.insert(0, str(FAKES))
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ["PYTHONPATH"] = os.pathsep.join([str(FAKES), str(ROOT), os.environ.get("PYTHONPATH", "")])


def stand_in(tmp: Path) -> tuple[str, Path]:
    script = tmp / "fake-python"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STAND_IN}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    model = tmp / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    (model / "model.safetensors").write_bytes(os.urandom(1024))
    return str(script), model


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", type=int, default=3)
    ap.add_argument("--tasks", type=int, default=150, help="units per model (one seed)")
    ap.add_argument("--latency", type=float, default=0.2, help="stand-in seconds per chat request")
    ap.add_argument("--per-worker", type=int, default=16, help="episodes in flight (one worker)")
    ap.add_argument("--starts", type=int, default=3, help="server starts timed alone")
    args = ap.parse_args()

    import ray
    from ray.cluster_utils import Cluster

    from toolsweep.cluster.config import SweepConfig
    from toolsweep.cluster.driver import run_sweep
    from toolsweep.cluster.models_runtime import ModelRuntime
    from toolsweep.evaluator.registry import register_benchmark
    from toolsweep.models.config import VLLMModelConfig

    register_benchmark("fake", "fake_bench:FakeBench")
    tmp = Path(tempfile.mkdtemp(prefix="wave-bench-"))
    python, model_dir = stand_in(tmp)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 4, "num_gpus": 1, "include_dashboard": False})
    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
    env = {"FAKE_VLLM_LATENCY_S": str(args.latency)}
    common = {"kind": "vllm", "path": str(model_dir), "device": "gpu", "python": python, "num_cpus": 0.5,
              "startup_timeout_s": 120, "env": env, "engine_args": {"max_num_seqs": args.per_worker}}
    try:
        runtime = ModelRuntime([VLLMModelConfig(name="alone", **common)], log_dir=str(tmp / "logs"))
        starts, stops = [], []
        for _ in range(args.starts):
            t0 = time.perf_counter()
            runtime.start_models(["alone"])
            t1 = time.perf_counter()
            runtime.stop_models(["alone"])
            starts.append(t1 - t0)
            stops.append(time.perf_counter() - t1)
        print(f"server start alone (actor + placement group + server healthy), {args.starts} runs: "
              f"median {statistics.median(starts):.2f} s (min {min(starts):.2f}, max {max(starts):.2f}); "
              f"stop median {statistics.median(stops):.2f} s")

        names = [f"m{i + 1}" for i in range(args.models)]
        cfg = SweepConfig.model_validate({
            "name": "wave-bench", "seeds": 1, "models": [{"name": n, **common} for n in names],
            "benchmarks": [{"name": "fake", "options": {"n_tasks": args.tasks}, "settings": ["small"]}],
            "concurrency": {"workers": 1, "episodes_per_worker": args.per_worker},
            "bootstrap": {"n_resamples": 200, "live_n_resamples": 50},
            "output_dir": str(tmp / "runs"), "mlflow": False,
        })
        t0 = time.perf_counter()
        out = run_sweep(cfg, progress=False, extra_benchmarks={"fake": "fake_bench:FakeBench"}, log=lambda m: None)
        wall = time.perf_counter() - t0
        waves = json.loads(out.run_dir.summary_path.read_text())["waves"]
        print(f"\nsweep: {args.models} models x {args.tasks} units on 1 GPU, latency {args.latency} s, "
              f"{args.per_worker} in flight; {out.done} units in {wall:.1f} s (driver wall)")
        print(f"{'wave':>4}  {'models':<8}  {'units':>5}  {'servers up s':>12}  {'preflight s':>11}  "
              f"{'serving s':>9}  {'stop s':>6}")
        for w in waves["waves"]:
            up = w["start_s"] - w["preflight_s"]
            print(f"{w['wave']:>4}  {','.join(w['models']):<8}  {w['done']:>5}  {up:>12.2f}  {w['preflight_s']:>11.2f}  "
                  f"{w['ended_at'] - w['serving_at']:>9.2f}  {w['stop_s']:>6.2f}")
        switches = waves["switch_s"]
        print(f"switches (last unit of a wave -> next wave serving): {', '.join(f'{s:.2f}' for s in switches)} s; "
              f"median {statistics.median(switches):.2f} s vs server start alone {statistics.median(starts):.2f} s")
        print(f"no model serving: {waves['idle_s']:.2f} s of the run = {100 * waves['idle_share']:.1f}% (target <= 5%)")
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
