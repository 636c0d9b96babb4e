"""APB's roles cannot be read off a string (apb-gen-7): an Unsolvable case and its solvable twin read
the same requirement and list the same tools (conflict: the step's tool under one of its two names, the
twin naming the listed one; info: a note's rate, the twin's the one the query refers to; visual: another
case's files), either wording of a Tool-Broken step may be the one that breaks, and a distractor is
worded like a listed tool, drawn as often as its tool is listed, and no tool is needed by every case of
its domain. Positive controls keep their credit.
(tool: both list a retired look-alike of each removed tool, the twin the tool too)

Before (apb-gen-4, gen_seed 0): a rule of 7 words plus a file check flagged every Unsolvable case and
no solvable one; the replacement-within-its-pair probe read 1.000; every distractor had one parameter
(`item_id`) and one return sentence no listed tool has."""

from __future__ import annotations

import asyncio
import random
import re

import pytest

from toolsweep.benchmarks.apb import APB
from toolsweep.benchmarks.apb.generator import (UNSOLVABLE_TYPES, Dataset, dataset, renamed_base, twin_case,
                                                unsolvable_eligible, unsolvable_variant)
from toolsweep.benchmarks.apb.probe import (broken_lists, extraneous_lists, lookalike_lists, twin_lists,
                                            unsolvable_lists)
from toolsweep.evaluator.episode import run_episode
from toolsweep.evaluator.registry import get_benchmark, register_benchmark
from toolsweep.evaluator.role_probe import CHANCE_MARGIN, ProbeItem, probe
from toolsweep.evaluator.types import WorkUnit

register_benchmark("apb", "toolsweep.benchmarks.apb:APB")

RULE_WORDS = re.compile(r"\b(?:offline|outage|prohibited|accepted|discussed|handbook|eligible)\b", re.I)
FILE_NAMED = re.compile(r"\b\w+\.(?:png|jpe?g|mp4)\b", re.I)
GATED = ("conflict", "info", "tool")


def phrase_rule(query: str, files: list) -> bool:
    """The 7-word rule with a visual-word check that read every apb-gen-4 Unsolvable case."""
    return bool(RULE_WORDS.search(query)) or (not files and bool(FILE_NAMED.search(query)))


@pytest.fixture(scope="module")
def ds() -> Dataset:
    return dataset(0)


@pytest.fixture(scope="module")
def bench() -> APB:
    b = get_benchmark("apb")
    assert isinstance(b, APB)
    return b


def twins(ds: Dataset) -> list[tuple[dict, dict]]:
    """(control, Unsolvable case of the control's kind, same base) for every gated control."""
    out = []
    for c in ds.tasks["unsolvable_control"]:
        if c["gate"] in GATED:
            u = next(t for t in ds.tasks[f"unsolvable_{c['gate']}"] if t["base"] == c["base"])
            out.append((c, u))
    return out


def test_phrase_rule_flags_an_unsolvable_case_and_its_solvable_twin_alike(ds):
    pairs = twins(ds)
    assert {c["gate"] for c, _ in pairs} == set(GATED)
    for c, u in pairs:
        files = ds.bases[c["base"]]["background"]["files"]
        assert phrase_rule(c["query"], files) == phrase_rule(u["query"], u["files"]), c["task_id"]
    # and over every case the refusal prompt shows with a requirement, the rule sits at chance
    uns = [phrase_rule(t["query"], t["files"]) for k in GATED for t in ds.tasks[f"unsolvable_{k}"]]
    ctl = [phrase_rule(c["query"], ds.bases[c["base"]]["background"]["files"]) for c, _ in pairs]
    bacc = (sum(uns) / len(uns) + 1 - sum(ctl) / len(ctl)) / 2
    assert abs(bacc - 0.5) <= 0.05, bacc


