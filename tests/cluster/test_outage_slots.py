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
