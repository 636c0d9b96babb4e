"""Tool-Broken with look-alikes (APB option `lookalikes`, the default).

In the paper's layout the replacement is the only listed tool described as the broken one is, so a rule
over strings (call the tool whose description is nearest, with the failed call's arguments) replaced on
every case. Beside look-alikes, each the broken tool reworded the same way with the operation said in
another word, only what the words mean tells which one does the job: the rule picks the replacement in
about one case of four, the role-leak probe reads the look-alikes at chance, and a reader that knows
which words name the broken tool's operation finds the replacement in every case.
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from toolsweep.benchmarks.apb import APB
from toolsweep.benchmarks.apb.baseline import nearest_equivalent_call
from toolsweep.benchmarks.apb.generator import LOOKALIKES
from toolsweep.benchmarks.apb.probe import broken_tool_list, lookalike_lists
from toolsweep.benchmarks.apb.tools import LOOKALIKE_NEAR, LOOKALIKE_OPERATIONS
from toolsweep.evaluator.exploits import aggregate, play
from toolsweep.evaluator.role_probe import probe
from toolsweep.evaluator.types import Message

# How the base's tools name each class's operation ("Does <operation> of ..."): what a reader knows of
# the broken tool's description, beside the words LOOKALIKE_OPERATIONS gives the class.
SAID_AS = {"calculation": "calculate", "comparison": "compare", "round": "round", "adjust": "adjust",
           "validate": "validate", "forecast": "forecast", "extract processing": "extract",
           "analyze processing": "analyze", "analysis": "analyze", "normalize processing": "normalize",
           "score processing": "score", "retrieval": "fetch", "counting": "count", "selection": "choose",
           "classification": "classify", "detection": "detect", "conversion": "get"}
OPERATION = re.compile(r"^Does (\w+(?: processing)?) of ")


@pytest.fixture(scope="module")
def bench() -> APB:
    return APB()


def _listed(bench: APB, t: dict) -> list[dict]:
    return broken_tool_list(bench.data, t)


def _operation(tool: dict) -> str:
    return OPERATION.match(tool["description"]).group(1)


def _without_operation(tool: dict) -> str:
    return OPERATION.sub("Does _ of ", tool["description"], count=1)


def test_every_case_lists_its_replacement_among_lookalikes_reworded_alike(bench):
    """Every case: the environment lists the broken tool, its replacement and LOOKALIKES others, all names
    distinct; the replacement and each look-alike carry the same parameters and the same description but
    for the operation's word, the replacement's word shares no stem with how the broken tool says its
    operation, and no look-alike's operation comes near the broken tool's."""
    cases = bench.data.cell("broken", twins=False)
    assert len(cases) == 300
    for t in cases:
        env_names = [x["name"] for x in bench.make_env(t["task_id"], "broken", 0).tools]
        assert env_names == [x["name"] for x in _listed(bench, t)]
        assert len(set(env_names)) == len(env_names)
        candidates = [t["replacement_tool"], *(x["tool"] for x in t["lookalikes"])]
        assert len(candidates) == LOOKALIKES + 1 and {x["name"] for x in candidates} <= set(env_names)
        assert t["broken_tool"] in env_names
        assert len({json.dumps(x["parameters"], sort_keys=True) for x in candidates}) == 1
        assert len({_without_operation(x) for x in candidates}) == 1
        assert len({_operation(x) for x in candidates}) == LOOKALIKES + 1
        broken = next(x for x in _listed(bench, t) if x["name"] == t["broken_tool"])
        own = SAID_AS[_operation(broken)]
        said = {w[:5] for w in re.findall(r"[a-z]+", f"{_operation(broken)} {broken['name']}".lower()) if len(w) >= 5}
        assert _operation(t["replacement_tool"])[:5] not in said, t["task_id"]  # "retrieving" for "retrieval"
        near = set().union(*(g for g in LOOKALIKE_NEAR if own in g)) | {own}
        for x in t["lookalikes"]:
            assert x["tool"]["hidden"]["kind"] == "lookalike"
            assert not set(x["tool"]["hidden"]["capabilities"]) & set(broken["hidden"]["capabilities"])
            assert not any(_operation(x["tool"]) in LOOKALIKE_OPERATIONS[c] for c in near), (t["task_id"], x)


def test_a_reader_of_the_words_finds_the_replacement_in_every_case(bench):
    """From what a model sees: the tool the error names, its operation, and the one listed tool whose
    operation is said in a word of the same class. That is the replacement in every case, and exactly one
    listed tool qualifies: the look-alikes are no second replacement."""
    for t in bench.data.cell("broken", twins=False):
        listed = _listed(bench, t)
        failed = t["prefix"][-1]["name"]
        own = SAID_AS[_operation(next(x for x in listed if x["name"] == failed))]
        same = [x["name"] for x in listed if (m := OPERATION.match(x["description"]))
                and m.group(1) in LOOKALIKE_OPERATIONS[own]]
        assert same == [t["replacement_tool"]["name"]], t["task_id"]


def test_the_nearest_description_picks_the_replacement_about_as_often_as_any_lookalike(bench):
    """Issue 42: the nearest description (what `heuristic` and `blind_switch` call after an error) was the
    replacement in every case of the paper's layout. Beside 3 look-alikes it is one of 4 candidates as
    near as each other (gen_seed 0: 61 of 300)."""
    def picks(b: APB) -> float:
        hits = []
        for t in b.data.cell("broken", twins=False, lookalikes=b.options.lookalikes):
            visible = [{k: x[k] for k in ("name", "description", "parameters")} for x in _listed(b, t)]
            call = json.loads(nearest_equivalent_call(t["prefix"], visible))["tool_calls"][0]["function"]["name"]
            hits.append(call == t["replacement_tool"]["name"])
        return sum(hits) / len(hits)

    assert picks(APB(lookalikes=False)) == 1.0
    assert picks(bench) <= 1 / (LOOKALIKES + 1) + 0.1


def test_the_replacement_is_at_chance_among_its_lookalikes_for_the_probe(bench):
    """Names, descriptions, parameters, positions and the list's relations of the replacement and its
    look-alikes, trained on half the bases: gen_seed 0 reads .446 against a shuffled .497."""
    r = probe("apb broken replacement among its look-alikes", lookalike_lists(bench.data), salt="apb")
    assert not r.readable, (r.balanced_accuracy, r.shuffled_balanced_accuracy, r.top_features)


def _after_switching(bench: APB, task_id: str, name: str, args: dict) -> dict:
    """The metrics of a Tool-Broken case (or twin) answered by one call of `name` with `args`."""
    env = bench.make_env(task_id, "broken", 0)
    env.reset()
    env.step(Message(role="assistant", content=json.dumps({
        "role": "assistant", "thought": "switching",
        "tool_calls": [{"type": "function", "function": {"name": name, "arguments": args}}]})))
    return env.result()


def test_a_lookalike_is_no_recovery_and_switching_to_one_after_a_success_is_a_false_recovery(bench):
    """A look-alike called with the failed step's arguments (renamed as the replacement's) is Other on the
    case, J5 Category 5; on the twin, whose call succeeded, it is a false recovery. The replacement called
    the same way is Replace."""
    cases = bench.data.cell("broken", twins=True)
    for case, twin in list(zip(cases[::2], cases[1::2]))[::25]:
        args = case["reference_action"]["tool_calls"][0]["function"]["arguments"]
        decoy = case["lookalikes"][0]["tool"]["name"]
        for tid, name, want in ((case["task_id"], decoy, {"other": 1.0, "correct": 0.0}),
                                (case["task_id"], case["replacement_tool"]["name"], {"replace": 1.0, "correct": 1.0}),
                                (twin["task_id"], decoy, {"false_recovery": 1.0, "correct": 0.0})):
            metrics = _after_switching(bench, tid, name, args)
            assert {k: metrics[k] for k in want} == want, (tid, name, metrics)


def test_a_lookalike_called_with_the_failed_calls_own_argument_names_is_no_recovery(bench):
    """The failed call's own arguments, unrenamed, fit a look-alike's node as the broken tool's do: it is
    still Other (J5 Category 5), never Alter with recovery credit, since a look-alike has none of the broken
    tool's capabilities; on the twin it is a false recovery."""
    cases = bench.data.cell("broken", twins=True)
    for case, twin in list(zip(cases[::2], cases[1::2]))[::25]:
        renamed = case["reference_action"]["tool_calls"][0]["function"]["arguments"]
        own_names = {old: renamed[new] for old, new in case["arg_map"].items() if new in renamed}
        assert set(own_names) != set(renamed), case["arg_map"]  # other names than the test above tries
        decoy = case["lookalikes"][0]["tool"]["name"]
        for tid, want in ((case["task_id"], {"other": 1.0, "alter": 0.0, "correct": 0.0}),
                          (twin["task_id"], {"false_recovery": 1.0, "correct": 0.0})):
            metrics = _after_switching(bench, tid, decoy, own_names)
            assert {k: metrics[k] for k in want} == want, (tid, decoy, own_names, metrics)


def test_the_floor_no_longer_fills_the_recovery_half(bench):
    """The floor (`heuristic`, the searched policy for Tool-Broken) on every case: Replace was 1.000 in the
    paper's layout; beside look-alikes it is what a pick among 4 gives."""
    scored = aggregate(bench.metrics("broken"),
                       asyncio.run(play(bench, "heuristic", "broken", bench.tasks("broken")[::2])))
    assert scored["replace"] <= 1 / (LOOKALIKES + 1) + 0.1
