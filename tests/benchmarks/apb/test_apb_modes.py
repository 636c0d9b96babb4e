"""Options and side modes: file rendering for vision models, the optional LLM-judge prompts (§6.5),
prompt layout (App. P rendering rule), and generation without network access (§12.3)."""

from __future__ import annotations

import json
import socket

import pytest

from toolsweep.benchmarks.apb import APB, prompts
from toolsweep.benchmarks.apb.generator import build_base, case_hash, dataset, slots
from toolsweep.benchmarks.apb.grader import parse_judge_verdict


@pytest.fixture(scope="module")
def bench() -> APB:
    return APB()


def test_file_modes(bench):
    ds = dataset(0)
    img = next(t["task_id"] for t in ds.tasks["holistic"] if ds.bases[t["base"]]["modality"] == "image")
    vid = next(t["task_id"] for t in ds.tasks["holistic"] if ds.bases[t["base"]]["modality"] == "video")
    scene = bench.make_env(img, "holistic", 0).reset().messages[1].content
    assert isinstance(scene, str) and "Scene structure:" in scene and "<unread>" in scene or "widgets" in scene
    base = ds.bases[bench.data.task_index("holistic")[img]["base"]]
    for secret in base["world"]["secrets"].values():  # the scene text never reveals a tool-only value
        if isinstance(secret, str) and len(secret) > 4:
            assert secret not in scene.split("User Query:")[1].split("Files:")[1]
    caption = APB(file_mode="caption").make_env(img, "holistic", 0).reset().messages[1].content
    assert "Scene structure" not in caption and ".png (image)" in caption
    render = APB(file_mode="render")
    parts = render.make_env(vid, "holistic", 0).reset().messages[1].content
    assert isinstance(parts, list) and parts[0]["type"] == "text"
    images = [p for p in parts if p["type"] == "image_url"]
    assert len(images) == 8 and all(p["image_url"]["url"].startswith("data:image/png;base64,") for p in images)
    tid = render.tasks("unsolvable_visual")[0]
    visual = render.make_env(tid, "unsolvable_visual", 0).reset().messages[1]  # another case's files
    named = ds.bases[ds.task_index("unsolvable_visual")[tid]["base"]]["background"]["files"][0]["name"]
    assert isinstance(visual.content, list) and named not in visual.content[0]["text"].split("Files:")[1]
    paper = APB(file_mode="render", unsolvable_visual="no_file")
    visual = paper.make_env(tid, "unsolvable_visual", 0).reset().messages[1]
    assert isinstance(visual.content, str) and "Files: (none)" in visual.content


def test_prompts_follow_the_paper_templates(bench):
    hol = bench.make_env(bench.tasks("holistic")[0], "holistic", 0).reset().messages[1].content
    assert hol.startswith("You are an expert AI assistant.") and "\nCrucial Assumptions:" in hol
    assert "Query is Solvable: The query can be fully solved by the tools." in hol
    uns = bench.make_env(bench.tasks("unsolvable_info")[0], "unsolvable_info", 0).reset().messages[1].content
    assert prompts.P4U_FEASIBILITY in uns and "Query is Solvable" not in uns
    eff = bench.make_env(bench.tasks("efficiency")[0], "efficiency", 0).reset().messages[1].content
    assert prompts.COST_ASSUMPTION in eff and "\n  cost=" in eff
    sw3 = bench.make_env(bench.tasks("stepwise_k3")[0], "stepwise_k3", 0).reset().messages[1].content
    assert "Predict the NEXT THREE STEPS" in sw3 and "\nSteps Completed So Far:" in sw3
    prefix = json.loads(sw3.split("Steps Completed So Far:")[1].split("\nYour Task:")[0])
    assert all(m["role"] in ("assistant", "tool") for m in prefix)
    paper = APB(distractor_position="append")
    ext = paper.make_env(paper.tasks("extraneous_stepwise_n4")[0], "extraneous_stepwise_n4", 0)
    block = ext.reset().messages[1].content.split("Available Tools:")[1].split("Steps Completed So Far:")[0]
    lines = [ln for ln in block.splitlines() if ln.startswith("- ")]
    names = [ln[2:].split(":")[0] for ln in lines]
    assert names[-4:] == [d["name"] for d in ext.task["distractors"]]  # appended after the originals
    ext = bench.make_env(bench.tasks("extraneous_stepwise_n4")[0], "extraneous_stepwise_n4", 0)  # default: shuffled
    block = ext.reset().messages[1].content.split("Available Tools:")[1].split("Steps Completed So Far:")[0]
    shuffled = [ln[2:].split(":")[0] for ln in block.splitlines() if ln.startswith("- ")]
    assert sorted(shuffled) == sorted(names) and shuffled != names
    assert bench.make_env(bench.tasks("holistic")[0], "holistic", 0).reset().tools == []


