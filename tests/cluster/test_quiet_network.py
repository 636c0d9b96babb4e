"""A run sends nothing beyond its endpoints: `toolsweep run` of a scripted sweep (no endpoint at all) with
the standard proxy variables pointing at a real proxy on 127.0.0.1 that records every request and refuses
it. Ray's dashboard asks the cloud metadata services which cloud it runs on whenever Ray starts; through
the proxy those requests left the machine (169.254.169.254 twice, metadata.google.internal once)."""

from __future__ import annotations

import os
import socketserver
import subprocess
import sys
import threading

import yaml

from toolsweep.cluster.ray_start import CLOUD_METADATA_HOSTS, quiet_environment


class RecordingProxy(socketserver.ThreadingTCPServer):
    """Records the request line of everything sent through it (plain requests and CONNECTs) and answers
    407, so nothing passes."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        self.seen: list[str] = []
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                line = self.rfile.readline(65536).decode("latin-1").strip()
                if line:
                    outer.seen.append(line)
                self.wfile.write(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")

        super().__init__(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


def test_a_run_through_a_proxy_sends_it_nothing(tmp_path):
    config = tmp_path / "sweep.yaml"
    config.write_text(yaml.safe_dump({
        "name": "quiet", "seeds": 1, "models": [{"name": "oracle", "kind": "scripted", "policy": "oracle"}],
        "benchmarks": [{"name": "toolmaze", "settings": ["C1-P0-std"], "tasks": {"limit": 2}}],
        "output_dir": str(tmp_path / "runs"), "mlflow": False,
    }))
    proxy = RecordingProxy()
    thread = threading.Thread(target=proxy.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY") and k != "RAY_USAGE_STATS_ENABLED"}
    env.update(HTTP_PROXY=proxy.url, HTTPS_PROXY=proxy.url, http_proxy=proxy.url, https_proxy=proxy.url,
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost",
               RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", HOME=str(tmp_path))  # no ~/.ray settings of this machine
    try:
        run = subprocess.run([sys.executable, "-m", "toolsweep.cluster.cli", "run", str(config), "--no-progress"],
                             env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert run.returncode == 0, run.stderr[-3000:]
    assert proxy.seen == [], proxy.seen


def test_the_metadata_hosts_join_no_proxy_only_when_a_proxy_is_set():
    env = {"NO_PROXY": "127.0.0.1", "HTTPS_PROXY": "http://proxy:3128"}
    quiet_environment(env)
    assert env["NO_PROXY"].split(",") == ["127.0.0.1", *CLOUD_METADATA_HOSTS]
    assert env["no_proxy"].split(",") == list(CLOUD_METADATA_HOSTS) and env["RAY_USAGE_STATS_ENABLED"] == "0"
    quiet_environment(env)  # idempotent
    assert env["NO_PROXY"].split(",") == ["127.0.0.1", *CLOUD_METADATA_HOSTS]
    plain = {"RAY_USAGE_STATS_ENABLED": "1"}
    quiet_environment(plain)
    assert plain == {"RAY_USAGE_STATS_ENABLED": "1"}  # no proxy: nothing to route; a user's choice kept
