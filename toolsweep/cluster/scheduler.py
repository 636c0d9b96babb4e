"""The scheduler: leases units to rollout workers and keeps enough episodes in flight.

Bounded in-flight units per worker and per model (so every model replica sees large continuous
batches without drowning), requeue of the units of a dead worker, `infra_error` and `timeout` (a
wall-clock expiry) retried up to `max_attempts` and never recorded as a result, a stop at the first
`config_error` (the endpoint refuses the configuration), a progress bar, and a clean stop on Ctrl-C.
After an `infra_error` (or a worker's report that a request found nothing answering) the model's
replicas are checked and restarted off the scheduling loop (a vLLM restart takes about a minute): that
model's units wait, and once its endpoint is found down its running episodes stop and wait too, so
every other model keeps running in all the slots.
Units go out in one `submit` call per worker and come back through one long-polling `collect`
per worker: an actor call per episode cost a measurable share of the sweep (bench/scheduler.py).
No benchmark name appears here.
"""

from __future__ import annotations

import gc
import time
from collections import Counter, deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.exceptions import ActorDiedError, ActorUnavailableError, OutOfMemoryError, RayActorError, WorkerCrashedError

from toolsweep.cluster.endpoint_health import OutageVerdict
from toolsweep.cluster.progress import rate_limit_postfix
from toolsweep.evaluator.encoded import EncodedResult, encode_failure, pack_unit
from toolsweep.evaluator.types import TerminationReason, WorkUnit
from toolsweep.models.rate_limit import read_limit_notice

_DEAD_ACTOR_ERRORS = (RayActorError, ActorDiedError, ActorUnavailableError, WorkerCrashedError, OutOfMemoryError)


def death_cause(exc: BaseException) -> str:
    """Why a rollout worker died, as the log and failures.jsonl say it."""
    if isinstance(exc, OutOfMemoryError):
        return "killed by Ray's memory monitor: the machine ran low on memory"
    return type(exc).__name__
POLL_S = 0.5
"""How long a worker's `collect` waits for a finished episode before answering empty (keeps the
driver responsive to Ctrl-C and to dead workers)."""
SUBMIT_CHUNK = 128
"""Units per `submit` when a lease fills many slots at once (a sweep's first wave): a worker starts
the first 128 episodes while the driver leases the rest, instead of waiting for all 512 (at K = 1,024,
0.84 -> 0.86 ideal/actual, bench/scheduler.py; 64 gained nothing)."""
TAKE_BACK_S = 10.0
"""How long the driver waits for a worker to return spares (a live worker answers in milliseconds)."""
POLLS_PER_WORKER = 2
"""`collect` calls kept waiting at each worker: while the driver reads and records one answer, the
next is already at the worker, ready to answer as soon as an episode finishes. With one, a wave's
last results waited a whole round trip behind the answer before them (bench/scheduler.py)."""


@contextmanager
def frozen_heap() -> Iterator[None]:
    """What the driver holds before the scheduler runs (modules, MLflow's client, the plan) kept out of
    the garbage collector's full collections while it runs, as the workers keep theirs: with MLflow on,
    a sweep's driver held about 400,000 objects and a full collection paused a lease for 205-235 ms
    (bench/gc_pause.py shows the mechanism: 85 ms for the imports alone, under 0.01 ms frozen).
    Unfrozen after the run, so what it leaves can be freed."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the driver by the CLI's handler: handled like Ctrl-C (everything finished is kept).
    Ray may re-raise it as a plain KeyboardInterrupt from inside a blocking call, so the handler also
    sets `SIGTERM_SEEN`."""


SIGTERM_SEEN: list[bool] = []


@dataclass
class SchedulerStats:
    done: int = 0
    requeued: int = 0
    worker_restarts: int = 0
    gave_up: list[EncodedResult] = field(default_factory=list)
    interrupted: bool = False
    terminated: bool = False  # the interrupt was SIGTERM
    config_error: str | None = None  # the endpoint refused the configuration: the run stopped
    # wall-clock expiries (retried, never scored) per "model|benchmark|setting"
    timeouts_by_cell: Counter = field(default_factory=Counter)
    terminations: Counter = field(default_factory=Counter)
    tokens: int = 0
    wall_s: float = 0.0
    outages: list[str] = field(default_factory=list)  # endpoint outages met, one line each