def test_the_twin_differs_only_in_the_world(ds):
    for c, u in twins(ds):
        base = ds.bases[c["base"]]
        if c["gate"] == "conflict":  # one list, two names of the step's tool: the twin names the listed one
            assert c.get("renamed") == u.get("renamed")
            listed = [x["name"] for x in renamed_base(base, c.get("renamed", {}))["tools"]]
            assert listed == [x["name"] for x in u["tools"]]
            named = u["renamed"].get(u["step_tool"], u["step_tool"]) if u.get("renamed") else u["step_tool"]
            assert named in listed and named in c["query"] and u["mandatory_tool"] not in listed
            c_tail, u_tail = c["query"][len(base["query"]):], u["query"][len(base["query"]):]
            assert c["query"].startswith(base["query"]) and u["query"].startswith(base["query"])
            assert c_tail.replace(named, "{X}") == u_tail.replace(u["mandatory_tool"], "{X}")
        elif c["gate"] == "tool":  # both list each removed tool's retired look-alike; the twin, the tool too
            assert c["query"] == u["query"]
            assert any(u["capability"] in x["hidden"]["capabilities"] for x in base["tools"])
            assert not any(u["capability"] in x["hidden"]["capabilities"] for x in u["tools"])
            kept = [x for x in c["tools"] if x["name"] not in u["removed_tools"]]
            assert [x["name"] for x in kept] == [x["name"] for x in u["tools"]]
            for name in u["removed_tools"]:
                assert f"legacy_{name}" in {x["name"] for x in u["tools"]} and name in {x["name"] for x in c["tools"]}
        else:  # info: both close with a note's rate; the twin's note is the one the query refers to
            head = c["query"].rsplit(" For reference, ", 1)[0]
            assert u["query"].rsplit(" For reference, ", 1)[0] == head
            code = re.search(r"\(ref\. ([A-Z]{3}-\d{3})\)", head).group(1)
            assert c["query"].endswith(f"under ref. {code} is {u['removed_value']}.")
            assert code not in u["query"].rsplit(" For reference, ", 1)[1]


def test_the_dataset_probe_reads_each_control_with_the_tools_it_lists(ds, bench):
    """A conflict twin lists the step's tool under its other name, a tool twin a retired look-alike: the
    probe and the environment read the control's own list, never its base's."""
    controls = ds.tasks["unsolvable_control"]
    items = unsolvable_lists(ds)[:len(controls)]
    for c, (item,) in zip(controls, items):
        listed = [x["name"] for x in bench.make_env(c["task_id"], "unsolvable_control", 0).tools]
        assert listed == [x["name"] for x in c["tools"]], c["task_id"]
        assert item.fields["tools"] == tuple(f"{x['name']} {x['description']}" for x in c["tools"])
    assert any(x["name"].startswith("legacy_") for c in controls if c["gate"] == "tool" for x in c["tools"])


@pytest.mark.parametrize("kind", ["conflict", "info", "tool", "visual"])
def test_unsolvable_cases_and_their_twins_are_at_chance_for_the_probe(ds, kind):
    """Every eligible base's Unsolvable case beside its solvable twin (435 pairs a kind at gen_seed 0).
    apb-gen-5: conflict 0.937, info 0.988, tool 0.907, visual 1.000 (bench/apb_roles.py)."""
    r = probe(f"apb unsolvable ('{kind}',)", twin_lists(ds, (kind,)), salt="apb")
    assert not r.readable, (kind, r.balanced_accuracy, r.shuffled_balanced_accuracy, r.top_features)


def test_broken_replacement_is_at_chance_within_its_pair(ds):
    r = probe("apb broken replacement within its pair", broken_lists(ds, pair_only=True), salt="apb")
    assert not r.readable, (r.balanced_accuracy, r.shuffled_balanced_accuracy, r.top_features)
    longer = [len(t["replacement_tool"]["name"]) > len(t["broken_tool"])
              for t in ds.cell("broken", twins=False, lookalikes=False)]
    assert abs(sum(longer) / len(longer) - 0.5) <= 0.1  # apb-gen-4: 260 of 300