def test_refinement_is_three_turns(bench):
    import asyncio

    from toolsweep.evaluator.episode import run_episode
    from toolsweep.evaluator.types import WorkUnit

    for setting, turns in (("refine_self_plus", 3), ("refine_self_minus", 3), ("refine_critic_plus", 2)):
        tid = bench.tasks(setting)[0]
        env = bench.make_env(tid, setting, 0)
        r = asyncio.run(run_episode(env, bench.make_scripted_policy("oracle", env, 0),
                                    WorkUnit(sweep="t", model="o", benchmark="apb", setting=setting, task_id=tid, seed=0)))
        assert len(r.trajectory.steps) == turns and r.metrics["hol_refined_cr"] == 1.0
        users = [m for m in r.trajectory.messages if m.role == "user"]
        if setting == "refine_self_plus":
            assert "E1_GOAL_UNDERSTANDING" in users[1].text() and users[2].text() == prompts.REFINE_FINAL
        if setting == "refine_self_minus":
            assert "E1_GOAL_UNDERSTANDING" not in users[1].text()
        if setting == "refine_critic_plus":
            assert users[1].text().startswith("Review of your plan:")


def test_llm_judge_prompts_are_filled(bench):
    for setting in ("holistic", "stepwise_k2", "broken", "extraneous_holistic_n2", "efficiency",
                    *[f"unsolvable_{u}" for u in ("conflict", "info", "tool", "visual")]):
        env = bench.make_env(bench.tasks(setting)[0], setting, 0)
        text = env.judge_messages('{"plan": "x", "tool_chain": []}')[0].content
        assert not any(slot in text for slot in ("[Query]", "[Model Prediction]", "[Ground Truth]", "[Insert",
                                                  "{available_tools_str}", "[Tool Definitions]"))
        assert '{"plan": "x", "tool_chain": []}' in text
    v = parse_judge_verdict('```json\n{"E4_LOGIC_ERROR": true, "E5_TOOL_USE_ERROR": false, "score": 0.6, '
                            '"is_correct": "NO"}\n```')
    assert v == {"correct": False, "grade": 0.6, "flags": {"E4"}}
    assert parse_judge_verdict('{"category": 2, "is_correct": true}')["category"] == "alter"
    assert parse_judge_verdict("not json") == {}


@pytest.mark.parametrize("reply", ['{"is_correct": "YES", "score": 42}', '{"is_correct": "YES", "score": -0.5}',
                                   '{"is_correct": "YES", "grade": "high"}', '{"is_correct": "maybe"}',
                                   '{"is_correct": 1, "score": 1.0}', '{"is_correct": true, "score": true}'])
def test_a_judge_reply_off_its_protocol_is_unreadable_not_clipped_or_guessed(reply):
    # a score off the rubric's 0-1 scale was clipped to 1.0 and "maybe" read as NO; unreadable is asked again
    assert parse_judge_verdict(reply) == {}
    assert parse_judge_verdict('{"is_correct": "yes", "score": 1}') == {"correct": True, "grade": 1.0, "flags": set()}
    assert parse_judge_verdict('{"is_correct": false, "grade": 0}')["correct"] is False


def test_generation_needs_no_network(monkeypatch):
    def refuse(*a, **k):
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    sl = slots(0)
    for i in range(0, 1109, 111):
        assert case_hash(build_base(0, sl[i])) == case_hash(dataset(0).bases[i])