@dataclass(slots=True)
class _Lease:
    unit: WorkUnit
    attempts: int
    worker: int
    spare: bool = False  # queued at the worker, not yet running (see `Scheduler.spares_per_worker`)
    token: str = ""  # a spare's name at its worker, never reused (a retried unit is a new lease)
    asked_back: bool = False  # the driver asked the worker to return it (once only)
    since: float = 0.0  # when it was leased, or for a spare when it started (the progress heartbeat's oldest age)


class _Slots:
    """What runs where, as the driver counts it: episodes running per worker and per model (the
    bounds), and the spares queued at each worker. A spare counts against no bound until it runs:
    its worker starts it only in the slot an episode of its model frees (so a model never has more
    running than its cap), or when the driver promotes it into a free slot."""

    def __init__(self, n_workers: int) -> None:
        self.running = [0] * n_workers
        self.models: Counter = Counter()
        self.spares: list[dict[str, _Lease]] = [{} for _ in range(n_workers)]  # oldest first

    def take(self, unit_id: str, lease: _Lease) -> None:
        if lease.spare:
            self.spares[lease.worker][unit_id] = lease
        else:
            self.running[lease.worker] += 1
            self.models[lease.unit.model] += 1

    def release(self, unit_id: str, lease: _Lease) -> None:
        if lease.spare:
            del self.spares[lease.worker][unit_id]
        else:
            self.running[lease.worker] -= 1
            self.models[lease.unit.model] -= 1

    def run_spare(self, unit_id: str, lease: _Lease) -> None:
        """A spare started: it now holds a slot of its worker and of its model."""
        self.release(unit_id, lease)
        lease.spare = False
        lease.since = time.monotonic()
        self.take(unit_id, lease)


