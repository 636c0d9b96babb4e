"""Per-cell bounds of ToolMaze's exploit suite: what each adversary may score at most (ceilings)
and what each positive control must score at least (floors), cell by cell (a cell is C{1..4}-P{0..4};
scripted policies do not read the prompt, so a std cell's bound also holds for its hint cell).

A metric is sound only when both hold: the adversaries stay under their ceilings (no credit for a
fault never noticed or a path never planned) and the controls get their credit (a real recovery is
recovered). Values are fractions. They are the per-cell scores measured on every task of each cell
(`bench/toolmaze_adversaries.py`), rounded up to the next 0.05 for ceilings; floors are exact.
Where an adversary's trajectory is the same as a real recovery's, no trajectory judge can withhold
the credit, and no ceiling is declared (see docs/toolmaze.md, "Adversaries and controls").
"""

from __future__ import annotations

from typing import Any

LEVELS = (1, 2, 3, 4)
PERTURBED = ("P1", "P2", "P3", "P4")


def _cells(levels=LEVELS, modes=PERTURBED) -> list[str]:
    return [f"C{c}-{p}" for c in levels for p in modes]


def _same(cells: list[str], bound: dict[str, float]) -> dict[str, dict[str, float]]:
    return {cell: dict(bound) for cell in cells}


# policy -> cell -> {metric: ceiling}
CEILINGS: dict[str, dict[str, dict[str, float]]] = {
    # reads only the query, the schemas and the responses; calls everything that binds
    "greedy_binder": {
        **_same(_cells((1,)), {"prr": 0.0, "tsr": 0.0}),
        **_same(_cells((2,), ("P1", "P2")), {"prr": 0.5, "tsr": 0.05}),
        **_same(_cells((2,), ("P3", "P4")), {"prr": 0.15, "tsr": 0.05}),
        **_same(_cells((3,), ("P1", "P2")), {"prr": 0.3, "tsr": 0.05}),
        **_same(_cells((3,), ("P3", "P4")), {"prr": 0.15, "tsr": 0.05}),
        **_same(_cells((4,), ("P1", "P2")), {"prr": 0.2, "tsr": 0.05}),
        **_same(_cells((4,), ("P3", "P4")), {"prr": 0.1, "tsr": 0.05}),
        **_same(_cells(LEVELS, ("P0",)), {"tsr": 0.05}),
    },
    # knows the groups and calls their members in name order; on C2 explicit faults, where s*'s member
    # (which holds the fault) comes first, its trajectory is a reroute's (the next member is the switch):
    # bounded where it differs. s* is a seeded draw among the shortest paths, so the faulted member is
    # first in name order about as often as chance (C2-P1 PRR .55; 1.00 when ties went alphabetically).
    # Where the faulted member comes after the one whose output it binds, its corruption is never read
    # (C3-P3/P4 TSR .13).
    "call_all_members": {
        **_same(_cells((1,)), {"prr": 0.0, "tsr": 0.0}),
        **_same(_cells((2,), ("P3", "P4")), {"prr": 0.15, "tsr": 0.3}),
        **_same(_cells((3,), ("P1", "P2")), {"prr": 0.2, "tsr": 0.9}),
        **_same(_cells((4,), ("P1", "P2")), {"prr": 0.1}),
        **_same(_cells((3,), ("P3", "P4")), {"prr": 0.0, "tsr": 0.15}),
        **_same(_cells((4,), ("P3", "P4")), {"prr": 0.0, "tsr": 0.0}),
    },
    # calls each group's look-alikes before s*'s member, never reading them (issue 42): the fault is
    # bound to s*'s tool when the task is made, so the sacrifice is no reroute; it succeeds only
    # where the look-alike it called first was the whole rest of a path (a group at the Action)
    "lookalike_first": {
        **_same(_cells((1, 3, 4)), {"prr": 0.0, "tsr": 0.0}),
        **_same(_cells((2,)), {"prr": 0.0, "tsr": 0.3}),
    },
    # every tool twice in a row, never reading a response (issue 42): a trajectory that repeats calls
    # that had succeeded earns no retry
    "blind_repeat": _same(_cells(LEVELS, ("P1", "P3")), {"prr": 0.0}),
    # (the greedy binder plus repetition: on C1 no retry of it counts; on C2-C4 it still reroutes as
    # the greedy binder does, bounded by that policy's ceilings)
    "greedy_repeat": _same(_cells((1,), ("P1", "P3")), {"prr": 0.0}),
    # gives up at the first error: right only where the task cannot be done (C1-P2, a control)
    "abort_first_error": {
        **_same([c for c in _cells() if c != "C1-P2"], {"prr": 0.0, "tsr": 0.0}),
    },
    # random calls over the visible tools; 0.1 on C2 explicit covers run seeds 0-2 (at most 0.061)
    "random": {
        **_same(_cells(), {"prr": 0.0, "tsr": 0.0}),
        **_same(_cells((2,), ("P1", "P2")), {"prr": 0.1, "tsr": 0.0}),
        **_same(_cells(LEVELS, ("P0",)), {"tsr": 0.0}),
    },
}

