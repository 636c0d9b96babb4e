"""Spares: units queued at a rollout worker beyond its running episodes, each started there the moment
an episode of its model ends, with no round trip through the driver. They must keep every bound the
driver keeps (a model's in-flight cap, a worker's episodes), lose and double nothing, and never leave a
unit waiting behind a long episode while a slot idles at the end of a sweep.

The worker's side is the plain class; the scheduler runs on a real Ray with real rollout workers and a
benchmark whose episodes stamp when they ran (tests/fakes/stamp_bench.py)."""

from __future__ import annotations

import asyncio
import json
import time

from spare_keeping import KeepsSpares
from toolsweep.actors.rollout_worker import RolloutWorker
from toolsweep.evaluator.encoded import pack_unit
from toolsweep.evaluator.registry import register_benchmark
from toolsweep.evaluator.types import WorkUnit
from toolsweep.models.config import ScriptedModelConfig

STAMPS = "stamp_bench:StampBench"
register_benchmark("stamps", STAMPS)
MODELS = {m: ScriptedModelConfig(name=m, kind="scripted", policy="waiting") for m in ("a", "b")}


def _unit(model: str, task: str) -> WorkUnit:
    return WorkUnit(sweep="spares", model=model, benchmark="stamps", setting="plain", task_id=task, seed=0)


def _spare(token: str, model: str, task: str) -> list:
    return [token, *pack_unit(_unit(model, task))]


def _row(result) -> dict:
    row = json.loads(result.row_json)
    return {**row, **json.loads(row["metrics"])}


async def _collect(worker: RolloutWorker, n: int, timeout_s: float = 10.0) -> list:
    got: list = []
    deadline = time.monotonic() + timeout_s
    while len(got) < n and time.monotonic() < deadline:
        got += await worker.collect(0.2)
    return got


def _plain_worker(tasks: list[str]) -> RolloutWorker:
    return RolloutWorker("w0", MODELS, {"stamps": {"tasks": tasks}}, extra_benchmarks={"stamps": STAMPS},
                         offload_env=False)


def test_a_spare_starts_only_in_a_slot_its_model_frees_and_that_episodes_result_names_it():
    worker = _plain_worker(["t1", "t2", "t3"])

    async def play():
        await worker.submit([pack_unit(_unit("a", "t1"))], [_spare("a@1", "a", "t2"), _spare("b@2", "b", "t3")])
        played = await _collect(worker, 2)
        idle = await worker.collect(0.3)  # no episode of b ended here: its spare waits
        back = worker.take_back(["a@1", "b@2"])  # a@1 has run: only b@2 comes back
        worker.promote(["b@2"])  # taken back: there is nothing to start
        after = await worker.collect(0.3)
        return played, idle, back, after

    played, idle, back, after = asyncio.run(play())
    started = {_row(r)["task_id"]: r.started for r in played}
    assert started == {"t1": "a@1", "t2": None}
    assert idle == [] and back == ["b@2"] and after == []


def test_a_slot_freed_by_infrastructure_goes_back_to_the_driver_not_to_a_spare():
    """A dead replica fails every episode of its model within milliseconds: spares started in those
    slots would each fail too, and spend an attempt, before the driver could check the model."""
    worker = _plain_worker(["broken-1", "t2"])

    async def play():
        await worker.submit([pack_unit(_unit("a", "broken-1"))], [_spare("a@1", "a", "t2")])
        failed = await _collect(worker, 1)
        idle = await worker.collect(0.3)
        return failed, idle, worker.take_back(["a@1"])

    failed, idle, back = asyncio.run(play())
    assert [(r.termination.value, r.started) for r in failed] == [("infra_error", None)]
    assert idle == [] and back == ["a@1"]


def test_a_promoted_spare_starts_at_once_even_when_the_promotion_overtook_it():
    """Ray may run an async actor's calls out of order: a `promote` can arrive before the `submit` that
    brings its spare, which must then start on arrival, or the driver would wait for it forever."""
    worker = _plain_worker(["t1", "t2"])

    async def play():
        await worker.submit([], [_spare("b@1", "b", "t1")])
        worker.promote(["b@1"])
        first = await _collect(worker, 1, timeout_s=2.0)
        worker.promote(["b@2"])
        await worker.submit([], [_spare("b@2", "b", "t2")])
        second = await _collect(worker, 1, timeout_s=2.0)
        return first, second

    first, second = asyncio.run(play())
    assert [_row(r)["task_id"] for r in first] == ["t1"]
    assert [_row(r)["task_id"] for r in second] == ["t2"]


# -- the scheduler with spares, on a real Ray ------------------------------------------------------


def _run(ray, units: list[WorkUnit], tasks: list[str], *, workers: int, per_worker: int, spares: int,
         per_model: dict[str, int] | None = None):
    from toolsweep.actors.rollout_worker import RemoteRolloutWorker
    from toolsweep.cluster.scheduler import Scheduler

    def make_worker(i: int):
        return RemoteRolloutWorker.options(max_concurrency=10_000).remote(
            f"worker-{i}", MODELS, {"stamps": {"tasks": tasks}}, {}, {"stamps": STAMPS}, 60.0, False)

    recorded: list = []
    scheduler = Scheduler(make_worker, workers, recorded.extend, per_worker=per_worker, per_model=per_model,
                          spares_per_worker=spares, log=lambda m: None)
    ray.get([w.warmup.remote({"stamps": ["plain"]}) for w in scheduler.workers])
    stats = scheduler.run(units)
    for w in scheduler.workers:
        ray.kill(w)
    return stats, recorded


