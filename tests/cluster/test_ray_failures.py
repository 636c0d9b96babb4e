"""Every Ray failure is a message with a cause and an exit code: a rollout worker that Ray's memory
monitor kills while warming up is replaced like any dead worker; an embedded Ray that does not start is
tried again (once, then while `ray_start_timeout_s` lasts) and then named with its cause, in `run` and
in `preflight` alike; a preflight of a model that is not prepared stops with a message."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolsweep.cluster.cli import EXIT_RAY_START, main
from toolsweep.cluster.ray_start import RayStartFailed, start_embedded_ray
from conftest import FAKE_TARGET  # noqa: E402  (at import: a later conftest.py takes the name)

ROOT = Path(__file__).resolve().parents[2]


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def failing_init(clock: FakeClock, failures: int, cost_s: float = 30.0):
    """An `init` that times out `failures` times (each costing Ray's own 30 s wait), then starts."""
    calls: list[int] = []

    def init() -> None:
        calls.append(1)
        clock.t += cost_s
        if len(calls) <= failures:
            raise Exception("The current node timed out during startup.")

    return init, calls


def test_a_failed_start_is_retried_once_by_default():
    clock = FakeClock()
    init, calls = failing_init(clock, failures=1)
    assert start_embedded_ray(0.0, lambda m: None, init=init, clock=clock) == 2 and len(calls) == 2


def test_without_time_left_a_second_failure_ends_with_both_causes():
    clock = FakeClock()
    init, calls = failing_init(clock, failures=5)
    with pytest.raises(RayStartFailed) as err:
        start_embedded_ray(0.0, lambda m: None, init=init, clock=clock)
    assert len(calls) == 2
    text = str(err.value)
    assert "2 tries" in text and text.count("timed out during startup") == 2 and "--ray-start-timeout" in text


def test_the_start_timeout_keeps_trying_until_it_has_passed():
    clock = FakeClock()
    init, calls = failing_init(clock, failures=3)  # 4th try starts, at 120 s
    lines: list[str] = []
    assert start_embedded_ray(100.0, lines.append, init=init, clock=clock) == 4
    assert len(lines) == 3 and "try 3" in lines[-1]
    clock2 = FakeClock()
    init2, calls2 = failing_init(clock2, failures=10)
    with pytest.raises(RayStartFailed):
        start_embedded_ray(100.0, lambda m: None, init=init2, clock=clock2)
    assert len(calls2) == 4  # 30, 60, 90 s are inside the 100 s; the try ending at 120 s is the last


def write_config(tmp_path: Path, raw: dict) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(json.dumps(raw))
    return path


def _run_cli(args: list[str], env: dict[str, str], timeout: int = 400) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "toolsweep.cluster.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _unusable_ray_tmpdir(tmp_path: Path) -> dict[str, str]:
    """An environment whose RAY_TMPDIR cannot be created (a path under a file): every Ray start fails."""
    (tmp_path / "a-file").write_text("")
    return {**os.environ, "PYTHONPATH": str(ROOT), "RAY_TMPDIR": str(tmp_path / "a-file" / "ray")}


def test_run_whose_ray_cannot_start_tries_twice_then_exits_5_with_the_cause(tmp_path):
    cfg = write_config(tmp_path, {
        "name": "nostart", "seeds": 1, "models": [{"name": "oracle", "kind": "scripted", "policy": "oracle"}],
        "benchmarks": [{"name": "toolmaze", "settings": ["C1-P1-std"], "tasks": {"limit": 1}}],
        "mlflow": False, "output_dir": str(tmp_path / "runs")})
    out = _run_cli(["run", str(cfg), "--no-progress"], _unusable_ray_tmpdir(tmp_path))
    assert out.returncode == EXIT_RAY_START, out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    assert "did not start in 2 tries" in out.stderr and "Not a directory" in out.stderr


def test_an_adaptive_sweep_starts_ray_with_the_start_timeout(tmp_path):
    """An adaptive sweep (`stop_when`) starts its Ray for all rounds itself: with the config's
    ray_start_timeout_s, like any run (it used to start it with none: two tries, whatever was set)."""
    cfg = write_config(tmp_path, {
        "name": "adaptive-nostart", "seeds": 1, "ray_start_timeout_s": 4,
        "models": [{"name": "oracle", "kind": "scripted", "policy": "oracle"}],
        "benchmarks": [{"name": "toolmaze", "settings": ["C1-P1-std"], "tasks": {"limit": 2}}],
        "stop_when": {"ci_half_width": 0.1, "max_rounds": 2, "seeds_per_round": 1, "max_seeds": 2},
        "mlflow": False, "output_dir": str(tmp_path / "runs")})
    out = _run_cli(["run", str(cfg), "--no-progress"], _unusable_ray_tmpdir(tmp_path))
    assert out.returncode == EXIT_RAY_START, out.stderr[-2000:]
    assert "Traceback" not in out.stderr and "Not a directory" in out.stderr
    assert "of ray_start_timeout_s 4 s spent" in out.stderr, out.stderr[-2000:]
    # the flag wins over the config, as for a plain run
    out = _run_cli(["run", str(cfg), "--no-progress", "--ray-start-timeout", "2"], _unusable_ray_tmpdir(tmp_path))
    assert out.returncode == EXIT_RAY_START and "of ray_start_timeout_s 2 s spent" in out.stderr, out.stderr[-2000:]


def fake_model_dir(root: Path) -> Path:
    d = root / "model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (d / "model.safetensors").write_bytes(os.urandom(256))
    (d / "tokenizer.json").write_text("{}")
    return d


def test_preflight_whose_ray_cannot_start_exits_5_with_the_cause(tmp_path):
    cfg = write_config(tmp_path, {
        "name": "pf", "seeds": 1,
        "models": [{"name": "v", "kind": "vllm", "path": str(fake_model_dir(tmp_path)), "device": "cpu"}],
        "benchmarks": [{"name": "toolmaze", "settings": ["C1-P1-std"]}], "mlflow": False})
    out = _run_cli(["preflight", str(cfg)], _unusable_ray_tmpdir(tmp_path))
    assert out.returncode == 5, out.stderr[-2000:]
    assert "Traceback" not in out.stderr and "did not start in 2 tries" in out.stderr
    assert out.stderr.rstrip().splitlines()[-1].startswith("error: the embedded Ray did not start"), out.stderr[-2000:]


def test_preflight_waits_as_long_as_the_configs_start_timeout(tmp_path):
    cfg = write_config(tmp_path, {
        "name": "pf", "seeds": 1, "ray_start_timeout_s": 3,
        "models": [{"name": "v", "kind": "vllm", "path": str(fake_model_dir(tmp_path)), "device": "cpu"}],
        "benchmarks": [{"name": "toolmaze", "settings": ["C1-P1-std"]}], "mlflow": False})
    out = _run_cli(["preflight", str(cfg)], _unusable_ray_tmpdir(tmp_path))
    assert out.returncode == 5 and "Traceback" not in out.stderr, out.stderr[-2000:]
    assert "of ray_start_timeout_s 3 s spent" in out.stderr, out.stderr[-2000:]


def test_preflight_of_a_model_that_is_not_prepared_is_a_message(tmp_path, capsys):
    cfg = write_config(tmp_path, {
        "name": "pf", "seeds": 1,
        "models": [{"name": "v", "kind": "vllm", "path": str(tmp_path / "not-prepared"), "device": "cpu"}],
        "benchmarks": [{"name": "toolmaze", "settings": ["C1-P1-std"]}], "mlflow": False})
    assert main(["preflight", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "not-prepared does not exist" in err and "toolsweep models prepare" in err


def test_a_worker_killed_by_the_memory_monitor_while_warming_up_is_replaced(ray_local, tmp_path, capsys,
                                                                             monkeypatch):

    monkeypatch.setenv("TOOLSWEEP_EXTRA_BENCHMARKS", f"fake={FAKE_TARGET}")
    marker = tmp_path / "oom"
    cfg = write_config(tmp_path, {
        "name": "oom", "seeds": 1, "models": [{"name": "oracle", "kind": "scripted", "policy": "oracle"}],
        "benchmarks": [{"name": "fake", "options": {"n_tasks": 3, "oom_once_marker": str(marker)},
                        "settings": ["small"]}],
        "concurrency": {"workers": 1, "episodes_per_worker": 2}, "bootstrap": {"n_resamples": 200},
        "mlflow": False, "output_dir": str(tmp_path / "runs")})
    assert main(["run", str(cfg), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert marker.exists(), "the memory monitor's kill was never raised"
    assert "killed by Ray's memory monitor" in err and "starting a new one" in err
    import pyarrow.parquet as pq

    run = tmp_path / "runs" / "oom" / "main"
    rows = sum(pq.read_table(p).num_rows for p in run.glob("episodes/*.parquet"))
    assert rows == 3 and not (run / "failures.jsonl").exists()


def _memory_monitor_env(tmp_path: Path, headroom_gb: float = 3.0) -> dict[str, str]:
    """An environment whose embedded Ray's memory monitor acts `headroom_gb` above what the machine uses
    now (Ray counts the node's used memory: MemTotal - MemAvailable), checking every 100 ms; a worker
    that grows by more than the headroom is killed by it, a real `OutOfMemoryError`."""
    info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in open("/proc/meminfo")}
    total, used = info["MemTotal"], info["MemTotal"] - info["MemAvailable"]
    assert total - used > (headroom_gb + 4) * 1e9, "not enough free memory for a memory-monitor test"
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests" / "fakes")]),
            "TOOLSWEEP_EXTRA_BENCHMARKS": f"fake={FAKE_TARGET}",
            "RAY_memory_usage_threshold": f"{(used + headroom_gb * 1e9) / total:.4f}",
            "RAY_memory_monitor_refresh_ms": "100", "RAY_min_memory_free_bytes": "-1"}


def _hog_config(tmp_path: Path, name: str, hog: dict) -> Path:
    return write_config(tmp_path, {
        "name": name, "seeds": 1, "models": [{"name": "oracle", "kind": "scripted", "policy": "oracle"}],
        "benchmarks": [{"name": "fake", "settings": ["small"],
                        "options": {"n_tasks": 12, "delay_s": 0.05, "hog_limit_mb": 7000, **hog}}],
        # one worker: the memory monitor has one candidate, the worker that grows
        "concurrency": {"workers": 1, "episodes_per_worker": 3}, "bootstrap": {"n_resamples": 200},
        "mlflow": False, "preflight": False, "output_dir": str(tmp_path / "runs")})


def _episodes(run: Path) -> list[dict]:
    import pyarrow.parquet as pq

    return [r for p in sorted(run.glob("episodes/*.parquet"))
            for r in pq.read_table(p, columns=["unit_id", "task_id", "termination", "attempts"]).to_pylist()]


@pytest.mark.slow  # a CLI run with its own embedded Ray (~70 s under load)
def test_a_worker_the_memory_monitor_kills_mid_run_is_replaced_and_its_units_run_again(tmp_path):
    """A real kill by Ray's memory monitor while episodes run (the worker playing t5 grows until killed):
    the driver starts a new worker, the episodes that were running on the dead one run again (one more
    attempt), and the sweep ends with every unit recorded once, exit 0, no failures.jsonl."""
    marker = tmp_path / "hogged"
    cfg = _hog_config(tmp_path, "oom-mid-run", {"hog_once_marker": str(marker), "hog_task": "t5"})
    out = _run_cli(["run", str(cfg), "--no-progress"], _memory_monitor_env(tmp_path))
    assert marker.exists(), "no episode ever grew"
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr
    assert "rollout worker 0 died (killed by Ray's memory monitor" in out.stderr, out.stderr[-3000:]
    run = tmp_path / "runs" / "oom-mid-run" / "main"
    rows = _episodes(run)
    assert sorted(r["task_id"] for r in rows) == sorted(f"t{i}" for i in range(12))  # none lost, none twice
    assert len({r["unit_id"] for r in rows}) == 12
    assert all(r["termination"] == "answered" for r in rows), rows
    hogged = next(r for r in rows if r["task_id"] == "t5")
    assert hogged["attempts"] == 2  # it was running when its worker died: one attempt spent, then it ran
    assert not (run / "failures.jsonl").exists()


@pytest.mark.slow
def test_a_worker_the_memory_monitor_kills_while_warming_up_is_replaced(tmp_path):
    """The same real kill while the worker builds its benchmarks (before any episode)."""
    marker = tmp_path / "hogged"
    cfg = _hog_config(tmp_path, "oom-warm-up", {"hog_once_marker": str(marker), "hog_when": "build"})
    out = _run_cli(["run", str(cfg), "--no-progress"], _memory_monitor_env(tmp_path))
    assert marker.exists(), "the worker never grew"
    assert out.returncode == 0, out.stderr[-3000:]
    assert "Traceback" not in out.stderr
    assert "died while warming up (killed by Ray's memory monitor" in out.stderr, out.stderr[-3000:]
    run = tmp_path / "runs" / "oom-warm-up" / "main"
    rows = _episodes(run)
    assert sorted(r["task_id"] for r in rows) == sorted(f"t{i}" for i in range(12))
    assert all(r["attempts"] == 1 for r in rows)  # nothing ran on the dead worker
    assert not (run / "failures.jsonl").exists()
