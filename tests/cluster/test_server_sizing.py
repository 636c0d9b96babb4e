"""Servers sized and protected for a real GPU node: in-flight caps from the engine's reported KV
capacity and the cells' measured sizes, rope scaling only when a cell needs it, a per-sweep API key
that no command line or manifest shows, and a port taken between picking and binding retried."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from pathlib import Path

import pytest
from test_gpu_path import fake_python, gpu_cluster, gpu_model, model_dir  # noqa: F401 - fixtures

from toolsweep.cluster.config import SweepConfig
from toolsweep.cluster.driver import resolve_rope_scaling
from toolsweep.cluster.models_runtime import ModelRuntime
from toolsweep.models import vllm_server
from toolsweep.models.client import Endpoint, OpenAIClient
from toolsweep.models.config import VLLMModelConfig
from toolsweep.models.sizing import choose_rope_scaling, in_flight_per_replica, kv_capacity
from toolsweep.models.vllm_server import VLLMServer

# as vLLM prints it on /metrics (one label set, gauge value 1.0)
METRICS = (
    "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
    "# TYPE vllm:cache_config_info gauge\n"
    'vllm:cache_config_info{block_size="16",cache_dtype="auto",calculate_kv_scales="False",'
    'enable_prefix_caching="True",gpu_memory_utilization="0.9",num_cpu_blocks="None",'
    'num_gpu_blocks="27264",prefix_caching_hash_algo="builtin"} 1.0\n'
    "vllm:num_requests_running{engine=\"0\",model_name=\"q\"} 0.0\n"
)


def test_kv_capacity_is_read_from_the_engines_metrics():
    assert kv_capacity(METRICS) == {"num_gpu_blocks": 27264, "block_size": 16, "kv_tokens": 436224}
    assert kv_capacity("vllm:num_requests_running 0.0\n") is None


def test_in_flight_cap_follows_kv_capacity_below_max_num_seqs_and_an_override_wins():
    # qwen3-8b's case: 256 sequences allowed, episodes of 67k tokens, ~436k tokens of KV cache
    cap, why = in_flight_per_replica(kv_tokens=436224, tokens_per_episode=67_000 + 512, max_num_seqs=256, default=64)
    assert cap == 6 and "KV cache" in why and "preempted" in why
    cap, why = in_flight_per_replica(kv_tokens=436224, tokens_per_episode=1000, max_num_seqs=256, default=64)
    assert cap == 256 and "max_num_seqs 256" in why
    assert in_flight_per_replica(kv_tokens=436224, tokens_per_episode=10**6, max_num_seqs=256, default=64)[0] == 1
    assert in_flight_per_replica(kv_tokens=None, tokens_per_episode=1000, max_num_seqs=None, default=64)[0] == 64
    cap, why = in_flight_per_replica(kv_tokens=436224, tokens_per_episode=67_512, max_num_seqs=256, default=64,
                                     override=32)
    assert cap == 32 and "set in the model's config" in why


def test_yarn_only_when_a_cell_needs_more_than_the_native_window():
    scaling, window, why = choose_rope_scaling(32768, 20_000)
    assert scaling is None and window is None and "within the native 32,768" in why
    scaling, window, why = choose_rope_scaling(32768, 60_000)
    assert scaling == {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 32768}
    assert window == 65536 and "factor 2" in why
    scaling, window, _ = choose_rope_scaling(32768, 100_000)
    assert scaling["factor"] == 4.0 and window == 131072
    scaling, window, why = choose_rope_scaling(32768, 200_000)
    assert scaling["factor"] == 4.0 and "context_exceeded" in why


def _rope_config(tmp_path: Path, native: int, max_tokens: int) -> SweepConfig:
    d = tmp_path / f"model-{native}"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "qwen3", "max_position_embeddings": native}))
    (d / "model.safetensors").write_bytes(b"\0" * 64)
    (d / "tokenizer.json").write_text("{}")
    return SweepConfig.model_validate({
        "name": "rope", "models": [{"name": "q", "kind": "vllm", "path": str(d), "rope_scaling": "auto",
                                    "engine_args": {"max_model_len": native}}],
        "benchmarks": [{"name": "fake", "settings": ["small"]}], "sampling": {"max_tokens": max_tokens},
        "output_dir": str(tmp_path / "runs"), "mlflow": False,
    })


def test_rope_scaling_auto_is_decided_from_the_cells_and_written_into_the_run_config(tmp_path):
    short, reasons = resolve_rope_scaling(_rope_config(tmp_path, 32768, 256), lambda m: None)
    engine = short.models[0].engine_args
    assert "rope_scaling" not in (engine.model_extra.get("hf_overrides") or {}) and engine.max_model_len == 32768
    assert "no YaRN" in reasons["q"]
    long, reasons = resolve_rope_scaling(_rope_config(tmp_path, 256, 300), lambda m: None)
    engine = long.models[0].engine_args
    rope = engine.model_extra["hf_overrides"]["rope_scaling"]
    assert rope["rope_type"] == "yarn" and rope["original_max_position_embeddings"] == 256
    assert engine.max_model_len == 256 * rope["factor"] >= 300
    assert "YaRN" in reasons["q"] and short.config_sha256() != long.config_sha256()
    assert "--hf-overrides" in engine.to_cli()


def test_in_flight_cap_of_a_started_server_follows_the_kv_it_reports(gpu_cluster, model_dir, fake_python, tmp_path):
    gpu_cluster([(4, 2)])
    model = gpu_model(model_dir, fake_python, "qwen", replicas=2).model_copy(
        update={"env": {"FAKE_VLLM_KV_BLOCKS": "1024"}, "start_stagger_s": 0.0})  # 16,384 tokens
    runtime = ModelRuntime([model], log_dir=str(tmp_path / "logs"), episode_tokens={"qwen": 3000})
    try:
        endpoint = runtime.start()["qwen"]
        assert endpoint["max_in_flight"] == 2 * 5  # 16384 // 3000 per replica, below max_num_seqs 64
        assert runtime.sizing["qwen"]["kv_tokens"] == 16384 and "KV cache" in runtime.sizing["qwen"]["rule"]
    finally:
        runtime.stop()


def _ask(base_url: str, key: str | None) -> int:
    client = OpenAIClient(Endpoint(kind="openai", name="q", model="q", base_urls=[base_url], api_key=key,
                                   max_retries=0), backoff_s=0.01)
    try:
        asyncio.run(client.chat([{"role": "user", "content": "ping"}], session="s"))
        return 200
    except Exception as exc:  # noqa: BLE001 - the client's refusal carries the status
        return getattr(exc, "status", 0) or (401 if "401" in str(exc) or "auth" in str(exc) else 0)


def test_the_sweep_key_is_required_and_shows_on_no_command_line(model_dir, fake_python, tmp_path):
    model = VLLMModelConfig(name="q", path=str(model_dir), device="cpu", python=fake_python, startup_timeout_s=60)
    server = VLLMServer(model, log_dir=tmp_path / "logs", api_key="sekrit-key-123")
    server.start()
    try:
        assert _ask(server.base_url, "sekrit-key-123") == 200
        assert _ask(server.base_url, None) == 401 and _ask(server.base_url, "wrong") == 401
        for pid in server._tree_pids():
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            assert b"sekrit-key-123" not in cmdline
        assert "sekrit-key-123" not in " ".join(server.command())
        from toolsweep.actors.model_server import ModelServer

        actor_body = ModelServer.__new__(ModelServer)
        actor_body.config, actor_body.server = model, server
        assert "VLLM_API_KEY" not in actor_body.describe()["env"]
    finally:
        server.stop()
    assert "sekrit-key-123" not in (server.log_path.read_text() if server.log_path else "")


def test_a_port_taken_before_the_server_binds_it_is_replaced(model_dir, fake_python, tmp_path, monkeypatch):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    picks = iter([port])
    real = vllm_server.free_port
    monkeypatch.setattr(vllm_server, "free_port", lambda host="127.0.0.1": next(picks, None) or real(host))
    model = VLLMModelConfig(name="q", path=str(model_dir), device="cpu", python=fake_python, startup_timeout_s=60)
    server = VLLMServer(model, log_dir=tmp_path / "logs")
    try:
        server.start()
        assert server.port != port and server.port_retries == 1 and server.healthy()
    finally:
        server.stop()
        taken.close()
    assert not os.path.exists(f"/dev/shm/psm_toolsweep_fake_{server.port}")
    # the stand-in makes its segment before it binds (vLLM binds first): the failed try's is left, removed here
    Path(f"/dev/shm/psm_toolsweep_fake_{port}").unlink(missing_ok=True)


def test_a_vllm_server_started_by_its_actor_runs_at_the_ordinary_niceness(gpu_cluster, model_dir, fake_python, tmp_path):
    """Ray starts workers at niceness 15 and a server they start inherits it; the server is the sweep's
    compute, so its actor (and the server) run at 0."""
    gpu_cluster([(4, 2)])
    model = gpu_model(model_dir, fake_python, "qwen", replicas=1).model_copy(update={"start_stagger_s": 0.0})
    runtime = ModelRuntime([model], log_dir=str(tmp_path / "logs"))
    try:
        runtime.start()
        (replica,) = runtime._replicas["qwen"]
        # Ray's niceness is added to what its processes inherit from this one: the ordinary niceness is
        # this process's own (0, unless the tests run under `nice`)
        ordinary = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, replica.address["server_pid"]) == ordinary
        assert os.getpriority(os.PRIO_PROCESS, replica.address["pid"]) == ordinary  # the actor itself
    finally:
        runtime.stop()