class Scheduler:
    """Runs units on a pool of rollout workers.

    `make_worker(i)` creates (or re-creates, after a death) worker i; `record(results)` is the
    result sink; `on_infra_error(model)` lets the model runtime restart a dead replica and returns
    fresh endpoints for the workers (or None). Up to `spares_per_worker` units wait at each worker
    beyond its `per_worker` running episodes, each started there the moment an episode of its model
    ends (`RolloutWorker.submit`).
    """

    def __init__(
        self,
        make_worker: Callable[[int], Any],
        n_workers: int,
        record: Callable[[list[EncodedResult]], Any],
        *,
        per_worker: int = 64,
        per_model: dict[str, int] | None = None,
        spares_per_worker: int = 0,
        max_attempts: int = 3,
        on_infra_error: Callable[[str], dict[str, Any] | None] | None = None,
        wait_endpoint: Callable[[str, Callable[[], None]], OutageVerdict | None] | None = None,
        progress: Any = None,
        log: Callable[[str], None] = print,
    ) -> None:
        self.make_worker = make_worker
        self.workers = [make_worker(i) for i in range(n_workers)]
        self.record = record
        self.per_worker = per_worker
        self.per_model = per_model or {}
        self.spares_per_worker = spares_per_worker
        self._spare_seq = 0
        # what each worker builds before its first episode ({benchmark: settings}); the driver sets it
        self.warmup_plan: dict[str, list[str]] | None = None
        self.max_attempts = max_attempts
        self.on_infra_error = on_infra_error
        self.wait_endpoint = wait_endpoint
        self.progress = progress
        self.log = log
        # model -> its replicas being checked/restarted in the background (its units wait meanwhile)
        self._healing: dict[str, Future] = {}
        self._heal_pool: ThreadPoolExecutor | None = None
        # model -> its units that failed on infrastructure while it was checked: the check's verdict
        # decides whether they spend an attempt (`endpoint_health`)
        self._parked: dict[str, list[tuple[_Lease, EncodedResult]]] = {}
        # model -> its units drawn while it is checked: they wait here, outside the lease look-ahead, so
        # a model whose endpoint is down never stops the draw of other models' units (`_lease`)
        self._held: dict[str, deque[tuple[WorkUnit, int]]] = {}
        self._abandoned: dict[str, str] = {}  # model -> why its units are given up (an outage past its budget)
        # models whose check found their endpoint down (set from the check's thread): their running
        # episodes are stopped at the workers and wait with the model's other units (`_park_running`)
        self._down: set[str] = set()
        self._parked_running: Counter = Counter()  # model -> running episodes stopped during its outage
        # model -> worker -> its requests in flight, as the worker's rate limit last set them (the progress
        # line shows them: being rate limited is visible where the run is watched)
        self._rate_limits: dict[str, dict[int, int]] = {}

    def _pick_worker(self, load: list[int]) -> int | None:
        """The least loaded worker (the first of equals), if it has a free slot."""
        least = min(load)
        return load.index(least) if least < self.per_worker else None

    def run(self, units: Iterable[WorkUnit]) -> SchedulerStats:
        """Run `units`, which may be a lazy iterable: units are drawn from it as slots free up (with a
        bounded look-ahead past units whose model is at its cap), so the driver never holds more than
        what is in flight and waiting."""
        stats = self._stats = SchedulerStats()
        start = time.monotonic()
        self._down.clear()  # a verdict of an earlier run (a wave before) stops nothing in this one
        self._parked_running.clear()
        self._source: Iterator[WorkUnit] | None = iter(units)
        pending: deque[tuple[WorkUnit, int]] = deque()  # retries, and units passed over for a capped model
        in_flight: dict[str, _Lease] = {}
        slots = _Slots(len(self.workers))
        # Long polls at every worker: the driver blocks on all of them at once.
        polls: dict[Any, tuple[int, Any]] = {}  # ref -> (worker index, the handle it was sent to)
        for w in range(len(self.workers)):
            self._top_up_polls(polls, w)
        finished: list[EncodedResult] = []
        try:
            while pending or in_flight or finished or self._source is not None or self._healing or self._parked:
                if stats.config_error is not None:
                    # every unit of the model would fail the same way: stop, drop what is in flight
                    pending.clear()
                    self._source = None
                    in_flight.clear()
                    slots = _Slots(len(self.workers))
                    if finished:
                        self._record(finished, stats, start)
                    break
                self._finish_heals(pending, stats)
                self._park_running(in_flight, slots)
                pending = self._lease(pending, in_flight, slots)
                self._heartbeat(in_flight, stats)
                # Record only after the freed slots are leased again: the workers never wait on
                # the driver's bookkeeping.
                if finished:
                    self._record(finished, stats, start)
                    finished = []
                if not in_flight:
                    if self._healing:  # only units of a healing model are left: wait for it
                        wait_futures(list(self._healing.values()), timeout=1.0, return_when=FIRST_COMPLETED)
                    elif pending and self._source is None:
                        # nothing can lease and nothing will finish: every model left is capped at 0
                        raise RuntimeError("units are left that no model slot can take (a model's in-flight cap is 0?)")
                    continue
                ready, _ = ray.wait(list(polls), num_returns=1, timeout=1.0)
                for ref in ready:
                    w, handle = polls.pop(ref)
                    if handle is not self.workers[w]:
                        continue  # a poll of a worker already replaced, whose units were requeued then
                    try:
                        raw = ray.get(ref)
                    except _DEAD_ACTOR_ERRORS as exc:
                        self._replace_dead_worker(w, exc, stats)
                        for unit_id, lease in list(in_flight.items()):
                            if lease.worker == w:
                                slots.release(unit_id, in_flight.pop(unit_id))
                                if lease.spare:  # never started: no attempt spent
                                    pending.appendleft((lease.unit, lease.attempts))
                                else:
                                    self._retry(lease, pending, stats, f"rollout worker died ({death_cause(exc)})")
                        self._top_up_polls(polls, w)
                        continue
                    self._top_up_polls(polls, w)
                    for model in getattr(raw, "unreachable", ()):
                        self._on_unreachable(model, pending, in_flight, slots)
                    for line in getattr(raw, "notices", ()):
                        self.log(line)  # e.g. a model's requests in flight changed by its rate limit
                        limit = read_limit_notice(line)
                        if limit is not None:
                            self._rate_limits.setdefault(limit[0], {})[w] = limit[1]
                    for result in raw:  # EncodedResult: the row as the worker encoded it
                        if result.started is not None:  # a spare took this episode's slot at the worker
                            unit_id = result.started.rpartition("@")[0]
                            spare = in_flight.get(unit_id)
                            if spare is not None and spare.spare and spare.token == result.started:
                                slots.run_spare(unit_id, spare)
                        lease = in_flight.get(result.unit_id)
                        if lease is None or lease.worker != w:
                            continue  # a unit already requeued elsewhere; the sink keeps one copy
                        if lease.spare:  # it ran: the answer naming its start came after this one
                            slots.run_spare(result.unit_id, lease)
                        slots.release(result.unit_id, in_flight.pop(result.unit_id))
                        result.unit = lease.unit
                        if result.termination == TerminationReason.CONFIG_ERROR:
                            stats.config_error = stats.config_error or result.error or "configuration error"
                            continue
                        if result.termination == TerminationReason.TIMEOUT:
                            u = lease.unit
                            stats.timeouts_by_cell[f"{u.model}|{u.benchmark}|{u.setting}"] += 1
                            self._retry(lease, pending, stats, result.error or "timeout", result)
                            continue
                        if result.termination == TerminationReason.INFRA_ERROR:
                            self._on_infra_error(lease, result, pending, in_flight, slots, stats)
                            continue
                        result.attempts = lease.attempts
                        finished.append(result)
        except KeyboardInterrupt as exc:
            stats.interrupted = True
            stats.terminated = isinstance(exc, Terminated) or bool(SIGTERM_SEEN)
            if finished:
                self._record(finished, stats, start)  # finished episodes are kept, always
            queued = sum(lease.spare for lease in in_flight.values())
            self.log(
                f"\ninterrupted: {stats.done} episodes of this run are saved, {len(in_flight) - queued} in flight "
                f"were dropped{f' ({queued} more had not started)' if queued else ''}; run the same command "
                "again to finish the rest"
            )
        for ref in polls:
            ray.cancel(ref)
        if self._heal_pool is not None:
            self._heal_pool.shutdown(wait=True, cancel_futures=True)  # a restart under way completes
            self._heal_pool = None
            self._healing.clear()
        stats.wall_s = time.monotonic() - start
        return stats

    def _heartbeat(self, in_flight: dict[str, _Lease], stats: SchedulerStats) -> None:
        """Off a terminal, a progress line also when no unit finished for a while (`LogProgress.heartbeat`):
        what runs, since when, and which models' endpoints are being checked. Gathered only when due."""
        due = getattr(self.progress, "due", None)
        if due is None or not due():
            return
        started = [lease.since for lease in in_flight.values() if not lease.spare]
        status: dict[str, Any] = {"running": len(started), "gave_up": len(stats.gave_up),
                                  "checking": sorted(self._healing), "abandoned": sorted(self._abandoned)}
        if started:
            status["oldest_s"] = time.monotonic() - min(started)
        self.progress.heartbeat(status)

    def _top_up_polls(self, polls: dict[Any, tuple[int, Any]], w: int) -> None:
        """Keep POLLS_PER_WORKER `collect` calls waiting at worker w (its current handle)."""
        handle = self.workers[w]
        waiting = sum(1 for i, h in polls.values() if i == w and h is handle)
        for _ in range(POLLS_PER_WORKER - waiting):
            polls[handle.collect.remote(POLL_S)] = (w, handle)

    def _on_infra_error(self, lease: _Lease, result: EncodedResult, pending: deque[tuple[WorkUnit, int]],
                        in_flight: dict[str, _Lease], slots: _Slots, stats: SchedulerStats) -> None:
        """A unit failed on infrastructure: check its model (restart dead replicas, probe the endpoint)
        and hold the unit until the check says whose failure it was."""
        model = lease.unit.model
        reason = result.error or "infra_error"
        if model in self._abandoned:
            self._give_up(lease.unit, lease.attempts, f"{self._abandoned[model]} (first: {reason})", stats, result)
            return
        if self._start_heal(model):
            self._take_back(pending, in_flight, slots, lambda ls: ls.unit.model == model)
        if model in self._healing:
            self._parked.setdefault(model, []).append((lease, result))
        else:
            self._retry(lease, pending, stats, reason, result)

    def _on_unreachable(self, model: str, pending: deque[tuple[WorkUnit, int]], in_flight: dict[str, _Lease],
                        slots: _Slots) -> None:
        """A request of `model` found nothing answering (its retries still run): check the model now, as
        after a failed unit, so that if its endpoint is down its episodes give back their slots at once."""
        if (self.per_model and model not in self.per_model) or model in self._abandoned:
            return  # a helper (its users' units fail and are checked as usual), or given up already
        if self._start_heal(model):
            self._take_back(pending, in_flight, slots, lambda ls: ls.unit.model == model)

    def _park_running(self, in_flight: dict[str, _Lease], slots: _Slots) -> None:
        """The running episodes of a model whose endpoint was found down stop at their workers (`park`) and
        wait with the model's other units, no attempt spent: their slots go to other models until the
        endpoint answers (else each held its slot until its own retries ran out)."""
        while self._down:
            model = self._down.pop()
            if model not in self._healing:
                continue  # its check ended meanwhile
            stopped = 0
            for w in sorted({lease.worker for lease in in_flight.values() if lease.unit.model == model}):
                try:
                    unit_ids = ray.get(self.workers[w].park.remote(model), timeout=TAKE_BACK_S)
                except Exception:  # noqa: BLE001 - dead or stuck: its units come back with its death, or fail
                    continue
                for unit_id in unit_ids:
                    lease = in_flight.get(unit_id)
                    if lease is None or lease.worker != w:
                        continue
                    slots.release(unit_id, in_flight.pop(unit_id))
                    self._held.setdefault(model, deque()).append((lease.unit, lease.attempts))
                    stopped += 1
            if stopped:
                self._parked_running[model] += stopped
                self.log(f"model {model}: its endpoint is down; {stopped} of its running episodes stop and wait "
                         "with its other units (no attempt spent), their slots go to other models")

    def _start_heal(self, model: str) -> bool:
        """Check (and restart) the model's replicas and probe its endpoint in the background, once at a
        time per model; True if a check started (its spares then come back from the workers, to wait
        for it in the driver)."""
        if (self.on_infra_error is None and self.wait_endpoint is None) or model in self._healing:
            return False
        if self._heal_pool is None:
            self._heal_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="toolsweep-heal")
        self._healing[model] = self._heal_pool.submit(self._check_model, model)
        return True

    def _check_model(self, model: str) -> tuple[dict[str, Any] | None, OutageVerdict | None]:
        endpoints = self.on_infra_error(model) if self.on_infra_error is not None else None
        verdict = self.wait_endpoint(model, lambda: self._down.add(model)) if self.wait_endpoint is not None else None
        return endpoints, verdict

    def _finish_heals(self, pending: deque[tuple[WorkUnit, int]], stats: SchedulerStats) -> None:
        """Hand the workers the endpoints of models whose check finished, and settle the units that
        failed meanwhile by the check's verdict: an endpoint that was down and came back costs them no
        attempt; one that answered at once means the failure was the unit's own (an attempt spent); one
        down past the outage budget gives up the model's units. Their units then lease again."""
        for model, future in list(self._healing.items()):
            if not future.done():
                continue
            del self._healing[model]
            parked = self._parked.pop(model, [])
            held = self._held.pop(model, deque())
            pending.extendleft(reversed(held))  # they lease again first (or are given up with the model)
            try:
                endpoints, verdict = future.result()
            except Exception as exc:  # noqa: BLE001 - its units are retried (and given up after max_attempts)
                self.log(f"model {model}: checking or restarting its replicas failed ({type(exc).__name__}: "
                         f"{str(exc)[:300]}); its units are retried")
                endpoints, verdict = None, None
            if endpoints:
                for worker in self.workers:
                    worker.update_endpoints.remote(endpoints)
            stopped = self._parked_running.pop(model, 0)
            if verdict is not None and verdict.state == "recovered":
                line = (f"model {model}: its endpoint ({verdict.where}) was down for {verdict.outage_s:.0f} s and "
                        f"answers again; {len(parked) + stopped} units that failed or were stopped meanwhile resume "
                        "with no attempt spent")
                self.log(line)
                stats.outages.append(line)
                for lease, _ in reversed(parked):
                    pending.appendleft((lease.unit, lease.attempts))
            elif verdict is not None and verdict.state == "exhausted":
                self._abandon_model(model, verdict, parked, pending, stats)
            else:
                for lease, result in parked:
                    self._retry(lease, pending, stats, result.error or "infra_error", result)

    def _abandon_model(self, model: str, verdict: OutageVerdict, parked: list[tuple[_Lease, EncodedResult]],
                       pending: deque[tuple[WorkUnit, int]], stats: SchedulerStats) -> None:
        """The endpoint stayed down for the whole outage budget: give up every unit of the model (they
        go to failures.jsonl; a re-run retries them), keep running the other models."""
        message = (f"model {model}: its endpoint ({verdict.where}) did not answer for {verdict.outage_s:.0f} s, "
                   f"the sweep's outage budget (`outage_budget_s`); last error: {verdict.last_error[:300]}")
        self._abandoned[model] = message
        self.log(message + "; its units are given up, other models keep running. Re-run the same command "
                 "once the endpoint is back to run them.")
        stats.outages.append(message)
        for lease, result in parked:
            self._give_up(lease.unit, lease.attempts, message, stats, result)
        kept = [(u, a) for u, a in pending if u.model != model]
        for unit, attempts in pending:
            if unit.model == model:
                self._give_up(unit, attempts, message, stats)
        pending.clear()
        pending.extend(kept)

    def _lease(
        self,
        pending: deque[tuple[WorkUnit, int]],
        in_flight: dict[str, _Lease],
        slots: _Slots,
    ) -> deque[tuple[WorkUnit, int]]:
        """Lease as many units as the bounds allow, one `submit` call per worker: first into free slots
        (a worker's own spares, then new units), then as spares. A unit whose model is at its cap
        waits without blocking units of other models behind it. Returns the units still waiting, in order."""
        self._promote_spares(in_flight, slots)
        if not pending and self._source is None and self.spares_per_worker:
            self._take_back(pending, in_flight, slots, lambda lease: self._could_run(lease.unit.model, slots),
                            only_for_free_slots=True)
        waiting: deque[tuple[WorkUnit, int]] = deque()
        batches: dict[int, list[list]] = {}
        spares: dict[int, list[list]] = {}
        lookahead = (self.per_worker + self.spares_per_worker) * len(self.workers) * 4

        def candidates() -> Iterator[tuple[WorkUnit, int]]:
            while pending:
                yield pending.popleft()
            while self._source is not None and len(waiting) < lookahead:
                unit = next(self._source, None)
                if unit is None:
                    self._source = None
                    return
                yield unit, 1

        for unit, attempts in candidates():
            model = unit.model
            if model in self._abandoned:
                self._give_up(unit, attempts, self._abandoned[model], self._stats)
                continue
            if model in self._healing:
                self._held.setdefault(model, deque()).append((unit, attempts))
                continue
            cap = self.per_model.get(model)
            w = self._pick_worker(slots.running) if cap is None or slots.models[model] < cap else None
            spare = w is None
            if spare and cap != 0:
                w = self._pick_spare_worker(slots)
            if w is None:
                waiting.append((unit, attempts))
                if self._pick_worker(slots.running) is None and self._pick_spare_worker(slots) is None:
                    break  # every slot and spare place is taken
                continue
            lease = in_flight[unit.unit_id] = _Lease(unit, attempts, w, spare, since=time.monotonic())
            slots.take(unit.unit_id, lease)
            if spare:
                self._send(batches)  # the episodes start before the spares are packed
                self._spare_seq += 1
                lease.token = f"{unit.unit_id}@{self._spare_seq}"
                spares.setdefault(w, []).append([lease.token, *pack_unit(unit)])
                continue
            batch = batches.setdefault(w, [])
            batch.append(pack_unit(unit))
            if len(batch) == SUBMIT_CHUNK:  # a worker starts its first episodes while the rest are leased
                self._send({w: batches.pop(w)})
        self._send(batches)
        for w, batch in spares.items():
            self.workers[w].submit.remote([], batch)
        waiting.extend(pending)
        return waiting

    def _send(self, batches: dict[int, list[list]]) -> None:
        """Start these units at their workers (one `submit` each), and forget them."""
        for w, batch in batches.items():
            self.workers[w].submit.remote(batch)
        batches.clear()

    def _could_run(self, model: str, slots: _Slots) -> bool:
        """Whether a unit of `model` may start now (its replicas are not being checked, its cap has room)."""
        cap = self.per_model.get(model)
        return model not in self._healing and (cap is None or slots.models[model] < cap)

    def _pick_spare_worker(self, slots: _Slots) -> int | None:
        """The worker with the fewest spares (the first of equals), if it has room for one more."""
        if not self.spares_per_worker:
            return None
        counts = [len(s) for s in slots.spares]
        least = min(counts)
        return counts.index(least) if least < self.spares_per_worker else None

    def _promote_spares(self, in_flight: dict[str, _Lease], slots: _Slots) -> None:
        """Start a worker's spares in its free slots (an episode of another model ended there, or a
        spare was taken back), oldest first, within their models' caps."""
        for w, queued in enumerate(slots.spares):
            free = self.per_worker - slots.running[w]
            if free <= 0 or not queued:
                continue
            promoted = []
            for unit_id, lease in list(queued.items()):
                if len(promoted) == free:
                    break
                if not self._could_run(lease.unit.model, slots):
                    continue
                slots.run_spare(unit_id, lease)
                promoted.append(lease.token)
            if promoted:
                self.workers[w].promote.remote(promoted)

    def _take_back(
        self,
        pending: deque[tuple[WorkUnit, int]],
        in_flight: dict[str, _Lease],
        slots: _Slots,
        which: Callable[[_Lease], bool],
        only_for_free_slots: bool = False,
    ) -> None:
        """Bring spares back from the workers to lease them again: those of a model whose replicas are
        being checked (they would fail meanwhile), or, at the end of a sweep, as many as other workers
        have free slots (a spare queued behind long episodes would otherwise wait while slots idle).
        Each spare is asked for once; one its worker has started comes back as a result."""
        wanted = sum(max(0, self.per_worker - n) for n in slots.running) if only_for_free_slots else None
        for w, queued in enumerate(slots.spares):
            if wanted is not None and wanted <= 0:
                return
            if only_for_free_slots and slots.running[w] < self.per_worker:
                continue  # its own free slots took what they could (`_promote_spares`)
            asked = [lease for lease in queued.values() if not lease.asked_back and which(lease)]
            if wanted is not None:
                asked = asked[:wanted]
            if not asked:
                continue
            for lease in asked:
                lease.asked_back = True
            try:
                returned = ray.get(self.workers[w].take_back.remote([lease.token for lease in asked]),
                                   timeout=TAKE_BACK_S)
            except Exception:  # noqa: BLE001 - dead or stuck: its spares are requeued with its death, or run there
                continue
            for token in returned:
                unit_id = token.rpartition("@")[0]
                lease = in_flight.get(unit_id)
                if lease is None or not lease.spare or lease.token != token:
                    continue
                slots.release(unit_id, in_flight.pop(unit_id))
                pending.append((lease.unit, lease.attempts))
            if wanted is not None:
                wanted -= len(returned)

    def _record(self, finished: list[EncodedResult], stats: SchedulerStats, start: float) -> None:
        self.record(finished)
        for r in finished:
            stats.done += 1
            stats.terminations[r.termination.value] += 1
            # every token the served models processed, the agents' and the helpers' alike
            stats.tokens += r.tokens
        if self.progress is not None:
            elapsed = max(time.monotonic() - start, 1e-9)
            self.progress.update(len(finished))
            self.progress.set_postfix(
                {"ep/s": f"{stats.done / elapsed:.1f}", "tok/s": f"{stats.tokens / elapsed:.0f}",
                 **rate_limit_postfix(self._rate_limits)},
                refresh=False,
            )

    def _replace_dead_worker(self, index: int, exc: BaseException, stats: SchedulerStats) -> None:
        # Every in-flight ref of a dead worker fails; replace the worker only on the first of them.
        handle = self.workers[index]
        try:
            ray.get(handle.info.remote(), timeout=10)
            return  # it answers: already replaced, or the failure was of one call only
        except Exception:  # noqa: BLE001
            pass
        self.log(f"rollout worker {index} died ({death_cause(exc)}); starting a new one, its running units are "
                 "run again")
        self.workers[index] = self.make_worker(index)
        for per_worker in self._rate_limits.values():  # the new worker's clients start at the configured cap
            per_worker.pop(index, None)
        if self.warmup_plan:  # as the first workers were: benchmarks built, garbage collector settled
            self.workers[index].warmup.remote(self.warmup_plan)
        stats.worker_restarts += 1

    def _retry(
        self,
        lease: _Lease,
        pending: deque[tuple[WorkUnit, int]],
        stats: SchedulerStats,
        reason: str,
        result: EncodedResult | None = None,
    ) -> None:
        if lease.attempts < self.max_attempts:
            stats.requeued += 1
            pending.appendleft((lease.unit, lease.attempts + 1))
            return
        self._give_up(lease.unit, lease.attempts, f"gave up after {lease.attempts} attempts: {reason}", stats, result)

    @staticmethod
    def _give_up(unit: WorkUnit, attempts: int, error: str, stats: SchedulerStats,
                 result: EncodedResult | None = None) -> None:
        failed = result or encode_failure(unit, TerminationReason.INFRA_ERROR, None)
        failed.unit = unit
        failed.error = error
        failed.attempts = attempts
        stats.gave_up.append(failed)
