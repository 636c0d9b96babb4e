"""Role-leak probe on PlanBench-XL's result lists (issue 42): a classifier trained on half the
executables' families, over every visible field and the relations inside each list, sits at chance
on the other half for the executable, the noisy twins (their disclosure sentence blanked: the paper
asks it to be read) and the explicit and implicit alternatives. Before 1.4.0 the executable's
description was inside each noisy twin's and equal to its alternatives' (balanced accuracy .95-1.0)."""

from __future__ import annotations

import dataclasses

import pytest

pytest.importorskip("sklearn")

from toolsweep.benchmarks.planbench_xl.probe import as_items, run_probes, tool_lists  # noqa: E402
from toolsweep.benchmarks.planbench_xl.retriever import Retriever  # noqa: E402
from toolsweep.benchmarks.planbench_xl.world import build_world  # noqa: E402
from toolsweep.evaluator.role_probe import item_features, probe  # noqa: E402

AT_CHANCE = ("executable", "noisy", "blocker:exp", "blocker:imp")


def _check(sample: int | None, order: str) -> None:
    world = build_world()
    results = run_probes(world, Retriever(world, list_order=order), sample=sample, roles=AT_CHANCE)
    for r in results:
        assert r.at_chance, (r.row(), r.top_features)


def test_no_list_relation_tells_the_executable() -> None:
    """The string rules of issue 42, read directly: in no default list is the executable the one
    whose description lies inside another's, nor the shortest one."""
    world = build_world()
    lists = tool_lists(world, Retriever(world, list_order="shuffled"), blocked_lists=False)
    contained = shortest = 0
    for listed in lists:
        feats = item_features(as_items(listed, "executable", mask_notes=False))
        for t, f in zip(listed, feats):
            if t.is_exec:
                contained += f["desc_contained_in_other"] == 1.0
                shortest += f["shortest_desc"] == 1.0
    executables = sum(t.is_exec for listed in lists for t in listed)
    assert contained == 0
    assert shortest < 0.5 * executables  # was every one of them


def test_role_probe_sits_at_chance_on_a_sample() -> None:
    _check(sample=None, order="shuffled")  # every list: a sample of 80 left the noisy-twin probe a few points from chance either way


@pytest.mark.slow
@pytest.mark.parametrize("order", ["executables_first"])
def test_role_probe_sits_at_chance_on_every_list(order: str) -> None:
    if order == "executables_first":
        # the paper's order lists the matches, alternatives in a blocked tool's place, before any
        # noisy tool (App. B.6): position tells that part of the list by design, so in that order the
        # probe asks only whether anything tells an executable from an alternative within it
        world = build_world()
        lists = [lst for lst in tool_lists(world, Retriever(world))
                 if any(t.kind.startswith("blocker:") for t in lst) and any(t.is_exec for t in lst)]
        items = [[dataclasses.replace(it, scored=not t.kind.startswith("noisy:"))
                  for t, it in zip(lst, as_items(lst, "executable"))] for lst in lists]
        r = probe("executable among alternatives", items, salt="planbench_xl")
        assert r.at_chance, (r.row(), r.top_features)
        return
    _check(sample=None, order=order)
