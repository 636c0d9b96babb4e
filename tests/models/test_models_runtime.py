"""vLLM server lifecycle, Ray model-server actors and the driver's ModelRuntime.

The process tree is real: a stand-in for vLLM's api_server (`models_fake_vllm.py`, started through
the same `python -m vllm.entrypoints.openai.api_server ...` command line) serves the OpenAI API and
holds a /dev/shm segment from a child process, so start, health checks, kill, restart, stop and
shared-memory cleanup are exercised without the vLLM engine (tier 3 runs the real one).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import stat
import sys
from pathlib import Path

import pytest

from toolsweep.cluster.models_runtime import ModelRuntime
from toolsweep.cluster.placement import PlacementError
from toolsweep.models.client import Endpoint, OpenAIClient
from toolsweep.models.config import ScriptedModelConfig, VLLMEngineArgs, VLLMModelConfig
from toolsweep.models.vllm_server import VLLMServer

FAKE = Path(__file__).resolve().parent / "models_fake_vllm.py"


@pytest.fixture()
def fake_python(tmp_path: Path) -> str:
    """An executable that runs the stand-in server with the server class's command-line."""
    script = tmp_path / "fake-python"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


@pytest.fixture()
def model_dir(tmp_path: Path) -> Path:
    d = tmp_path / "tiny-model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (d / "model.safetensors").write_bytes(os.urandom(4096))
    (d / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages }}"}))
    return d


