"""Error rates of the text verdicts (APB refusal, ToolMaze failure acknowledgement, success claim) on the
labelled corpora in tests/verdicts/, both ways, on the tuning part and on the held-out part.

    python bench/verdicts.py            # the table
    python bench/verdicts.py --errors   # and every misread held-out sentence
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.verdicts.corpus import CORPORA, rates, split  # noqa: E402
from toolsweep.benchmarks.apb.grader import text_refuses  # noqa: E402
from toolsweep.benchmarks.toolmaze.metrics import acknowledges_failure  # noqa: E402
from toolsweep.evaluator.verdicts import claims_success  # noqa: E402

DETECTORS = {"refusal": text_refuses, "acknowledgement": acknowledges_failure, "success_claim": claims_success}


def main() -> None:
    print(f"{'detector':16s} {'part':9s} {'pos':>4s} {'neg':>4s} {'false pos':>10s} {'false neg':>10s}")
    for name in CORPORA:
        for held_out in (False, True):
            part = split(name, held_out)
            fpr, fnr, fp, fn = rates(part, DETECTORS[name])
            pos = sum(e.label for e in part)
            print(f"{name:16s} {'held-out' if held_out else 'tuning':9s} {pos:4d} {len(part) - pos:4d} "
                  f"{fpr:9.1%} {fnr:9.1%}")
            if held_out and "--errors" in sys.argv:
                for e in fp:
                    print(f"    FP  {e.text}")
                for e in fn:
                    print(f"    FN  {e.text}")


if __name__ == "__main__":
    main()
