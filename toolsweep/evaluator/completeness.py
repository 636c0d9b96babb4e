"""Whole and partial cells: how many of a cell's units the summary rests on.

A cell is partial when some of its units are not recorded: given up on infrastructure (listed in
failures.jsonl until a re-run records them) or not run yet (the sweep was interrupted, ran a subset, or a
resume is pending). Its estimate is then over fewer (task, seed) cells than the config asks for, and a
given-up unit is not a random one (an endpoint that failed on long prompts drops the long tasks), so a
reader must see it: summary.json says `complete`, `units_done`, `units_expected` and `units_given_up` per
cell, and the tables mark the numbers (`0.42* (87/100 units)`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Container, Mapping, Sequence
from pathlib import Path
from typing import Any

Cell = tuple[str, str, str]

PARTIAL_MARK = "*"
PARTIAL_NOTE = ("* partial cell: not every unit of it is recorded (units given up are listed in failures.jsonl; "
                "others are not run yet): run the sweep's command without --models/--benchmarks/--settings/--limit "
                "to finish it")


def given_up_by_cell(failures: Path, unit_ids: Container[str] | None = None) -> Counter:
    """Units listed in failures.jsonl per cell (only those of `unit_ids`, the current config, when given)."""
    counts: Counter = Counter()
    if not failures.exists():
        return counts
    for line in failures.read_text().splitlines():
        try:
            entry = json.loads(line)
            unit = entry["unit"]
            cell = (str(unit["model"]), str(unit["benchmark"]), str(unit["setting"]))
        except (ValueError, KeyError, TypeError):
            continue
        if unit_ids is None or entry.get("unit_id") in unit_ids:
            counts[cell] += 1
    return counts


def attach_completeness(
    cells: Sequence[dict[str, Any]],
    cell_units: Mapping[Cell, int],
    given_up: Mapping[Cell, int] | None = None,
) -> list[dict[str, Any]]:
    """Give each cell `units_expected` (the config's units of the cell), `units_done` (those recorded,
    scored or not), `units_given_up` and `complete`, in place; returns the cells of the config with no
    unit recorded at all (they have no summary, so no table would show them otherwise)."""
    given_up = given_up or {}
    seen = set()
    for c in cells:
        cell = (c["model"], c["benchmark"], c["setting"])
        seen.add(cell)
        expected = cell_units.get(cell)
        if expected is None:
            continue
        done = int(sum(int(v) for v in (c.get("terminations") or {}).values()))
        c.update(units_expected=int(expected), units_done=done, units_given_up=int(given_up.get(cell, 0)),
                 complete=done >= expected)
    return [
        {"model": m, "benchmark": b, "setting": s, "units_expected": int(n), "units_done": 0,
         "units_given_up": int(given_up.get((m, b, s), 0)), "complete": False}
        for (m, b, s), n in sorted(cell_units.items()) if (m, b, s) not in seen and n
    ]


def is_partial(cell: Mapping[str, Any]) -> bool:
    """A cell the summary knows to be partial (a summary made without the config's units says nothing)."""
    return cell.get("complete") is False


def units_text(cell: Mapping[str, Any]) -> str:
    """`87/100 units` for a partial cell (with how many were given up), empty for a whole one."""
    if not is_partial(cell):
        return ""
    text = f"{cell.get('units_done', 0)}/{cell.get('units_expected', '?')} units"
    given_up = int(cell.get("units_given_up") or 0)
    return text + (f", {given_up} given up" if given_up else "")
