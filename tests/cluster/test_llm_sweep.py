"""An OpenAI-compatible model through the whole cluster path: preflight, rollout workers in Ray
reaching a real HTTP server on 127.0.0.1, token counts in the run directory; and a model whose
replies do not parse is refused before anything runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))

from conftest import FAKE_TARGET  # noqa: E402
from models_fake_server import FakeOpenAIServer, text_reply, tool_reply  # noqa: E402
from toolsweep.cluster.cli import main  # noqa: E402
from toolsweep.cluster.config import SweepConfig  # noqa: E402
from toolsweep.cluster.driver import run_sweep  # noqa: E402
from toolsweep.cluster.preflight import PreflightFailed  # noqa: E402


def adder(body: dict) -> dict:
    """Calls `add` with the numbers of the question, then answers with the tool's result."""
    messages = body["messages"]
    if messages[-1]["role"] == "tool":
        return text_reply(messages[-1]["content"], prompt_tokens=40, completion_tokens=2)
    names = [t["function"]["name"] for t in body.get("tools") or []]
    if "add" in names and messages[-1]["content"].startswith("What is"):
        words = messages[-1]["content"].rstrip("?").split()
        return tool_reply("add", json.dumps({"a": int(words[2]), "b": int(words[4])}))
    if "get_weather" in names:
        return tool_reply("get_weather", json.dumps({"city": "Paris"}))
    return text_reply('{"action": "get_weather", "arguments": {"city": "Paris"}}')


def prose(body: dict) -> dict:
    return text_reply("You could use the add tool for that.")


def _config(tmp_path, base_url, name):
    return SweepConfig.model_validate({
        "name": name, "seeds": 1,
        "models": [{"name": "served", "kind": "openai", "base_url": base_url, "model": "m", "max_retries": 0}],
        "benchmarks": [{"name": "fake", "options": {"n_tasks": 6}, "settings": ["small"]}],
        "concurrency": {"workers": 2, "episodes_per_worker": 4},
        "bootstrap": {"n_resamples": 500, "live_n_resamples": 100},
        "output_dir": str(tmp_path / "runs"), "mlflow": False,
    })


def test_openai_model_sweep_records_tokens_and_solves_the_fake_tasks(ray_local, tmp_path):
    with FakeOpenAIServer() as server:
        server.default = adder
        out = run_sweep(_config(tmp_path, server.base_url, "served"), progress=False,
                        extra_benchmarks={"fake": FAKE_TARGET}, log=lambda m: None)
    assert out.done == 6
    table = out.run_dir.read_table(columns=["prompt_tokens", "completion_tokens", "termination"]).to_pydict()
    assert all(t == "answered" for t in table["termination"])
    assert all(p > 0 for p in table["prompt_tokens"]) and all(c > 0 for c in table["completion_tokens"])
    [cell] = out.cells
    assert cell["metrics"]["accuracy"]["value"] == 1.0
    manifest = json.loads(out.run_dir.manifest_path.read_text())
    assert "served" in manifest["models"]


def test_model_failing_the_preflight_is_refused_before_any_unit_runs(ray_local, tmp_path, capsys):
    with FakeOpenAIServer() as server:
        server.default = prose
        cfg = _config(tmp_path, server.base_url, "prose")
        with pytest.raises(PreflightFailed, match="served"):
            run_sweep(cfg, progress=False, extra_benchmarks={"fake": FAKE_TARGET}, log=lambda m: None)
        assert not list((tmp_path / "runs").rglob("*.parquet"))
        path = tmp_path / "prose.yaml"
        path.write_text(json.dumps(cfg.model_dump(mode="json")))  # JSON is YAML
        assert main(["run", str(path), "--no-progress"]) == 3
        assert "preflight failed" in capsys.readouterr().err
