"""Slots per model: while one model's endpoint is down and being checked, its units wait outside the
workers and take no place another model could use, so the other models finish their units meanwhile.

Real HTTP on 127.0.0.1 (the server really stops listening), a real Ray, the real driver; two models:
one served over HTTP and the fake benchmark's scripted oracle. The assertion counts the oracle's units
finished while the endpoint was down (from each episode's `finished_at`), never a duration."""

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
from toolsweep.evaluator.rundir import RunDirectory  # noqa: E402

N_TASKS = 80
DOWN_S = 15.0  # the outage is ~45 s; the oracle needs ~2 s of it at this size


def two_models(tmp_path: Path, base_url: str) -> SweepConfig:
    return SweepConfig.model_validate({
        "name": "outage-slots", "seeds": 1,
        "models": [{"name": "served", "kind": "openai", "base_url": base_url, "model": "m", "max_retries": 1},
                   {"name": "oracle", "kind": "scripted", "policy": "oracle"}],
        "benchmarks": [{"name": "fake", "options": {"n_tasks": N_TASKS}, "settings": ["small"]}],
        "concurrency": {"workers": 1, "episodes_per_worker": 4},
        "bootstrap": {"n_resamples": 100, "live_n_resamples": 20},
        "output_dir": str(tmp_path / "runs"), "mlflow": False, "preflight": False, "max_attempts": 2,
        "outage_budget_s": 300,
    })


def test_the_other_model_finishes_its_units_while_one_endpoint_is_down(ray_local, tmp_path):
    lines: list[str] = []
    window: dict[str, float] = {}
    with FakeOpenAIServer(delay_s=0.05) as server:
        server.default = adder

        def outage() -> None:
            while len(server.requests) < 6:
                time.sleep(0.01)
            server.go_down()
            window["down"] = time.time()
            time.sleep(DOWN_S)
            window["up"] = time.time()
            server.come_back()

        thread = threading.Thread(target=outage, daemon=True)
        thread.start()
        cfg = two_models(tmp_path, server.base_url)
        out = run_sweep(cfg, progress=False, extra_benchmarks={"fake": FAKE_TARGET}, log=lines.append)
        thread.join()
    assert out.done == 2 * N_TASKS and out.gave_up == 0, lines
    rows = RunDirectory(cfg.run_path()).read_table(["model", "finished_at"]).to_pylist()
    oracle = [r["finished_at"] for r in rows if r["model"] == "oracle"]
    before = sum(t < window["down"] for t in oracle)
    during = sum(window["down"] <= t < window["up"] for t in oracle)
    # every oracle unit not done when the endpoint went down was done before it came back
    assert before + during == N_TASKS, (before, during, lines)
    assert during > 0
    assert any("was down for" in line for line in lines), lines


LONG_TASKS = 60
LONG_DOWN_S = 20.0


@pytest.mark.slow  # a 20-s outage in a sweep of 120 units (~50 s under load)
def test_running_episodes_of_a_down_model_give_back_their_slots(ray_local, tmp_path):
    """The served model's client retries for at least 31 s (max_retries 7), longer than the 20-s outage:
    its episodes running when the endpoint goes down used to keep their slots through the whole outage
    (and the oracle, sharing the 4 slots, stalled). Now the first refused request has the endpoint
    probed, and once it is found down those episodes stop at the worker and wait with the model's
    other units, no attempt spent: the oracle finishes all its units before the endpoint is back."""
    lines: list[str] = []
    window: dict[str, float] = {}
    with FakeOpenAIServer(delay_s=0.05) as server:
        server.default = adder

        def outage() -> None:
            while len(server.requests) < 6:
                time.sleep(0.01)
            server.go_down()
            window["down"] = time.time()
            time.sleep(LONG_DOWN_S)
            window["up"] = time.time()
            server.come_back()

        thread = threading.Thread(target=outage, daemon=True)
        thread.start()
        data = two_models(tmp_path, server.base_url).model_dump(mode="json")
        data["models"][0]["max_retries"] = 7
        data["benchmarks"][0]["options"] = {"n_tasks": LONG_TASKS, "delay_s": 0.1}
        cfg = SweepConfig.model_validate(data)
        out = run_sweep(cfg, progress=False, extra_benchmarks={"fake": FAKE_TARGET}, log=lines.append)
        thread.join()
    assert out.done == 2 * LONG_TASKS and out.gave_up == 0, lines
    rows = RunDirectory(cfg.run_path()).read_table(["model", "finished_at", "attempts"]).to_pylist()
    oracle = [r["finished_at"] for r in rows if r["model"] == "oracle"]
    before = sum(t < window["down"] for t in oracle)
    during = sum(window["down"] <= t < window["up"] for t in oracle)
    assert before < LONG_TASKS // 2, (before, lines)  # most of the oracle's work fell in the outage
    assert before + during == LONG_TASKS, (before, during, [l for l in lines if "model served" in l])
    assert any("of its running episodes stop and wait" in line for line in lines), lines
    # the stopped episodes ran again with no attempt spent
    assert all(r["attempts"] == 1 for r in rows if r["model"] == "served"), lines
