"""The driver's bounded wait for MLflow (`--mlflow-wait`, the RayJob's entrypoint uses it), against
real HTTP servers on 127.0.0.1: one that comes up late, one that answers 503 until then, and none at
all; and `toolsweep run` itself stopping with exit 2 before it runs anything."""

from __future__ import annotations

import shlex
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from toolsweep.cluster.mlflow_wait import MlflowNeverCame, wait_for_mlflow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Health(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self):  # noqa: N802 - http.server's name
        self.send_response(self.server.status if self.path == "/health" else 404)  # type: ignore[attr-defined]
        self.end_headers()

    def log_message(self, *args):
        pass


def serve(port: int, status: int = 200) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", port), Health)
    server.status = status  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class FakeClock:
    """Time moves only when the wait sleeps; `at` runs an action once that time is reached."""

    def __init__(self, actions: dict[float, object] | None = None) -> None:
        self.now = 0.0
        self.actions = dict(actions or {})
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        for at in sorted(self.actions):
            if at <= self.now:
                self.actions.pop(at)()  # type: ignore[operator]


def test_the_wait_ends_when_a_late_server_comes_up():
    port = free_port()
    servers = []
    clock = FakeClock({30.0: lambda: servers.append(serve(port))})
    logs: list[str] = []
    try:
        wait_for_mlflow(f"http://127.0.0.1:{port}", 900, logs.append, clock=clock, sleep=clock.sleep)
    finally:
        for s in servers:
            s.shutdown()
    assert 30.0 <= clock.now < 40.0  # waited for it, and no longer than one poll after it came
    assert logs[0].startswith(f"waiting up to 900 s for MLflow at http://127.0.0.1:{port}")
    assert logs[-1] == f"MLflow at http://127.0.0.1:{port} answers"


def test_a_server_that_never_answers_ends_the_wait_at_its_bound_with_what_to_check():
    port = free_port()
    server = serve(port, status=503)  # up, but not healthy (MLflow migrating its database)
    clock = FakeClock()
    try:
        with pytest.raises(MlflowNeverCame) as err:
            wait_for_mlflow(f"http://127.0.0.1:{port}", 60, lambda _: None, clock=clock, sleep=clock.sleep)
    finally:
        server.shutdown()
    assert clock.now == 60.0  # the bound, not one poll more
    assert "did not answer within 60 s (/health answered 503)" in str(err.value)
    assert "rollout status deployment/mlflow" in str(err.value)


def test_no_wait_without_a_server_uri_or_a_bound():
    clock = FakeClock()
    for uri, bound in (("sqlite:///mlflow.db", 60), (f"http://127.0.0.1:{free_port()}", 0)):
        wait_for_mlflow(uri, bound, lambda _: None, clock=clock, sleep=clock.sleep)
    assert clock.slept == []


@pytest.mark.slow
def test_toolsweep_run_with_mlflow_wait_stops_before_running_anything(k8s, rendered, tmp_path):
    """The RayJob's own flag, on the CLI: no server at the tracking URI -> exit 2 after the wait,
    the message says so, and no episode was run (nothing in the run directory)."""
    argv = shlex.split(k8s.find(rendered["cpu-smoke"], "RayJob")["spec"]["entrypoint"])
    wait = float(argv[argv.index("--mlflow-wait") + 1])
    assert 60 <= wait <= 1800  # long enough for a first start's migrations, short enough to notice
    config = tmp_path / "sweep.yaml"
    config.write_text(k8s.find(rendered["cpu-smoke"], "ConfigMap", "toolsweep-sweep")["data"]["sweep.yaml"])
    uri = f"http://127.0.0.1:{free_port()}"
    run = subprocess.run(
        [str(Path(sys.executable).parent / "toolsweep"), "run", str(config), "--tracking-uri", uri,
         "--output-dir", str(tmp_path / "runs"), "--mlflow-wait", "2", "--limit", "1", "--no-progress"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 2, run.stderr[-3000:]
    assert f"MLflow at {uri} did not answer within 2 s" in run.stderr
    assert not list((tmp_path / "runs").glob("*/*/episodes/*.parquet"))
    assert not list((tmp_path / "runs").glob("*/*/episodes/pending.jsonl")) or all(
        p.read_text() == "" for p in (tmp_path / "runs").glob("*/*/episodes/pending.jsonl"))
