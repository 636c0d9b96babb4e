"""The GPU path without a GPU: Ray clusters whose nodes declare GPUs they do not have
(`ray.cluster_utils.Cluster` with `num_gpus`), and the stand-in server behind the real launcher
(`models_fake_vllm.py` started by `VLLMServer` through the same command line, in the same
`ModelServer` actor and placement group as a real vLLM replica). What runs here is everything of a GPU
deployment but the engine: placement groups per replica (tensor and pipeline parallelism), packing
on one node and spreading over nodes, the devices Ray hands each server, refusal before anything
starts, and a killed replica replaced in its own placement group.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from pathlib import Path

import pytest

from toolsweep.cluster.models_runtime import ModelRuntime
from toolsweep.cluster.placement import PlacementError
from toolsweep.models.client import Endpoint, OpenAIClient
from toolsweep.models.config import VLLMModelConfig

FAKE = Path(__file__).resolve().parents[1] / "models" / "models_fake_vllm.py"


@pytest.fixture()
def fake_python(tmp_path: Path) -> str:
    script = tmp_path / "fake-python"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


@pytest.fixture()
def model_dir(tmp_path: Path) -> Path:
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "qwen3"}))
    (d / "model.safetensors").write_bytes(os.urandom(1024))
    (d / "tokenizer.json").write_text("{}")  # config, weights and tokenizer: what the config check asks of a model
    return d


@pytest.fixture()
def gpu_cluster():
    """Start a cluster of nodes [(num_cpus, num_gpus), ...] (the first is the head) and connect."""
    import ray
    from ray.cluster_utils import Cluster

    made = []

    def start(nodes: list[tuple[float, int]]):
        if ray.is_initialized():
            ray.shutdown()  # the shared embedded Ray; the next test that needs it starts it again
        (head_cpus, head_gpus), *rest = nodes
        cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": head_cpus, "num_gpus": head_gpus, "include_dashboard": False})
        made.append(cluster)
        for cpus, gpus in rest:
            cluster.add_node(num_cpus=cpus, num_gpus=gpus)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
        return cluster

    yield start
    ray.shutdown()
    for cluster in made:
        cluster.shutdown()


def gpu_model(model_dir: Path, python: str, name: str, *, tp: int = 1, pp: int = 1, replicas: int = 1) -> VLLMModelConfig:
    engine = {"dtype": "bfloat16", "max_model_len": 32768, "max_num_seqs": 64, "tensor_parallel_size": tp}
    if pp > 1:
        engine["pipeline_parallel_size"] = pp
    return VLLMModelConfig(name=name, path=str(model_dir), device="gpu", python=python, replicas=replicas,
                           num_cpus=0.5, engine_args=engine, startup_timeout_s=60)


def ask(base_url: str, model: str, key: str | None = None) -> dict:
    """One chat request to one replica (with the sweep's key, which the servers require): the stand-in
    answers with its port, flags and devices."""
    client = OpenAIClient(Endpoint(kind="openai", name=model, model=model, base_urls=[base_url], api_key=key),
                          backoff_s=0.01)
    resp = asyncio.run(client.chat([{"role": "user", "content": "ping"}], session="s"))
    return json.loads(resp.message.content)


def devices(reply: dict) -> frozenset[str]:
    return frozenset((reply["cuda_visible_devices"] or "").split(",")) - {""}


def placement(runtime: ModelRuntime, model: str) -> list[dict]:
    """Each replica's placement group as Ray's table has it: id, strategy, bundles, node."""
    import ray

    out = []
    for replica in runtime._replicas[model]:
        table = ray.util.placement_group_table(replica.placement_group)
        out.append({"id": replica.placement_group.id.hex(), "strategy": table["strategy"],
                    "bundles": list(table["bundles"].values()), "nodes": set(table["bundles_to_node_id"].values())})
    return out


def server_processes(model_dir: Path) -> list[int]:
    """Live stand-in servers (and their engine-like children) of this test's model."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if b"models_fake_vllm.py" in b" ".join(cmd) and str(model_dir).encode() in cmd and state != "Z":
            out.append(int(pid))
    return out


def test_two_tp2_replicas_pack_a_4gpu_node_and_a_killed_one_returns_to_its_own_group(
    gpu_cluster, model_dir, fake_python, tmp_path
):
    import ray

    gpu_cluster([(4, 4)])
    model = gpu_model(model_dir, fake_python, "qwen", tp=2, replicas=2)
    runtime = ModelRuntime([model], log_dir=str(tmp_path / "logs"))
    endpoint = runtime.start()["qwen"]
    try:
        groups = placement(runtime, "qwen")
        assert [g["strategy"] for g in groups] == ["STRICT_PACK", "STRICT_PACK"]
        assert all(g["bundles"] == [{"GPU": 2.0, "CPU": 0.5}] for g in groups)
        replies = [ask(url, "qwen", endpoint["api_key"]) for url in endpoint["base_urls"]]
        seen = [devices(r) for r in replies]
        # each server sees the two GPUs of its own group, and no GPU is shared
        assert all(len(d) == 2 for d in seen) and seen[0].isdisjoint(seen[1])
        assert seen[0] | seen[1] == {"0", "1", "2", "3"}
        assert all(r["flags"][r["flags"].index("--tensor-parallel-size") + 1] == "2" for r in replies)
        assert endpoint["max_in_flight"] == 2 * 64  # max_num_seqs per replica

        # kill replica 0: its successor goes into the same placement group, on the same GPUs
        ray.kill(runtime.replica_actors("qwen")[0], no_restart=True)
        fresh = runtime.ensure_healthy("qwen")["qwen"]
        after = placement(runtime, "qwen")
        assert [g["id"] for g in after] == [g["id"] for g in groups]
        assert len(ray.util.placement_group_table()) == 2  # no new group was made
        assert fresh["base_urls"][0] != endpoint["base_urls"][0] and fresh["base_urls"][1] == endpoint["base_urls"][1]
        assert devices(ask(fresh["base_urls"][0], "qwen", fresh["api_key"])) == seen[0]
        assert runtime.replica_status()["qwen"][0]["restarts"] == 1
    finally:
        runtime.stop()
    assert server_processes(model_dir) == []
    assert all(g["state"] == "REMOVED" for g in ray.util.placement_group_table().values())


def test_two_models_spread_over_two_gpu_nodes_with_tensor_and_pipeline_parallelism(
    gpu_cluster, model_dir, fake_python, tmp_path
):
    import ray

    cluster = gpu_cluster([(2, 0), (2, 2), (2, 2)])  # a CPU-only head, two 2-GPU workers
    gpu_nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("GPU")}
    assert len(gpu_nodes) == 2 and cluster.address
    tp = gpu_model(model_dir, fake_python, "tp2", tp=2)
    pp = gpu_model(model_dir, fake_python, "pp2", pp=2)
    runtime = ModelRuntime([tp, pp], log_dir=str(tmp_path / "logs"))
    endpoints = runtime.start()
    try:
        (g_tp,), (g_pp,) = placement(runtime, "tp2"), placement(runtime, "pp2")
        assert g_tp["bundles"] == g_pp["bundles"] == [{"GPU": 2.0, "CPU": 0.5}]
        # each 2-GPU replica fills one node: they cannot share one, and neither lands on the head
        assert g_tp["nodes"] | g_pp["nodes"] == gpu_nodes and g_tp["nodes"].isdisjoint(g_pp["nodes"])
        r_tp, r_pp = (ask(endpoints["tp2"]["base_urls"][0], "tp2", endpoints["tp2"]["api_key"]),
                      ask(endpoints["pp2"]["base_urls"][0], "pp2", endpoints["pp2"]["api_key"]))
        assert devices(r_tp) == devices(r_pp) == {"0", "1"}  # device ids are per node
        assert r_pp["flags"][r_pp["flags"].index("--pipeline-parallel-size") + 1] == "2"
        assert r_tp["flags"][r_tp["flags"].index("--tensor-parallel-size") + 1] == "2"
    finally:
        runtime.stop()
    assert server_processes(model_dir) == []


def test_a_sweep_that_cannot_fit_is_refused_with_the_numbers_before_anything_starts(
    gpu_cluster, model_dir, fake_python, tmp_path
):
    import ray

    gpu_cluster([(4, 4)])
    # alone each fits; together they need 6 GPUs of 4
    runtime = ModelRuntime(
        [gpu_model(model_dir, fake_python, "big", tp=4), gpu_model(model_dir, fake_python, "small", tp=2)],
        log_dir=str(tmp_path / "logs"),
    )
    with pytest.raises(PlacementError) as err:
        runtime.start()
    text = str(err.value)
    assert "big" in text and "small" in text and "6" in text and "4" in text
    wide = ModelRuntime([gpu_model(model_dir, fake_python, "wide", tp=8)], log_dir=str(tmp_path / "logs"))
    with pytest.raises(PlacementError, match="wide") as err:
        wide.start()
    assert "8" in str(err.value)
    assert ray.util.placement_group_table() == {} and server_processes(model_dir) == []  # nothing was started
    assert not (tmp_path / "logs").exists() or not any((tmp_path / "logs").iterdir())