def test_no_tool_is_needed_by_every_case_of_its_domain(ds):
    """A base draws its deliverable, its metric and the order of its nouns: apb-gen-6 listed one
    deliverable, one metric tool and one first fetch in every case of a domain, which therefore never
    drew them as distractors (the extraneous probe read .710 on them)."""
    by_domain: dict[str, list[dict]] = {}
    for b in ds.bases:
        by_domain.setdefault(b["domain"], []).append(b)
    for domain, bases in by_domain.items():
        if len(bases) < 12:
            continue
        for verb in ("generate", "calculate", "fetch"):
            tools = [" ".join(x["hidden"]["words"]) for b in bases for x in b["tools"]
                     if x["hidden"]["words"][0] == verb]
            top = max(map(tools.count, set(tools)))
            assert len(set(tools)) >= 2 and top <= 0.6 * len(bases), (domain, verb, top, len(bases))


def test_distractors_are_drawn_as_often_as_their_tools_are_listed(ds):
    """Each tool of the extraneous bases is a distractor about as often, relative to the others, as it
    is listed (generator.balanced_pool). Total variation between the two distributions: .128 at
    gen_seed 0; .213 drawn by the listed counts alone, which left the probe at .530 against .483."""
    listed: dict[tuple, int] = {}
    drawn: dict[tuple, int] = {}
    cases = {t["base"]: t for t in ds.tasks["extraneous_holistic_n10"] + ds.tasks["extraneous_stepwise_n10"]}
    for base, t in cases.items():
        for x in ds.bases[base]["tools"]:
            if x["name"] != "Finish":
                listed[tuple(x["hidden"]["words"])] = listed.get(tuple(x["hidden"]["words"]), 0) + 1
        for x in t["distractors"]:
            drawn[tuple(x["hidden"]["words"])] = drawn.get(tuple(x["hidden"]["words"]), 0) + 1
    n_listed, n_drawn = sum(listed.values()), sum(drawn.values())
    tv = 0.5 * sum(abs(listed.get(k, 0) / n_listed - drawn.get(k, 0) / n_drawn) for k in set(listed) | set(drawn))
    assert tv < 0.17, tv


def test_distractors_are_worded_as_listed_tools(ds):
    wordings = {(x["description"], str(x["parameters"])) for b in ds.bases for x in b["tools"]}
    for t in ds.tasks["extraneous_holistic_n10"] + ds.tasks["extraneous_stepwise_n10"]:
        for d in t["distractors"]:
            assert (d["description"], str(d["parameters"])) in wordings, d["name"]
        # a description's opening is shared by two tools at most, one listed and one added: three
        # "Does extract processing of ..." tools in one list would have two additions among them
        openings = [x["description"][:30] for x in t["distractors"]]
        assert len(set(openings)) == len(openings), t["task_id"]
    # shuffled in by default: the appended distractors were found by their position alone
    r = probe("apb extraneous", extraneous_lists(ds), salt="apb")
    appended = probe("apb extraneous appended", extraneous_lists(ds, position="append"), salt="apb")
    assert r.balanced_accuracy < appended.balanced_accuracy - 0.1, (r.balanced_accuracy, appended.balanced_accuracy)
    assert not r.readable, (r.balanced_accuracy, r.shuffled_balanced_accuracy, r.top_features)
    # apb-gen-4: 1.000 (0.943 with words alone); apb-gen-6: 0.710 (a domain's deliverable, metric and
    # first noun were needed by every one of its cases, and so never its distractors)


def _run(bench: APB, setting: str, policy: str, ids: list[str]) -> list:
    async def main():
        out = []
        for tid in ids:
            env = bench.make_env(tid, setting, 0)
            pol = bench.make_scripted_policy(policy, env, 0)
            unit = WorkUnit(sweep="t", model=policy, benchmark="apb", setting=setting, task_id=tid, seed=0)
            out.append(await run_episode(env, pol, unit, max_turns=bench.max_turns(setting)))
        return out

    return asyncio.run(main())


