"""Error rates of the text verdicts (APB refusal, ToolMaze failure acknowledgement, success claim) on the
labelled corpora in tests/verdicts/, both ways, on the tuning part, the first held-out round (seen
since it was measured) and the unseen held-out part.

    python bench/verdicts.py            # the table
    python bench/verdicts.py --errors   # and every misread held-out sentence
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.verdicts.corpus import CORPORA, rates, round_one, split  # noqa: E402
from toolsweep.benchmarks.apb.grader import text_refuses  # noqa: E402
from toolsweep.benchmarks.toolmaze.metrics import acknowledges_failure  # noqa: E402
from toolsweep.evaluator.verdicts import (  # noqa: E402
    claims_success, rule_acknowledges_failure, rule_claims_success, rule_refuses)

DETECTORS = {"refusal": text_refuses, "acknowledgement": acknowledges_failure, "success_claim": claims_success}
# The rules alone (what the detectors were before the classifier; APB's raw-text reading adds its
# "no tool_chain" condition).
RULES = {"refusal": lambda t: "tool_chain" not in t and rule_refuses(t), "acknowledgement": rule_acknowledges_failure,
         "success_claim": rule_claims_success}


def main() -> None:
    print(f"{'detector':16s} {'part':9s} {'pos':>4s} {'neg':>4s} {'false pos':>11s} {'false neg':>11s}")
    for name in CORPORA:
        for label, part in (("tuning", split(name, False)), ("round 1", round_one(name)),
                            ("held-out", split(name, True))):
            fpr, fnr, fp, fn = rates(part, DETECTORS[name])
            pos = sum(e.label for e in part)
            print(f"{name:16s} {label:9s} {pos:4d} {len(part) - pos:4d} "
                  f"{len(fp):4d} {fpr:6.1%} {len(fn):4d} {fnr:6.1%}")
            if label == "held-out" and "--errors" in sys.argv:
                for e in fp:
                    print(f"    FP  {e.text}")
                for e in fn:
                    print(f"    FN  {e.text}")


if __name__ == "__main__":
    main()
