"""APB case generation: the paper's counts (§1, §2.5, §10), determinism and the §3.5/§12 checks."""

from __future__ import annotations

import collections
import re
import statistics

import pytest

from toolsweep.benchmarks.apb import APB, plans
from toolsweep.benchmarks.apb.domains import DOMAINS, PRIVATE_INFO_CAPS, SOURCE_STEPS, SOURCES
from toolsweep.benchmarks.apb.generator import (
    build_base,
    case_hash,
    dataset,
    quality_problems,
    slots,
    step_bin,
)
from toolsweep.benchmarks.apb.probe import broken_tool_list
from toolsweep.benchmarks.apb.tools import AFFIXES, FINISH

# Tab. 11 and Tab. 10 as printed in the paper
TAB11 = {
    "Software Development": 43, "System Operations & Web Engineering": 106, "Mathematical Reasoning": 38,
    "Statistical Analysis": 61, "Spreadsheet Manipulation": 63, "Financial Modeling": 70,
    "Expense & Budget Management": 55, "Market Research": 59, "Document & Legal Analysis": 32,
    "Art & Aesthetic Analysis": 63, "Scientific & Nature Exploration": 57, "Graphic Design": 70,
    "Narrative & Emotional Analysis": 78, "Professional Communication": 48, "Information Retrieval": 60,
    "Digital Media & Gaming Analytics": 60, "Creative Storytelling & Writing": 14, "Travel & Itinerary Planning": 38,
    "Logistics & Supply Chain": 12, "Consumer Decision Making": 18, "Event Planning": 30,
    "Health & Nutrition Management": 34,
}
TAB10 = {"FrameThinker": (100, 7.73, (90, 10, 0)), "GAIA": (163, 14.85, (18, 130, 15)),
         "GTA": (226, 10.92, (106, 120, 0)), "OpenCUA": (100, 12.08, (39, 59, 2)),
         "ToolBench": (150, 13.47, (11, 134, 5)), "RealWorld": (370, 13.37, (170, 137, 63))}


@pytest.fixture(scope="module")
def ds():
    return dataset(0)


@pytest.fixture(scope="module")
def bench():
    return APB()


def test_setting_sizes_sum_to_4209(ds, bench):
    """The paper's 4,209 cases (its layout, `twins: false`); by default every Unsolvable
    setting also holds each of its cases' solvable twins."""
    paper = APB(twins=False)
    sizes = {s: len(paper.tasks(s)) for s in paper.settings()}
    groups = {
        "holistic": sizes["holistic"],
        "stepwise": sum(sizes[f"stepwise_k{k}"] for k in (1, 2, 3)),
        "extraneous": sum(sizes[f"extraneous_{h}_n{n}"] for h in ("holistic", "stepwise") for n in (2, 4, 6, 8, 10)),
        "broken": sizes["broken"],
        "unsolvable": sum(sizes[f"unsolvable_{u}"] for u in ("conflict", "info", "tool", "visual")),
    }
    assert groups == {"holistic": 1109, "stepwise": 900, "extraneous": 1500, "broken": 300, "unsolvable": 400}
    assert sum(n for s, n in sizes.items() if bench.settings()[s]["in_4209"]) == 4209
    # the extra studies (§12.1): 600 stage cases, 106 efficiency cases, 4 x 300 refinement cases
    assert sizes["stepwise_stage_early"] + sizes["stepwise_stage_late"] == 600
    assert sizes["efficiency"] == 106
    assert all(sizes[f"refine_{m}"] == 300 for m in ("self_plus", "self_minus", "critic_plus", "critic_minus"))
    for s in bench.settings():
        ids = bench.tasks(s)
        assert len(set(ids)) == len(ids)
        twins = [i for i in ids if "-twin-" in i]
        if (s.startswith("unsolvable_") and s != "unsolvable_control") or s == "broken":
            assert len(ids) == 2 * len(paper.tasks(s)) and sorted(i.replace("-twin-", "-") for i in twins) == paper.tasks(s)
        else:
            assert not twins and ids == paper.tasks(s)


def test_domain_source_and_modality_counts(ds):
    assert len(DOMAINS) == 22
    assert collections.Counter(b["domain"] for b in ds.bases) == TAB11
    assert collections.Counter(b["source_style"] for b in ds.bases) == {s: v[0] for s, v in TAB10.items()}
    assert collections.Counter(b["modality"] for b in ds.bases) == {"text": 673, "image": 336, "video": 100}