# policy -> cell -> {metric: floor}
FLOORS: dict[str, dict[str, dict[str, float]]] = {
    # the paper's robust agent (Fig. 1): retries, then switches to the alternative
    "retry_then_switch": {
        **_same(_cells(LEVELS, ("P1", "P2")), {"prr": 1.0, "tsr": 1.0}),
    },
    # strategy (1), retrying for transient faults
    "retry": _same(_cells(LEVELS, ("P1",)), {"prr": 1.0, "tsr": 1.0}),
    # strategy (3), wisely aborting an unsolvable task, and saying so
    "acknowledged_abort": _same(["C1-P2"], {"prr": 1.0, "tsr": 1.0}),
}


def sample_proof(bounds: dict[str, dict[str, float]]) -> list[str]:
    """The cells whose ceilings are all zero: a policy that scores nothing on a whole cell scores
    nothing on any sample of it, so these bounds hold for the exploit suite's small samples too."""
    return sorted(cell for cell, bound in bounds.items() if not any(bound.values()))


def settings_of(cells: list[str]) -> list[str]:
    """The std and hint settings of cells (P0 has no hint setting)."""
    out = []
    for cell in cells:
        out.append(f"{cell}-std")
        if not cell.endswith("P0"):
            out.append(f"{cell}-hint")
    return out


