"""How often the real pairs of a three-model cell get their sign beside a futile pair: the design of
tests/evaluator/test_adaptive_pairs.py (40 tasks, a null pair out of reach of 10 seeds, two real
differences of 0.12), run on many cells. docs/adaptive.md quotes its figure.

    python bench/adaptive_pairs.py              # 2,000 cells: 4,000 real pairs
    python bench/adaptive_pairs.py --cells 200 --seed 1

Prints the share of real pairs given their sign (and the wrong sign), the share of null pairs given a
sign, and the mean seeds a cell ran.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "evaluator")]  # the test module imports its sibling by name

import numpy as np  # noqa: E402

from tests.evaluator.test_adaptive_pairs import three_model_cell  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shift", type=float, default=0.12, help="the real differences")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    t0 = time.monotonic()
    records = [three_model_cell(rng, shift=args.shift) for _ in range(args.cells)]
    real = [r.decisions[k] for r in records for k in ("c - a", "c - b")]
    right, wrong = sum(d == "a>b" for d in real), sum(d == "a<b" for d in real)
    null = sum(r.decisions["b - a"] in ("a>b", "a<b") for r in records)
    print(f"{args.cells} cells (seed {args.seed}, shift {args.shift}), {time.monotonic() - t0:.0f} s")
    print("| real pairs | signed right | signed wrong | null pairs signed | mean seeds |")
    print("|---:|---:|---:|---:|---:|")
    print(f"| {len(real):,} | {right:,} ({right / len(real):.1%}) | {wrong} ({wrong / len(real):.1%}) "
          f"| {null} of {len(records):,} ({null / len(records):.1%}) | {np.mean([r.seeds for r in records]):.2f} |")


if __name__ == "__main__":
    main()
