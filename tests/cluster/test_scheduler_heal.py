"""A model's replica restart happens off the scheduling loop: while one model's replicas are being
restarted (a vLLM restart takes about a minute), its units wait and every other model keeps running.

The scheduler is the class under test, on a real Ray; its rollout workers are stand-in actors with
the same submit / collect / update_endpoints interface whose episodes of model "a" fail with
infra_error until the workers have the healed endpoints.
"""

from __future__ import annotations

import threading
import time

import pytest

from spare_keeping import KeepsSpares
from toolsweep.evaluator.sweep import BenchmarkPlan, expand_units
from toolsweep.evaluator.types import EpisodeResult, Sampling, TerminationReason

HEAL_S = 3.0
B_DURING = 8  # episodes of model b that finish while model a restarts


class StandInWorker(KeepsSpares):
    """Spares (`submit`'s second list) wait as the real worker's do: each starts when an episode of its
    model ends here, or when promoted."""

    def __init__(self) -> None:
        super().__init__()
        self.queue: list[tuple[str, float]] = []
        self.generation = 0
        self.submits: list[tuple[str, float, int]] = []  # (model, time it started, endpoint generation)

    def _start(self, raw: list) -> None:
        from toolsweep.evaluator.encoded import UnitUnpacker

        now = time.time()
        self.submits.append((UnitUnpacker()(raw).model, now, self.generation))
        self.queue.append((raw, now + 0.05))


    def collect(self, timeout: float) -> list:
        from toolsweep.evaluator.encoded import UnitUnpacker, encode_result
        from toolsweep.evaluator.types import EpisodeResult, TerminationReason

        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.lock:
                ready = [q for q in self.queue if q[1] <= time.time()]
                if ready:
                    self.queue = [q for q in self.queue if q not in ready]
                    out = []
                    for raw, _ in ready:
                        unit = UnitUnpacker()(raw)
                        broken = unit.model == "a" and self.generation == 0
                        result = encode_result(EpisodeResult(
                            unit=unit, termination=TerminationReason.INFRA_ERROR if broken else TerminationReason.ANSWERED,
                            error="connection refused" if broken else None, node_id=str(time.time()),
                        ))
                        spare = next((s for s in self.spares if UnitUnpacker()(s[1]).model == unit.model), None)
                        if spare is not None:
                            self.spares.remove(spare)
                            self._start(spare[1])
                            result.started = spare[0]
                        out.append(result)
                    return out
            time.sleep(0.01)
        return []

    def update_endpoints(self, endpoints: dict) -> None:
        self.generation = endpoints["a"]["generation"]

    def info(self) -> dict:
        return {"submits": self.submits, "generation": self.generation}


@pytest.fixture()
def units():
    plan = [BenchmarkPlan("fake", {"small": [f"t{i}" for i in range(40)]}, [0])]
    return expand_units("heal", ["a", "b"], plan, Sampling())


@pytest.mark.parametrize("spares", [0, 16], ids=["no-spares", "spares"])
def test_a_restart_runs_beside_the_loop_and_holds_only_its_models_units(ray_local, units, spares):
    """With spares, those of the model under restart come back to the driver: at the workers they would
    start, and fail, each time an episode of the model ended."""
    ray = ray_local
    from toolsweep.cluster.scheduler import Scheduler

    import sys

    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import tests/
    worker_cls = ray.remote(StandInWorker)
    heals: list[tuple[str, float, float, int]] = []
    lock = threading.Lock()

    recorded: list[tuple[EpisodeResult, float]] = []

    def b_done() -> int:
        return sum(1 for r, _ in list(recorded) if r.unit.model == "b")

    def heal(model: str) -> dict:
        """A restart that lasts until model b has finished B_DURING more episodes (bounded): a loop that
        waited on the restart would finish none, and the restart would end at its bound."""
        began, b_before = time.time(), b_done()
        time.sleep(HEAL_S)  # restarting a replica
        bound = time.monotonic() + 120
        while b_done() - b_before < B_DURING and time.monotonic() < bound:
            time.sleep(0.01)
        with lock:
            heals.append((model, began, time.time(), b_done() - b_before))
        return {"a": {"generation": 1}}

    scheduler = Scheduler(
        lambda i: worker_cls.options(max_concurrency=8).remote(), 2,
        lambda results: recorded.extend((r, time.time()) for r in results),
        per_worker=4, per_model={"a": 4, "b": 4}, spares_per_worker=spares, on_infra_error=heal, log=lambda m: None,
    )
    stats = scheduler.run(list(units))
    assert stats.done == len(units) and not stats.gave_up
    assert [h[0] for h in heals] == ["a"], "one restart for the burst of failures of model a"
    _, began, ended, b_during = heals[0]
    assert b_during >= B_DURING  # model b kept running while model a's replica restarted
    a_results = [r for r, _ in recorded if r.unit.model == "a"]
    assert all(r.termination == TerminationReason.ANSWERED for r in a_results) and len(a_results) == 40
    for w in scheduler.workers:
        submits = ray.get(w.info.remote())["submits"]
        # no unit of model a went out while its restart was under way (a second's margin each side: a unit
        # sent before the restart began reaches a busy worker late)
        assert not [t for m, t, _ in submits if m == "a" and began + 1.0 < t < ended - 1.0]
    assert stats.requeued >= 4  # the failed attempts were retried, never recorded


def test_replica_restarts_are_reported_per_model_on_the_sweeps_run():
    from toolsweep.cluster.record import _infrastructure_metrics

    metrics = _infrastructure_metrics({"replica_restarts_by_model": {"qwen": 2, "judge": 0},
                                       "units_in_failures_jsonl": 0})
    assert metrics["infra/qwen/replica_restarts"] == 2.0 and metrics["infra/judge/replica_restarts"] == 0.0
