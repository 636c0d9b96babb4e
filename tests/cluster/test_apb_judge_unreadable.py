"""APB's LLM judge served over HTTP on 127.0.0.1 (a real Ray) answering with no readable verdict: the
judge's failure is never charged to the evaluated model nor hidden behind the rule grade. The judge is
asked again; an answer whose verdict stays unreadable is left out of `correct` (its n), and counted."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))

from models_fake_server import FakeOpenAIServer, text_reply  # noqa: E402
from toolsweep.benchmarks.apb.environment import JUDGE_ASKS, JUDGE_REMINDER  # noqa: E402
from toolsweep.cluster.config import SweepConfig  # noqa: E402
from toolsweep.cluster.driver import run_sweep  # noqa: E402

N_TASKS = 3
NO = {"is_correct": "NO", "grade": 0.4, "error_list": ["E2"], "reasoning": "a sub-task is missing"}
GARBAGE = "The plan seems reasonable overall, though I would double-check step 3."


def garbage_then_no(body: dict) -> dict:
    """Prose at the first ask, a valid verdict when asked again (the reminder is the last message)."""
    again = body["messages"][-1]["content"] == JUDGE_REMINDER
    return text_reply(json.dumps(NO) if again else GARBAGE)


def _config(tmp_path, base_url: str, name: str) -> SweepConfig:
    return SweepConfig.model_validate({
        "name": name, "seeds": 1,
        "models": [{"name": "oracle", "kind": "scripted", "policy": "oracle"}],
        "helpers": [{"name": "judge", "kind": "openai", "base_url": base_url, "model": "j", "max_retries": 0}],
        "benchmarks": [{"name": "apb", "options": {"grader": "llm:judge"}, "settings": ["holistic"],
                        "tasks": {"limit": N_TASKS}}],
        "concurrency": {"workers": 1, "episodes_per_worker": 4},
        "bootstrap": {"n_resamples": 200, "live_n_resamples": 50},
        "output_dir": str(tmp_path / "runs"), "mlflow": False,
    })


def _episodes(out) -> list[dict]:
    return [json.loads(r["metrics"]) for r in out.run_dir.read_table(columns=["metrics"]).to_pylist()]


def test_a_judge_that_answers_on_the_second_ask_grades_every_episode(ray_local, tmp_path):
    with FakeOpenAIServer() as server:
        server.default = garbage_then_no
        out = run_sweep(_config(tmp_path, server.base_url, "reask"), progress=False, log=lambda m: None)
        asks = [r for r in server.requests if r["model"] == "j" and "Expert Example:" in r["messages"][0]["content"]]
    assert out.done == N_TASKS and out.gave_up == 0
    assert len(asks) == 2 * N_TASKS  # each answer: the first ask and one more
    [cell] = out.cells
    m = cell["metrics"]
    # the judge's verdict (NO) counts for every episode, though the rule grader passes the oracle
    assert m["correct"]["value"] == 0.0 and m["rule_correct"]["value"] == 1.0
    assert m["judge_unreadable"]["value"] == 0.0 and m["judge_reasks"]["value"] == 1.0
    assert cell["n"] == N_TASKS


def test_a_judge_that_never_answers_readably_leaves_correct_unscored(ray_local, tmp_path):
    with FakeOpenAIServer() as server:
        server.default = lambda body: text_reply(GARBAGE)
        out = run_sweep(_config(tmp_path, server.base_url, "garbage"), progress=False, log=lambda m: None)
        asks = [r for r in server.requests if r["model"] == "j" and "Expert Example:" in r["messages"][0]["content"]]
    assert out.done == N_TASKS and out.gave_up == 0 and len(asks) == JUDGE_ASKS * N_TASKS
    episodes = _episodes(out)
    assert all(e["correct"] is None or math.isnan(e["correct"]) for e in episodes)  # undefined, not the rule's 1
    assert all(e["rule_correct"] == 1.0 and e["judge_unreadable"] == 1.0 for e in episodes)
    [cell] = out.cells
    m = cell["metrics"]
    assert m["correct"]["value"] is None or math.isnan(m["correct"]["value"])  # no episode scored
    assert m["judge_unreadable"]["value"] == 1.0 and m["rule_correct"]["value"] == 1.0