def test_step_count_distribution_matches_tab10(ds):
    for src in SOURCES:
        lengths = [b["meta"]["L"] for b in ds.bases if b["source_style"] == src]
        n, mean, bins = TAB10[src]
        assert SOURCE_STEPS[src] == TAB10[src]
        counted = collections.Counter(step_bin(x) for x in lengths)
        assert (counted[0], counted[1], counted[2]) == bins, src
        assert abs(statistics.mean(lengths) - mean) <= 0.05, src
        assert min(lengths) >= 3 and max(lengths) <= 30
    overall = [b["meta"]["L"] for b in ds.bases]
    assert abs(statistics.mean(overall) - 12.48) <= 0.05
    assert sum(1 for x in overall if x <= 10) == 434 and sum(1 for x in overall if x > 20) == 85
    # a step is one reference node = one tool-calling assistant turn (Finish not counted)
    b = ds.bases[0]
    calls = [m for m in b["reference"]["trajectory"] if m["role"] == "assistant"]
    assert len(calls) == b["meta"]["L"] + 1 and calls[-1]["tool_calls"][0]["function"]["name"] == FINISH


def test_cases_list_as_many_tools_as_the_papers(ds):
    """App. B.1: the augmented cases average 9.4 tools (Finish, the protocol's terminal, not counted);
    each still has an unneeded tool (the forbid_tool constraint and extraneous-tool checks use one)."""
    tools = [[t for t in b["tools"] if t["name"] != FINISH] for b in ds.bases]
    assert abs(statistics.mean(len(t) for t in tools) - 9.4) <= 0.1
    assert all(any(t["hidden"].get("neutral") for t in ts) for ts in tools)
    used = [len({n["tool"] for n in b["reference"]["nodes"]}) for b in ds.bases]
    assert statistics.mean(len(t) for t in tools) - statistics.mean(used) < 2.0  # most listed tools are needed


def test_every_base_passes_the_generation_quality_checks(ds):
    bad = {b["base_id"]: quality_problems(b) for b in ds.bases if quality_problems(b)}
    assert bad == {}
    # no caption carries a secret, every goal slot is in the query
    for b in ds.bases[:200]:
        for n in b["reference"]["nodes"]:
            for spec in n["args"].values():
                if spec["kind"] == "const" and spec["goal_slot"]:
                    assert str(spec["value"]) in b["query"]


def test_quality_check_catches_a_broken_case(ds):
    import copy

    b = copy.deepcopy(ds.bases[3])
    nodes = b["reference"]["nodes"]
    nodes[0]["deps"] = [nodes[-1]["id"]]  # a cycle
    b["background"]["files"] = [{"name": "x.png", "type": "image", "scene": {},
                                 "caption": f"shows {next(iter(b['world']['secrets'].values()))}"}]
    probs = quality_problems(b)
    assert any("cycle" in p for p in probs)
    assert any("leaks a secret" in p for p in probs)


def test_determinism_and_seed_independence(ds):
    # a case does not depend on generation order: rebuilding single slots gives identical hashes
    sl = slots(0)
    for i in (0, 517, 1108):
        assert case_hash(build_base(0, sl[i])) == case_hash(ds.bases[i])
    # a different seed gives different cases (<1% shared hashes on a sample)
    hashes0 = {case_hash(b) for b in ds.bases}
    other = [build_base(1, s) for s in slots(1)[:120]]
    assert sum(case_hash(b) in hashes0 for b in other) == 0


def test_extraneous_variants(ds):
    for n_e in (2, 4, 6, 8, 10):
        for half in ("holistic", "stepwise"):
            for t in ds.tasks[f"extraneous_{half}_n{n_e}"]:
                base = ds.bases[t["base"]]
                assert len(t["distractors"]) == n_e
                bigger = ds.task_index(f"extraneous_{half}_n10")[t["task_id"].replace(f"_n{n_e}-", "_n10-")]
                assert [d["name"] for d in bigger["distractors"][:n_e]] == [d["name"] for d in t["distractors"]]
                names = {x["name"].lower() for x in base["tools"]}
                node_caps = {n["cap"] for n in base["reference"]["nodes"]}
                for d in t["distractors"]:
                    assert d["name"].lower() not in names
                    assert not re.fullmatch(r"(tool\d*|useless_tool)", d["name"].lower())
                    assert not set(d["hidden"]["capabilities"]) & node_caps
                    assert d["hidden"]["kind"] == "distractor"


