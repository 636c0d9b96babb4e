"""ToolMaze with an LLM judge of the wise abort (`judge: llm:<model>`) through the whole cluster path:
the judge served over HTTP on 127.0.0.1 and reached from the rollout workers in Ray, the cell logged to
a real MLflow (sqlite). The judge's reading and the rule's, with their agreement, reach the cell's run,
so a reader of MLflow sees how far a judge-free run of the same cell can be trusted."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))

from conftest import session_mlflow_uri  # noqa: E402
from models_fake_server import FakeOpenAIServer, text_reply  # noqa: E402
from toolsweep.cluster.config import SweepConfig  # noqa: E402
from toolsweep.cluster.driver import run_sweep  # noqa: E402

SETTING = "C1-P2-std"
N_TASKS = 6
# The judge reads every abort as a claim of success: it disagrees with the rule on each one it is asked.
DISAGREES = '{"cannot_complete": false, "reason": "the answer reads as done"}'


def _config(tmp_path, base_url: str) -> SweepConfig:
    return SweepConfig.model_validate({
        "name": "toolmaze-judged", "seeds": 1,
        "models": [{"name": "aborts", "kind": "scripted", "policy": "acknowledged_abort"}],
        "helpers": [{"name": "judge", "kind": "openai", "base_url": base_url, "model": "j", "max_retries": 0}],
        "benchmarks": [{"name": "toolmaze", "options": {"judge": "llm:judge"}, "settings": [SETTING],
                        "tasks": {"limit": N_TASKS}}],
        "concurrency": {"workers": 1, "episodes_per_worker": 4},
        "bootstrap": {"n_resamples": 200, "live_n_resamples": 50},
        "output_dir": str(tmp_path / "runs"), "tracking_uri": session_mlflow_uri(),
    })


@pytest.mark.slow  # a sweep through Ray and MLflow's first tables: about 90 s on two busy cores
def test_a_judged_toolmaze_cell_logs_the_judge_and_rule_agreement_to_mlflow(ray_local, tmp_path):
    with FakeOpenAIServer() as server:
        server.default = lambda body: text_reply(DISAGREES)
        out = run_sweep(_config(tmp_path, server.base_url), progress=False, log=lambda m: None)
        asks = [r for r in server.requests if "The assistant's final answer:" in r["messages"][-1]["content"]]
    assert out.done == N_TASKS and out.gave_up == 0
    assert len(asks) == N_TASKS  # one abort verdict per episode, every one readable at the first ask
    [cell] = out.cells
    m = {k: v["value"] for k, v in cell["metrics"].items()}
    # the rule credits the policy's abort, the judge (deciding) does not; they never agree
    assert m["rule_prr"] == 1.0 and m["prr"] == 0.0 and m["ack_agreement"] == 0.0 and m["judge_unreadable"] == 0.0

    from mlflow.tracking import MlflowClient

    client = MlflowClient(session_mlflow_uri())
    exp = client.get_experiment_by_name("toolmaze-judged")
    runs = client.search_runs([exp.experiment_id])
    [child] = [r for r in runs if r.data.tags.get("setting") == SETTING and "mlflow.parentRunId" in r.data.tags]
    logged = child.data.metrics
    for key in ("ack_agreement", "rule_prr", "rule_tsr", "prr", "tsr", "judge_unreadable"):
        assert logged[key] == m[key], key
    assert logged["ack_agreement_ci_low"] <= logged["ack_agreement"] <= logged["ack_agreement_ci_high"]
    summary = json.loads(out.run_dir.summary_path.read_text())
    assert any("LLM judge" in t["title"] for t in summary["tables"])