def vllm_config(model_dir: Path, python: str, **kw) -> VLLMModelConfig:
    return VLLMModelConfig(
        name=kw.pop("name", "tiny"), path=str(model_dir), device="cpu", python=python,
        engine_args={"dtype": "float32", "max_model_len": 2048, "max_num_seqs": 16}, startup_timeout_s=60, **kw,
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purposes
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def serving_processes(port: str) -> list[int]:
    """Live processes of the stand-in server for this port (server and its engine-like child)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"models_fake_vllm.py" in b" ".join(cmd) and port.encode() in cmd and alive(int(pid)):
            out.append(int(pid))
    return out


def chat(endpoint: dict, session: str) -> dict:
    client = OpenAIClient(Endpoint.model_validate(endpoint), backoff_s=0.01)
    resp = asyncio.run(client.chat([{"role": "user", "content": "ping"}], session=session))
    return json.loads(resp.message.content)


def test_engine_args_become_server_flags():
    args = VLLMEngineArgs(
        dtype="bfloat16", max_model_len=4096, max_num_seqs=128, tensor_parallel_size=2,
        chat_template="/t.jinja", tool_call_parser="llama3_json", enable_prefix_caching=False, seed=7,
        gpu_memory_utilization=0.85, enforce_eager=True,
    )
    cli = args.to_cli()
    pairs = {cli[i]: cli[i + 1] for i in range(len(cli) - 1) if cli[i].startswith("--") and not cli[i + 1].startswith("--")}
    assert pairs["--dtype"] == "bfloat16" and pairs["--max-model-len"] == "4096"
    assert pairs["--max-num-seqs"] == "128" and pairs["--tensor-parallel-size"] == "2"
    assert pairs["--tool-call-parser"] == "llama3_json" and "--enable-auto-tool-choice" in cli
    assert pairs["--chat-template"] == "/t.jinja" and pairs["--seed"] == "7"
    assert pairs["--gpu-memory-utilization"] == "0.85" and "--enforce-eager" in cli
    assert "--no-enable-prefix-caching" in cli
    assert "--tool-call-parser" not in VLLMEngineArgs(tool_call_parser=None).to_cli()


def test_missing_model_path_says_how_to_prepare(tmp_path):
    server = VLLMServer(VLLMModelConfig(name="m", path=str(tmp_path / "nope"), device="cpu"))
    with pytest.raises(FileNotFoundError, match="models prepare smollm2"):
        server.start()
    assert server.proc is None


def test_a_server_not_started_answers_unhealthy_and_no_capacity(model_dir, fake_python):
    """Asked before its start (a watcher polling a replica being restarted), a server has no port: it
    answers 'not healthy, capacity unknown' instead of failing on a URL with port None."""
    server = VLLMServer(vllm_config(model_dir, fake_python))
    assert server.port is None
    assert server.kv_capacity() is None and not server.healthy() and server._get("/metrics") == (0, "")


def test_cpu_server_env_sets_kv_cache_space(model_dir, fake_python):
    env = VLLMServer(vllm_config(model_dir, fake_python)).environment()
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1" and env["HF_HUB_OFFLINE"] == "1"
    env = VLLMServer(vllm_config(model_dir, fake_python, env={"VLLM_CPU_KVCACHE_SPACE": "2"})).environment()
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2"


def test_server_start_health_stop_cleans_processes_and_shm(model_dir, fake_python, tmp_path):
    server = VLLMServer(vllm_config(model_dir, fake_python), log_dir=tmp_path / "logs")
    url = server.start()
    try:
        assert server.healthy()
        pids = server._tree_pids()
        assert len(pids) == 4  # supervisor, its guard, the server, its engine-like child
        segment = f"/dev/shm/psm_toolsweep_fake_{server.port}"
        assert server.tracked_shm == [segment] and os.path.exists(segment)
        reply = chat(Endpoint(name="tiny", model="tiny", base_urls=[url]).model_dump(), "s")
        assert reply["echo"] == "ping" and "--max-num-seqs" in reply["flags"]
    finally:
        removed = server.stop()
    assert removed == [segment] and not os.path.exists(segment)
    assert not any(alive(p) for p in pids)
    assert not server.healthy()


def test_gpu_replica_on_gpu_less_cluster_fails_before_anything_starts(ray_local, model_dir):
    ray = ray_local
    assert ray.cluster_resources().get("GPU", 0) == 0
    pgs_before = len(ray.util.placement_group_table())
    models = [
        ScriptedModelConfig(name="oracle", policy="oracle"),
        VLLMModelConfig(name="qwen3-8b", path=str(model_dir), device="gpu", engine_args={"tensor_parallel_size": 2}),
    ]
    runtime = ModelRuntime(models)
    with pytest.raises(PlacementError) as info:
        runtime.start()
    text = str(info.value)
    assert "qwen3-8b" in text and "GPU" in text
    assert runtime.replica_status() == {}
    assert len(ray.util.placement_group_table()) == pgs_before


def test_on_an_autoscaling_cluster_the_gpus_are_asked_for_waited_for_and_released(ray_local, model_dir):
    """The real request to Ray's autoscaler (the v1 protocol: a KV entry the autoscaler reads):
    made with the replica's bundle while waiting, withdrawn when the nodes never came."""
    import json
    import threading

    from ray.experimental.internal_kv import _internal_kv_get

    ray = ray_local
    models = [VLLMModelConfig(name="qwen3-8b", path=str(model_dir), device="gpu", engine_args={"tensor_parallel_size": 2})]
    lines: list[str] = []
    runtime = ModelRuntime(models, scale_up_timeout_s=6.0, log=lines.append)
    seen: list[list[dict]] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            raw = _internal_kv_get(b"autoscaler_resource_request")
            if raw:
                seen.append(json.loads(raw))
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        with pytest.raises(PlacementError) as info:
            runtime.start()
    finally:
        done.set()
        watcher.join(5)
    # how long it waits is wait_for_capacity's, checked on a fake clock in test_placement.py
    assert any("waiting up to 6 s" in line for line in lines), lines
    assert [{"CPU": 1.0, "GPU": 2.0}] in seen
    assert json.loads(_internal_kv_get(b"autoscaler_resource_request")) == []
    assert "within 6 s" in str(info.value) and "qwen3-8b" in str(info.value)
    assert any("asked the autoscaler" in line for line in lines)
    assert runtime.replica_status() == {} and ray.cluster_resources().get("GPU", 0) == 0


def test_a_runtime_that_did_not_need_to_ask_leaves_the_autoscaler_request_of_others_alone(ray_local, model_dir):
    """The autoscaler request is one per cluster: a sweep whose servers fit at once must not withdraw
    another driver's."""
    import json

    from ray.autoscaler.sdk import request_resources
    from ray.experimental.internal_kv import _internal_kv_get

    request_resources(bundles=[{"CPU": 3.0}])  # someone else's
    try:
        models = [VLLMModelConfig(name="cpu-served", path=str(model_dir), device="cpu", num_cpus=1)]
        lines: list[str] = []
        runtime = ModelRuntime(models, scale_up_timeout_s=30.0, log=lines.append)
        runtime.check_resources()  # fits the embedded cluster: nothing to ask for, nothing waited for
        assert not any("asked the autoscaler" in line or "waiting up to" in line for line in lines), lines
        runtime.stop()
        assert json.loads(_internal_kv_get(b"autoscaler_resource_request")) == [{"CPU": 3.0}]
    finally:
        request_resources(bundles=[])


def test_runtime_replicas_sticky_endpoints_restart_and_clean_stop(ray_local, model_dir, fake_python, tmp_path):
    ray = ray_local
    cfg = vllm_config(model_dir, fake_python, replicas=2, max_in_flight=8, num_cpus=0.5)
    runtime = ModelRuntime([cfg, ScriptedModelConfig(name="oracle", policy="oracle")], log_dir=str(tmp_path / "logs"))
    endpoints = runtime.start()
    try:
        ep = endpoints["tiny"]
        assert set(endpoints) == {"tiny"}
        assert len(ep["base_urls"]) == 2 and ep["max_in_flight"] == 16 and ep["model"] == "tiny"  # 8 per replica
        ports = {chat(ep, f"unit-{i}")["port"] for i in range(8)}
        assert len(ports) == 2  # sessions spread over both replicas
        assert chat(ep, "unit-3")["port"] == chat(ep, "unit-3")["port"]

        manifest = runtime.manifest()["tiny"]
        assert manifest["weights_sha256"]["model.safetensors"] == __import__("hashlib").sha256((model_dir / "model.safetensors").read_bytes()).hexdigest()
        assert manifest["chat_template"]["text"] == "{{ messages }}"
        assert manifest["tool_parser"] == "hermes" and manifest["engine_args"]["max_num_seqs"] == 16
        assert "--max-model-len" in manifest["server_command"]
        assert set(manifest["versions"]) == {"vllm", "transformers", "torch"}
        assert runtime.manifest()["oracle"]["kind"] == "scripted"

        # Kill one replica's actor: its server dies with it (PDEATHSIG); ensure_healthy restarts it.
        status = runtime.replica_status()["tiny"]
        victim = status[0]
        ray.kill(runtime.replica_actors("tiny")[0], no_restart=True)
        fresh = runtime.ensure_healthy("tiny")
        new_ep = fresh["tiny"]
        assert new_ep["generation"] == 1
        assert new_ep["base_urls"][1] == ep["base_urls"][1]  # the live replica kept its URL
        assert new_ep["base_urls"][0] != ep["base_urls"][0]
        assert {chat(new_ep, f"unit-{i}")["port"] for i in range(8)} == {int(u.rsplit(":", 1)[1].split("/")[0]) for u in new_ep["base_urls"]}
        assert not alive(victim["server_pid"])
        victim_port = victim["base_url"].rsplit(":", 1)[1].split("/")[0]
        assert not serving_processes(victim_port)  # the killed actor's server and engine child are gone
        assert not any(os.path.exists(p) for p in victim["shm"])  # the dead replica's segment is gone
        assert runtime.replica_status()["tiny"][0]["restarts"] == 1
        assert runtime.ensure_healthy("tiny")["tiny"]["generation"] == 1  # healthy: nothing restarted
        final = runtime.replica_status()["tiny"]
    finally:
        runtime.stop()
    assert not any(alive(r["server_pid"]) for r in final)
    assert not any(serving_processes(r["base_url"].rsplit(":", 1)[1].split("/")[0]) for r in final)
    assert not any(os.path.exists(p) for r in final for p in r["shm"])


def test_runtime_without_servers_needs_no_ray(model_dir, monkeypatch):
    from toolsweep.models.config import HFModelConfig, OpenAIModelConfig

    monkeypatch.setenv("TS_SECRET", "sk-do-not-log")
    models = [
        OpenAIModelConfig(name="hosted", base_url="https://api.example.invalid/v1", model="m", api_key_env="TS_SECRET"),
        HFModelConfig(name="local", path=str(model_dir)),
        ScriptedModelConfig(name="oracle", policy="oracle"),
    ]
    runtime = ModelRuntime(models)
    endpoints = runtime.start()
    assert set(endpoints) == {"hosted", "local"}
    assert endpoints["hosted"]["base_urls"] == ["https://api.example.invalid/v1"] and endpoints["local"]["kind"] == "hf"
    manifest = runtime.manifest()
    assert "sk-do-not-log" not in json.dumps(manifest) and "sk-do-not-log" not in json.dumps(endpoints)
    assert manifest["local"]["weights_sha256"] == {"model.safetensors": __import__("hashlib").sha256((model_dir / "model.safetensors").read_bytes()).hexdigest()}
    assert manifest["local"]["chat_template"]["sha256"] and manifest["local"]["tool_parser"] == "hermes"
    assert runtime.ensure_healthy("hosted") == endpoints
    runtime.stop()
    with pytest.raises(ValueError, match="unique"):
        ModelRuntime([ScriptedModelConfig(name="a", policy="oracle"), ScriptedModelConfig(name="a", policy="random")])
