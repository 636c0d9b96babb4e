"""Per-cell bounds of TRAJECT-Bench's adversaries: what a policy that does not solve the task may
score at most, per split (every setting of a split is a cell checked against its split's bounds).

Measured with `bench/traject_adversaries.py` under `paper_compat: exact` (the authors' scoring):
the prose echoes on every task (answer_facts 0.182 / 0.097 / 0.088 for par-simple / par-hard / seq)
and on the tests' seeded 60-task samples of six cells (at most 0.217 / 0.150 / 0.100); the pool
policies on 8- and 40-task samples. Each bound is the largest value seen plus a margin. A metric a bound leaves out is one
the policy is entitled to (the prose echoes replay the gold calls: EM, Inclusion, Usage are theirs).

- all_tools (call everything; also the benchmark's `baseline_policy`): EM 0 (it never matches a gold
  set of 3-10 tools). Inclusion is near 1 by construction: the paper's definition rewards it, so it is
  read against this policy's floor, not bounded. Usage and Traj-Satisfy* are bounded at its measured
  level; its answer restates every output it got back.
- keyword (BM25 top-6 with example arguments): the same metrics. Its Usage is over few pairs (it
  shares only ~3 tools with a gold trajectory), so it moves more between samples: 0.24-0.38 under
  "exact" on 8-task samples, 0.54 pooled under "off" on the exploit suite's 6-task seq sample.
- prose_echo / prose_echo_query: `answer_facts` (the deterministic diagnostic; Acc is the LLM
  judge's) stays low: an answer restating every output value is mostly values the gold answer leaves
  out. It cannot be 0: where the gold answer restates all outputs, so does a correct answer.
"""

from __future__ import annotations

import random

SPLITS = ("par-simple", "par-hard", "seq")
SAMPLE_SEED = 31


def cell_sample(task_ids: list[str], n: int, setting: str) -> list[str]:
    """The seeded sample of a cell's tasks the default checks play (all of them when n <= 0)."""
    if n <= 0 or n >= len(task_ids):
        return list(task_ids)
    return sorted(random.Random(f"{SAMPLE_SEED}/{setting}").sample(task_ids, n))

ADVERSARY_CEILINGS: dict[str, dict[str, dict[str, float]]] = {
    "all_tools": {
        "par-simple": {"em": 0.0, "usage": 0.55, "traj_satisfy_proxy": 6.2, "answer_facts": 0.02},
        "par-hard": {"em": 0.0, "usage": 0.55, "traj_satisfy_proxy": 6.2, "answer_facts": 0.02},
        "seq": {"em": 0.0, "usage": 0.45, "traj_satisfy_proxy": 5.6, "answer_facts": 0.02},
    },
    "keyword": {
        # answer_facts: 0.0385 / 0.0423 measured on every task of par-simple/all/direct and seq/retrieval-all/native
        "par-simple": {"em": 0.02, "inclusion": 0.6, "usage": 0.6, "traj_satisfy_proxy": 5.2, "answer_facts": 0.05},
        "par-hard": {"em": 0.02, "inclusion": 0.5, "usage": 0.6, "traj_satisfy_proxy": 5.0, "answer_facts": 0.05},
        "seq": {"em": 0.02, "inclusion": 0.55, "usage": 0.6, "traj_satisfy_proxy": 5.2, "answer_facts": 0.05},
    },
    "prose_echo": {
        "par-simple": {"answer_facts": 0.25},
        "par-hard": {"answer_facts": 0.2},
        "seq": {"answer_facts": 0.15},
    },
    "prose_echo_query": {
        "par-simple": {"answer_facts": 0.25},
        "par-hard": {"answer_facts": 0.2},
        "seq": {"answer_facts": 0.15},
    },
    "echo_outputs": {s: {"answer_facts": 0.03} for s in SPLITS},
    # answer_facts 0.02: Mapping/par-simple/97 and Mapping/par-hard/97 are answered from the query alone (1 task of
    # the 64 in a cell); answer_facts is a diagnostic, not Acc, which only the LLM judge gives
    "no_tools": {s: {"em": 0.0, "inclusion": 0.0, "answer_facts": 0.02, "traj_satisfy_proxy": 0.0} for s in SPLITS},
}


def ceilings_for(policy: str, setting: str) -> dict[str, float]:
    """The bounds of one cell (a setting is `<split>/<pool>/<method>`)."""
    return ADVERSARY_CEILINGS[policy][setting.split("/", 1)[0]]


def loosest_ceilings(policy: str) -> dict[str, float]:
    """The largest bound of each metric over the splits: what the generic exploit suite checks."""
    out: dict[str, float] = {}
    for per_split in ADVERSARY_CEILINGS[policy].values():
        for k, v in per_split.items():
            out[k] = max(out.get(k, v), v)
    return out
