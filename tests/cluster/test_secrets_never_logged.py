"""An API key given to a sweep appears in no file the run leaves: not the run directory, not the MLflow
store, not Ray's session directory (whose runtime_env_agent.log records a runtime env's env_vars)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))

from conftest import FAKE_TARGET  # noqa: E402
from models_fake_server import FakeOpenAIServer  # noqa: E402
from test_llm_sweep import adder  # noqa: E402
from toolsweep.cluster.config import SweepConfig  # noqa: E402
from toolsweep.cluster.driver import run_sweep  # noqa: E402
from toolsweep.models.secrets import Secrets  # noqa: E402

MARKER = "sk-marker-7d1e0c5a93b24f6e"


def files_holding(root: Path, needle: bytes) -> list[Path]:
    hits = []
    for p in root.rglob("*"):
        try:
            if p.is_file() and not p.is_symlink() and needle in p.read_bytes():
                hits.append(p)
        except OSError:
            continue  # sockets, files removed while we look
    return hits


def test_a_marker_key_reaches_the_endpoint_and_no_file(ray_local, tmp_path, monkeypatch):
    import ray

    monkeypatch.setenv("TS_MARKER_KEY", MARKER)
    with FakeOpenAIServer() as server:
        server.default = adder
        cfg = SweepConfig.model_validate({
            "name": "secret", "seeds": 1,
            "models": [{"name": "served", "kind": "openai", "base_url": server.base_url, "model": "m",
                        "api_key_env": "TS_MARKER_KEY"}],
            "benchmarks": [{"name": "fake", "options": {"n_tasks": 3}, "settings": ["small"]}],
            "concurrency": {"workers": 1, "episodes_per_worker": 4},
            "bootstrap": {"n_resamples": 100, "live_n_resamples": 20},
            "output_dir": str(tmp_path / "runs"), "preflight": False,
            "tracking_uri": f"sqlite:///{tmp_path}/mlflow.db",
        })
        out = run_sweep(cfg, progress=False, extra_benchmarks={"fake": FAKE_TARGET}, log=lambda m: None)
        seen = [h.get("Authorization") for h in server.headers]
    assert out.done == 3
    assert seen and set(seen) == {f"Bearer {MARKER}"}  # the key did reach the endpoint from the workers
    session = Path(ray._private.worker._global_node.get_session_dir_path())
    leaks = files_holding(tmp_path, MARKER.encode()) + files_holding(session, MARKER.encode())
    assert not leaks, f"the key was written to: {leaks}"


def test_secrets_show_names_only_and_survive_pickling():
    import pickle

    s = Secrets({"A_KEY": MARKER})
    assert MARKER not in repr(s) and MARKER not in str(s) and "A_KEY" in repr(s)
    assert pickle.loads(pickle.dumps(s)).values() == [MARKER]
    assert MARKER not in json.dumps({"k": repr(s)})
