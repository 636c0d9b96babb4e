"""The transformers backend before and after, side by side: concurrent ToolMaze episodes (~6,500-token
prompts sharing their tool list) and a short-prompt workload, each played by every engine given.

An engine is a directory whose `toolsweep` package is imported (this checkout by default; `--before
/path/to/other/checkout` adds another, e.g. the previous backend), each workload in a process of its own
(`PYTHONPATH=<dir>`) so that peak memory is its own. SmolLM2-135M-Instruct (or `--model`), greedy, one
torch thread on CPU. Prints per engine and workload: requests, prompt tokens asked for and computed,
decoding steps, wall time, peak memory, the ratio to the first engine, and whether the replies are the
same as the first engine's. Needs the hf extra and `toolsweep models prepare smollm2` (or `--model`).

    python bench/hf_prefix.py [--before /work/main] [--workloads toolmaze,short] [--episodes 2]
                              [--max-turns 3] [--max-tokens 64] [--short 16] [--device cpu|cuda]
                              [--together]

On a GPU box with torch and transformers: `--device cuda --dtype bfloat16 --model /path/to/model`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def _client(args: argparse.Namespace):
    """The engine's client, given only the config fields its HFModelConfig knows (engines differ)."""
    from toolsweep.models.config import HFModelConfig
    from toolsweep.models.hf import HFClient

    wanted = {"name": "smollm2-hf", "path": args.model, "device": args.device, "dtype": args.dtype,
              "num_threads": args.threads, "max_model_len": 8192, "max_batch_size": 8, "batch_wait_ms": 20,
              "prefix_cache_mib": args.cache_mib, "kv_cache_mib": args.cache_mib}
    fields = HFModelConfig.model_fields
    return HFModelConfig(**{k: v for k, v in wanted.items() if k in fields and v is not None}), HFClient


def _stats(client) -> dict:
    steps = getattr(client, "decode_steps", None)
    if steps is None:  # the previous backend: decoding steps of each batch it generated
        steps = sum(getattr(client, "batch_steps", []))
    return {"prompt": client.prompt_tokens, "computed": client.computed_tokens, "decode_steps": steps}


def _peak_mib(device: str) -> float:
    if device.startswith("cuda"):
        import torch

        return torch.cuda.max_memory_allocated() / 2**20
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_toolmaze(args: argparse.Namespace) -> dict:
    import asyncio

    from toolsweep.evaluator import WorkUnit, get_benchmark, run_episode
    from toolsweep.evaluator.types import Sampling
    from toolsweep.models.factory import build_policy

    model, HFClient = _client(args)
    bench = get_benchmark("toolmaze")
    client = HFClient.shared(model)

    async def episode(task: str):
        unit = WorkUnit(sweep="bench", model=model.name, benchmark="toolmaze", setting=args.setting, task_id=task,
                        seed=0, sampling=Sampling(temperature=0.0, max_tokens=args.max_tokens))
        env = bench.make_env(task, args.setting, 0)
        return await run_episode(env, build_policy(model, bench, env, unit), unit, max_turns=args.max_turns)

    async def together():
        return await asyncio.gather(*(episode(t) for t in bench.tasks(args.setting)[:args.episodes]))

    start = time.monotonic()
    results = asyncio.run(together())
    wall = time.monotonic() - start
    replies = [s.reply.model_dump_json(exclude={"tool_calls": {"__all__": {"id"}}})
               for r in results for s in r.trajectory.steps]
    out = {"requests": sum(r.num_turns for r in results), "wall_s": wall, "replies": replies, **_stats(client),
           "errors": [r.error for r in results if r.error]}
    client.close()
    return out


def child_short(args: argparse.Namespace) -> dict:
    import asyncio

    from toolsweep.evaluator.types import Sampling

    model, HFClient = _client(args)
    client = HFClient.shared(model)
    sampling = Sampling(temperature=0.0, max_tokens=args.max_tokens)
    prompts = [[{"role": "user", "content": f"In two sentences, what is special about the number {i}?"}]
               for i in range(args.short)]

    async def together():
        await client.chat([{"role": "user", "content": "Hi"}], sampling=Sampling(max_tokens=1))  # loaded
        start = time.monotonic()
        replies = await asyncio.gather(*(client.chat(p, sampling=sampling) for p in prompts))
        return replies, time.monotonic() - start

    before = _stats(client)
    replies, wall = asyncio.run(together())
    after = _stats(client)
    out = {"requests": len(prompts), "wall_s": wall, "replies": [r.message.content for r in replies],
           **{k: after[k] - before[k] for k in after}, "errors": []}
    client.close()
    return out


def run_child(root: str, workload: str, argv: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=root, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    proc = subprocess.run([sys.executable, __file__, "--child", workload, *argv], env=env, capture_output=True,
                          text=True, cwd=root)
    if proc.returncode != 0:
        raise SystemExit(f"{workload} with {root} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", action="append", default=[], help="another checkout to compare (repeatable)")
    ap.add_argument("--workloads", default="toolmaze,short")
    ap.add_argument("--setting", default="C1-P0-std")
    ap.add_argument("--episodes", type=int, default=2, help="concurrent ToolMaze episodes")
    ap.add_argument("--max-turns", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--short", type=int, default=16, help="concurrent short-prompt requests")
    ap.add_argument("--model", default=None, help="model directory (default: the prepared SmolLM2)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: 1 on CPU)")
    ap.add_argument("--cache-mib", type=float, default=1024, help="key/value cache (prefix store before)")
    ap.add_argument("--together", action="store_true",
                    help="run every engine and workload at once (a shared, loaded machine: the same load for all)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.model is None:
        from toolsweep.models.smollm2 import model_dir

        args.model = str(model_dir())
    if args.threads is None and args.device == "cpu":
        args.threads = 1
    if args.child:
        out = {"toolmaze": child_toolmaze, "short": child_short}[args.child](args)
        out["peak_mib"] = _peak_mib(args.device)
        print(json.dumps(out))
        return
    argv = []  # the options each workload's process is given
    for name in ("setting", "episodes", "max_turns", "max_tokens", "short", "model", "device", "dtype", "threads",
                 "cache_mib"):
        value = getattr(args, name)
        if value is not None:
            argv += [f"--{name.replace('_', '-')}", str(value)]
    roots = [str(HERE), *args.before]
    jobs = [(workload, root) for workload in args.workloads.split(",") for root in roots]
    if args.together:  # every engine and workload at once: on a shared machine, under the same load
        with ThreadPoolExecutor(len(jobs)) as pool:
            done = dict(zip(jobs, pool.map(lambda job: run_child(job[1], job[0], argv), jobs)))
    else:
        done = {job: run_child(job[1], job[0], argv) for job in jobs}
    print(f"{'engine':<22} {'workload':<9} {'requests':>8} {'prompt tok':>10} {'computed':>9} {'decode steps':>12} "
          f"{'wall s':>7} {'vs first':>8} {'peak MiB':>9} {'same replies':>12}")
    for workload in args.workloads.split(","):
        first = None
        for root in roots:
            r = done[(workload, root)]
            first = first or r
            same = "-" if r is first else str(r["replies"] == first["replies"])
            print(f"{Path(root).name:<22} {workload:<9} {r['requests']:>8} {r['prompt']:>10,} {r['computed']:>9,} "
                  f"{r['decode_steps']:>12,} {r['wall_s']:>7.1f} {r['wall_s'] / first['wall_s']:>8.2f} "
                  f"{r['peak_mib']:>9.0f} {same:>12}", flush=True)
            for error in r["errors"]:
                print(f"  error: {error}")


if __name__ == "__main__":
    main()
