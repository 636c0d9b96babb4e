"""A rollout worker that hosts a model in-process runs at the ordinary niceness: at Ray's default for
workers (15) a transformers model got about 1/28 of the CPU share of any ordinary process beside it, and
on a saturated machine 0 of 16 SmolLM2 episodes finished (bench/hf_load.py)."""

from __future__ import annotations

import os

from toolsweep.actors.rollout_worker import RemoteRolloutWorker, worker_options
from toolsweep.models.config import HFModelConfig, ScriptedModelConfig


def _niceness_of_worker(ray, models: list) -> int:
    worker = RemoteRolloutWorker.options(**worker_options(models)).remote("nice", {m.name: m for m in models}, {})
    try:
        pid = ray.get(worker.info.remote(), timeout=300)["pid"]
        return os.getpriority(os.PRIO_PROCESS, pid)
    finally:
        ray.kill(worker)


def test_a_worker_hosting_a_transformers_model_runs_at_niceness_0_others_at_rays_default(ray_local):
    hf = HFModelConfig(name="hf", path="/nonexistent/model")  # never loaded: the worker runs no episode
    scripted = ScriptedModelConfig(name="oracle", kind="scripted", policy="oracle")
    # Ray's niceness is added to what its processes inherit from this one: 0, unless the tests themselves
    # run under `nice`, when "ordinary" is this process's own niceness.
    ordinary = os.getpriority(os.PRIO_PROCESS, 0)
    assert _niceness_of_worker(ray_local, [scripted, hf]) == ordinary
    assert _niceness_of_worker(ray_local, [scripted]) == min(19, ordinary + 15)  # Ray's default otherwise
