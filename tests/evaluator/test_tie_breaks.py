"""The tie-break check's arithmetic (`evaluator.tie_breaks`): mid-ranks with ties, a role that always
falls on the first tool by name is read as far from its null, one drawn as the null says is not, and a
tool that holds the role in every case is counted above its expectation."""

from __future__ import annotations

import random

import pytest

from toolsweep.evaluator.tie_breaks import RoleCase, mid_ranks, rank_z, recurrence_z, visible_keys


def _schemas(names: list[str]) -> list[dict]:
    return [{"type": "function", "function": {"name": n, "description": "d" * len(n),
                                              "parameters": {"type": "object", "properties": {}}}}
            for n in names]


def test_mid_ranks_share_ties_and_span_zero_to_one():
    assert mid_ranks({"a": 1, "b": 2, "c": 3}, ["a", "b", "c"]) == {"a": 0.0, "b": 0.5, "c": 1.0}
    assert mid_ranks({"a": 1, "b": 1, "c": 3}, ["a", "b", "c"]) == {"a": 0.25, "b": 0.25, "c": 1.0}
    keys = visible_keys(_schemas(["zeta", "ab", "mid"]))
    assert keys["name"] == {"ab": 0, "mid": 1, "zeta": 2} and keys["list position"] == {"zeta": 0, "ab": 1, "mid": 2}
    assert keys["parameter count"] == {"zeta": 0, "ab": 0, "mid": 0}


def test_a_role_on_the_alphabetically_first_tool_is_read_and_a_drawn_one_is_not():
    rng = random.Random(7)
    biased, drawn = [], []
    for _ in range(200):
        names = [f"tool_{rng.randrange(10 ** 6):06d}" for _ in range(3)]
        rng.shuffle(names)
        null = {n: 1 / 3 for n in names}
        biased.append(RoleCase(_schemas(names), min(names), null))
        drawn.append(RoleCase(_schemas(names), rng.choice(names), null))
    assert rank_z(biased)["name"] < -10
    assert all(abs(z) < 3.3 for z in rank_z(drawn).values())
    with pytest.raises(ValueError, match="no probability"):
        rank_z([RoleCase(_schemas(["a", "b"]), "c", {"a": 0.5, "b": 0.5})])


def test_a_tool_that_always_holds_the_role_recurs_above_its_expectation():
    cases = [RoleCase(_schemas(["hot", f"cold{i}"]), "hot", {"hot": 0.5, f"cold{i}": 0.5}) for i in range(40)]
    counts = recurrence_z(cases)
    assert counts["hot"][:2] == (40, 20.0) and counts["hot"][2] > 6
    assert all(z < 0 for t, (_, _, z) in counts.items() if t != "hot")
