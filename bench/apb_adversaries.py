"""APB adversaries and positive controls, per cell: what each named scripted policy scores in every
setting it is bounded in (`APB.exploit_policies`), on every case or a seeded sample.

    OMP_NUM_THREADS=1 python bench/apb_adversaries.py [--policies all_offered replace_with_args]
        [--settings broken unsolvable_info] [--tasks 0 (= every case)] [--seed 0] [--option lookalikes=false]

One row per (policy, setting): n, then the metrics that decide the policy's bounds (correct, pass,
replace, recovery, refused/false_refusal, grade where defined), in percent. Cases are graded the way an
episode grades them (`APBEnv.step`), without the episode runner, so a full table takes minutes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

SHOWN = ("correct", "pass", "replace", "alter", "retry", "refuse", "other", "recovery", "false_recovery",
         "refused", "false_refusal", "grade")
DEFAULT_SETTINGS = ("holistic", "stepwise_k1", "stepwise_k2", "stepwise_k3", "extraneous_holistic_n6",
                    "extraneous_stepwise_n6", "broken", "unsolvable_conflict", "unsolvable_info",
                    "unsolvable_tool", "unsolvable_visual", "unsolvable_control", "efficiency")


def cell(bench, policy: str, setting: str, tasks: int, seed: int) -> tuple[int, dict[str, float]]:
    """Mean of each shown metric over the cell's cases (all, or a seeded sample of `tasks`)."""
    from toolsweep.evaluator.types import Message

    ids = bench.tasks(setting)
    if tasks and tasks < len(ids):
        ids = sorted(random.Random(f"{seed}|{setting}").sample(ids, tasks))
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for task_id in ids:
        env = bench.make_env(task_id, setting, 0)
        env.reset()
        text = bench.make_scripted_policy(policy, env, 0).answer()
        env.step(Message(role="assistant", content=text))
        for k, v in env.result().items():
            if k in SHOWN and math.isfinite(v):
                sums[k] = sums.get(k, 0.0) + v
                counts[k] = counts.get(k, 0) + 1
    return len(ids), {k: sums[k] / counts[k] for k in sums}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policies", nargs="*", default=None, help="default: every bounded exploit and control")
    ap.add_argument("--settings", nargs="*", default=list(DEFAULT_SETTINGS))
    ap.add_argument("--tasks", type=int, default=0, help="cases per setting (0: every case)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="an APB option (JSON value, else a string), e.g. lookalikes=false for the paper's layout")
    args = ap.parse_args()

    from toolsweep.benchmarks.apb import APB

    options = {}
    for item in args.option:
        key, _, value = item.partition("=")
        try:
            options[key] = json.loads(value)
        except ValueError:
            options[key] = value
    bench = APB(**options)
    names = args.policies or [e.name for e in bench.exploit_policies()]
    print(f"{'policy':<26}{'setting':<26}{'n':>5}  " + "".join(f"{k[:8]:>9}" for k in SHOWN) + f"{'sec':>7}")
    for name in names:
        for setting in args.settings:
            t0 = time.perf_counter()
            n, values = cell(bench, name, setting, args.tasks, args.seed)
            shown = "".join(f"{100 * values[k]:>9.1f}" if k in values and k != "grade" else
                            f"{values[k]:>9.3f}" if k in values else f"{'-':>9}" for k in SHOWN)
            print(f"{name:<26}{setting:<26}{n:>5}  {shown}{time.perf_counter() - t0:>7.1f}", flush=True)


if __name__ == "__main__":
    main()
