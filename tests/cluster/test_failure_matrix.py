"""Whose fault is it: a misbehaving OpenAI-compatible endpoint (real HTTP on 127.0.0.1) through the
whole run path. Configuration errors stop the run and score nothing; transient failures and
wall-clock expiries are retried, then listed in failures.jsonl, never in the episodes; the model's own
replies are scored. docs/failures.md has the table these tests check."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))

from conftest import FAKE_TARGET  # noqa: E402
from models_fake_server import FakeOpenAIServer, text_reply  # noqa: E402
from toolsweep.cluster.endpoint_health import CHAT_PROBE  # noqa: E402
from test_llm_sweep import adder  # noqa: E402
from toolsweep.cluster.cli import main  # noqa: E402
from toolsweep.cluster.config import SweepConfig  # noqa: E402
from toolsweep.cluster.driver import run_sweep  # noqa: E402
from toolsweep.cluster.endpoint_health import EndpointMisconfigured  # noqa: E402

N_TASKS = 3
KEY = "sk-test-4f9a1c77e2"


def config(tmp_path: Path, base_url: str, **model: object) -> SweepConfig:
    overrides = {k: model.pop(k) for k in ("episode_timeout_s", "sampling", "outage_budget_s") if k in model}
    return SweepConfig.model_validate({
        "name": "faults", "seeds": 1,
        "models": [{"name": "served", "kind": "openai", "base_url": base_url, "model": "m", "max_retries": 1,
                    **model}],
        "benchmarks": [{"name": "fake", "options": {"n_tasks": N_TASKS}, "settings": ["small"]}],
        "concurrency": {"workers": 1, "episodes_per_worker": 4},
        "bootstrap": {"n_resamples": 200, "live_n_resamples": 50},
        "output_dir": str(tmp_path / "runs"), "mlflow": False, "preflight": False, "max_attempts": 2,
        **overrides,
    })


def sweep(cfg: SweepConfig):
    return run_sweep(cfg, progress=False, extra_benchmarks={"fake": FAKE_TARGET}, log=lambda m: None)


def episodes(cfg: SweepConfig) -> list[str]:
    parts = list(cfg.run_path().glob("episodes/*.parquet"))
    if not parts:
        return []
    import pyarrow.parquet as pq

    return [t for p in parts for t in pq.read_table(p, columns=["termination"]).column("termination").to_pylist()]


def failures(cfg: SweepConfig) -> list[dict]:
    path = cfg.run_path() / "failures.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize(("status", "cause"), [(401, "auth"), (404, "not found"), (400, "request")])
def test_a_refused_configuration_stops_the_run_scores_nothing_and_a_fixed_rerun_scores_all(
        ray_local, tmp_path, status, cause, capsys):
    with FakeOpenAIServer() as server:
        server.default = lambda body: (status, {"error": {"message": "no such key or model"}})
        cfg = config(tmp_path, server.base_url)
        with pytest.raises(EndpointMisconfigured, match=f"'served'.*{cause}"):
            sweep(cfg)
        assert episodes(cfg) == [] and failures(cfg) == []  # nothing scored, nothing to retry
        path = tmp_path / "sweep.yaml"
        path.write_text(json.dumps(cfg.model_dump(mode="json")))
        assert main(["run", str(path), "--no-progress"]) == 4
        assert "fix:" in capsys.readouterr().err
        server.default = adder  # the key or model name fixed
        out = sweep(cfg)
    assert out.done == N_TASKS and episodes(cfg) == ["answered"] * N_TASKS


@pytest.mark.parametrize("reply", [(500, {"error": "boom"}), (200, "<html>proxy error</html>"),
                                   (200, {"choices": []}), (200, {"choices": [{"message": "hi"}]}), (503, "")])
def test_transient_failures_go_to_failures_jsonl_never_to_episodes(ray_local, tmp_path, reply):
    with FakeOpenAIServer() as server:
        server.default = lambda body: reply
        # an endpoint whose every chat request gets a 5xx is down (its health probe asks chat too): its units
        # wait out the outage budget, here 1 s, then are given up as the others' are after their attempts
        cfg = config(tmp_path, server.base_url, outage_budget_s=1)
        out = sweep(cfg)
        assert out.gave_up == N_TASKS and episodes(cfg) == []
        assert len(failures(cfg)) == N_TASKS and all("infra" in f["termination"] for f in failures(cfg))
        summary = json.loads((cfg.run_path() / "summary.json").read_text())
        assert summary["infrastructure"]["units_in_failures_jsonl"] == N_TASKS
        path = tmp_path / "sweep.yaml"
        path.write_text(json.dumps(cfg.model_dump(mode="json")))
        assert main(["run", str(path), "--no-progress"]) == 1  # units given up: exit 1, listed for a re-run
        server.default = adder  # the endpoint recovers: a re-run retries them and clears the list
        out = sweep(cfg)
    assert out.done == N_TASKS and episodes(cfg) == ["answered"] * N_TASKS and failures(cfg) == []


@pytest.mark.parametrize("headers", [None, {}], ids=["retry-after", "no-retry-after"])
def test_429_is_waited_out_and_scored(ray_local, tmp_path, headers):
    with FakeOpenAIServer() as server:
        server.default = adder
        reply = (429, {"error": "slow down"}) if headers is None else (429, {"error": "slow down"}, headers)
        server.script.extend([reply] * 2)
        cfg = config(tmp_path, server.base_url, max_retries=3)
        out = sweep(cfg)
    assert out.done == N_TASKS and out.gave_up == 0 and episodes(cfg) == ["answered"] * N_TASKS


def test_a_hung_endpoint_costs_a_bounded_time_and_is_never_scored(ray_local, tmp_path):
    with FakeOpenAIServer(delay_s=3) as server:
        cfg = config(tmp_path, server.base_url, timeout_s=0.5)
        out = sweep(cfg)
        sent = sum(1 for b in server.requests if b["messages"] != CHAT_PROBE["messages"])  # not the health probe's
    # the cost is bounded in work: per unit at most 2 hung requests (then it is given up as hung), x 2 attempts
    assert out.gave_up == N_TASKS and episodes(cfg) == []
    assert N_TASKS <= sent <= N_TASKS * 2 * 2, sent
    assert all("no response within" in f["error"] for f in failures(cfg))


def test_a_wall_clock_expiry_is_infrastructure_retried_and_never_scored(ray_local, tmp_path):
    with FakeOpenAIServer(delay_s=1.5) as server:
        server.default = adder
        cfg = config(tmp_path, server.base_url, episode_timeout_s=1.0)
        out = sweep(cfg)
    assert out.gave_up == N_TASKS and episodes(cfg) == [] and out.timeouts == {"served": 2 * N_TASKS}
    assert {f["termination"] for f in failures(cfg)} == {"timeout"}
    summary = json.loads((cfg.run_path() / "summary.json").read_text())
    assert summary["infrastructure"]["timeouts_by_cell"] == {"served|fake|small": 2 * N_TASKS}
    assert summary["composites"]["infra/served/fake/small/timeouts"] == 2 * N_TASKS  # on the MLflow run too


def test_waiting_for_a_retry_does_not_count_against_the_episode(ray_local, tmp_path):
    # two 503s with Retry-After 0.05 s and a 0.5 s backoff ahead of each episode's first reply: the
    # working time stays under the 1.2 s guard only because waits and failed attempts are excluded
    with FakeOpenAIServer() as server:
        server.default = adder
        server.script.extend([(503, {"error": "warming up"})] * 2)
        cfg = config(tmp_path, server.base_url, max_retries=3, episode_timeout_s=1.2)
        out = sweep(cfg)
    assert out.done == N_TASKS and episodes(cfg) == ["answered"] * N_TASKS


def test_a_reply_past_max_tokens_is_cut_and_scored(ray_local, tmp_path):
    with FakeOpenAIServer() as server:
        server.default = lambda body: text_reply("x" * 200_000)
        cfg = config(tmp_path, server.base_url, sampling={"max_tokens": 8})
        out = sweep(cfg)
        results = out.run_dir.read_results()
    assert out.done == N_TASKS and len(results) == N_TASKS
    for r in results:
        replies = [s.reply for s in r.trajectory.steps]
        assert replies and all(len(m.content or "") <= 8 * 16 and m.truncated for m in replies)


def test_an_error_body_that_echoes_the_key_is_redacted(ray_local, tmp_path, monkeypatch):
    monkeypatch.setenv("TS_FAULTS_KEY", KEY)
    with FakeOpenAIServer() as server:
        # the episodes' requests (they offer tools) get the echo; the endpoint answers otherwise (its health
        # probe too), so the failures are the units' own and their errors reach failures.jsonl
        server.default = lambda body: ((500, {"error": f"upstream rejected Authorization: Bearer {KEY}"})
                                       if body.get("tools") else text_reply("ok"))
        cfg = config(tmp_path, server.base_url, api_key_env="TS_FAULTS_KEY")
        out = sweep(cfg)
    assert out.gave_up == N_TASKS
    text = (cfg.run_path() / "failures.jsonl").read_text()
    assert KEY not in text and "[REDACTED]" in text


def test_a_worker_dying_during_warm_up_is_replaced(ray_local, tmp_path):
    raw = config(tmp_path, "http://127.0.0.1:9/v1").model_dump(mode="json")
    raw["models"] = [{"name": "oracle", "kind": "scripted", "policy": "oracle"}]
    raw["benchmarks"] = [{"name": "fake", "options": {"n_tasks": N_TASKS, "die_once_marker": str(tmp_path / "died")},
                          "settings": ["small"]}]
    cfg = SweepConfig.model_validate(raw)
    out = sweep(cfg)
    assert (tmp_path / "died").exists() and out.done == N_TASKS


def test_a_second_run_on_the_same_run_directory_is_refused_with_a_message(ray_local, tmp_path, capsys):
    from toolsweep.evaluator.rundir import EpisodeWriter, RunDirectory

    with FakeOpenAIServer() as server:
        server.default = adder
        cfg = config(tmp_path, server.base_url)
        path = tmp_path / "sweep.yaml"
        path.write_text(json.dumps(cfg.model_dump(mode="json")))
        holder = EpisodeWriter(RunDirectory(cfg.run_path()))  # as if another `toolsweep run` were writing
        try:
            assert main(["run", str(path), "--no-progress"]) == 2
        finally:
            holder.close()
    err = capsys.readouterr().err
    assert "another toolsweep process is writing" in err and "Traceback" not in err


def test_sigterm_stops_the_run_like_ctrl_c_and_exits_143(tmp_path):
    import os
    import signal
    import subprocess

    raw = {"name": "term", "seeds": 3, "models": [{"name": "oracle", "kind": "scripted", "policy": "oracle"}],
           "benchmarks": [{"name": "toolmaze", "settings": "all"}], "mlflow": False,
           "output_dir": str(tmp_path / "runs"), "concurrency": {"workers": 1}}
    path = tmp_path / "term.yaml"
    path.write_text(json.dumps(raw))
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "toolsweep.cluster.cli", "run", str(path), "--no-progress"],
                            stderr=subprocess.PIPE, text=True, env=env)
    for line in proc.stderr:  # wait until the rollout workers are being prepared
        if "rollout workers" in line:
            break
    time.sleep(8)  # into the sweep itself
    proc.send_signal(signal.SIGTERM)
    rest = proc.stderr.read()
    assert proc.wait(timeout=120) == 143, rest[-2000:]
    assert "Traceback" not in rest


def test_a_400_after_the_model_has_spoken_is_the_agents_error():
    # Only the first request of an episode is free of the model's output; later, what the model said
    # may be what the endpoint rejects, so the episode records it (and the run goes on).
    import asyncio

    from toolsweep.evaluator.protocols import EndpointConfigError
    from toolsweep.evaluator.registry import get_benchmark, register_benchmark
    from toolsweep.evaluator.types import Message
    from toolsweep.models.client import Endpoint, ModelRequestError, OpenAIClient
    from toolsweep.models.policy import LLMPolicy

    register_benchmark("toolmaze", "toolsweep.benchmarks.toolmaze:ToolMaze")
    bench = get_benchmark("toolmaze")
    setting = "C1-P0-std"
    env = bench.make_env(bench.tasks(setting)[0], setting, 0)
    observation = env.reset()  # a real benchmark's first request: its system prompt and the user's task
    first, tools = list(observation.messages), list(observation.tools)
    assert [m.role for m in first] == ["system", "user"]
    with FakeOpenAIServer() as server:
        server.default = lambda body: (400, {"error": "tool call arguments are not valid JSON"})
        policy = LLMPolicy(OpenAIClient(Endpoint(name="m", model="x", base_urls=[server.base_url], max_retries=0)))
        with pytest.raises(EndpointConfigError, match="'m': request"):
            asyncio.run(policy.act(first, tools))
        later = first + [Message(role="assistant", content="{bad"), Message(role="user", content="again")]
        with pytest.raises(ModelRequestError):
            asyncio.run(policy.act(later, tools))


def test_ray_that_cannot_start_is_a_message_and_exit_5_not_a_traceback(tmp_path):
    import os
    import subprocess

    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    raw = {"name": "noray", "models": [{"name": "oracle", "kind": "scripted", "policy": "oracle"}],
           "benchmarks": [{"name": "toolmaze", "settings": ["C1-P0-std"]}], "mlflow": False,
           "output_dir": str(tmp_path / "runs")}
    cfg = tmp_path / "sweep.yaml"
    cfg.write_text(json.dumps(raw))
    env = {**os.environ, "RAY_TMPDIR": str(not_a_dir / "ray")}  # Ray's start fails for real
    proc = subprocess.run([sys.executable, "-m", "toolsweep.cluster.cli", "run", str(cfg), "--no-progress"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 5, proc.stderr[-2000:]
    assert "embedded Ray did not start" in proc.stderr and "Traceback" not in proc.stderr
