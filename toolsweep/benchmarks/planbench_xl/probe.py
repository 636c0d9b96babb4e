"""The lists PlanBench-XL's retriever shows, as role-leak probe items (evaluator/role_probe.py).

Every typed request the retriever can answer (by inputs, by output, by inputs and output) gives one
list in the default setting, one with every other match blocked under the mixed alternatives, and
one per single-type setting. Each listed tool is an item with the fields a model reads (name,
description, parameter names and descriptions) and its hidden role; its family is the executable
tool it belongs to, so the probe trains on half the executables' families and tests on the rest.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from toolsweep.benchmarks.planbench_xl.retriever import Retriever
from toolsweep.benchmarks.planbench_xl.world import Tool, World, seed_of
from toolsweep.evaluator.role_probe import ProbeItem, ProbeResult, probe

ROLES = ("executable", "noisy", "blocker:exp", "blocker:imp", "blocker:sem")
BLOCK_TYPES = (("exp", "imp", "sem"), ("exp",), ("imp",), ("sem",))


def _requests(retriever: Retriever) -> Iterator[list[Tool]]:
    for group in (retriever.by_inputs, retriever.by_output, retriever.by_io):
        for key in sorted(group, key=lambda k: str(sorted(k)) if isinstance(k, frozenset) else str(k)):
            yield list(group[key])


def tool_lists(world: World, retriever: Retriever, *, blocked_lists: bool = True,
               sample: int | None = None, seed: int = 0) -> list[list[Tool]]:
    """The retriever's result lists: default, and (blocked_lists) with half the matches blocked."""
    matches = list(_requests(retriever))
    if sample is not None and sample < len(matches):
        matches = random.Random(seed).sample(matches, sample)
    out: list[list[Tool]] = []
    for matched in matches:
        listed, _ = retriever.result_list(matched, frozenset(), ("exp", "imp", "sem"))
        out.append(listed)
        if not blocked_lists:
            continue
        key = ",".join(t.id for t in matched)
        for btypes in BLOCK_TYPES:
            rng = random.Random(seed_of(seed, "probe-block", key, *btypes))
            blocked = frozenset(t.id for t in matched if rng.random() < 0.5) or frozenset({matched[0].id})
            listed, _ = retriever.result_list(matched, blocked, btypes)
            out.append(listed)
    return out


def role_of(tool: Tool) -> str:
    return "noisy" if tool.kind.startswith("noisy:") else tool.kind


def masked(tool: Tool) -> str:
    """The description with its service sentence blanked (its length and place kept): the
    paper asks a noisy tool to say why it is unreliable (App. B.2.2), so what that sentence says is
    meant to be read; everything else must tell nothing."""
    if not tool.note:
        return tool.description
    return tool.description.replace(tool.note, " " * len(tool.note))


def as_items(listed: list[Tool], role: str, param_descriptions: str = "datatype",
             mask_notes: bool = True) -> list[ProbeItem]:
    items = []
    for t in listed:
        schema = t.schema(param_descriptions)
        params = tuple((p, v["description"]) for p, v in schema["parameters"]["properties"].items())
        desc = masked(t) if mask_notes else t.description
        items.append(ProbeItem(fields={"name": t.title, "description": desc}, label=role_of(t) == role,
                               family=t.paired or t.id, params=params))
    return items


def run_probes(world: World, retriever: Retriever, *, sample: int | None = None, seed: int = 0,
               roles: tuple[str, ...] = ROLES, mask_notes: bool = True) -> list[ProbeResult]:
    """One probe per role: executable and noisy over every list, each alternative kind over the lists
    where alternatives are listed."""
    lists = tool_lists(world, retriever, sample=sample, seed=seed)
    results = []
    for role in roles:
        scope = lists if role in ("executable", "noisy") else [
            lst for lst in lists if any(role_of(t) == role for t in lst)]
        label = f"planbench_xl {role}" + ("" if mask_notes else " (service sentence read)")
        results.append(probe(label, (as_items(lst, role, mask_notes=mask_notes) for lst in scope),
                             salt="planbench_xl", seed=seed))
    return results
