"""The rollout worker: a CPU actor that hosts environment replicas and runs many episodes at once.

Each `run` call plays one unit on the actor's event loop; blocking environment work goes to a
thread (see `run_episode(offload=True)`), so hundreds of episodes waiting on model replies share
one process. Benchmarks are built once per process (the registry caches them).
"""

from __future__ import annotations

import asyncio
import os
import socket
import traceback
from typing import Any

import ray

from toolsweep.evaluator.episode import run_episode
from toolsweep.evaluator.protocols import InfraError
from toolsweep.evaluator.registry import get_benchmark, register_benchmark
from toolsweep.evaluator.types import EpisodeResult, TerminationReason, WorkUnit
from toolsweep.models.factory import build_policy


class RolloutWorker:
    """Plain class (testable without Ray); `RemoteRolloutWorker` is its Ray actor."""

    def __init__(
        self,
        worker_id: str,
        models: dict[str, Any],
        benchmark_options: dict[str, dict[str, Any]],
        endpoints: dict[str, Any] | None = None,
        extra_benchmarks: dict[str, str] | None = None,
        timeout_s: float = 600.0,
        offload_env: bool = True,
    ) -> None:
        for name, target in (extra_benchmarks or {}).items():
            register_benchmark(name, target)
        self.worker_id = worker_id
        self.models = models
        self.benchmark_options = benchmark_options
        self.endpoints = endpoints or {}
        self.timeout_s = timeout_s
        self.offload_env = offload_env
        try:
            self.node_id = ray.get_runtime_context().get_node_id()
        except Exception:  # noqa: BLE001 - outside Ray (unit tests)
            self.node_id = socket.gethostname()
        self._build_lock = asyncio.Lock()

    async def _benchmark(self, name: str):
        # The first build of a benchmark can take seconds (a world, a dataset): do it once, off the loop.
        async with self._build_lock:
            return await asyncio.to_thread(get_benchmark, name, self.benchmark_options.get(name, {}))

    def update_endpoints(self, endpoints: dict[str, Any]) -> None:
        """New model endpoints after a replica restart."""
        self.endpoints = endpoints

    async def run(self, unit: WorkUnit) -> EpisodeResult:
        """Play one unit. Never raises: infrastructure failures come back as `infra_error`."""
        try:
            bench = await self._benchmark(unit.benchmark)
            env = await asyncio.to_thread(bench.make_env, unit.task_id, unit.setting, unit.seed)
            policy = build_policy(self.models[unit.model], bench, env, unit, self.endpoints)
            result = await run_episode(
                env,
                policy,
                unit,
                max_turns=bench.max_turns(unit.setting),
                offload=self.offload_env,
                timeout_s=self.timeout_s,
            )
        except InfraError as exc:
            result = EpisodeResult(unit=unit, termination=TerminationReason.INFRA_ERROR, error=str(exc))
        except Exception:  # noqa: BLE001 - building the env or policy failed: the environment's fault
            result = EpisodeResult(
                unit=unit, termination=TerminationReason.ENV_ERROR, error=traceback.format_exc(limit=8)
            )
        result.node_id = self.node_id
        result.worker_id = self.worker_id
        return result

    def info(self) -> dict[str, Any]:
        return {"worker_id": self.worker_id, "node_id": self.node_id, "pid": os.getpid()}


RemoteRolloutWorker = ray.remote(RolloutWorker)
