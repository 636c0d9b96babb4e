"""A permanent driver error inside a Ray job stops the job instead of failing it, so a KubeRay RayJob
does not retry it on new clusters (a bad config used to be retried 4 times, each cluster waiting 15
minutes). The job API is a real HTTP server on 127.0.0.1 that answers as Ray's does and, as Ray's job
supervisor does, ends the entrypoint with SIGTERM when asked to stop it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from toolsweep.cluster.ray_job import JOB_CONFIG_ENV, own_submission_id, stop_own_job

ROOT = Path(__file__).resolve().parents[2]
JOB = "raysubmit_t3stJ0b"


class FakeJobApi:
    def __init__(self) -> None:
        self.stopped: list[str] = []
        self.target_pid: int | None = None
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _json(self, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._json({"ray_version": "2.60.0", "version": "4", "ray_commit": "0", "session_name": "s"})

            def do_POST(self) -> None:
                parts = self.path.strip("/").split("/")  # api/jobs/<id>/stop
                api.stopped.append(parts[2])
                self._json({"stopped": True})
                if api.target_pid is not None:  # the supervisor ends the entrypoint
                    os.kill(api.target_pid, signal.SIGTERM)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeJobApi:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def job_env(api: FakeJobApi, job: str | None = JOB) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOOLSWEEP_RAY_DASHBOARD": api.url, "NO_PROXY": "127.0.0.1"}
    env.pop(JOB_CONFIG_ENV, None)
    if job:
        env[JOB_CONFIG_ENV] = json.dumps({"runtime_env": {}, "metadata": {"job_submission_id": job, "job_name": job}})
    return env


def bad_config(tmp_path: Path) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(json.dumps({"name": "bad", "models": [{"name": "o", "kind": "scripted", "policy": "oracle"}],
                                "benchmarks": [{"name": "no-such-benchmark"}], "output_dir": str(tmp_path / "runs")}))
    return path


def run_cli(args: list[str], env: dict[str, str], api: FakeJobApi) -> tuple[int, str]:
    proc = subprocess.Popen([sys.executable, "-m", "toolsweep.cluster.cli", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    api.target_pid = proc.pid
    try:
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err


def test_a_bad_config_in_a_ray_job_stops_the_job(tmp_path):
    with FakeJobApi() as api:
        code, err = run_cli(["run", str(bad_config(tmp_path)), "--permanent-error-stops-job"], job_env(api), api)
    assert api.stopped == [JOB], err[-2000:]
    assert "no-such-benchmark" in err and f"stopping Ray job {JOB}" in err and "Traceback" not in err
    assert code == 143  # ended by the job's supervisor, which records the job as STOPPED


def test_outside_a_ray_job_the_exit_code_is_kept(tmp_path):
    with FakeJobApi() as api:
        code, err = run_cli(["run", str(bad_config(tmp_path)), "--permanent-error-stops-job"], job_env(api, None), api)
    assert code == 2 and api.stopped == [], err[-2000:]


@pytest.mark.parametrize("code", [0, 1, 5, 130, 143])
def test_only_permanent_exit_codes_stop_the_job(code, monkeypatch):
    with FakeJobApi() as api:
        for key, value in job_env(api).items():
            monkeypatch.setenv(key, value)
        assert stop_own_job(code, lambda m: None, wait_s=0) is False
        assert stop_own_job(2, lambda m: None, wait_s=0) is True
    assert api.stopped == [JOB]  # only the exit 2


def test_the_submission_id_is_read_from_the_job_config():
    meta = {"metadata": {"job_submission_id": "raysubmit_a", "job_name": "raysubmit_a"}}
    assert own_submission_id({JOB_CONFIG_ENV: json.dumps(meta)}) == "raysubmit_a"
    assert own_submission_id({}) is None and own_submission_id({JOB_CONFIG_ENV: "not json"}) is None
