"""APB's searched floor (search.py): per setting, the strongest policy of the adversary search space that
bench/apb_search.py found, its score and the heuristic's on the same tasks. The cases the table was
searched on come from one generator: when the generator changes, search again (a test compares)."""

from __future__ import annotations

SEARCHED_ON = "apb-gen-8"  # generator.GENERATOR_VERSION of the cases below

# The refusal decision across settings (§7.5), the space's refusal options with the heuristic's other
# choices, on the same seeded samples: TRR over the four Unsolvable kinds, FRR on the solvable controls.
# The floor's refusal is one rule for both; no option is better calibrated than the heuristic's cues.
CALIBRATION: dict[str, dict[str, float]] = {
    "cues": {"TRR": 1.0, "FRR": 0.85, "Calibration": 0.575},
    "never": {"TRR": 0.0, "FRR": 0.0, "Calibration": 0.5},
    "always": {"TRR": 1.0, "FRR": 1.0, "Calibration": 0.5},
    "phrase_bank": {"TRR": 0.8, "FRR": 0.75, "Calibration": 0.525},
}

# setting -> metric -> {searched, heuristic, policy} (a seeded task sample per setting, run seed 0; a
# twinned setting's sample is whole pairs, each case with its twin: search.setting_sample)
SEARCHED: dict[str, dict[str, dict[str, object]]] = {
    "holistic": {
        "correct": {"searched": 0.1, "heuristic": 0.1,
               "policy": "search:pick=name_and_description,order=query,bind=heuristic,refuse=cues,broken=description"},
    },
    "stepwise_k1": {
        "correct": {"searched": 0.8, "heuristic": 0.8,
               "policy": "search:pick=name_and_description,order=query,bind=heuristic,refuse=cues,broken=description"},
    },
    "stepwise_k3": {
        "correct": {"searched": 0.1, "heuristic": 0.1,
               "policy": "search:pick=name_and_description,order=query,bind=heuristic,refuse=cues,broken=description"},
    },
    "broken": {
        "correct": {"searched": 0.45, "heuristic": 0.45,
               "policy": "search:pick=name_and_description,order=query,bind=heuristic,refuse=cues,broken=description"},
    },
    "unsolvable_conflict": {
        "correct": {"searched": 0.5, "heuristic": 0.5,
               "policy": "search:pick=name_and_description,order=query,bind=heuristic,refuse=cues,broken=description"},
    },
    "unsolvable_info": {
        "correct": {"searched": 0.5, "heuristic": 0.5,
               "policy": "search:pick=name_and_description,order=query,bind=heuristic,refuse=cues,broken=description"},
    },
    "unsolvable_tool": {
        "correct": {"searched": 0.5, "heuristic": 0.5,
               "policy": "search:pick=name_and_description,order=query,bind=heuristic,refuse=cues,broken=description"},
    },
    "unsolvable_visual": {
        "correct": {"searched": 0.5, "heuristic": 0.5,
               "policy": "search:pick=name_and_description,order=query,bind=heuristic,refuse=cues,broken=description"},
    },
    "unsolvable_control": {
        "correct": {"searched": 0.0, "heuristic": 0.0,
               "policy": "search:pick=name_and_description,order=query,bind=heuristic,refuse=cues,broken=description"},
    },
    "extraneous_holistic_n4": {
        "correct": {"searched": 0.3, "heuristic": 0.3,
               "policy": "search:pick=name_and_description,order=query,bind=heuristic,refuse=cues,broken=description"},
    },
    "extraneous_stepwise_n4": {
        "correct": {"searched": 0.7, "heuristic": 0.7,
               "policy": "search:pick=name_and_description,order=query,bind=heuristic,refuse=cues,broken=description"},
    },
    "efficiency": {
        "correct": {"searched": 0.05, "heuristic": 0.05,
               "policy": "search:pick=name_and_description,order=query,bind=heuristic,refuse=cues,broken=description"},
    },
}
