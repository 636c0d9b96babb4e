"""PlanBench-XL baselines per setting: what the scripted policies score, and what each setting blocks.

    OMP_NUM_THREADS=1 python bench/planbench_xl_baselines.py [--policies oracle planner random]
                                                            [--settings default one_path_mixed ...]

For every setting it prints the accuracy of each policy over all tasks (the oracle must be 100%, the
planner is a typed backward search with no ground truth, random is the floor), then the blocking
facts: tasks left unblocked, tasks with more than one surviving minimal set, and for keep_longest the
tasks whose survivors are not the true longest paths. Nothing is sampled.
"""

from __future__ import annotations

import argparse
import asyncio
import time

DEFAULT_SETTINGS = ["default", "ratio_0.2", "ratio_0.4", "ratio_0.6", "ratio_0.8", "one_path_mixed",
                    "one_path_explicit", "one_path_implicit", "one_path_misleading", "keep_shortest",
                    "keep_longest", "one_path_mixed_enf5", "single_step"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policies", nargs="+", default=["oracle", "planner", "random"])
    ap.add_argument("--settings", nargs="+", default=DEFAULT_SETTINGS)
    ap.add_argument("--seed", type=int, default=42, help="the sweep seed (sigma_0)")
    ap.add_argument("--ablate-order", action="store_true",
                    help="the option list_order=shuffled, a variant the paper does not have: each retrieval "
                         "list in a seeded order, so executable matches no longer come before distractors "
                         "(App. E)")
    args = ap.parse_args()
    from toolsweep.benchmarks.planbench_xl import PlanBenchXL
    from toolsweep.benchmarks.planbench_xl.blocking import SETTINGS
    from toolsweep.evaluator.episode import run_episode
    from toolsweep.evaluator.types import WorkUnit

    b = PlanBenchXL(list_order="shuffled") if args.ablate_order else PlanBenchXL()

    async def accuracy(setting: str, policy: str, ids: list[str]) -> float:
        total = 0.0
        for tid in ids:
            env = b.make_env(tid, setting, args.seed)
            pol = b.make_scripted_policy(policy, env, 7)
            unit = WorkUnit(sweep="bench", model=policy, benchmark="planbench_xl", setting=setting,
                            task_id=tid, seed=args.seed)
            res = await run_episode(env, pol, unit, max_turns=b.max_turns(setting))
            total += res.metrics["accuracy"]
        return total / len(ids)

    header = f"{'setting':<22}{'tasks':>6}" + "".join(f"{p:>10}" for p in args.policies)
    header += f"{'unblocked':>11}{'>1 path':>9}{'not longest':>13}{'blk s':>7}"
    ablation = " [ablation: retrieval lists shuffled]" if args.ablate_order else ""
    print(f"PlanBench-XL {b.version}, seed {args.seed}: accuracy per setting (all tasks), blocking facts{ablation}")
    print(header)
    for setting in args.settings:
        spec = SETTINGS[setting]
        ids = b.tasks(setting)
        t0 = time.perf_counter()
        unblocked = multi = not_longest = 0
        if spec.objective != "none":
            for tid in ids:
                task = b.task_set.by_id[tid]
                choice = b.blocker.choose(task, spec, args.seed)
                unblocked += not choice.blocked
                survivors = [r for r in task.minimal_sets if not (set(r) & {b.world.by_id[x].num
                                                                             for x in choice.blocked})]
                multi += len(survivors) > 1 and spec.objective != "ratio"
                if spec.objective == "keep_longest":
                    not_longest += any(len(r) != task.lmax for r in survivors)
        blk_s = time.perf_counter() - t0
        accs = [asyncio.run(accuracy(setting, p, ids)) for p in args.policies]
        row = f"{setting:<22}{len(ids):>6}" + "".join(f"{a:>10.3f}" for a in accs)
        blocking = spec.objective != "none"
        row += (f"{unblocked:>11}{multi:>9}{not_longest if spec.objective == 'keep_longest' else '':>13}"
                if blocking else f"{'':>11}{'':>9}{'':>13}")
        row += f"{blk_s:>7.1f}"
        print(row, flush=True)


if __name__ == "__main__":
    main()
