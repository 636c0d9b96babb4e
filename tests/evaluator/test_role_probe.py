"""The role-leak probe finds a planted tell in any visible field or list relation, and sits at
chance when roles are assigned after every field is drawn."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("sklearn")

from toolsweep.evaluator.role_probe import ProbeItem, family_half, item_features, probe  # noqa: E402

WORDS = "fetch record lookup value order account status shipment payment refund user item".split()


def _world(tell: str, n_families: int = 160, seed: int = 1) -> list[list[ProbeItem]]:
    """Lists of 6 tools, one working per family; `tell` plants one leak (or none)."""
    rng = random.Random(seed)
    lists = []
    for f in range(n_families):
        descs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))) for _ in range(6)]
        names = [f"Get_{rng.choice(WORDS)}_{rng.choice(WORDS)}" for _ in range(6)]
        working = rng.randrange(6)
        if tell == "contained":  # the working description is inside every decoy's
            descs = [descs[working] if i == working else f"{descs[i]} {descs[working]}" for i in range(6)]
        elif tell == "shortest":
            descs[working] = " ".join(descs[working].split()[:4])
        elif tell == "phrase":
            descs = [f"Equivalent service. {d}" if i == working else d for i, d in enumerate(descs)]
        elif tell == "first":
            order = [working] + [i for i in range(6) if i != working]
            descs, names = [descs[i] for i in order], [names[i] for i in order]
            working = 0
        lists.append([ProbeItem(fields={"name": names[i], "description": descs[i]}, label=i == working,
                                family=f"fam{f}") for i in range(6)])
    return lists


@pytest.mark.parametrize("tell", ["contained", "shortest", "phrase", "first"])
def test_probe_finds_a_planted_tell(tell: str) -> None:
    result = probe(tell, _world(tell))
    assert result.balanced_accuracy > 0.9
    assert not result.at_chance and result.readable
    assert result.row().endswith("| LEAKS |"), result.row()


def test_a_role_learnt_the_wrong_way_round_is_not_read() -> None:
    """Below chance (what the training half teaches is inverted in the other half) is no leak."""
    lists = _world("phrase")
    flipped = [[ProbeItem({**it.fields, "description": it.fields["description"].replace("Equivalent service. ", "")
                           if it.label else f"Equivalent service. {it.fields['description']}"}, it.label, it.family)
                for it in items] if family_half(items[0].family) else items for items in lists]
    result = probe("flipped", flipped)
    assert result.balanced_accuracy < result.shuffled_balanced_accuracy - 0.3
    assert not result.readable and not result.at_chance
    assert result.row().endswith("| below chance |"), result.row()


def test_probe_sits_at_chance_when_roles_are_assigned_after_drawing() -> None:
    result = probe("clean", _world("none"))
    assert result.at_chance and not result.readable, result


def test_list_relations_are_read_from_the_whole_list() -> None:
    items = [ProbeItem({"description": "returns the order"}, True, "a"),
             ProbeItem({"description": "Deprecated. returns the order"}, False, "a"),
             ProbeItem({"description": "returns the order"}, False, "b")]
    f = item_features(items)
    assert f[0]["desc_contained_in_other"] == 1.0 and f[0]["desc_identical_to_other"] == 1.0
    assert f[1]["desc_contains_other"] == 1.0 and f[1]["desc_contained_in_other"] == 0.0
    assert f[0]["shortest_desc"] == 1.0 and f[1]["longest_desc"] == 1.0
