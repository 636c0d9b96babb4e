"""Helper models through the whole cluster path: APB graded by an LLM judge and refined with a
model critic, both served over HTTP on 127.0.0.1 and reached from the rollout workers in Ray; and a
judge that cannot be reached, which loses no episode and says which model failed."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))

from models_fake_server import FakeOpenAIServer, text_reply  # noqa: E402
from toolsweep.cluster.config import SweepConfig  # noqa: E402
from toolsweep.cluster.cli import main  # noqa: E402
from toolsweep.cluster.driver import run_sweep  # noqa: E402
from toolsweep.cluster.preflight import HelpersUnreachable  # noqa: E402
from toolsweep.evaluator.types import Trajectory  # noqa: E402

VERDICT = {"is_correct": "YES", "grade": 1.0, "error_list": [], "reasoning": "matches the expert example"}


def judge_and_critic(body: dict) -> dict:
    prompt = body["messages"][-1]["content"]
    if "Expert Example:" in prompt:
        return text_reply(json.dumps(VERDICT), prompt_tokens=900, completion_tokens=20)
    return text_reply("The plan is complete; keep it.", prompt_tokens=700, completion_tokens=9)


def _config(tmp_path, base_url: str, name: str, max_attempts: int = 3) -> SweepConfig:
    return SweepConfig.model_validate({
        "name": name, "seeds": 1,
        "models": [{"name": "oracle", "kind": "scripted", "policy": "oracle"}],
        "helpers": [{"name": "judge", "kind": "openai", "base_url": base_url, "model": "j", "max_retries": 0}],
        "benchmarks": [{"name": "apb", "options": {"grader": "llm:judge", "critic": "model:judge"},
                        "settings": ["holistic", "refine_critic_plus"], "tasks": {"limit": 3}}],
        "sampling": {"temperature": 0.7, "max_tokens": 512},
        "concurrency": {"workers": 2, "episodes_per_worker": 4},
        "bootstrap": {"n_resamples": 300, "live_n_resamples": 100},
        "output_dir": str(tmp_path / "runs"), "mlflow": False, "max_attempts": max_attempts,
    })


def test_judge_and_critic_served_over_http_grade_a_sweep(ray_local, tmp_path):
    with FakeOpenAIServer() as server:
        server.default = judge_and_critic
        out = run_sweep(_config(tmp_path, server.base_url, "judged"), progress=False, log=lambda m: None)
        requests = list(server.requests)
    assert out.done == 6 and out.gave_up == 0
    prompts = [r["messages"][-1]["content"] for r in requests]
    assert sum("Expert Example:" in p for p in prompts) == 3 + 2 * 3  # holistic + refine's initial and final
    assert sum("Initial response:" in p for p in prompts) == 3  # one critic review per refinement
    assert all(r["temperature"] == 0.0 for r in requests)  # helpers decode greedily whatever the sweep samples
    # and reply within their own budget, not the evaluated model's max_tokens (512 in this sweep)
    grading = [r for r in requests if any(k in r["messages"][-1]["content"] for k in ("Expert Example:", "Initial response:"))]
    assert grading and {r["max_tokens"] for r in grading} == {1024}
    cells = {c["setting"]: c["metrics"] for c in out.cells}
    assert cells["holistic"]["judge_agree"]["value"] == 1.0 and cells["holistic"]["correct"]["value"] == 1.0
    assert cells["refine_critic_plus"]["hol_refined_cr"]["value"] == 1.0
    rows = out.run_dir.read_table(columns=["setting", "trajectory"]).to_pylist()
    refine = [Trajectory.model_validate_json(r["trajectory"]) for r in rows if r["setting"] == "refine_critic_plus"]
    assert all([c.role for c in t.consults] == ["judge", "critic", "judge"] for t in refine)
    assert all("The plan is complete; keep it." in t.messages[3].text() for t in refine)
    manifest = json.loads(out.run_dir.manifest_path.read_text())
    assert "judge" in manifest["models"]
    summary = json.loads(out.run_dir.summary_path.read_text())
    assert any(t["title"].startswith("Table 7 analogue") for t in summary["tables"])


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_judge_is_refused_before_any_unit_runs(ray_local, tmp_path, capsys, monkeypatch):
    cfg = _config(tmp_path, f"http://127.0.0.1:{_closed_port()}/v1", "refused")
    import toolsweep.cluster.driver as driver

    # an endpoint outside the cluster is checked before Ray (and any server) is started: it was found only
    # after Ray's start, 24.5 s into the run
    def no_ray(*args, **kwargs):
        raise AssertionError("Ray was started before the external judge was checked")

    with monkeypatch.context() as patch:
        patch.setattr(driver, "connect_ray", no_ray)
        with pytest.raises(HelpersUnreachable, match="helper 'judge' did not answer"):
            run_sweep(cfg, progress=False, log=lambda m: None)
    assert not list((tmp_path / "runs").rglob("*.parquet"))
    path = tmp_path / "refused.yaml"
    path.write_text(json.dumps(cfg.model_dump(mode="json")))  # JSON is YAML
    assert main(["run", str(path), "--no-progress"]) == 3
    err = capsys.readouterr().err
    assert "preflight failed, nothing was run" in err and "start its server or fix its base_url" in err


def test_judge_dying_mid_sweep_loses_nothing_and_names_the_model(ray_local, tmp_path):
    logs: list[str] = []
    cfg = _config(tmp_path, f"http://127.0.0.1:{_closed_port()}/v1", "unreachable", max_attempts=2)
    # as if the server died after the preflight, and stayed down past the sweep's outage budget
    cfg = cfg.model_copy(update={"preflight": False, "outage_budget_s": 2.0})
    out = run_sweep(cfg, progress=False, log=logs.append)
    assert out.done == 0 and out.gave_up == 6
    failures = [json.loads(x) for x in (out.run_dir.path / "failures.jsonl").read_text().splitlines()]
    # the judge's endpoint is named, and the outage is said to be one
    assert len(failures) == 6 and all("judge at http://127.0.0.1" in f["error"] and "outage budget" in f["error"]
                                      for f in failures), failures[0]["error"]
    assert any("re-run the same command to retry them" in m for m in logs)
    assert out.run_dir.finished_unit_ids() == set()  # nothing scored without its judge


def test_a_judges_reply_budget_is_in_the_ids_of_the_units_it_grades_only(tmp_path):
    from toolsweep.cluster.run_record import load_benchmarks
    from toolsweep.cluster.identity import unit_contexts

    def contexts(judge_budget: int) -> dict:
        raw = _config(tmp_path, "http://127.0.0.1:9/v1", "ids").model_dump(mode="json")
        raw["models"].append({"name": "agent", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "a"})
        raw["helpers"][0]["helper_max_tokens"] = judge_budget
        cfg = SweepConfig.model_validate(raw)
        benches = load_benchmarks(cfg)
        return unit_contexts(cfg, benches, {n: b.fingerprint() for n, b in benches.items()})

    a, b = contexts(1024), contexts(2048)
    assert a[("agent", "apb")] != b[("agent", "apb")]  # graded by a judge asked differently: new units
    agent = {"name": "agent", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "a"}
    from toolsweep.cluster.identity import model_identity
    from toolsweep.models.config import OpenAIModelConfig

    # a model's own units do not depend on how it would be asked as a helper
    assert model_identity(OpenAIModelConfig(**agent)) == model_identity(OpenAIModelConfig(**agent, helper_max_tokens=7))
