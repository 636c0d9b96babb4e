"""What reusing computed prompts saves the transformers backend on real ToolMaze episodes.

Plays the same ToolMaze episodes (tasks x seeds; one after another, or all at once with --concurrent,
as a sweep's worker does) (SmolLM2-135M-Instruct, one torch thread) through the hf backend twice, one
mode after the other in this process: with the prefix store off (`prefix_cache_mib: 0`,
every prompt computed whole) and on (the default). Prints, per mode, the turns played, the prompt
tokens asked for and computed, the wall time and the seconds per turn, and whether every reply was the
same in both modes. Needs the hf extra and `toolsweep models prepare smollm2`.

    python bench/hf_prefix.py [--setting C1-P0-std] [--episodes 2] [--seeds 1] [--temperature 0]
                              [--max-tokens 128] [--max-turns 5] [--concurrent]
                              [--modes whole,reuse]
"""

from __future__ import annotations

import argparse
import asyncio
import time


def play(setting: str, episodes: int, seeds: int, temperature: float, max_tokens: int, max_turns: int,
         prefix_cache_mib: float, concurrent: bool = False) -> dict:
    from toolsweep.evaluator import WorkUnit, get_benchmark, run_episode
    from toolsweep.evaluator.types import Sampling
    from toolsweep.models.config import HFModelConfig
    from toolsweep.models.factory import build_policy
    from toolsweep.models.hf import HFClient
    from toolsweep.models.smollm2 import model_dir

    model = HFModelConfig(name="smollm2-hf", path=str(model_dir()), num_threads=1, max_model_len=8192,
                          max_batch_size=8, batch_wait_ms=20, prefix_cache_mib=prefix_cache_mib)
    bench = get_benchmark("toolmaze")
    client = HFClient.shared(model)
    start = time.monotonic()

    async def episode(task: str, seed: int):
        unit = WorkUnit(sweep="bench", model=model.name, benchmark="toolmaze", setting=setting, task_id=task,
                        seed=seed, sampling=Sampling(temperature=temperature, max_tokens=max_tokens))
        env = bench.make_env(task, setting, seed)
        return await run_episode(env, build_policy(model, bench, env, unit), unit, max_turns=max_turns)

    async def together(jobs):
        return await asyncio.gather(*(episode(*job) for job in jobs))

    jobs = [(t, s) for t in bench.tasks(setting)[:episodes] for s in range(seeds)]
    results = asyncio.run(together(jobs)) if concurrent else [asyncio.run(episode(*job)) for job in jobs]
    turns = sum(result.num_turns for result in results)
    replies = [s.reply.model_dump_json(exclude={"tool_calls": {"__all__": {"id"}}})
               for result in results for s in result.trajectory.steps]
    wall = time.monotonic() - start
    out = {"mode": "reuse" if prefix_cache_mib else "whole", "turns": turns, "prompt": client.prompt_tokens,
           "computed": client.computed_tokens, "wall_s": wall, "replies": replies, "batches": list(client.batches),
           "steps": sum(client.batch_steps)}
    client.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--setting", default="C1-P0-std")
    ap.add_argument("--episodes", type=int, default=2, help="tasks")
    ap.add_argument("--seeds", type=int, default=1, help="seeds per task (the same prompt, sampled anew)")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--max-turns", type=int, default=5)
    ap.add_argument("--concurrent", action="store_true",
                    help="play every episode at once (as a sweep's worker does) instead of one after another")
    ap.add_argument("--modes", default="whole,reuse", help="which of whole,reuse to play (the first is the baseline)")
    args = ap.parse_args()
    budgets = {"whole": 0, "reuse": 1024}
    rows = [play(args.setting, args.episodes, args.seeds, args.temperature, args.max_tokens, args.max_turns,
                 budgets[mode], args.concurrent) for mode in args.modes.split(",")]
    print(f"{'mode':>6} {'turns':>6} {'prompt tok':>11} {'computed':>9} {'wall s':>7} {'s/turn':>7} {'vs whole':>9}"
          f" {'mean batch':>10} {'decode steps':>12}")
    for r in rows:
        mean_batch = sum(r["batches"]) / max(len(r["batches"]), 1)
        print(f"{r['mode']:>6} {r['turns']:>6} {r['prompt']:>11,} {r['computed']:>9,} {r['wall_s']:>7.1f} "
              f"{r['wall_s'] / max(r['turns'], 1):>7.1f} {r['wall_s'] / rows[0]['wall_s']:>9.2f} {mean_batch:>10.2f} {r['steps']:>12,}")
    if len(rows) > 1:
        print("same replies:", rows[0]["replies"] == rows[1]["replies"])


if __name__ == "__main__":
    main()
