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


# setting -> metric -> the strongest policy bench/traject_search.py found (12 seeded tasks per setting,
# budget 24 policies, seed 0, default scoring), its pooled score and all_tools' on the same tasks
SEARCHED: dict[str, dict[str, dict[str, object]]] = {
    "par-simple/domain/direct": {
        "inclusion": {"searched": 1.0, "all_tools": 1.0,
               "policy": "search:tools=all,bind=example,optional=none,order=rank,variants=one"},
        "traj_satisfy_proxy": {"searched": 4.627, "all_tools": 4.015,
               "policy": "search:tools=all,bind=shape,optional=none,order=list,variants=plus_example"},
        "usage": {"searched": 0.462, "all_tools": 0.162,
               "policy": "search:tools=keyword-3,bind=shape,optional=none,order=list,variants=plus_example"},
    },
    "par-simple/retrieval/direct": {
        "inclusion": {"searched": 0.718, "all_tools": 0.718,
               "policy": "search:tools=all,bind=example,optional=none,order=rank,variants=one"},
        "traj_satisfy_proxy": {"searched": 4.993, "all_tools": 4.643,
               "policy": "search:tools=all,bind=shape,optional=none,order=rank,variants=one"},
        "usage": {"searched": 0.5, "all_tools": 0.277,
               "policy": "search:tools=mentioned,bind=example,optional=none,order=rank,variants=one"},
    },
    "par-simple/retrieval-all/direct": {
        "inclusion": {"searched": 0.421, "all_tools": 0.421,
               "policy": "search:tools=all,bind=example,optional=none,order=rank,variants=one"},
        "traj_satisfy_proxy": {"searched": 3.738, "all_tools": 2.807,
               "policy": "search:tools=name-10,bind=shape,optional=none,order=list,variants=plus_example"},
        "usage": {"searched": 0.5, "all_tools": 0.3,
               "policy": "search:tools=keyword-3,bind=shape,optional=none,order=list,variants=plus_example"},
    },
    "par-simple/fixed-k/direct": {
        "inclusion": {"searched": 1.0, "all_tools": 1.0,
               "policy": "search:tools=all,bind=example,optional=none,order=rank,variants=one"},
        "traj_satisfy_proxy": {"searched": 6.284, "all_tools": 4.818,
               "policy": "search:tools=keyword-6,bind=shape,optional=none,order=list,variants=plus_example"},
        "usage": {"searched": 0.5, "all_tools": 0.266,
               "policy": "search:tools=keyword-3,bind=shape,optional=none,order=list,variants=plus_example"},
    },
    "par-hard/domain/direct": {
        "inclusion": {"searched": 0.983, "all_tools": 0.983,
               "policy": "search:tools=all,bind=example,optional=none,order=rank,variants=one"},
        "traj_satisfy_proxy": {"searched": 4.626, "all_tools": 4.246,
               "policy": "search:tools=all,bind=shape,optional=none,order=rank,variants=one"},
        "usage": {"searched": 0.545, "all_tools": 0.309,
               "policy": "search:tools=mentioned,bind=example,optional=none,order=rank,variants=one"},
    },
    "par-hard/retrieval/direct": {
        "inclusion": {"searched": 0.44, "all_tools": 0.44,
               "policy": "search:tools=all,bind=example,optional=none,order=rank,variants=one"},
        "traj_satisfy_proxy": {"searched": 3.397, "all_tools": 3.076,
               "policy": "search:tools=name-10,bind=shape,optional=none,order=list,variants=plus_example"},
        "usage": {"searched": 1.0, "all_tools": 0.195,
               "policy": "search:tools=mentioned,bind=example,optional=none,order=rank,variants=one"},
    },
    "par-hard/retrieval-all/direct": {
        "inclusion": {"searched": 0.358, "all_tools": 0.358,
               "policy": "search:tools=all,bind=example,optional=none,order=rank,variants=one"},
        "traj_satisfy_proxy": {"searched": 2.992, "all_tools": 2.357,
               "policy": "search:tools=name-10,bind=shape,optional=none,order=list,variants=plus_example"},
        "usage": {"searched": 0.5, "all_tools": 0.226,
               "policy": "search:tools=mentioned,bind=example,optional=none,order=rank,variants=one"},
    },
    "par-hard/fixed-k/direct": {
        "inclusion": {"searched": 0.981, "all_tools": 0.981,
               "policy": "search:tools=all,bind=example,optional=none,order=rank,variants=one"},
        "traj_satisfy_proxy": {"searched": 5.223, "all_tools": 5.087,
               "policy": "search:tools=keyword-6,bind=example,optional=none,order=rank,variants=one"},
        "usage": {"searched": 0.444, "all_tools": 0.205,
               "policy": "search:tools=mentioned,bind=example,optional=none,order=rank,variants=one"},
    },
    "seq/domain/direct": {
        "inclusion": {"searched": 0.969, "all_tools": 0.948,
               "policy": "search:tools=all,bind=shape,optional=none,order=list,variants=plus_example"},
        "traj_satisfy_proxy": {"searched": 5.151, "all_tools": 4.294,
               "policy": "search:tools=name-10,bind=shape,optional=none,order=list,variants=plus_example"},
        "usage": {"searched": 0.352, "all_tools": 0.256,
               "policy": "search:tools=name-10,bind=shape,optional=none,order=list,variants=plus_example"},
    },
    "seq/retrieval/direct": {
        "inclusion": {"searched": 0.677, "all_tools": 0.677,
               "policy": "search:tools=all,bind=example,optional=none,order=rank,variants=one"},
        "traj_satisfy_proxy": {"searched": 4.918, "all_tools": 4.312,
               "policy": "search:tools=name-10,bind=shape,optional=none,order=list,variants=plus_example"},
        "usage": {"searched": 0.562, "all_tools": 0.395,
               "policy": "search:tools=keyword-3,bind=example,optional=none,order=rank,variants=one"},
    },
    "seq/retrieval-all/direct": {
        "inclusion": {"searched": 0.621, "all_tools": 0.621,
               "policy": "search:tools=all,bind=example,optional=none,order=rank,variants=one"},
        "traj_satisfy_proxy": {"searched": 5.013, "all_tools": 3.94,
               "policy": "search:tools=name-3,bind=example,optional=none,order=rank,variants=one"},
        "usage": {"searched": 0.36, "all_tools": 0.281,
               "policy": "search:tools=name-3,bind=example,optional=none,order=rank,variants=one"},
    },
    "seq/fixed-k/direct": {
        "inclusion": {"searched": 0.972, "all_tools": 0.962,
               "policy": "search:tools=all,bind=shape,optional=none,order=list,variants=plus_example"},
        "traj_satisfy_proxy": {"searched": 5.81, "all_tools": 4.956,
               "policy": "search:tools=name-10,bind=shape,optional=none,order=list,variants=plus_example"},
        "usage": {"searched": 0.393, "all_tools": 0.254,
               "policy": "search:tools=keyword-3,bind=shape,optional=none,order=list,variants=plus_example"},
    },
}
