"""Prediction error of `toolsweep plan --power` by how its pilot chose tasks: the first tasks of a
setting (tasks.limit) against a seeded random sample (tasks.sample), on simulated settings with a known
truth whose task order is not random (earlier tasks easier, as in APB's holistic setting, where the first
15 of 81 succeeded 0.267 against 0.148 overall).

    python bench/power_pilot.py            # 400 simulated settings of 81 tasks, pilots of 15
    python bench/power_pilot.py --sims 100

For each setting: the half-width of the 95% interval a full run (every task, one seed) has, from its
variance components (the truth the plan predicts), and the half-width the plan predicts for that run
from each pilot. Prints the mean prediction, its mean absolute error and its bias per pilot.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from toolsweep.cluster.config import sample_tasks  # noqa: E402
from toolsweep.cluster.power import guarded  # noqa: E402
from toolsweep.evaluator.design import half_width, variance_components  # noqa: E402

TASKS, PILOT = 81, 15


def setting(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Task ids and one episode's success per task; success probability falls with the task's position."""
    position = np.arange(TASKS) / (TASKS - 1)
    p = np.clip(rng.beta(1.0, 4.0, TASKS) + 0.25 * (1 - position) - 0.08, 0.0, 1.0)
    ids = np.array([f"t{i:03d}" for i in range(TASKS)])
    return ids, (rng.random(TASKS) < p).astype(float)


def predicted(ids: np.ndarray, y: np.ndarray, keep: list[str]) -> float:
    chosen = np.isin(ids, keep)
    vc, _ = guarded(variance_components(ids[chosen], y[chosen]))
    return half_width(vc, TASKS, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sims", type=int, default=400)
    args = ap.parse_args()
    rng = np.random.default_rng(11)
    truth, first, sampled, mean_first, mean_sampled, mean_all = [], [], [], [], [], []
    for i in range(args.sims):
        ids, y = setting(rng)
        truth.append(half_width(variance_components(ids, y), TASKS, 1))
        head = list(ids[:PILOT])
        drawn = sample_tasks(list(ids), PILOT, "pilot", i)
        first.append(predicted(ids, y, head))
        sampled.append(predicted(ids, y, drawn))
        mean_first.append(y[:PILOT].mean())
        mean_sampled.append(y[np.isin(ids, drawn)].mean())
        mean_all.append(y.mean())
    truth_a = np.array(truth)
    print(f"{args.sims} settings of {TASKS} tasks x 1 seed, pilots of {PILOT} tasks; half-width of a 95% interval")
    print(f"{'pilot':28s}{'success':>9s}{'predicted':>11s}{'actual':>9s}{'mean |error|':>14s}{'bias':>9s}")
    print(f"{'(all tasks)':28s}{np.mean(mean_all):9.3f}{'':11s}{truth_a.mean():9.4f}")
    for name, pred, mean in (("first 15 (tasks.limit)", first, mean_first),
                             ("seeded sample (tasks.sample)", sampled, mean_sampled)):
        err = np.array(pred) - truth_a
        print(f"{name:28s}{np.mean(mean):9.3f}{np.mean(pred):11.4f}{truth_a.mean():9.4f}"
              f"{np.abs(err).mean():14.4f}{err.mean():+9.4f}")


if __name__ == "__main__":
    main()
