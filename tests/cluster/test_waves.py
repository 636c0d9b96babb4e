"""Model waves on a cluster with fewer GPUs than models (DESIGN §3 "Model waves"): a Ray cluster that
declares 1 GPU, three vLLM models behind the stand-in server (`models_fake_vllm.py`, started by the
real launcher in the real `ModelServer` actor and placement group). Every stand-in appends "up" when
its process begins and "down" when it ends to an events file, so "at no moment are two models'
servers up" is read from the servers themselves, not from the driver's own account.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_gpu_path import fake_python, gpu_cluster, model_dir, server_processes  # noqa: F401 - fixtures

from toolsweep.cluster.config import SweepConfig
from toolsweep.cluster.driver import run_sweep

FAKES = Path(__file__).resolve().parents[1] / "fakes"
MODELS = ["m1", "m2", "m3"]


def sweep(tmp_path: Path, python: str, model_dir: Path, events: Path, *, n_tasks: int = 4, delay_s: float = 0.0,
          latency_s: float = 0.0, address: str | None = None) -> SweepConfig:
    env = {"FAKE_VLLM_EVENTS": str(events), "FAKE_VLLM_KEYFILE": str(tmp_path / "keys"),
           "FAKE_VLLM_LATENCY_S": str(latency_s)}
    models = [{"name": name, "kind": "vllm", "path": str(model_dir), "device": "gpu", "python": python,
               "num_cpus": 0.5, "startup_timeout_s": 60, "start_stagger_s": 0, "env": env, "max_retries": 0,
               "engine_args": {"max_model_len": 4096, "max_num_seqs": 8}} for name in MODELS]
    return SweepConfig.model_validate({
        "name": "waves", "seeds": 1, "models": models,
        "benchmarks": [{"name": "fake", "options": {"n_tasks": n_tasks, "delay_s": delay_s}, "settings": ["small"]}],
        "concurrency": {"workers": 1, "episodes_per_worker": 2},
        "bootstrap": {"n_resamples": 200, "live_n_resamples": 50},
        "output_dir": str(tmp_path / "runs"), "mlflow": False, "ray_address": address,
    })


def read_events(path: Path) -> list[tuple[float, str, str]]:
    out = []
    for line in path.read_text().splitlines():
        t, kind, name, _port = line.split()
        out.append((float(t), kind, name))
    return sorted(out)


def intervals(events: list[tuple[float, str, str]]) -> list[tuple[float, float, str]]:
    """(up, down, model) of every server process, in order of start."""
    up: dict[str, float] = {}
    out = []
    for t, kind, name in events:
        if kind == "up":
            assert name not in up, f"two servers of {name} at once"
            up[name] = t
        elif kind == "down":
            out.append((up.pop(name), t, name))
    assert not up, f"servers never went down: {up}"
    return sorted(out)


def assert_one_model_at_a_time(spans: list[tuple[float, float, str]]) -> None:
    for (a_up, a_down, a), (b_up, _b_down, b) in zip(spans, spans[1:]):
        assert a_down <= b_up, f"{a} was still up ({a_down:.3f}) when {b} came up ({b_up:.3f})"


def test_three_models_on_one_gpu_run_in_waves_one_server_at_a_time(gpu_cluster, model_dir, fake_python, tmp_path):
    gpu_cluster([(4, 1)])
    events = tmp_path / "events"
    cfg = sweep(tmp_path, fake_python, model_dir, events)
    lines: list[str] = []
    out = run_sweep(cfg, progress=False, extra_benchmarks={"fake": "fake_bench:FakeBench"}, log=lines.append)
    assert out.done == out.total_units == 12 and out.gave_up == 0
    rows = out.run_dir.read_table(columns=["model", "termination", "unit_id"]).to_pydict()
    assert sorted(rows["model"]) == sorted(MODELS * 4) and len(set(rows["unit_id"])) == 12
    assert set(rows["termination"]) == {"answered"}
    assert all(c["metrics"]["accuracy"]["value"] == 1.0 for c in out.cells)  # the stand-in's tool calls were answered

    spans = intervals(read_events(events))
    assert [name for _, _, name in spans] == MODELS  # each model's server once, in wave order
    assert_one_model_at_a_time(spans)
    reqs = read_events(events)
    for up, down, name in spans:  # every request of a model reached it while its wave was up
        assert all(up <= t <= down for t, kind, n in reqs if kind == "req" and n == name)

    summary = json.loads(out.run_dir.summary_path.read_text())
    assert [w["models"] for w in summary["waves"]["waves"]] == [["m1"], ["m2"], ["m3"]]
    assert [w["done"] for w in summary["waves"]["waves"]] == [4, 4, 4]
    assert len(summary["waves"]["switch_s"]) == 2 and 0 <= summary["waves"]["idle_share"] < 1
    assert summary["composites"]["wave/m3"] == 3.0
    manifest = json.loads(out.run_dir.manifest_path.read_text())
    assert [w["models"] for w in manifest["waves"]] == [["m1"], ["m2"], ["m3"]]
    assert "wave 3 (m3)" in out.table_text and any("3 waves" in line for line in lines)

    # the per-sweep key: one for the whole sweep, required by the servers, and in no file the run wrote
    keys = set((tmp_path / "keys").read_text().split())
    assert len(keys) == 1
    key = keys.pop()
    logs = [p for p in [*out.run_dir.path.rglob("*"), *Path("/tmp/toolsweep-vllm").glob("m[123]-*.log")] if p.is_file()]
    assert logs and not [p for p in logs if key.encode() in p.read_bytes()]
    assert server_processes(model_dir) == []


def _driver(cfg_path: Path) -> subprocess.Popen:
    code = (
        "import sys, json; sys.path.insert(0, %r)\n"
        "from toolsweep.cluster.config import SweepConfig\n"
        "from toolsweep.cluster.driver import run_sweep\n"
        "from toolsweep.evaluator.registry import register_benchmark\n"
        "register_benchmark('fake', 'fake_bench:FakeBench')\n"
        "cfg = SweepConfig.model_validate(json.loads(open(%r).read()))\n"
        "run_sweep(cfg, progress=False, extra_benchmarks={'fake': 'fake_bench:FakeBench'})\n"
    ) % (str(FAKES), str(cfg_path))
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=open(cfg_path.with_suffix(".log"), "w"),
                            start_new_session=True)


def test_a_sweep_killed_mid_wave_resumes_in_that_wave(gpu_cluster, model_dir, fake_python, tmp_path):
    cluster = gpu_cluster([(4, 1)])
    events = tmp_path / "events"
    cfg = sweep(tmp_path, fake_python, model_dir, events, n_tasks=8, delay_s=0.2, latency_s=0.2,
                address=cluster.address)
    cfg_path = tmp_path / "sweep.json"
    cfg_path.write_text(json.dumps(cfg.model_dump(mode="json")))
    driver = _driver(cfg_path)
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:  # wait until the second wave has answered a few requests
            seen = read_events(events) if events.exists() else []
            if sum(1 for _, kind, name in seen if kind == "req" and name == "m2") >= 3 + 7:  # preflight + 3.5 episodes
                break
            assert driver.poll() is None, "the driver ended before the second wave"
            time.sleep(0.1)
        else:
            pytest.fail("the second wave never served")
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(30)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
    killed_at = time.time()
    deadline = time.monotonic() + 60
    while server_processes(model_dir) and time.monotonic() < deadline:  # the dead driver's servers go with it
        time.sleep(0.2)
    assert server_processes(model_dir) == []

    from toolsweep.evaluator.rundir import RunDirectory

    before = RunDirectory(cfg.run_path()).read_table(columns=["model"]).to_pydict()["model"]
    assert before.count("m1") == 8 and 0 < before.count("m2") < 8 and "m3" not in before

    out = run_sweep(cfg, progress=False, extra_benchmarks={"fake": "fake_bench:FakeBench"}, log=lambda m: None)
    assert out.skipped == len(before) and out.done == 24 - len(before)
    rows = out.run_dir.read_table(columns=["model", "unit_id"]).to_pydict()
    assert len(rows["unit_id"]) == len(set(rows["unit_id"])) == 24
    after = [e for e in read_events(events) if e[0] > killed_at and e[1] == "up"]
    assert [name for _, _, name in after] == ["m2", "m3"]  # resumed in the second wave; the first was not started
    assert_one_model_at_a_time(intervals(read_events(events)))
    summary = json.loads(out.run_dir.summary_path.read_text())
    # both invocations' waves: the killed one's first wave and its second, cut short, then the resumed ones
    assert [(w["invocation"], w["wave"]) for w in summary["waves"]["waves"]] == [(1, 1), (1, 2), (2, 2), (2, 3)]
    assert [w["ended"] for w in summary["waves"]["waves"]] == [True, False, True, True]
    assert summary["waves"]["waves"][0]["done"] == 8
    assert summary["waves"]["waves"][2]["done"] == 8 - before.count("m2")
    assert [inv["waves"] for inv in summary["waves"]["invocations"]] == [[1, 2], [2, 3]]
