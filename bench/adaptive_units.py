"""Units an adaptive sweep runs against a fixed design reaching the same interval widths.

A grid of cells of different variance (two models each, on the same tasks) is simulated with a known
truth: per (cell, model) the tasks' success probabilities come from a Beta (some cells certain, some
near 0.1, some near 0.5), episodes are Bernoulli. On the same episodes:

Width goal (`--goal width`, stop_when.ci_half_width):
- adaptive: the rounds of `toolsweep.evaluator.adaptive.run_rounds` (2 seeds, +`--per-round` a round,
  at most `--max-seeds`), every round judged at the nominal 95% (`WidthRule`); `--union-bound` judges
  round r at 1 - 0.05 * 6 / (pi^2 r^2) instead, the method this replaced;
- fixed: one number of seeds for every cell, as a config without `stop_when` has it, the fewest that
  bring every cell to the target at plain 95% (chosen knowing the outcome: the cheapest fixed design
  there is, and so a lower bound on what a fixed design costs).

Paired goal (`--goal paired`, stop_when.paired_difference: decided, margin `--margin`):
- adaptive: the rounds with `PairedRule` (each cell's Pocock-type boundary over its planned looks), the
  pair's interval from `paired_interval`; units until every cell's pair is decided (or the budget);
- fixed: the fewest seeds, the same in every cell, at which one look at plain 95% decides at least as
  many cells as the adaptive sweep did (chosen knowing the outcome, again a lower bound): the fixed
  design with the same power on that grid.

Growth by tasks (`--compare-grow`, stop_when.grow): the settings hold `--pool` tasks of which the config
runs the first `--tasks` (a tasks.limit); each grid runs adaptively with grow: seeds and with grow: auto
(or tasks) on the same episodes, and the table gives each mode's units and cells met. `--grid tasky` is a
grid where the between-task variance dominates most cells.

Prints one row per simulated grid and the totals.   python bench/adaptive_units.py [--grids 20]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import math

from toolsweep.evaluator.adaptive import PairedRule, WidthRule, decision, half_width, paired_interval, run_rounds
from toolsweep.evaluator.protocols import MetricSpec
from toolsweep.evaluator.stats import summarize_metrics

SUCCESS = MetricSpec(name="success")
# (model a, model b) populations per cell: None = always succeeds (an oracle-like cell)
MIXED = {
    "certain": (None, None),
    "certain_vs_low": (None, (1.0, 9.0)),
    "low": ((1.0, 9.0), (2.0, 18.0)),
    "mid_low": ((3.0, 7.0), (1.0, 9.0)),
    "mid": ((10.0, 10.0), (6.0, 4.0)),
    "mid_hard": ((10.0, 10.0), (10.0, 10.0)),
    "high": ((8.0, 2.0), (18.0, 2.0)),
    "high_certain": ((18.0, 2.0), None),
}
# most cells settled at once (scripted floors and oracles, a strong model at the ceiling), two open
SETTLED = {
    "certain": (None, None),
    "certain_2": (None, None),
    "certain_3": (None, None),
    "near_1": (None, (60.0, 0.5)),
    "near_2": ((60.0, 0.5), None),
    "certain_4": (None, None),
    "mid": ((10.0, 10.0), (6.0, 4.0)),
    "low": ((1.0, 9.0), (2.0, 18.0)),
}
# paired comparisons as they come: two models on the same tasks, task difficulty shared (a task's
# success probability for b is a's plus the cell's shift and a task-level U(-0.05, 0.05)); ("shift",
# Beta of a's tasks, mean difference b - a)
SHIFTED = {
    "same": ("shift", (10.0, 10.0), 0.0),
    "same_low": ("shift", (2.0, 14.0), 0.0),
    "small": ("shift", (10.0, 10.0), 0.05),
    "medium": ("shift", (10.0, 10.0), 0.1),
    "medium_high": ("shift", (14.0, 6.0), -0.1),
    "large": ("shift", (10.0, 10.0), 0.2),
    "large_low": ("shift", (3.0, 12.0), 0.25),
    "huge": ("shift", (6.0, 14.0), 0.4),
}
# tasks' success probabilities spread widely (Beta with a + b <= 2.5) in most cells: the between-task
# variance is half or more of the total, so seeds cannot settle them at 30 tasks; one cell (narrow) is
# seed-dominated and one certain
TASKY = {
    "split": ((0.5, 0.5), (0.5, 0.5)),
    "uniform": ((1.0, 1.0), (1.0, 1.0)),
    "skewed": ((0.3, 0.7), (0.7, 0.3)),
    "polar": ((0.2, 0.2), (0.5, 0.5)),
    "mid": ((2.0, 2.0), (0.8, 1.2)),
    "low": ((0.5, 2.0), (0.4, 1.6)),
    "certain_vs_split": (None, (0.5, 0.5)),
    "narrow": ((10.0, 10.0), (12.0, 8.0)),
}
GRIDS = {"mixed": MIXED, "settled": SETTLED, "shifted": SHIFTED, "tasky": TASKY}
GRID = MIXED


def simulate_grid(rng: np.random.Generator, tasks: int, max_seeds: int) -> dict[tuple[str, str], dict[str, np.ndarray]]:
    out = {}
    for cell, pops in GRID.items():
        ys = {}
        if pops[0] == "shift":
            _, pop, shift = pops
            pa = rng.beta(*pop, tasks)
            pb = np.clip(pa + shift + rng.uniform(-0.05, 0.05, tasks), 0.0, 1.0)
            for model, p in zip("ab", (pa, pb)):
                ys[model] = (rng.random((tasks, max_seeds)) < p[:, None]).astype(float)
            out[("sim", cell)] = ys
            continue
        for model, pop in zip("ab", pops):
            p = np.ones(tasks) if pop is None else rng.beta(*pop, tasks)
            ys[model] = (rng.random((tasks, max_seeds)) < p[:, None]).astype(float)
        out[("sim", cell)] = ys
    return out


def intervals(ys: dict[str, np.ndarray], seeds: int, confidence: float, n_resamples: int, seed: int):
    tasks = next(iter(ys.values())).shape[0]
    ids = np.repeat(np.arange(tasks), seeds)
    seed_col = np.tile(np.arange(seeds), tasks)
    return {m: summarize_metrics(ids, seed_col, {"success": y[:, :seeds].ravel()}, [SUCCESS], n_resamples=n_resamples,
                                 confidence=confidence, seed=seed)["success"] for m, y in ys.items()}


def paired(ys: dict[str, np.ndarray], seeds: int, confidence: float):
    tasks = next(iter(ys.values())).shape[0]
    ids = np.repeat(np.arange(tasks), seeds)
    seed_col = np.tile(np.arange(seeds), tasks)
    return {"a - b": paired_interval(ids, seed_col, {"success": ys["a"][:, :seeds].ravel()}, ids, seed_col,
                                     {"success": ys["b"][:, :seeds].ravel()}, SUCCESS, confidence)}


def one_grid(rng, i, *, tasks, target, max_seeds, max_rounds, n_resamples, per_round=2, union_bound=False):
    data = simulate_grid(rng, tasks, max_seeds)

    def measure(r, seeds, confidence, cell_tasks=None):
        level = 1 - 0.05 * 6 / (math.pi ** 2 * r * r) if union_bound else None
        return {c: intervals(data[c], len(seeds[c]), level or conf, n_resamples, i) for c, conf in confidence.items()}

    rule = WidthRule(target=target, max_seeds=None if union_bound else max_seeds)
    out = run_rounds({c: [0, 1] for c in data}, rule=rule, max_rounds=max_rounds,
                     max_seeds=max_seeds, seeds_per_round=per_round, measure=measure)
    adaptive_units = sum(len(s) * tasks * 2 for s in out.seeds.values())
    met = sum(rec.met for rec in out.records.values())
    fixed_seeds = None
    for s in range(2, max_seeds + 1):
        if all(half_width(e) <= target for c in data for e in intervals(data[c], s, 0.95, n_resamples, i).values()):
            fixed_seeds = s
            break
    fixed_units = (fixed_seeds or max_seeds) * tasks * 2 * len(data)
    return out, adaptive_units, met, fixed_seeds, fixed_units


def one_paired_grid(rng, i, *, tasks, margin, max_seeds, max_rounds, per_round=2, **_):
    data = simulate_grid(rng, tasks, max_seeds)
    rule = PairedRule(margin=margin, pairs=1, per_round=per_round, max_seeds=max_seeds, max_rounds=max_rounds)

    def measure(r, seeds, confidence, cell_tasks=None):
        return {c: paired(data[c], len(seeds[c]), conf) for c, conf in confidence.items()}

    out = run_rounds({c: [0, 1] for c in data}, rule=rule, max_rounds=max_rounds, max_seeds=max_seeds,
                     seeds_per_round=per_round, measure=measure)
    adaptive_units = sum(len(s) * tasks * 2 for s in out.seeds.values())
    met = sum(rec.met for rec in out.records.values())
    fixed_seeds = None
    for s in range(2, max_seeds + 1):
        decided = sum(decision(paired(data[c], s, 0.95)["a - b"], margin) != "undecided" for c in data)
        if decided >= met:
            fixed_seeds = s
            break
    fixed_units = (fixed_seeds or max_seeds) * tasks * 2 * len(data)
    return out, adaptive_units, met, fixed_seeds, fixed_units


def grow_comparison(rng, i, *, tasks, pool, target, max_seeds, max_rounds, n_resamples, per_round=2,
                    modes=("seeds", "auto"), max_tasks=None):
    """One simulated grid whose settings hold `pool` tasks, the config running the first `tasks` (a
    tasks.limit); the same episodes run adaptively once per growth mode (stop_when.grow). Returns
    {mode: (RoundsResult, units, cells met)}."""
    from toolsweep.evaluator.adaptive import CellJudgement, task_order
    from toolsweep.evaluator.design import variance_components

    data = simulate_grid(rng, pool, max_seeds)
    ids = [str(k) for k in range(pool)]
    orders = {c: task_order(ids[:tasks], ids, f"bench|{c[1]}") for c in data}

    def measure(r, seeds, confidence, cell_tasks):
        out = {}
        for c, conf in confidence.items():
            rows = np.array([int(t) for t in cell_tasks[c]])
            s = len(seeds[c])
            task_col, seed_col = np.repeat(rows, s), np.tile(np.arange(s), len(rows))
            ests, comps = {}, {}
            for m, y in data[c].items():
                vals = y[rows][:, :s].ravel()
                ests[m] = summarize_metrics(task_col, seed_col, {"success": vals}, [SUCCESS], n_resamples=n_resamples,
                                            confidence=conf, seed=i)["success"]
                comps[m] = variance_components(task_col, vals)
            out[c] = CellJudgement(ests, comps)
        return out

    found = {}
    for mode in modes:
        out = run_rounds({c: [0, 1] for c in data}, rule=WidthRule(target=target, max_seeds=max_seeds),
                         max_rounds=max_rounds, max_seeds=max_seeds, seeds_per_round=per_round, measure=measure,
                         tasks={c: o[:tasks] for c, o in orders.items()}, task_orders=orders, grow=mode,
                         max_tasks=max_tasks)
        units = sum(len(out.tasks[c]) * len(out.seeds[c]) * 2 for c in data)
        found[mode] = (out, units, sum(rec.met for rec in out.records.values()))
    return found


def main_grow(args) -> None:
    """--compare-grow: seeds-only against the other growth modes on the same simulated grids."""
    modes = ("seeds", *args.grow_modes)
    rng = np.random.default_rng(2026)
    print(f"grid {args.grid}: {len(GRID)} cells x 2 models; settings of {args.pool} tasks, the config running the "
          f"first {args.tasks}; target half-width {args.target}; seeds 2 (+{args.per_round} a round) up to "
          f"{args.max_seeds}, at most {args.max_rounds} rounds; grow: {', '.join(modes)}")
    print(f"{'grid':>4} " + " ".join(f"{m + ' units':>12} {m + ' met':>9}" for m in modes))
    units = {m: 0 for m in modes}
    met = {m: 0 for m in modes}
    start = time.perf_counter()
    for i in range(args.grids):
        found = grow_comparison(rng, i, tasks=args.tasks, pool=args.pool, target=args.target, max_seeds=args.max_seeds,
                                max_rounds=args.max_rounds, n_resamples=args.n_resamples, per_round=args.per_round,
                                modes=modes, max_tasks=args.max_tasks)
        for m in modes:
            units[m] += found[m][1]
            met[m] += found[m][2]
        print(f"{i:>4} " + " ".join(f"{found[m][1]:>12} {found[m][2]:>6}/{len(GRID):<2}" for m in modes))
    cells = len(GRID) * args.grids
    print("total: " + "; ".join(f"{m}: {units[m]} units, {met[m]}/{cells} cells met ({units[m] / max(1, met[m]):.0f} "
                                f"units a met cell)" for m in modes) + f" ({time.perf_counter() - start:.0f} s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grids", type=int, default=20)
    ap.add_argument("--tasks", type=int, default=30)
    ap.add_argument("--target", type=float, default=0.12)
    ap.add_argument("--max-seeds", type=int, default=16)
    ap.add_argument("--max-rounds", type=int, default=8)
    ap.add_argument("--n-resamples", type=int, default=2000)
    ap.add_argument("--per-round", type=int, default=2, help="seeds a round adds (seeds_per_round)")
    ap.add_argument("--grid", choices=sorted(GRIDS), default="mixed",
                    help="mixed: cells of every variance; settled: six cells settled at once, two open; shifted: "
                    "two models on the same tasks, b = a + a cell's difference (for --goal paired)")
    ap.add_argument("--goal", choices=["width", "paired"], default="width")
    ap.add_argument("--margin", type=float, default=0.05, help="paired goal: the equivalence margin")
    ap.add_argument("--union-bound", action="store_true",
                    help="width goal: judge round r at 1 - 0.05 * 6 / (pi^2 r^2), the method this replaced")
    ap.add_argument("--compare-grow", action="store_true",
                    help="width goal: run each grid with stop_when.grow seeds and with --grow-modes (default auto) on "
                    "the same episodes, the settings holding --pool tasks of which the config runs --tasks")
    ap.add_argument("--grow-modes", nargs="+", choices=["tasks", "auto"], default=["auto"])
    ap.add_argument("--pool", type=int, default=240, help="with --compare-grow: tasks a setting holds")
    ap.add_argument("--max-tasks", type=int, default=None, help="with --compare-grow: stop_when.max_tasks")
    args = ap.parse_args()
    global GRID
    GRID = GRIDS[args.grid]
    if args.compare_grow:
        main_grow(args)
        return
    rng = np.random.default_rng(2026)
    goal = f"target half-width {args.target}" if args.goal == "width" else f"paired decided, margin {args.margin}"
    print(f"grid {args.grid}: {len(GRID)} cells x 2 models x {args.tasks} tasks; {goal}"
          f"{' (union bound)' if args.union_bound else ''}; seeds 2 (+{args.per_round} a "
          f"round) up to {args.max_seeds}, at most {args.max_rounds} rounds")
    print(f"{'grid':>4} {'rounds':>6} {'met':>5} {'adaptive units':>14} {'fixed seeds':>11} {'fixed units':>11} "
          f"{'adaptive/fixed':>14}")
    totals = np.zeros(2)
    met_total = fixed_met = 0
    start = time.perf_counter()
    for i in range(args.grids):
        if args.goal == "width":
            out, a_units, met, f_seeds, f_units = one_grid(
                rng, i, tasks=args.tasks, target=args.target, max_seeds=args.max_seeds, max_rounds=args.max_rounds,
                n_resamples=args.n_resamples, per_round=args.per_round, union_bound=args.union_bound)
        else:
            out, a_units, met, f_seeds, f_units = one_paired_grid(
                rng, i, tasks=args.tasks, margin=args.margin, max_seeds=args.max_seeds, max_rounds=args.max_rounds,
                per_round=args.per_round)
        totals += (a_units, f_units)
        met_total += met
        fixed_met += (len(GRID) if args.goal == "width" else met) if f_seeds is not None else 0
        shown = f_seeds if f_seeds is not None else f">{args.max_seeds}"
        print(f"{i:>4} {out.rounds:>6} {met:>2}/{len(GRID):<2} {a_units:>14} {shown:>11} {f_units:>11} "
              f"{a_units / f_units:>14.2f}")
    cells = len(GRID) * args.grids
    print(f"total: adaptive {int(totals[0])} units ({met_total}/{cells} cells met at their confidence), fixed "
          f"{int(totals[1])} units ({fixed_met}/{cells} {'met' if args.goal == 'width' else 'decided'} at 95%): adaptive/fixed = {totals[0] / totals[1]:.2f} "
          f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
