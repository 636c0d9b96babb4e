"""Off a terminal, progress is a plain line every so often (never silence, never one giant line):
when units finish, and as a heartbeat saying what is in flight when none finished for a while."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))

from conftest import FAKE_TARGET  # noqa: E402
from models_fake_server import FakeOpenAIServer  # noqa: E402
from test_llm_sweep import adder  # noqa: E402
from toolsweep.cluster.config import SweepConfig  # noqa: E402
from toolsweep.cluster.driver import run_sweep  # noqa: E402
from toolsweep.cluster.progress import LogProgress, make_progress, rate_limit_postfix  # noqa: E402


def test_a_line_every_period_and_at_the_end():
    now = [0.0]
    lines: list[str] = []
    p = LogProgress(100, "sweep", lines.append, every_s=30, clock=lambda: now[0])
    for _ in range(9):
        now[0] += 10
        p.set_postfix({"ep/s": "1.0"})
        p.update(10)
    assert len(lines) == 3  # at 30, 60 and 90 s
    assert lines[0].startswith("sweep: 30/100 units (30%)") and "ETA 1.2 min" in lines[0] and "ep/s 1.0" in lines[0]
    now[0] += 1
    p.update(10)
    assert len(lines) == 4 and lines[-1].startswith("sweep: 100/100 units (100%)")
    assert all("\r" not in line for line in lines)


def test_a_heartbeat_when_no_unit_finishes_says_what_is_in_flight():
    now = [0.0]
    lines: list[str] = []
    p = LogProgress(10, "sweep", lines.append, every_s=30, clock=lambda: now[0])
    status = {"running": 4, "oldest_s": 190.0, "gave_up": 1, "checking": ["served"], "abandoned": []}
    for _ in range(100):  # the scheduler asks every second or so; a line comes once a period
        now[0] += 1
        if p.due():
            p.heartbeat(status)
    assert len(lines) == 3  # at 30, 60 and 90 s, with no unit finished
    assert lines[0] == ("sweep: 0/10 units (0%), 0.5 min elapsed, ETA ?; running 4 (oldest 3.2 min), queued 5, "
                        "given up 1, model served: endpoint being checked, its units wait")
    now[0] += 25
    p.update(1)  # a finished unit's line (its period was up) starts the next period
    assert len(lines) == 4 and lines[-1].startswith("sweep: 1/10 units") and "running" not in lines[-1]
    now[0] += 29
    p.heartbeat(status)
    assert len(lines) == 4


def test_a_rate_limited_model_shows_its_requests_in_flight_worker_by_worker():
    from toolsweep.models.rate_limit import limit_notice, read_limit_notice

    notices = ["worker-1: " + limit_notice("hosted", 8, 16, "requests succeed"),
               "worker-0: " + limit_notice("hosted", 2, 4, "most requests rate limited (429)"),
               "worker-0: " + limit_notice("org/model: v2", 3, 6, "most requests rate limited (429)"),
               "worker-0: rollout worker ready"]
    limits: dict[str, dict[int, int]] = {}
    for worker, line in zip((1, 0, 0, 0), notices):
        if (read := read_limit_notice(line)) is not None:
            limits.setdefault(read[0], {})[worker] = read[1]
    assert limits == {"hosted": {0: 2, 1: 8}, "org/model: v2": {0: 3}}
    postfix = rate_limit_postfix(limits)
    assert postfix == {"hosted in flight": "2+8", "org/model: v2 in flight": "3"}
    lines: list[str] = []
    bar = LogProgress(4, "sweep", lines.append)
    bar.set_postfix(postfix)
    bar.update(4)
    assert lines[-1].endswith(", hosted in flight 2+8, org/model: v2 in flight 3"), lines


def test_without_a_terminal_the_bar_becomes_lines():
    assert isinstance(make_progress(10, "s", True, print), LogProgress)  # pytest's stderr is not a terminal
    assert make_progress(10, "s", True, print, every_s=2.5).every_s == 2.5


def test_a_sweep_of_slow_episodes_prints_heartbeats_before_any_unit_finishes(ray_local, tmp_path):
    lines: list[str] = []
    with FakeOpenAIServer(delay_s=2.0) as server:  # a slow model: each episode takes two of its replies
        server.default = adder
        cfg = SweepConfig.model_validate({
            "name": "heartbeat", "seeds": 1,
            "models": [{"name": "served", "kind": "openai", "base_url": server.base_url, "model": "m"}],
            "benchmarks": [{"name": "fake", "options": {"n_tasks": 2}, "settings": ["small"]}],
            "concurrency": {"workers": 1, "episodes_per_worker": 2},
            "bootstrap": {"n_resamples": 100, "live_n_resamples": 20},
            "output_dir": str(tmp_path / "runs"), "mlflow": False, "preflight": False,
            "progress_interval_s": 0.5,
        })
        out = run_sweep(cfg, progress=False, extra_benchmarks={"fake": FAKE_TARGET}, log=lines.append)
    assert out.done == 2, lines
    # the scheduler's lines (the run's own heartbeat through the other phases says "still working")
    progress = [line for line in lines if line.startswith("heartbeat: ") and "still working" not in line]
    before = [line for line in progress if line.startswith("heartbeat: 0/2 units")]
    assert before, lines  # lines while no unit had finished
    assert all("running 2 (oldest " in line and "queued 0" in line for line in before), before
    assert progress[-1].startswith("heartbeat: 2/2 units (100%)")
