"""PlanBench-XL's searched floor (search.py): per setting, the strongest policy of the adversary search
space that bench/planbench_xl_search.py found on the setting's tuning half, its accuracy and the
planner's there, and both played on the held-out half: [accuracy, 95% Wilson low, high, episodes], the
figure reported."""

from __future__ import annotations

# setting -> metric -> {searched, planner, held_out, held_out_planner, policy} (tuning and held-out halves
# of every setting's 327 tasks, `search.setting_halves`; budget 16 policies, run seed 42)
SEARCHED: dict[str, dict[str, dict[str, object]]] = {
    "default": {
        "accuracy": {"searched": 1.0, "planner": 1.0,
               "held_out": [1.0, 0.977, 1.0, 164],
               "held_out_planner": [1.0, 0.977, 1.0, 164],
               "policy": "search:prefer=list,trust=all,repeat=once,final=refusal"},
    },
    "ratio_0.2": {
        "accuracy": {"searched": 0.871, "planner": 0.871,
               "held_out": [0.915, 0.862, 0.948, 164],
               "held_out_planner": [0.915, 0.862, 0.948, 164],
               "policy": "search:prefer=list,trust=all,repeat=once,final=refusal"},
    },
    "ratio_0.4": {
        "accuracy": {"searched": 0.859, "planner": 0.859,
               "held_out": [0.811, 0.744, 0.864, 164],
               "held_out_planner": [0.811, 0.744, 0.864, 164],
               "policy": "search:prefer=list,trust=all,repeat=once,final=refusal"},
    },
    "ratio_0.6": {
        "accuracy": {"searched": 0.773, "planner": 0.755,
               "held_out": [0.707, 0.634, 0.772, 164],
               "held_out_planner": [0.665, 0.589, 0.732, 164],
               "policy": "search:prefer=list,trust=preferred,repeat=once,final=refusal"},
    },
    "ratio_0.8": {
        "accuracy": {"searched": 0.73, "planner": 0.73,
               "held_out": [0.695, 0.621, 0.76, 164],
               "held_out_planner": [0.695, 0.621, 0.76, 164],
               "policy": "search:prefer=list,trust=all,repeat=once,final=refusal"},
    },
    "one_path_mixed": {
        "accuracy": {"searched": 0.675, "planner": 0.669,
               "held_out": [0.646, 0.571, 0.715, 164],
               "held_out_planner": [0.64, 0.564, 0.71, 164],
               "policy": "search:prefer=list,trust=preferred,repeat=once,final=refusal"},
    },
    "one_path_explicit": {
        "accuracy": {"searched": 0.84, "planner": 0.761,
               "held_out": [0.72, 0.646, 0.783, 164],
               "held_out_planner": [0.628, 0.552, 0.698, 164],
               "policy": "search:prefer=list,trust=preferred,repeat=once,final=refusal"},
    },
    "one_path_implicit": {
        "accuracy": {"searched": 0.669, "planner": 0.644,
               "held_out": [0.738, 0.666, 0.799, 164],
               "held_out_planner": [0.744, 0.672, 0.805, 164],
               "policy": "search:prefer=list,trust=preferred,repeat=once,final=refusal"},
    },
    "one_path_misleading": {
        "accuracy": {"searched": 0.62, "planner": 0.62,
               "held_out": [0.622, 0.546, 0.693, 164],
               "held_out_planner": [0.622, 0.546, 0.693, 164],
               "policy": "search:prefer=list,trust=all,repeat=once,final=refusal"},
    },
    "keep_shortest": {
        "accuracy": {"searched": 0.957, "planner": 0.957,
               "held_out": [0.939, 0.891, 0.967, 164],
               "held_out_planner": [0.939, 0.891, 0.967, 164],
               "policy": "search:prefer=list,trust=all,repeat=once,final=refusal"},
    },
    "keep_longest": {
        "accuracy": {"searched": 0.147, "planner": 0.092,
               "held_out": [0.165, 0.116, 0.229, 164],
               "held_out_planner": [0.091, 0.056, 0.145, 164],
               "policy": "search:prefer=list,trust=preferred,repeat=once,final=refusal"},
    },
}
