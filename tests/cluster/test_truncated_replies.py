"""A reply the endpoint cut at max_tokens (finish_reason "length") is scored as the model left it, but
never reads as one the model ended itself: the transcript record flags it with its budget, `toolsweep
show` marks it, and summary.json and each cell's MLflow run count such replies. Real HTTP on 127.0.0.1, a
real Ray, a real MLflow store."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))

from conftest import FAKE_TARGET, session_mlflow_uri  # noqa: E402
from models_fake_server import FakeOpenAIServer, text_reply  # noqa: E402
from toolsweep.cluster import show  # noqa: E402
from toolsweep.cluster.config import SweepConfig  # noqa: E402
from toolsweep.cluster.driver import run_sweep  # noqa: E402

N_TASKS = 4


def cut_for_one_model(body: dict) -> dict:
    """Model "cut" runs out of tokens mid-answer; model "whole" ends its (equally wrong) answer itself."""
    reply = text_reply("The answer is")
    if body["model"] == "cut":
        reply["choices"][0]["finish_reason"] = "length"
    return reply


def test_replies_cut_at_max_tokens_are_marked_in_show_and_counted_per_cell(ray_local, tmp_path, capsys):
    with FakeOpenAIServer() as server:
        server.default = cut_for_one_model
        cfg = SweepConfig.model_validate({
            "name": "cut", "seeds": 1,
            "models": [{"name": name, "kind": "openai", "base_url": server.base_url, "model": name}
                       for name in ("cut", "whole")],
            "benchmarks": [{"name": "fake", "options": {"n_tasks": N_TASKS}, "settings": ["small"]}],
            "sampling": {"max_tokens": 64},
            "concurrency": {"workers": 1, "episodes_per_worker": 4},
            "bootstrap": {"n_resamples": 100, "live_n_resamples": 20},
            "output_dir": str(tmp_path / "runs"), "tracking_uri": session_mlflow_uri(), "preflight": False,
        })
        out = run_sweep(cfg, progress=False, extra_benchmarks={"fake": FAKE_TARGET}, log=lambda m: None)
    assert out.done == 2 * N_TASKS
    for r in out.run_dir.read_results():
        replies = [s.reply for s in r.trajectory.steps]
        flags = [(m.model_extra or {}).get("truncated", False) for m in replies]
        assert flags == [r.unit.model == "cut"] * len(replies) and replies
        assert r.termination.value == "answered"  # scored as the model left it
    summary = json.loads((cfg.run_path() / "summary.json").read_text())
    counts = {c["model"]: c["truncated_replies"] for c in summary["cells"]}
    assert counts == {"cut": N_TASKS, "whole": 0}
    assert f"cut/fake/small {N_TASKS} in {N_TASKS} episodes" in out.table_text and "whole/fake" not in out.table_text
    from mlflow.tracking import MlflowClient

    client = MlflowClient(session_mlflow_uri())
    runs = client.search_runs([client.get_experiment_by_name("cut").experiment_id])
    mirrored = {r.data.tags["model"]: r.data.metrics.get("truncated_replies") for r in runs
                if "toolsweep.cell" in r.data.tags}
    assert mirrored == {"cut": float(N_TASKS), "whole": 0.0}

    capsys.readouterr()
    assert show.main([str(cfg.run_path()), "--cell", "cut/fake/small", "--limit", "1"]) == 0
    cut = capsys.readouterr().out
    assert "[assistant] (cut at max_tokens (64))" in cut and "1 of its replies cut at max_tokens" in cut
    assert show.main([str(cfg.run_path()), "--cell", "whole/fake/small", "--limit", "1"]) == 0
    whole = capsys.readouterr().out
    assert "[assistant]\n" in whole and "cut at" not in whole
