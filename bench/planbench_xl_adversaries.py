"""PlanBench-XL against its non-LLM adversaries: the naming shortcut, the shape of fake values, the
Fig. 11 trap, and what blocker selection costs per setting.

    OMP_NUM_THREADS=1 python bench/planbench_xl_adversaries.py [--settings ...] [--skip-table]

Prints, in order:
1. the name rule ("my name + `_` is a prefix of another listed name") per tool in the list that
   shows it (executables and noisy twins in their default list, blocker alternatives in the list
   that injects them), and its precision over every by_inputs / by_outputs list against the base
   rate of executables in those lists;
2. a shape classifier (character-class signature and the hundreds digit of the trailing number)
   trained on half of the real and fake values and scored on the other half: balanced accuracy per
   value family (0.5 = cannot separate);
3. the Fig. 11 trap of the issue (retail_task_0275, ratio_0.8): an implicit-failure payment method,
   then the default payment method for real, answered: the grade it gets;
4. per setting: blocker selection time for all tasks, searched and then read from the on-disk
   cache another process wrote, and the accuracy of the planner, the planner with the name rule,
   and the oracle over all tasks.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import re
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

SETTINGS = ["default", "ratio_0.2", "ratio_0.4", "ratio_0.6", "ratio_0.8", "one_path_mixed",
            "one_path_explicit", "one_path_implicit", "one_path_misleading", "keep_shortest", "keep_longest"]


def name_rule_counts(b) -> None:
    from toolsweep.benchmarks.planbench_xl.policies import name_rule

    w, r = b.world, b._data()[2]
    hits: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    for t in w.executable:
        lists = [r.result_list([t], frozenset(), ("exp", "imp", "sem"))[0]]
        lists.append(r.result_list([t], frozenset({t.id}), ("exp", "imp", "sem"))[0])
        for bt in ("exp", "imp", "sem"):
            lists.append(r.result_list([t], frozenset({t.id}), (bt,))[0])
        seen: set[str] = set()
        for lst in lists:
            picked = name_rule([x.name for x in lst])
            for x in lst:
                if x.id in seen:
                    continue
                seen.add(x.id)
                group = "executable" if x.is_exec else x.kind.split(":")[0]
                totals[group] += 1
                hits[group] += x.name in picked
    print("1. name rule per tool, in the list that shows it:")
    for g in ("executable", "noisy", "blocker"):
        print(f"   {g:<11} {hits[g]:>5} / {totals[g]:<5}")
    picked_exec = picked_all = n_exec = n_all = 0
    keys = [("by_inputs", sorted(k)) for k in r.by_inputs] + [("by_outputs", k) for k in r.by_output]
    for mode, key in keys:
        matched = r.by_inputs[frozenset(key)] if mode == "by_inputs" else r.by_output[key]
        lst = r.result_list(matched, frozenset(), ("exp", "imp", "sem"))[0]
        picked = name_rule([x.name for x in lst])
        n_all += len(lst)
        n_exec += sum(x.is_exec for x in lst)
        picked_all += len(picked)
        picked_exec += sum(x.is_exec and x.name in picked for x in lst)
    prec = picked_exec / picked_all if picked_all else float("nan")
    print(f"   default lists ({len(keys)}): precision {prec:.3f} ({picked_exec}/{picked_all} picked), "
          f"base rate {n_exec / n_all:.3f}")


def shape(value: str) -> tuple[str, int, int]:
    """Character classes (A a 9, others kept, runs collapsed), the trailing number's hundreds digit
    and the length in steps of 3: what a shape classifier sees."""
    sig = re.sub(r"[A-Z]+", "A", re.sub(r"[a-z]+", "a", re.sub(r"[0-9]+", "9", value)))
    m = re.search(r"([0-9]+)\D*$", value)
    return sig, int(m.group(1)) % 1000 // 100 if m else -1, len(value) // 3


def balanced_accuracy(samples: list[tuple[str, str, int]], splits: int = 30) -> dict[str, float]:
    """Per datatype, a lookup classifier on `shape` (class rates compared), trained on a random half
    and scored on the other half, averaged over `splits` splits; per family (IDs, attributes)."""
    from toolsweep.benchmarks.planbench_xl.world import DT

    out: dict[str, list[float]] = defaultdict(list)
    for rep in range(splits):
        train, test = [], []
        for s in samples:
            h = int(hashlib.sha256(f"{rep}|{s[0]}|{s[1]}|{s[2]}".encode()).hexdigest(), 16)
            (test if h % 2 else train).append(s)
        votes: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
        prior = [1, 1]
        for d, v, y in train:
            votes[(d, shape(v))][y] += 1
            prior[y] += 1
        right: dict[str, list[list[int]]] = defaultdict(lambda: [[0, 0], [0, 0]])
        for d, v, y in test:
            real, fake = votes.get((d, shape(v)), [0, 0])
            guess = int(fake / prior[1] > real / prior[0])
            right["id" if DT[d].is_id else "attribute"][y][guess == y] += 1
        for fam, ((rw, rr), (fw, fr)) in right.items():
            out[fam].append((rr / max(1, rr + rw) + fr / max(1, fr + fw)) / 2)
    return {k: sum(v) / len(v) for k, v in out.items()}


def shape_separability(b) -> None:
    """The classifier on the real labels, and on labels shuffled within each datatype (its chance)."""
    import random

    w = b.world
    samples = [(d, v, 0) for rec in w.records for d, v in rec.items()]
    samples += [(t.output, t.fixed_output, 1) for t in w.tools + w.extra_blockers
                if t.fixed_output is not None and not t.fixed_output.startswith("error")]
    by_dt: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for d, v, y in samples:
        by_dt[d].append((v, y))
    rng, null = random.Random(0), []
    for d, rows in by_dt.items():
        ys = [y for _, y in rows]
        rng.shuffle(ys)
        null += [(d, v, y) for (v, _), y in zip(rows, ys)]
    got, chance = balanced_accuracy(samples), balanced_accuracy(null)
    print("2. shape classifier, balanced accuracy on held-out values (chance = labels shuffled):")
    for fam in sorted(got):
        print(f"   {fam:<10} {got[fam]:.3f}  (chance {chance[fam]:.3f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--settings", nargs="+", default=SETTINGS)
    ap.add_argument("--policies", nargs="+", default=["planner", "name_rule_planner", "oracle"])
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--skip-table", action="store_true")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="a PlanBenchXL option (e.g. list_order=shuffled, param_descriptions=parameter, "
                         "type_neighbours=1, expose_output_datatype=false)")
    ap.add_argument("--table-only", action="store_true", help="skip sections 1-3")
    args = ap.parse_args()

    from toolsweep.benchmarks.planbench_xl import PlanBenchXL

    options = {}
    for kv in args.option:
        k, v = kv.split("=", 1)
        options[k] = {"true": True, "false": False}.get(v.lower(), int(v) if v.isdigit() else v)
    b = PlanBenchXL(**options)
    print(f"PlanBench-XL {b.version}, seed {args.seed}, options {options or 'default'}")
    if not args.table_only:
        sections_1_to_3(b, args.seed)
    if args.skip_table:
        return
    table(b, args)


def sections_1_to_3(b, seed: int) -> None:
    from toolsweep.evaluator.episode import run_episode
    from toolsweep.evaluator.types import WorkUnit

    name_rule_counts(b)
    shape_separability(b)
    env = b.make_env("retail_task_0275", "ratio_0.8", seed)
    pol = b.make_scripted_policy("default_method_trap", env, 7)
    unit = WorkUnit(sweep="bench", model="trap", benchmark="planbench_xl", setting="ratio_0.8",
                    task_id="retail_task_0275", seed=seed)
    r = asyncio.run(run_episode(env, pol, unit, max_turns=b.max_turns("ratio_0.8")))
    calls = [(x.get("kind"), x.get("output_datatype"), x.get("output_value")) for x in env.state.log
             if x.get("action") == "tool_call"]
    print(f"3. Fig. 11 trap (retail_task_0275, ratio_0.8): calls {calls}")
    print(f"   answered {env.state.answers[-1]!r} (gold {env.task.gold!r}): accuracy {r.metrics['accuracy']:.0f}, "
          f"{env.state.failure}")


def table(b, args) -> None:
    from toolsweep.benchmarks.planbench_xl.blocking import SETTINGS as SPECS, Blocker
    from toolsweep.evaluator.episode import run_episode
    from toolsweep.evaluator.types import WorkUnit

    async def accuracy(setting: str, policy: str, ids: list[str]) -> float:
        total = 0.0
        for tid in ids:
            env = b.make_env(tid, setting, args.seed)
            pol = b.make_scripted_policy(policy, env, 7)
            unit = WorkUnit(sweep="bench", model=policy, benchmark="planbench_xl", setting=setting,
                            task_id=tid, seed=args.seed)
            total += (await run_episode(env, pol, unit, max_turns=b.max_turns(setting))).metrics["accuracy"]
        return total / len(ids)

    print("4. accuracy over all tasks per setting; blocker selection seconds for all tasks: searched "
          "(cold), then read from the cache file another process wrote (cached)")
    print(f"   {'setting':<22}{'tasks':>6}{'cold s':>8}{'cached s':>9}" + "".join(f"{p:>19}" for p in args.policies))
    o = b.options
    for setting in args.settings:
        spec = SPECS[setting]
        ids = b.tasks(setting)
        with tempfile.TemporaryDirectory() as tmp:
            cache = Path(tmp) / "blockers.json"
            times = []
            for _ in range(2):  # a cold search that writes the cache, then a process that reads it
                blocker = Blocker(b.world, pool_cap=o.pool_cap, k_blk=o.k_blk, pool=o.blocker_pool,
                                  cache_file=cache)
                t0 = time.perf_counter()
                for tid in ids:
                    blocker.choose(b.task_set.by_id[tid], spec, args.seed)
                blocker.flush()
                times.append(time.perf_counter() - t0)
        accs = [asyncio.run(accuracy(setting, p, ids)) for p in args.policies]
        print(f"   {setting:<22}{len(ids):>6}{times[0]:>8.2f}{times[1]:>9.3f}" + "".join(f"{a:>19.3f}" for a in accs),
              flush=True)


if __name__ == "__main__":
    main()