def test_broken_variants(ds):
    """The paper's layout (option `lookalikes: false`; test_apb_lookalikes: the default)."""
    swapped = 0
    paper = ds.cell("broken", twins=False, lookalikes=False)
    for t in paper:
        base = ds.bases[t["base"]]
        names = [x["name"] for x in base["tools"]]
        repl, broken = t["replacement_tool"]["name"], t["broken_tool"]
        listed = [x["name"] for x in broken_tool_list(ds, t)]
        assert repl in listed and broken in listed and len(set(listed)) == len(listed) == len(names) + 1
        assert (repl in names) != (broken in names)  # one wording is the base's, the other the synonyms'
        swapped += repl in names
        assert not any(repl.lower() in (broken.lower() + a, a + broken.lower()) for a in AFFIXES)
        assert not any(broken.lower() in (repl.lower() + a, a + repl.lower()) for a in AFFIXES)
        assert repl.lower() != broken.lower()
        node = plans.node_map(base["reference"]["nodes"])[t["broken_node"]]
        assert [n["tool"] for n in base["reference"]["nodes"]].count(node["tool"]) == 1
        assert node["tool"] in (repl, broken)
        caps = next(x for x in base["tools"] if x["name"] == node["tool"])["hidden"]["capabilities"]
        assert t["replacement_tool"]["hidden"]["capabilities"] == caps
        last = t["prefix"][-1]
        assert last["role"] == "tool" and last["name"] == broken and "broken" in last["content"]
        failed = t["prefix"][-2]["tool_calls"][0]["function"]
        assert failed["name"] == broken
        renamed = [p for p, q in t["arg_map"].items() if p != q]
        assert renamed, f"{broken}: no parameter renamed"
        action = t["reference_action"]["tool_calls"][0]["function"]
        assert action["name"] == repl
        assert action["arguments"] == {t["arg_map"][p]: v for p, v in failed["arguments"].items()}
    assert 0.4 < swapped / len(paper) < 0.6  # either wording breaks, by a coin


def test_unsolvable_variants(ds):
    for t in ds.tasks["unsolvable_visual"]:  # another case's files: none the query names is attached
        base = ds.bases[t["base"]]
        assert t["query"] == base["query"] and base["modality"] != "text"
        own = [f["name"] for f in base["background"]["files"]]
        assert len(t["files"]) == len(own) and all(n in t["query"] for n in own)
        assert not {f["name"] for f in t["files"]} & set(own)
        assert [f["type"] for f in t["files"]] == [f["type"] for f in base["background"]["files"]]
    for t in ds.tasks["unsolvable_tool"]:
        base = ds.bases[t["base"]]
        cap = t["capability"]
        before = [x["name"] for x in base["tools"] if cap in x["hidden"]["capabilities"]]
        assert sorted(before) == sorted(t["removed_tools"]) and before
        assert not any(cap in x["hidden"]["capabilities"] for x in t["tools"])
        assert len(t["tools"]) == len(base["tools"])  # each removed tool's place holds its retired look-alike
        assert {f"legacy_{r}" for r in t["removed_tools"]} <= {x["name"] for x in t["tools"]}
        assert all("Retired:" in x["description"] for x in t["tools"] if x["name"].startswith("legacy_"))
        sentence = t["query"][len(base["query"]):]
        assert not any(r in sentence for r in t["removed_tools"])
        assert not any(w in sentence for w in ("IMPORTANT", "WARNING", "COMPLIANCE", "NOTE:"))
    for t in ds.tasks["unsolvable_conflict"]:  # a named tool the list lacks; the step's tool under its other name
        base = ds.bases[t["base"]]
        listed = {x["name"] for x in t["tools"]}
        assert t["mandatory_tool"] not in listed and len(t["tools"]) == len(base["tools"])
        step_tool = t["step_tool"]  # listed under one of its two names, the other named in the requirement
        assert step_tool in {n["tool"] for n in base["reference"]["nodes"]}
        assert t.get("renamed", {}).get(step_tool, step_tool) in listed
        assert t["mandatory_tool"] in t["query"] and "offline" not in t["query"]
    renamed = sum(bool(t.get("renamed")) for t in ds.tasks["unsolvable_conflict"])
    assert 30 < renamed < 70  # which of the two names is listed is a coin's
    for t in ds.tasks["unsolvable_info"]:
        base = ds.bases[t["base"]]
        given = re.compile(rf"(?<![\d.]){re.escape(t['removed_value'])}")  # 5%, not the 5% of 15%
        assert given.search(base["query"]) and not given.search(t["query"])
        assert not any(set(x["hidden"]["capabilities"]) & PRIVATE_INFO_CAPS for x in t["tools"])
    bases = {tuple(t["base"] for t in ds.tasks[f"unsolvable_{u}"]) for u in ("conflict", "info", "tool", "visual")}
    assert len(bases) == 1  # the same 100 bases x 4 types


