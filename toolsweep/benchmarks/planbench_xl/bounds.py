"""PlanBench-XL's searched floor (search.py): per setting, the strongest policy of the adversary search
space that bench/planbench_xl_search.py found, its accuracy and the planner's on the same tasks."""

from __future__ import annotations

# setting -> metric -> {searched, planner, policy} (seeded task sample per setting, run seed 42)
SEARCHED: dict[str, dict[str, dict[str, object]]] = {
    "default": {
        "accuracy": {"searched": 1.0, "planner": 1.0,
               "policy": "search:prefer=list,trust=all,repeat=once,final=refusal"},
    },
    "ratio_0.2": {
        "accuracy": {"searched": 0.833, "planner": 0.833,
               "policy": "search:prefer=list,trust=all,repeat=once,final=refusal"},
    },
    "ratio_0.4": {
        "accuracy": {"searched": 0.917, "planner": 0.917,
               "policy": "search:prefer=list,trust=all,repeat=once,final=refusal"},
    },
    "ratio_0.6": {
        "accuracy": {"searched": 0.917, "planner": 0.833,
               "policy": "search:prefer=list,trust=preferred,repeat=once,final=refusal"},
    },
    "ratio_0.8": {
        "accuracy": {"searched": 0.583, "planner": 0.417,
               "policy": "search:prefer=list,trust=preferred,repeat=once,final=refusal"},
    },
    "one_path_mixed": {
        "accuracy": {"searched": 0.75, "planner": 0.75,
               "policy": "search:prefer=list,trust=all,repeat=once,final=refusal"},
    },
    "one_path_explicit": {
        "accuracy": {"searched": 0.75, "planner": 0.75,
               "policy": "search:prefer=list,trust=all,repeat=once,final=refusal"},
    },
    "one_path_implicit": {
        "accuracy": {"searched": 0.667, "planner": 0.667,
               "policy": "search:prefer=list,trust=all,repeat=once,final=refusal"},
    },
    "one_path_misleading": {
        "accuracy": {"searched": 0.417, "planner": 0.417,
               "policy": "search:prefer=list,trust=all,repeat=once,final=refusal"},
    },
    "keep_shortest": {
        "accuracy": {"searched": 0.917, "planner": 0.917,
               "policy": "search:prefer=list,trust=all,repeat=once,final=refusal"},
    },
    "keep_longest": {
        "accuracy": {"searched": 0.25, "planner": 0.167,
               "policy": "search:prefer=list,trust=preferred,repeat=once,final=refusal"},
    },
}
