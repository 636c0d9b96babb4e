"""APB's generated cases as role-leak probe items (evaluator/role_probe.py).

Three roles a model must judge and must not be able to read off a string: the Tool-Broken
replacement among the broken tool's look-alikes, the extraneous (distractor) tools among the originals, and an
Unsolvable case among solvable ones. A case's family is its base, so the probe trains on half the
bases and tests on the rest.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

from toolsweep.benchmarks.apb.generator import (UNSOLVABLE_TYPES, Dataset, broken_listing, twin_case,
                                                unsolvable_eligible, unsolvable_variant)
from toolsweep.benchmarks.apb.environment import render_files
from toolsweep.benchmarks.apb.tools import FINISH
from toolsweep.evaluator.role_probe import ProbeItem, ProbeResult, probe


def _tool_item(tool: dict[str, Any], label: bool, family: str) -> ProbeItem:
    props = tool.get("parameters", {}).get("properties", {})
    params = tuple((p, str(v.get("description", ""))) for p, v in props.items())
    return ProbeItem(fields={"name": tool["name"], "description": tool["description"]}, label=label,
                     family=family, params=params)


def broken_tool_list(ds: Dataset, t: dict[str, Any]) -> list[dict[str, Any]]:
    """The tools of a Tool-Broken case as the model sees them (the environment lists the same)."""
    return broken_listing(ds.bases[t["base"]]["tools"], t)


def broken_lists(ds: Dataset, pair_only: bool = True) -> list[list[ProbeItem]]:
    """The tool list of every Tool-Broken case of the paper's layout as the model sees it (replacement
    inserted in place).

    `pair_only`: the broken tool and its replacement alone, in list order. The error names the
    broken tool and the replacement does its job, so a reader finds the pair; what must tell
    nothing is which of the two is the replacement, apart from that error."""
    out = []
    for t in ds.cell("broken", twins=False, lookalikes=False):
        tools = broken_tool_list(ds, t)
        if pair_only:
            tools = [x for x in tools if x is t["replacement_tool"] or x["name"] == t["broken_tool"]]
        out.append([_tool_item(x, x is t["replacement_tool"], f"base{t['base']}") for x in tools])
    return out


def lookalike_lists(ds: Dataset) -> list[list[ProbeItem]]:
    """The whole tool list of every Tool-Broken case of the look-alike layout (the default), in the
    order the environment shows it, the replacement and the other look-alikes of the broken tool scored.

    The error names the broken tool and every look-alike reads as that tool reworded, so a reader finds
    the look-alikes; what must tell nothing, apart from what their words mean, is which of them does
    the broken tool's job. The other tools shape the list's relations and are neither trained nor
    tested on."""
    out = []
    for t in ds.cell("broken", twins=False):
        candidates = {t["replacement_tool"]["name"], *(x["tool"]["name"] for x in t.get("lookalikes", ()))}
        out.append([replace(_tool_item(x, x is t["replacement_tool"], f"base{t['base']}"),
                            scored=x["name"] in candidates) for x in broken_tool_list(ds, t)])
    return out


def extraneous_lists(ds: Dataset, position: str = "shuffle") -> list[list[ProbeItem]]:
    """The tool list of every extraneous case with the most distractors, in the order the environment
    shows it (`distractor_position`: shuffled in by default, or appended as §4.3 lists them)."""
    settings = [s for s in ds.tasks if s.startswith("extraneous_holistic_n")]
    top = max(settings, key=lambda s: int(s.rsplit("n", 1)[1]))
    out = []
    for t in ds.tasks[top]:
        tools = list(ds.bases[t["base"]]["tools"]) + list(t["distractors"])
        if position == "shuffle":
            random.Random(f"{t['task_id']}|shuffle").shuffle(tools)
        items = [_tool_item(x, x.get("hidden", {}).get("kind") == "distractor", f"base{t['base']}") for x in tools]
        # Finish is every list's terminal step, named by the prompt: never a candidate for a distractor,
        # so it shapes the list's relations but is neither trained nor tested on
        out.append([replace(it, scored=False) if it.fields["name"] == FINISH else it for it in items])
    return out


def _case_item(query: str, files: list[Any], tools: list[dict[str, Any]], label: bool, family: str) -> ProbeItem:
    """A case as the refusal prompt shows it: the query, the file manifest (names, captions and the
    structured scene, the default `file_mode`) and every listed tool."""
    listed = tuple(f"{x['name']} {x['description']}" for x in tools)
    manifest = f"files {len(files)} {render_files(files, 'scene')}"
    return ProbeItem(fields={"query": query, "tools": listed, "files": manifest}, label=label, family=family)


def unsolvable_lists(ds: Dataset, kinds: tuple[str, ...] = UNSOLVABLE_TYPES) -> list[list[ProbeItem]]:
    """Every case shown under the refusal prompt (P4u), one case per list (a case is judged alone):
    the Unsolvable cases of `kinds` and the solvable controls drawn as those kinds."""
    out = []
    for t in ds.tasks["unsolvable_control"]:
        if t.get("gate", kinds[0]) in kinds:
            b = ds.bases[t["base"]]
            out.append([_case_item(t.get("query", b["query"]), b["background"]["files"], t.get("tools", b["tools"]),
                                   False, f"base{t['base']}")])
    for kind in kinds:
        for t in ds.tasks[f"unsolvable_{kind}"]:
            out.append([_case_item(t["query"], t["files"], t["tools"], True, f"base{t['base']}")])
    return out


def twin_lists(ds: Dataset, kinds: tuple[str, ...] = UNSOLVABLE_TYPES) -> list[list[ProbeItem]]:
    """The generating process, probed with power: for every base the Unsolvable kind can be made from
    (some 430, of which a dataset draws 100), its Unsolvable case of each of `kinds` beside the
    solvable twin (the control `unsolvable_control` would draw as that kind). The controls a dataset
    holds give each kind some 25 cases, too few to tell a leak from the noise of a 0.05 margin."""
    eligible = [b for b in ds.bases if unsolvable_eligible(b)]
    out = []
    for kind in kinds:
        for b in eligible:
            u = unsolvable_variant(ds.gen_seed, b, kind, eligible)
            twin = twin_case(ds.gen_seed, b, kind)
            out.append([_case_item(twin["query"], twin["files"], twin["tools"], False, f"base{b['index']}")])
            out.append([_case_item(u["query"], u["files"], u["tools"], True, f"base{b['index']}")])
    return out


def run_probes(ds: Dataset, seed: int = 0) -> list[ProbeResult]:
    return [probe("apb broken replacement among its look-alikes", lookalike_lists(ds), salt="apb", seed=seed),
            probe("apb broken replacement (paper layout, within its pair)", broken_lists(ds), salt="apb", seed=seed),
            probe("apb extraneous tool", extraneous_lists(ds), salt="apb", seed=seed),
            probe("apb unsolvable case", unsolvable_lists(ds), salt="apb", seed=seed),
            *[probe(f"apb unsolvable {k}", unsolvable_lists(ds, (k,)), salt="apb", seed=seed)
              for k in UNSOLVABLE_TYPES]]
