"""An endpoint outage pauses its model's units instead of draining the sweep: while the endpoint
refuses connections its units wait (no attempt spent) and it is probed with backoff; when it answers
they resume. Only an outage longer than the sweep's budget gives them up, with a message naming the
endpoint. Real HTTP on 127.0.0.1 (the server really stops listening), a real Ray."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))

from conftest import FAKE_TARGET  # noqa: E402
from models_fake_server import FakeOpenAIServer  # noqa: E402
from test_llm_sweep import adder  # noqa: E402
from toolsweep.cluster.config import SweepConfig  # noqa: E402
from toolsweep.cluster.driver import run_sweep  # noqa: E402
from toolsweep.cluster.endpoint_health import CHAT_PROBE, OutageVerdict, wait_for_endpoint  # noqa: E402

N_TASKS = 24


def config(tmp_path: Path, base_url: str, budget_s: float) -> SweepConfig:
    return SweepConfig.model_validate({
        "name": "outage", "seeds": 1,
        "models": [{"name": "served", "kind": "openai", "base_url": base_url, "model": "m", "max_retries": 1}],
        "benchmarks": [{"name": "fake", "options": {"n_tasks": N_TASKS}, "settings": ["small"]}],
        "concurrency": {"workers": 1, "episodes_per_worker": 2},
        "bootstrap": {"n_resamples": 100, "live_n_resamples": 20},
        "output_dir": str(tmp_path / "runs"), "mlflow": False, "preflight": False, "max_attempts": 2,
        "outage_budget_s": budget_s,
    })


def for_a_while(server: FakeOpenAIServer, after_requests: int, seconds: float, begin, end) -> threading.Thread:
    """A thread that calls `begin` once the server has served `after_requests`, then `end` `seconds` later."""
    def run() -> None:
        while len(server.requests) < after_requests:
            time.sleep(0.01)
        begin()
        time.sleep(seconds)
        end()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def outage_during(server: FakeOpenAIServer, down_s: float, after_requests: int) -> threading.Thread:
    return for_a_while(server, after_requests, down_s, server.go_down, server.come_back)


def test_an_outage_within_the_budget_costs_no_unit(ray_local, tmp_path):
    lines: list[str] = []
    with FakeOpenAIServer(delay_s=0.05) as server:
        server.default = adder
        cfg = config(tmp_path, server.base_url, budget_s=120)
        # down for longer than a unit's every attempt takes (2 attempts x 1 client retry, milliseconds)
        outage = outage_during(server, down_s=6.0, after_requests=10)
        out = run_sweep(cfg, progress=False, extra_benchmarks={"fake": FAKE_TARGET}, log=lines.append)
        outage.join()
        served_after = len(server.requests)
    assert out.done == N_TASKS and out.gave_up == 0, lines
    assert not (cfg.run_path() / "failures.jsonl").exists() or not (cfg.run_path() / "failures.jsonl").read_text()
    assert any("was down for" in line and "no attempt spent" in line for line in lines), lines
    assert served_after > 10  # the server was used again after it came back


def storm_during(server: FakeOpenAIServer, reply: tuple, storm_s: float, after_requests: int) -> threading.Thread:
    """The server keeps listening, but answers every chat request with `reply` for `storm_s` seconds once it
    has served `after_requests` (the episodes' requests go to `adder` otherwise)."""
    storm = threading.Event()
    server.default = lambda body: reply if storm.is_set() else adder(body)
    return for_a_while(server, after_requests, storm_s, storm.set, storm.clear)


def test_a_5xx_storm_on_chat_while_the_server_answers_is_an_outage_that_costs_no_unit(ray_local, tmp_path):
    """The server keeps listening (its other routes answer) while every chat request gets a 503 for 6 s, as
    when an engine dies behind its API front: the probe asks chat too, so the units wait instead of spending
    their attempts (before: read as up, and units were given up as infra_error within seconds)."""
    lines: list[str] = []
    with FakeOpenAIServer(delay_s=0.05) as server:
        storm = storm_during(server, (503, {"error": {"message": "engine dead"}}), 6.0, after_requests=10)
        cfg = config(tmp_path, server.base_url, budget_s=120)
        out = run_sweep(cfg, progress=False, extra_benchmarks={"fake": FAKE_TARGET}, log=lines.append)
        storm.join()
        probes = [b for b in server.requests if b["messages"] == CHAT_PROBE["messages"]]
    assert out.done == N_TASKS and out.gave_up == 0, lines
    assert not (cfg.run_path() / "failures.jsonl").exists() or not (cfg.run_path() / "failures.jsonl").read_text()
    assert any("/chat/completions answers HTTP 503" in line for line in lines), lines
    assert probes and all(b["model"] == "m" and b["max_tokens"] == 1 for b in probes)


def test_rate_limiting_past_the_budget_pauses_the_units_and_spends_no_attempt(ray_local, tmp_path):
    """Every chat request gets a 429 for 7 s, longer than the 5-s budget a request waits out 429s: the requests
    then fail, and the probe (a chat request, still 429) reads the endpoint as down, so the units wait as in
    an outage and run again when it passes (before: /models answered, read as up, and every running unit
    spent an attempt)."""
    from toolsweep.evaluator.rundir import RunDirectory

    lines: list[str] = []
    with FakeOpenAIServer(delay_s=0.05) as server:
        storm = storm_during(server, (429, {"error": {"message": "slow down"}}, {"Retry-After": "0.2"}), 7.0,
                             after_requests=10)
        cfg = config(tmp_path, server.base_url, budget_s=5)
        out = run_sweep(cfg, progress=False, extra_benchmarks={"fake": FAKE_TARGET}, log=lines.append)
        storm.join()
    assert out.done == N_TASKS and out.gave_up == 0, lines
    attempts = RunDirectory(cfg.run_path()).read_table(columns=["attempts"]).to_pydict()["attempts"]
    assert attempts == [1] * N_TASKS, attempts
    assert any("rate limited (HTTP 429)" in line for line in lines), lines  # the units did meet the storm's end


def test_an_outage_past_the_budget_gives_up_with_the_endpoint_named(ray_local, tmp_path):
    lines: list[str] = []
    with FakeOpenAIServer(delay_s=0.05) as server:
        server.default = adder
        cfg = config(tmp_path, server.base_url, budget_s=2.0)
        outage = outage_during(server, down_s=30.0, after_requests=10)
        out = run_sweep(cfg, progress=False, extra_benchmarks={"fake": FAKE_TARGET}, log=lines.append)
        url = server.base_url
    assert out.done + out.gave_up == N_TASKS and out.gave_up > 0
    failures = (cfg.run_path() / "failures.jsonl").read_text()
    assert "outage budget" in failures and url in failures
    assert any("outage_budget_s" in line and url in line for line in lines)
    assert any(f"served: {out.gave_up} endpoint outage" in line for line in lines), lines
    del outage  # a daemon thread: it brings the (closed) server back later, harmlessly


def test_the_verdict_follows_the_probes():
    now = [0.0]

    def sleep(s: float) -> None:
        now[0] += s

    answers = iter([None])
    assert wait_for_endpoint(lambda: next(answers), 60, clock=lambda: now[0], sleep=sleep) == OutageVerdict("up")
    answers = iter(["refused", "refused", "refused", None])
    v = wait_for_endpoint(lambda: next(answers), 60, clock=lambda: now[0], sleep=sleep)
    assert v.state == "recovered" and v.outage_s == 0.5 + 1.0 + 2.0 and v.last_error == "refused"
    now[0] = 0.0
    v = wait_for_endpoint(lambda: "refused", 10, clock=lambda: now[0], sleep=sleep)
    assert v.state == "exhausted" and v.outage_s == 10


@pytest.mark.slow
def test_an_endpoint_down_for_a_minute_costs_no_unit_and_the_run_exits_0(ray_local, tmp_path):
    import json

    from toolsweep.cluster.cli import main

    with FakeOpenAIServer(delay_s=0.05) as server:
        server.default = adder
        cfg = config(tmp_path, server.base_url, budget_s=300)
        path = tmp_path / "sweep.yaml"
        path.write_text(json.dumps(cfg.model_dump(mode="json")))
        outage = outage_during(server, down_s=60.0, after_requests=10)
        code = main(["run", str(path), "--no-progress"])
        outage.join()
    from toolsweep.evaluator.rundir import RunDirectory

    assert code == 0
    assert len(RunDirectory(cfg.run_path()).finished_unit_ids()) == N_TASKS
    assert not (cfg.run_path() / "failures.jsonl").exists() or not (cfg.run_path() / "failures.jsonl").read_text()