def _most_at_once(rows: list[dict]) -> int:
    """The most episodes whose [reset, score] spans overlap at one moment."""
    events = sorted([(r["reset_at"], 1) for r in rows] + [(r["scored_at"], -1) for r in rows])
    most = now = 0
    for _, step in events:  # at equal times an end sorts before a start
        now += step
        most = max(most, now)
    return most


def test_spares_keep_a_models_cap_and_a_workers_bound_and_lose_nothing(ray_local):
    """Model a is capped at 2 and model b is not; 3 episodes run per worker and 3 spares wait at each.
    Spares of a wait at workers where episodes of b end: started there, they would break a's cap."""
    tasks = [f"mid{i}" for i in range(20)] + [f"t{i}" for i in range(20)]
    units = [u for i in range(20) for u in (_unit("a", f"mid{i}"), _unit("b", f"t{i}"))]
    stats, recorded = _run(ray_local, units, tasks, workers=2, per_worker=3, spares=3, per_model={"a": 2})

    rows = [_row(r) for r in recorded]
    assert stats.done == len(units) and sorted(r["unit_id"] for r in rows) == sorted(u.unit_id for u in units)
    assert all(r["termination"] == "answered" for r in rows)
    assert _most_at_once([r for r in rows if r["model"] == "a"]) == 2  # the cap, reached and never passed
    for worker in ("worker-0", "worker-1"):
        assert _most_at_once([r for r in rows if r["worker_id"] == worker]) <= 3
    handed_over = sum(r.started is not None for r in recorded)
    assert handed_over >= 10, f"only {handed_over} episodes started from a spare"


def test_at_the_end_a_spare_behind_a_long_episode_runs_in_a_slot_that_frees_elsewhere(ray_local):
    """One slot per worker, one spare each. The first unit is slow (3 s) and the spare queued behind it
    on worker 0 would wait for it; when worker 1 runs out of work, the spare is taken back and runs there."""
    tasks = ["slow", "f1", "f2", "f3", "f4", "f5"]
    units = [_unit("a", t) for t in tasks]
    stats, recorded = _run(ray_local, units, tasks, workers=2, per_worker=1, spares=1)

    rows = {r["task_id"]: r for r in map(_row, recorded)}
    assert stats.done == len(units) and len(recorded) == len(units)
    assert rows["slow"]["worker_id"] == "worker-0"
    assert rows["f2"]["worker_id"] == "worker-1", "the spare waited behind the slow episode"
    assert rows["f2"]["scored_at"] < rows["slow"]["scored_at"]  # it ran while the slow episode still did


class ReorderingWorker(KeepsSpares):
    """A stand-in rollout worker (the real one's `submit` / `collect` / `promote` / `take_back`) whose
    answers come in the order two waiting `collect` calls may reach the driver: the result of a spare
    before the answer that says it started. Each episode takes 0.05 s."""

    def __init__(self) -> None:
        super().__init__()
        self.running: list[tuple[list, float]] = []
        self.later: list = []  # answers held until the spare they name has been handed over
        self.handed_over: set[str] = set()

    def _start(self, raw: list) -> None:
        self.running.append((raw, time.time() + 0.05))

    def collect(self, timeout_s: float) -> list:
        from toolsweep.evaluator.encoded import UnitUnpacker, encode_result
        from toolsweep.evaluator.types import EpisodeResult, TerminationReason

        deadline = time.time() + timeout_s
        while time.time() < deadline:
            with self.lock:
                out = [r for r in self.later if r.started.rpartition("@")[0] in self.handed_over]
                self.later = [r for r in self.later if r not in out]
                for raw, ends in [r for r in self.running if r[1] <= time.time()]:
                    self.running.remove((raw, ends))
                    unit = UnitUnpacker()(raw)
                    result = encode_result(EpisodeResult(unit=unit, termination=TerminationReason.ANSWERED))
                    if self.spares:
                        token, spare = self.spares.pop(0)
                        result.started = token
                        self.later.append(result)  # after the spare's own result
                        self.running.append((spare, time.time()))  # it ends at once
                    else:
                        out.append(result)
                if out:
                    self.handed_over.update(r.unit_id for r in out)
                    return out
            time.sleep(0.005)
        return []

    def info(self) -> dict:
        return {}


def test_a_spares_result_that_overtakes_the_answer_naming_its_start_is_recorded_and_ends_the_sweep(ray_local):
    """Recorded once, and the sweep ends: the spare's result is its proof of having run."""
    import sys
    import threading

    from ray import cloudpickle

    from toolsweep.cluster.scheduler import Scheduler

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the stand-in lives in tests/
    remote = ray_local.remote(ReorderingWorker)
    units = [_unit("a", f"t{i}") for i in range(8)]
    recorded: list = []
    scheduler = Scheduler(lambda i: remote.options(max_concurrency=4).remote(), 1, recorded.extend,
                          per_worker=2, spares_per_worker=2, log=lambda m: None)
    runner = threading.Thread(target=lambda: recorded.append(scheduler.run(units)), daemon=True)
    runner.start()
    runner.join(30)
    assert not runner.is_alive(), "the sweep waited for a spare the driver thought was still running"
    stats, results = recorded[-1], recorded[:-1]
    assert stats.done == len(units) and sorted(r.unit_id for r in results) == sorted(u.unit_id for u in units)
    assert any(r.started for r in results), "no answer named a spare's start"