def test_efficiency_variants(ds):
    for t in ds.tasks["efficiency"]:
        base = ds.bases[t["base"]]
        order = base["reference"]["linearization"]
        nodes = {n["id"]: n for n in base["reference"]["nodes"]}
        comps, traps = t["composites"], t["traps"]
        n_traps = len({x["hidden"]["trap_id"] for x in traps})
        assert 3 <= len(comps) <= 6 and 2 <= n_traps <= 4 and 5 <= len(comps) + len(traps) <= 10
        for x in traps:
            h = x["hidden"]
            if h["trap"] == "overpriced":
                node = nodes[h["covers"][0]]
                assert h["cost"] >= t["costs"][node["tool"]] + 3
            if h["trap"] == "redundant":
                part_a = next(y for y in traps if y["name"] == h["requires"])
                assert part_a["hidden"]["cost"] + h["cost"] > t["costs"][nodes[h["covers"][0]]["tool"]]
        for c in comps:
            cov = c["hidden"]["covers"]
            idx = [order.index(x) for x in cov]
            assert 2 <= len(cov) <= 3 and idx == list(range(idx[0], idx[0] + len(idx)))
            assert all(cov[i] in nodes[cov[i + 1]]["deps"] for i in range(len(cov) - 1))
            assert c["hidden"]["cost"] < sum(t["costs"][nodes[x]["tool"]] for x in cov)
            assert len(cov) < len(order)
        assert t["optimal_cost"] < t["reference_cost"]
        assert all(1 <= t["costs"][x["name"]] <= 5 for x in base["tools"] if x["name"] != FINISH)
    kinds = {x["hidden"]["trap"] for t in ds.tasks["efficiency"] for x in t["traps"]}
    assert kinds == {"overpriced", "off_target", "redundant", "redundant_part"}


def test_same_cases_in_another_process(ds):
    """Hash randomization must not leak into the cases (seeds come from sha256, never hash())."""
    import os
    import subprocess
    import sys

    code = ("from toolsweep.benchmarks.apb.generator import build_base, case_hash, slots\n"
            "sl = slots(0)\nprint(' '.join(case_hash(build_base(0, sl[i])) for i in (5, 600, 1000)))")
    env = dict(os.environ, PYTHONHASHSEED="12345")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split() == [case_hash(ds.bases[i]) for i in (5, 600, 1000)]


def test_benchmark_interface(bench):
    assert bench.name == "apb" and len(bench.settings()) == 29
    names = {m.name for m in bench.metrics()}
    assert {"correct", "grade", "E1", "E6", "replace", "pass", "refused", "cost", "hol_delta", "ext_used"} <= names
    for s in bench.settings():
        specs = bench.metrics(s)
        assert len({m.name for m in specs}) == len(specs)
    with pytest.raises(KeyError, match="available"):
        bench.tasks("holistic_typo")
    with pytest.raises(KeyError, match="no task"):
        bench.make_env("nope", "holistic", 0)
    fp = bench.fingerprint()
    assert fp == APB().fingerprint() and fp["generator_version"] == "apb-gen-8" and len(fp["cases_sha256"]) == 64
    assert all(t.startswith("apb-g0-holistic-") for t in bench.tasks("holistic"))  # ids carry the generation seed
    exploits = {e.name for e in bench.exploit_policies()}
    assert set(bench.scripted_policies()) == {"oracle", "always_refuse", "random", bench.baseline_policy()} | exploits
    assert {"string_chain", "negated_refusal", "deep_nesting", "prose_refusal"} <= exploits
    env = bench.make_env(bench.tasks("broken")[0], "broken", 0)
    with pytest.raises(KeyError, match="available"):
        bench.make_scripted_policy("genius", env, 0)