def test_positive_controls_keep_their_credit(bench, ds):
    ids = [t["task_id"] for t in ds.tasks["broken"]]  # the broken cases (test_apb_twins: their twins)
    paper = APB(lookalikes=False)
    swapped = [t["task_id"] for t in paper.data.cell("broken", False, False) if t.get("listed_broken_tool")]
    sample = sorted(random.Random(3).sample(ids, 40))
    for b, tids in ((bench, sample), (paper, sample[:20] + swapped[:20])):
        for tid in tids:  # the wording that breaks is listed once, beside its replacement (and its look-alikes)
            names = [x["name"] for x in b.make_env(tid, "broken", 0).tools]
            t = b.data.task_index("broken", True, b.options.lookalikes)[tid]
            assert len(set(names)) == len(names) and {t["broken_tool"], t["replacement_tool"]["name"]} <= set(names)
            assert {x["tool"]["name"] for x in t.get("lookalikes", ())} <= set(names)
        for policy in ("replace_with_args", "oracle"):
            for r in _run(b, "broken", policy, tids):
                assert r.metrics["replace"] == 1.0 and r.metrics["recovery"] == 1.0, (policy, r.task_id)
    gated = [c["task_id"] for c, _ in twins(ds)]
    for r in _run(bench, "unsolvable_control", "oracle", gated):
        assert r.metrics["correct"] == 1.0 and r.metrics["refused"] == 0.0, r.task_id
    for k in GATED:
        ids = sorted(random.Random(k).sample([t["task_id"] for t in bench.data.tasks[f"unsolvable_{k}"]], 15))
        for policy in ("oracle", "refusal_report_only"):
            assert all(r.metrics["pass"] == 1.0 for r in _run(bench, f"unsolvable_{k}", policy, ids)), (policy, k)


def test_the_phrase_reading_floor_now_refuses_solvable_twins(bench, ds):
    """`heuristic` refused on visible cues; a cue that every twin reads costs it the twin."""
    gated = [c["task_id"] for c, _ in twins(ds)]
    refused = [r.metrics["refused"] for r in _run(bench, "unsolvable_control", "heuristic", gated)]
    assert sum(refused) / len(refused) > 0.5  # apb-gen-4: 0 (no control carried a requirement)


@pytest.mark.slow
def test_roles_at_another_generation_seed():
    """At gen_seed 1 the pair probe lands below chance (0.461 against 0.512): a pair's two wordings are
    each other's mirror, so words learnt on one half point the wrong way on the other half about as
    often as the right way. Below chance reads no role; the leak side is what must hold."""
    other = dataset(1)
    pair = probe("pair", broken_lists(other, pair_only=True), salt="apb", seed=1)
    assert pair.balanced_accuracy <= pair.shuffled_balanced_accuracy + CHANCE_MARGIN, pair.top_features
    lookalikes = probe("look-alikes", lookalike_lists(other), salt="apb", seed=1)  # .490 against .494
    assert not lookalikes.readable, (lookalikes.balanced_accuracy, lookalikes.top_features)
    # the Unsolvable twins (visual reads 0.387 there: a donor's files are a control in their own case)
    for kinds in (("conflict",), ("info",), ("visual",), UNSOLVABLE_TYPES):
        r = probe(f"twins {kinds}", twin_lists(other, kinds), salt="apb", seed=1)
        assert r.balanced_accuracy <= r.shuffled_balanced_accuracy + CHANCE_MARGIN, (kinds, r.top_features)
    extraneous = probe("extraneous", extraneous_lists(other), salt="apb", seed=1)
    assert not extraneous.readable, (extraneous.balanced_accuracy, extraneous.top_features)  # apb-gen-6: .719
    for c, u in twins(other):
        files = other.bases[c["base"]]["background"]["files"]
        assert phrase_rule(c["query"], files) == phrase_rule(u["query"], u["files"])
