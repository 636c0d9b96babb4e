"""A warmed-up rollout worker keeps Python's cycle collector from pausing its episodes: everything
built before the first episode is frozen out of full collections, and young collections are rare."""

from __future__ import annotations

import asyncio
import gc

from toolsweep.actors.rollout_worker import RolloutWorker


def test_warmup_freezes_what_it_built_and_collects_the_young_generation_rarely():
    threshold = gc.get_threshold()
    gc.unfreeze()
    try:
        worker = RolloutWorker("w0", {}, {})
        long_lived = [[i] for i in range(1000)]  # stands for a benchmark's world, built before episodes
        asyncio.run(worker.warmup({}))
        assert gc.get_freeze_count() >= len(long_lived)  # never walked by a full collection again
        assert gc.get_threshold()[0] == 20_000 and gc.get_threshold()[1:] == threshold[1:]
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def test_a_worker_started_in_place_of_a_dead_one_is_warmed_up_like_the_first(ray_local):
    """The replacement builds its benchmarks and settles its collector as the first workers did, instead of
    building them inside its first episode and walking them in every full collection."""
    from toolsweep.actors.rollout_worker import RemoteRolloutWorker
    from toolsweep.cluster.scheduler import Scheduler
    from toolsweep.evaluator.registry import register_benchmark
    from toolsweep.evaluator.types import WorkUnit
    from toolsweep.models.config import ScriptedModelConfig

    register_benchmark("stamps", "stamp_bench:StampBench")
    tasks = [f"mid{i}" for i in range(24)]
    models = {"a": ScriptedModelConfig(name="a", kind="scripted", policy="waiting")}

    def make_worker(i: int):
        return RemoteRolloutWorker.options(max_concurrency=10_000).remote(
            f"worker-{i}", models, {"stamps": {"tasks": tasks}}, {}, {"stamps": "stamp_bench:StampBench"}, 60.0, False)

    killed: list = []

    def record(results: list) -> None:
        if not killed:  # the first results in: worker 0 dies with episodes in flight
            killed.append(scheduler.workers[0])
            ray_local.kill(scheduler.workers[0], no_restart=True)

    scheduler = Scheduler(make_worker, 2, record, per_worker=2, spares_per_worker=2, log=lambda m: None)
    scheduler.warmup_plan = {"stamps": ["plain"]}
    ray_local.get([w.warmup.remote(scheduler.warmup_plan) for w in scheduler.workers])
    units = [WorkUnit(sweep="gc", model="a", benchmark="stamps", setting="plain", task_id=t, seed=0) for t in tasks]
    stats = scheduler.run(units)
    try:
        assert stats.worker_restarts == 1 and stats.done == len(units)
        replacement = scheduler.workers[0]
        assert replacement is not killed[0]
        frozen, young = ray_local.get(replacement.__ray_call__.remote(
            lambda self: (__import__("gc").get_freeze_count(), __import__("gc").get_threshold()[0])))
        assert frozen > 1000 and young == 20_000
    finally:
        for w in scheduler.workers:
            ray_local.kill(w)
