"""A sweep against a rate-limited endpoint: sustained 429s slow the model down and no unit is given
up (once, each unit failed after its retries, "gave up after N attempts"). Real HTTP on 127.0.0.1 (a
server that answers 429 while more than 2 requests are in flight), a real Ray, the real driver."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))

from conftest import FAKE_TARGET  # noqa: E402
from models_fake_server import FakeOpenAIServer  # noqa: E402
from test_llm_sweep import adder  # noqa: E402
from toolsweep.cluster.config import SweepConfig  # noqa: E402
from toolsweep.cluster.driver import run_sweep  # noqa: E402
from toolsweep.cluster.endpoint_health import CHAT_PROBE  # noqa: E402

N_TASKS = 24
QUOTA = 2


def test_a_sweep_over_a_rate_limited_endpoint_records_every_unit(ray_local, tmp_path):
    lines: list[str] = []
    with FakeOpenAIServer(delay_s=0.05) as server:
        def limited(body: dict) -> object:
            if server.in_flight > QUOTA:
                return 429, {"error": {"message": "rate limit exceeded"}}
            return adder(body)

        server.default = limited
        cfg = SweepConfig.model_validate({
            "name": "rate-limited", "seeds": 1,
            "models": [{"name": "hosted", "kind": "openai", "base_url": server.base_url, "model": "m",
                        "max_retries": 1}],
            "benchmarks": [{"name": "fake", "options": {"n_tasks": N_TASKS}, "settings": ["small"]}],
            "concurrency": {"workers": 1, "episodes_per_worker": 12},
            "bootstrap": {"n_resamples": 100, "live_n_resamples": 20},
            "output_dir": str(tmp_path / "runs"), "mlflow": False, "preflight": False, "max_attempts": 1,
        })
        out = run_sweep(cfg, progress=False, extra_benchmarks={"fake": FAKE_TARGET}, log=lines.append)
        # each episode: a tool call, then the answer (a health probe's request, were there one, is not counted)
        rejected = sum(1 for b in server.requests if b["messages"] != CHAT_PROBE["messages"]) - 2 * N_TASKS
    assert out.done == N_TASKS and out.gave_up == 0, lines
    assert rejected > 0  # the server did rate-limit the sweep
    # each change of the model's requests in flight reaches the run's own output (it was only in a worker's
    # .err file in Ray's session folder), with the worker, the model, the new and old limit and the cause
    changes = [line for line in lines if "model hosted:" in line and "requests in flight (was" in line]
    assert any(line.startswith("worker-0") and "rate limited (429)" in line for line in changes), lines
    # and the progress line shows the model's requests in flight as its rate limit last set them
    last = [line for line in lines if f"{N_TASKS}/{N_TASKS} units" in line]
    assert last and ", hosted in flight " in last[-1], lines
    assert not (cfg.run_path() / "failures.jsonl").exists() or not (cfg.run_path() / "failures.jsonl").read_text()