# cell -> metric -> the strongest policy bench/toolmaze_search.py found on the cell's tuning half (a
# seeded half of its std tasks, `search.cell_halves`; budget 24 policies, seed 0), its score there and
# the greedy binder's; then both played on the held-out half, as [mean, 95% Wilson low, high, episodes
# the metric is defined on]: the figure reported (s* a seeded draw among the shortest paths)
SEARCHED: dict[str, dict[str, dict[str, Any]]] = {
    "C1-P0": {
        "tsr": {"searched": 0.0, "greedy": 0.0,
                 "held_out": [0.0, 0.0, 0.071, 50],
                 "held_out_greedy": [0.0, 0.0, 0.071, 50],
                 "policy": "search:order=list,lookalikes=all,bind=name_or_type,repeat=once,on_error=ignore,final=success,calls=25,memory=none"},
    },
    "C1-P1": {
        "prr": {"searched": 0.588, "greedy": 0.0,
                 "held_out": [0.81, 0.6, 0.923, 21],
                 "held_out_greedy": [0.0, 0.0, 0.094, 37],
                 "policy": "search:order=reverse,lookalikes=one,bind=type,repeat=once,on_error=retry,final=success,calls=25,memory=cell"},
        "tsr": {"searched": 0.0, "greedy": 0.0,
                 "held_out": [0.0, 0.0, 0.071, 50],
                 "held_out_greedy": [0.0, 0.0, 0.071, 50],
                 "policy": "search:order=list,lookalikes=all,bind=name_or_type,repeat=once,on_error=ignore,final=success,calls=25,memory=none"},
    },
    "C1-P2": {
        "prr": {"searched": 0.75, "greedy": 0.0,
                 "held_out": [0.917, 0.646, 0.985, 12],
                 "held_out_greedy": [0.0, 0.0, 0.102, 34],
                 "policy": "search:order=list,lookalikes=one,bind=type,repeat=once,on_error=abort,final=failure,calls=4,memory=none"},
        "tsr": {"searched": 0.22, "greedy": 0.0,
                 "held_out": [0.2, 0.112, 0.33, 50],
                 "held_out_greedy": [0.0, 0.0, 0.071, 50],
                 "policy": "search:order=overlap,lookalikes=one,bind=type,repeat=once,on_error=abort,final=failure,calls=4,memory=none"},
    },
    "C1-P3": {
        "prr": {"searched": 0.143, "greedy": 0.0,
                 "held_out": [0.0, 0.0, 0.299, 9],
                 "held_out_greedy": [0.0, 0.0, 0.092, 38],
                 "policy": "search:order=name,lookalikes=one,bind=name_or_type,repeat=twice,on_error=abort,final=question,calls=4,memory=cell"},
        "tsr": {"searched": 0.0, "greedy": 0.0,
                 "held_out": [0.0, 0.0, 0.071, 50],
                 "held_out_greedy": [0.0, 0.0, 0.071, 50],
                 "policy": "search:order=list,lookalikes=all,bind=name_or_type,repeat=once,on_error=ignore,final=success,calls=25,memory=none"},
    },
    "C1-P4": {
        "prr": {"searched": 0.286, "greedy": 0.0,
                 "held_out": [0.083, 0.015, 0.354, 12],
                 "held_out_greedy": [0.0, 0.0, 0.11, 31],
                 "policy": "search:order=reverse,lookalikes=one,bind=type,repeat=once,on_error=abort,final=failure,calls=4,memory=none"},
        "tsr": {"searched": 0.06, "greedy": 0.0,
                 "held_out": [0.04, 0.011, 0.135, 50],
                 "held_out_greedy": [0.0, 0.0, 0.071, 50],
                 "policy": "search:order=list,lookalikes=one,bind=type,repeat=once,on_error=abort,final=failure,calls=4,memory=none"},
    },
    "C2-P0": {
        "tsr": {"searched": 0.0, "greedy": 0.0,
                 "held_out": [0.02, 0.004, 0.105, 50],
                 "held_out_greedy": [0.02, 0.004, 0.105, 50],
                 "policy": "search:order=list,lookalikes=all,bind=name_or_type,repeat=once,on_error=ignore,final=success,calls=25,memory=none"},
    },
    "C2-P1": {
        "prr": {"searched": 0.889, "greedy": 0.31,
                 "held_out": [0.833, 0.552, 0.953, 12],
                 "held_out_greedy": [0.121, 0.048, 0.273, 33],
                 "policy": "search:order=short_description,lookalikes=one,bind=type,repeat=once,on_error=retry,final=success,calls=25,memory=cell"},
        "tsr": {"searched": 0.04, "greedy": 0.0,
                 "held_out": [0.02, 0.004, 0.105, 50],
                 "held_out_greedy": [0.02, 0.004, 0.105, 50],
                 "policy": "search:order=reverse,lookalikes=one,bind=type,repeat=once,on_error=retry,final=success,calls=25,memory=cell"},
    },
    "C2-P2": {
        "prr": {"searched": 1.0, "greedy": 0.206,
                 "held_out": [0.636, 0.354, 0.848, 11],
                 "held_out_greedy": [0.214, 0.102, 0.395, 28],
                 "policy": "search:order=short_description,lookalikes=one,bind=type,repeat=once,on_error=retry,final=success,calls=25,memory=cell"},
        "tsr": {"searched": 0.02, "greedy": 0.02,
                 "held_out": [0.0, 0.0, 0.071, 50],
                 "held_out_greedy": [0.0, 0.0, 0.071, 50],
                 "policy": "search:order=list,lookalikes=all,bind=name_or_type,repeat=once,on_error=ignore,final=success,calls=25,memory=none"},
    },
    "C2-P3": {
        "prr": {"searched": 0.583, "greedy": 0.029,
                 "held_out": [0.364, 0.197, 0.57, 22],
                 "held_out_greedy": [0.071, 0.02, 0.226, 28],
                 "policy": "search:order=short_description,lookalikes=all,bind=name,repeat=once,on_error=ignore,final=success,calls=25,memory=none"},
        "tsr": {"searched": 0.04, "greedy": 0.02,
                 "held_out": [0.0, 0.0, 0.071, 50],
                 "held_out_greedy": [0.0, 0.0, 0.071, 50],
                 "policy": "search:order=overlap,lookalikes=one,bind=type,repeat=once,on_error=abort,final=failure,calls=4,memory=none"},
    },
    "C2-P4": {
        "prr": {"searched": 0.429, "greedy": 0.065,
                 "held_out": [0.25, 0.089, 0.532, 12],
                 "held_out_greedy": [0.032, 0.006, 0.162, 31],
                 "policy": "search:order=overlap,lookalikes=all,bind=name,repeat=once,on_error=ignore,final=success,calls=25,memory=none"},
        "tsr": {"searched": 0.02, "greedy": 0.02,
                 "held_out": [0.0, 0.0, 0.071, 50],
                 "held_out_greedy": [0.0, 0.0, 0.071, 50],
                 "policy": "search:order=list,lookalikes=all,bind=name_or_type,repeat=once,on_error=ignore,final=success,calls=25,memory=none"},
    },
    "C3-P0": {
        "tsr": {"searched": 0.0, "greedy": 0.0,
                 "held_out": [0.0, 0.0, 0.071, 50],
                 "held_out_greedy": [0.0, 0.0, 0.071, 50],
                 "policy": "search:order=list,lookalikes=all,bind=name_or_type,repeat=once,on_error=ignore,final=success,calls=25,memory=none"},
    },
    "C3-P1": {
        "prr": {"searched": 0.778, "greedy": 0.368,
                 "held_out": [0.3, 0.145, 0.519, 20],
                 "held_out_greedy": [0.045, 0.008, 0.218, 22],
                 "policy": "search:order=list,lookalikes=all,bind=name_or_type,repeat=once,on_error=retry,final=success,calls=25,memory=none"},
        "tsr": {"searched": 0.0, "greedy": 0.0,
                 "held_out": [0.0, 0.0, 0.071, 50],
                 "held_out_greedy": [0.0, 0.0, 0.071, 50],
                 "policy": "search:order=list,lookalikes=all,bind=name_or_type,repeat=once,on_error=ignore,final=success,calls=25,memory=none"},
    },
    "C3-P2": {
        "prr": {"searched": 0.25, "greedy": 0.053,
                 "held_out": [0.238, 0.106, 0.451, 21],
                 "held_out_greedy": [0.318, 0.164, 0.527, 22],
                 "policy": "search:order=list,lookalikes=all,bind=name_or_type,repeat=once,on_error=ignore,final=success,calls=25,memory=cell"},
        "tsr": {"searched": 0.0, "greedy": 0.0,
                 "held_out": [0.0, 0.0, 0.071, 50],
                 "held_out_greedy": [0.0, 0.0, 0.071, 50],
                 "policy": "search:order=list,lookalikes=all,bind=name_or_type,repeat=once,on_error=ignore,final=success,calls=25,memory=none"},
    },
    "C3-P3": {
        "prr": {"searched": 0.2, "greedy": 0.136,
                 "held_out": [0.091, 0.016, 0.377, 11],
                 "held_out_greedy": [0.0, 0.0, 0.168, 19],
                 "policy": "search:order=list,lookalikes=all,bind=name_or_type,repeat=twice,on_error=ignore,final=success,calls=25,memory=none"},
        "tsr": {"searched": 0.0, "greedy": 0.0,
                 "held_out": [0.0, 0.0, 0.071, 50],
                 "held_out_greedy": [0.0, 0.0, 0.071, 50],
                 "policy": "search:order=list,lookalikes=all,bind=name_or_type,repeat=once,on_error=ignore,final=success,calls=25,memory=none"},
    },
    "C3-P4": {
        "prr": {"searched": 0.1, "greedy": 0.053,
                 "held_out": [0.0, 0.0, 0.155, 21],
                 "held_out_greedy": [0.091, 0.025, 0.278, 22],
                 "policy": "search:order=list,lookalikes=all,bind=name_or_type,repeat=once,on_error=ignore,final=success,calls=25,memory=cell"},
        "tsr": {"searched": 0.0, "greedy": 0.0,
                 "held_out": [0.0, 0.0, 0.071, 50],
                 "held_out_greedy": [0.0, 0.0, 0.071, 50],
                 "policy": "search:order=list,lookalikes=all,bind=name_or_type,repeat=once,on_error=ignore,final=success,calls=25,memory=none"},
    },
    "C4-P0": {
        "tsr": {"searched": 0.0, "greedy": 0.0,
                 "held_out": [0.0, 0.0, 0.071, 50],
                 "held_out_greedy": [0.0, 0.0, 0.071, 50],
                 "policy": "search:order=list,lookalikes=all,bind=name_or_type,repeat=once,on_error=ignore,final=success,calls=25,memory=none"},
    },
    "C4-P1": {
        "prr": {"searched": 0.815, "greedy": 0.05,
                 "held_out": [0.586, 0.407, 0.745, 29],
                 "held_out_greedy": [0.182, 0.086, 0.344, 33],
                 "policy": "search:order=short_description,lookalikes=all,bind=name_or_type,repeat=once,on_error=retry,final=success,calls=25,memory=none"},
        "tsr": {"searched": 0.0, "greedy": 0.0,
                 "held_out": [0.0, 0.0, 0.071, 50],
                 "held_out_greedy": [0.0, 0.0, 0.071, 50],
                 "policy": "search:order=list,lookalikes=all,bind=name_or_type,repeat=once,on_error=ignore,final=success,calls=25,memory=none"},
    },
    "C4-P2": {
        "prr": {"searched": 0.233, "greedy": 0.132,
                 "held_out": [0.286, 0.153, 0.471, 28],
                 "held_out_greedy": [0.086, 0.03, 0.224, 35],
                 "policy": "search:order=short_description,lookalikes=all,bind=type,repeat=once,on_error=ignore,final=success,calls=25,memory=none"},
        "tsr": {"searched": 0.0, "greedy": 0.0,
                 "held_out": [0.0, 0.0, 0.071, 50],
                 "held_out_greedy": [0.0, 0.0, 0.071, 50],
                 "policy": "search:order=list,lookalikes=all,bind=name_or_type,repeat=once,on_error=ignore,final=success,calls=25,memory=none"},
    },
    "C4-P3": {
        "prr": {"searched": 0.158, "greedy": 0.028,
                 "held_out": [0.0, 0.0, 0.204, 15],
                 "held_out_greedy": [0.054, 0.015, 0.177, 37],
                 "policy": "search:order=short_description,lookalikes=all,bind=name_or_type,repeat=twice,on_error=ignore,final=success,calls=25,memory=none"},
        "tsr": {"searched": 0.0, "greedy": 0.0,
                 "held_out": [0.0, 0.0, 0.071, 50],
                 "held_out_greedy": [0.0, 0.0, 0.071, 50],
                 "policy": "search:order=list,lookalikes=all,bind=name_or_type,repeat=once,on_error=ignore,final=success,calls=25,memory=none"},
    },
    "C4-P4": {
        "prr": {"searched": 0.091, "greedy": 0.024,
                 "held_out": [0.0, 0.0, 0.259, 11],
                 "held_out_greedy": [0.062, 0.017, 0.201, 32],
                 "policy": "search:order=list,lookalikes=all,bind=name_or_type,repeat=once,on_error=ignore,final=success,calls=4,memory=none"},
        "tsr": {"searched": 0.0, "greedy": 0.0,
                 "held_out": [0.0, 0.0, 0.071, 50],
                 "held_out_greedy": [0.0, 0.0, 0.071, 50],
                 "policy": "search:order=list,lookalikes=all,bind=name_or_type,repeat=once,on_error=ignore,final=success,calls=25,memory=none"},
    },
}

