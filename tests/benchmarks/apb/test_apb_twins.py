"""An Unsolvable or Tool-Broken setting holds each of its cases' twins (option `twins`, the default), so
`correct` goes only to a response to what the case shows.

- Unsolvable: the twin is solvable (the same requirement, a world that meets it, the same refusal prompt);
  a refusal of the Unsolvable case (J8's PASS) or a correct plan for the twin is correct, so a policy
  that refuses without reading the world earns half a setting, where it earned all of it with the
  paper's 100 cases alone (`pass`, the paper's refusal rate, stays as it was).
- Tool-Broken: the twin shows the same call succeeding; Replace or Alter on the case, the right next step
  on the twin. A policy that switches to the nearest-described tool without reading the error
  (`blind_switch`) earns half in the paper's layout, where it earned all of it (the 5-way shares stay
  the paper's, over the broken cases); beside look-alikes (test_apb_lookalikes) less.
"""

from __future__ import annotations

import asyncio

import pytest

from toolsweep.benchmarks.apb import APB
from toolsweep.benchmarks.apb.generator import UNSOLVABLE_TYPES, twin_case
from toolsweep.benchmarks.apb.metrics import base_key
from toolsweep.evaluator.exploits import aggregate, play

UNSOLVABLE = [f"unsolvable_{k}" for k in UNSOLVABLE_TYPES]


@pytest.fixture(scope="module")
def bench() -> APB:
    return APB()


def _score(bench: APB, policy: str, setting: str, ids: list[str] | None = None) -> dict[str, float]:
    ids = bench.tasks(setting) if ids is None else ids
    return aggregate(bench.metrics(setting), asyncio.run(play(bench, policy, setting, ids)))


@pytest.mark.parametrize("setting", UNSOLVABLE)
def test_refusing_everything_earns_half_of_every_unsolvable_setting(bench, setting):
    """On every case of the setting: always_refuse passes every Unsolvable case and refuses every twin,
    so `correct` is one half (the paper's layout: all of it); the oracle, which refuses the Unsolvable
    cases and plans the twins, earns all of it."""
    refuse = _score(bench, "always_refuse", setting)
    assert refuse["pass"] == 1.0 and refuse["refused"] == 1.0
    assert refuse["correct"] == 0.5
    oracle = _score(bench, "oracle", setting)
    assert oracle["correct"] == 1.0 and oracle["pass"] == 1.0 and oracle["refused"] == 0.0
    paper = APB(twins=False)
    assert _score(paper, "always_refuse", setting)["correct"] == 1.0  # why the twins are the default


@pytest.mark.parametrize("setting", UNSOLVABLE)
def test_the_searched_floor_reads_no_more_than_half(bench, setting):
    """The floor (the searched policy bounds.SEARCHED names, here the heuristic's visible cues) refuses
    on cues that every twin carries too, and plans no twin correctly: it earns what refusing does."""
    floor = _score(bench, "heuristic", setting)
    assert floor["pass"] == 1.0
    assert floor["correct"] <= 0.5 + 0.05


def test_each_twin_is_the_solvable_twin_of_a_case_of_its_setting(bench):
    """Every twin pairs with one Unsolvable case on the same base, and shows what the role-leak probe
    reads as that case's twin (generator.twin_case): the probe at chance is the setting at chance."""
    ds = bench.data
    for setting, kind in zip(UNSOLVABLE, UNSOLVABLE_TYPES):
        ids = bench.tasks(setting)
        cases = {base_key(t["task_id"]): t for t in ds.tasks[setting]}
        twins = [t for t in ds.twins[setting]]
        assert [t["task_id"] for t in twins] == [i for i in ids if "-twin-" in i]
        assert sorted(base_key(t["task_id"]) for t in twins) == sorted(cases)
        for t in twins:
            case = cases[base_key(t["task_id"])]
            assert t["base"] == case["base"] and t["twin_of"] == kind and t["kind"] == "control"
            env = bench.make_env(t["task_id"], setting, 0)
            shown = twin_case(ds.gen_seed, ds.bases[t["base"]], kind)
            assert env.query == shown["query"] and env.files == shown["files"]
            assert [x["name"] for x in env.tools] == [x["name"] for x in shown["tools"]]
            assert env.first_prompt.count("REJECT") == bench.make_env(case["task_id"], setting, 0).first_prompt.count("REJECT") > 0


def test_the_papers_layout_holds_no_twin():
    paper = APB(twins=False)
    twin = APB().tasks("unsolvable_info")[-1]
    assert "-twin-" in twin and twin not in paper.tasks("unsolvable_info")
    with pytest.raises(KeyError, match="twins"):
        paper.make_env(twin, "unsolvable_info", 0)
    assert {m.name for m in paper.metrics("unsolvable_info")} == {"pass", "pass_strict", "correct"}
    assert "false_recovery" not in {m.name for m in paper.metrics("broken")}
    assert len(paper.tasks("broken")) == 300 and len(APB().tasks("broken")) == 600
    assert paper.fingerprint() != APB().fingerprint()


def test_switching_tools_unread_earns_half_of_tool_broken(bench):
    """On every case of the setting, in the paper's layout (the replacement alone beside the broken tool):
    `blind_switch` (the heuristic's recovery without its reading of the error) replaces on every broken
    case and recovers from no fault on every twin, so it earns half; with look-alikes (the default) it
    still switches on every twin and finds the replacement only as often as it picks a look-alike. The
    oracle and the paper's positive control (the replacement with the step's arguments, then the next
    step) earn all of it in both layouts."""
    paper = APB(lookalikes=False)
    blind = _score(paper, "blind_switch", "broken")
    assert blind["replace"] == 1.0 and blind["false_recovery"] == 1.0
    assert blind["correct"] == 0.5
    blind = _score(bench, "blind_switch", "broken")
    assert blind["false_recovery"] == 1.0 and blind["replace"] <= 0.35  # 4 to pick from (test_apb_lookalikes)
    for b in (bench, paper):
        for control in ("oracle", "replace_with_args"):
            scored = _score(b, control, "broken")
            assert scored["correct"] == 1.0 and scored["replace"] == 1.0 and scored["false_recovery"] == 0.0, control
    unpaired = APB(twins=False, lookalikes=False)
    assert _score(unpaired, "blind_switch", "broken")["correct"] == 1.0  # why the twins are the default


def test_each_tool_broken_twin_shows_its_cases_call_succeeding(bench):
    """The twin lists what its case lists and shows the same trajectory, but for the last message: the
    step's reference output under the name called, where the case shows the error."""
    ds = bench.data
    cases = {base_key(t["task_id"]): t for t in ds.tasks["broken"]}
    assert sorted(base_key(t["task_id"]) for t in ds.twins["broken"]) == sorted(cases)
    for t in ds.twins["broken"][::7]:
        case = cases[base_key(t["task_id"])]
        twin_env, case_env = bench.make_env(t["task_id"], "broken", 0), bench.make_env(case["task_id"], "broken", 0)
        assert [x["name"] for x in twin_env.tools] == [x["name"] for x in case_env.tools]
        assert twin_env.prefix[:-1] == case_env.prefix[:-1]
        last, error = twin_env.prefix[-1], case_env.prefix[-1]
        assert last["role"] == error["role"] == "tool" and last["name"] == error["name"] == case["broken_tool"]
        assert "error" in error["content"].lower() and "error" not in str(last["content"]).lower()
        pos = case["j"] - 1
        assert last["content"] == ds.bases[t["base"]]["reference"]["trajectory"][2 * pos + 1]["content"]
        assert twin_env.done_nodes == ds.bases[t["base"]]["reference"]["linearization"][: pos + 1]
