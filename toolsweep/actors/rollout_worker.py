"""The rollout worker: a CPU actor that hosts environment replicas and runs many episodes at once.

The driver hands it batches of units (`submit`) and long-polls what finished (`collect`); each
unit plays on the actor's event loop, with costly environment steps in a thread (`offload_env`),
so hundreds of episodes waiting on model replies share one process. Benchmarks are built once
per process (the registry caches them).
"""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import ray
from pydantic_core import PydanticSerializationError

from toolsweep.evaluator.encoded import (
    EncodedBatch, EncodedResult, EpisodeRow, UnitUnpacker, UnitWire, encode_result,
)
from toolsweep.evaluator.episode import run_episode
from toolsweep.evaluator.protocols import EndpointConfigError, InfraError
from toolsweep.evaluator.registry import get_benchmark, register_benchmark
from toolsweep.evaluator.types import EpisodeResult, TerminationReason, WorkUnit
from toolsweep.models.client import on_notice, on_unreachable
from toolsweep.models.factory import build_helpers, build_policy
from toolsweep.models.secrets import Secrets


OFFLOAD_ABOVE_S = 0.002
PROMOTED_EARLY_KEPT = 100_000
"""Promotions of spares not (yet) here that a worker remembers: most are of spares it had started
itself, so the oldest are dropped beyond this many."""


class _TimedEnv:
    """Measures what an environment's reset/step calls cost, to decide whether to offload them."""

    def __init__(self, env: Any) -> None:
        self.env = env
        self.calls = 0
        self.seconds = 0.0

    def _timed(self, fn: Any, *args: Any) -> Any:
        t = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self.calls += 1
            self.seconds += time.perf_counter() - t

    def reset(self) -> Any:
        return self._timed(self.env.reset)

    def step(self, reply: Any) -> Any:
        return self._timed(self.env.step, reply)

    def consult_reply(self, role: str, reply: Any) -> Any:
        return self._timed(self.env.consult_reply, role, reply)

    def result(self) -> Any:
        return self.env.result()

    def __getattr__(self, name: str) -> Any:  # scripted policies may read the env's ground truth
        return getattr(self.env, name)


def settle_garbage_collector(young_threshold: int = 20_000) -> None:
    """Keep Python's cycle collector from pausing the episodes in flight.

    What exists after warm-up (modules, the benchmarks' worlds and datasets) lives as long as the
    worker, yet every full collection walked all of it: a 40 ms pause in the middle of a thousand
    episodes, each of which then came back late (bench/scheduler.py). Frozen, it is never walked
    again; and the young generation, where an episode's garbage lives, is collected every
    `young_threshold` allocations instead of 700."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(young_threshold, middle, old)


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
        offload_env: bool | str = "auto",
        secrets: Secrets | None = None,
    ) -> None:
        if secrets:
            secrets.export()  # the model clients read their keys from this process's environment
        for name, target in (extra_benchmarks or {}).items():
            register_benchmark(name, target)
        self.worker_id = worker_id
        self.models = models
        self.benchmark_options = benchmark_options
        self.endpoints = endpoints or {}
        self.timeout_s = timeout_s
        self.offload_env = offload_env
        # Outside Ray (a unit test, a REPL) the host name stands in for the node id.
        self.node_id = ray.get_runtime_context().get_node_id() if ray.is_initialized() else socket.gethostname()
        self._build_lock = asyncio.Lock()
        self._benchmarks: dict[str, Any] = {}
        # One thread for all environment steps: they are pure Python (the GIL serialises them
        # anyway), and a single thread hands off with far less contention than a pool.
        self._env_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="env") if offload_env else None
        self._step_cost: dict[str, float] = {}  # benchmark -> running mean seconds per env call
        self._done = EncodedBatch()  # what `collect` hands over next
        self._waiters: list[asyncio.Future] = []  # the `collect` calls waiting for a result
        self._tasks: set[asyncio.Task] = set()
        self._unpack = UnitUnpacker()
        self._spares: dict[str, dict[str, WorkUnit]] = {}  # model -> its spares by lease token, oldest first
        self._promoted_early: dict[str, None] = {}  # tokens promoted before their `submit` arrived (or after they started)
        self._running: dict[str, tuple[str, asyncio.Task]] = {}  # unit id -> (model, its episode's task)
        self._unreachable: set[str] = set()  # models whose endpoint a request found silent since `collect`
        on_unreachable(self._note_unreachable)
        self._notices: list[str] = []  # lines for the driver's log since `collect` (rate-limit changes)
        on_notice(self._notices.append)

    async def _benchmark(self, name: str):
        # The first build of a benchmark can take seconds (a world, a dataset): do it once, off the
        # loop; afterwards it is a dict lookup (a thread hop per episode costs more than the episode).
        bench = self._benchmarks.get(name)
        if bench is None:
            async with self._build_lock:
                if name not in self._benchmarks:
                    self._benchmarks[name] = await asyncio.to_thread(
                        get_benchmark, name, self.benchmark_options.get(name, {})
                    )
            bench = self._benchmarks[name]
        return bench

    async def warmup(self, settings: dict[str, list[str]]) -> dict[str, Any]:
        """Build the sweep's benchmarks and their settings' tasks in this process before the first
        episode (worlds, datasets, indexes), so the progress bar measures episodes, not set-up."""
        for name, names in settings.items():
            bench = await self._benchmark(name)
            for setting in names:
                await asyncio.to_thread(bench.tasks, setting)
        settle_garbage_collector()
        return self.info()

    def update_endpoints(self, endpoints: dict[str, Any]) -> None:
        """New model endpoints after a replica restart."""
        self.endpoints = endpoints

    def _offload_for(self, benchmark: str) -> ThreadPoolExecutor | None:
        """"auto": environments whose calls cost more than OFFLOAD_ABOVE_S go to the thread; the
        rest run inline, because a thread hand-off costs more than a sub-millisecond step and buys
        no parallelism under the GIL (bench/scheduler.py measures both)."""
        if self._env_thread is None:
            return None
        if self.offload_env == "auto" and self._step_cost.get(benchmark, 0.0) < OFFLOAD_ABOVE_S:
            return None
        return self._env_thread

    # -- batched leases -------------------------------------------------------------------------
    # A Ray actor call costs ~1 ms here; one call per episode put a gap of tens of milliseconds
    # between waves of episodes. The driver instead hands a worker a batch of units in one call
    # and long-polls `collect` for whatever has finished (bench/scheduler.py).

    async def submit(self, units: list[UnitWire], spares: list[list] | None = None) -> None:
        """Start these units (as `pack_unit` packed them) in the background; results come back via `collect`.

        `spares` ([lease token, *packed unit]) wait here: each starts the moment an episode of its
        model ends on this worker, and that episode's result names its token (`started`), so the
        driver's count of what runs stays exact. The driver's round trip between one episode and the
        next (about 20 ms at 256 in flight, bench/scheduler.py) is then off the model's path.
        `promote` starts a spare the driver has a free slot for; `take_back` returns the ones not started."""
        for wire in units:
            self._start(self._unpack(wire))
        for token, *wire in spares or ():
            unit = self._unpack(wire)
            if token in self._promoted_early:
                del self._promoted_early[token]
                self._start(unit)
            else:
                self._spares.setdefault(unit.model, {})[token] = unit

    def _start(self, unit: WorkUnit) -> None:
        task = asyncio.get_running_loop().create_task(self._run_and_keep(unit))
        self._tasks.add(task)
        self._running[unit.unit_id] = (unit.model, task)
        task.add_done_callback(self._tasks.discard)

    def _note_unreachable(self, name: str) -> None:
        """A request of this model found nothing answering: the next `collect` says so (now, if one waits)."""
        if name in self.models and name not in self._unreachable:
            self._unreachable.add(name)
            self._wake_collectors()

    def _wake_collectors(self) -> None:
        while self._waiters:
            waiter = self._waiters.pop()
            if not waiter.done():
                waiter.set_result(None)

    def park(self, model: str) -> list[str]:
        """Stop the running episodes of `model`, whose endpoint the driver found down: they would only
        fail after their retries, holding their slots meanwhile. Returns their unit ids; none of them
        sends a result, and the driver runs them again (no attempt spent) once the endpoint answers."""
        stopped = [unit_id for unit_id, (m, _) in self._running.items() if m == model]
        for unit_id in stopped:
            self._running.pop(unit_id)[1].cancel()
        return stopped

    def _start_spare_of(self, model: str) -> str | None:
        """Start the oldest spare of `model`, if there is one, in the slot an episode of it just freed;
        its token."""
        queued = self._spares.get(model)
        if not queued:
            return None
        token = next(iter(queued))
        self._start(queued.pop(token))
        return token

    def promote(self, tokens: list[str]) -> None:
        """Start these spares now (the driver gave each a free slot); one already started is left alone.
        Ray may run this call before the `submit` that brings a spare (an async actor's calls can
        overtake each other), so a token not found is remembered, and its spare starts on arrival."""
        for token in tokens:
            for queued in self._spares.values():
                if token in queued:
                    self._start(queued.pop(token))
                    break
            else:  # started already, or not yet here (tokens are never reused)
                self._promoted_early[token] = None
                if len(self._promoted_early) > PROMOTED_EARLY_KEPT:
                    del self._promoted_early[next(iter(self._promoted_early))]

    def take_back(self, tokens: list[str]) -> list[str]:
        """Drop these spares if they have not started, and say which were dropped (the driver leases
        those elsewhere: to a worker with free slots at the end of a sweep, or after a model's restart)."""
        dropped = []
        for token in tokens:
            for queued in self._spares.values():
                if queued.pop(token, None) is not None:
                    dropped.append(token)
                    break
        return dropped

    async def _run_and_keep(self, unit: WorkUnit) -> None:
        row = EpisodeRow(unit)
        try:
            result = await self.run(unit, row)
        except asyncio.CancelledError:
            return  # parked (`park`): the driver runs it again; or the actor is going away
        finally:
            entry = self._running.get(unit.unit_id)
            if entry is not None and entry[1] is asyncio.current_task():
                del self._running[unit.unit_id]
        # A slot freed by infrastructure (a dead replica, an expiry) goes back to the driver, which checks
        # the model first: a spare started there would most likely fail the same way.
        started = None if result.termination in _NOT_THE_MODELS else self._start_spare_of(unit.model)
        encoded = _encode(result, row)
        encoded.started = started
        self._done.append(encoded)
        self._wake_collectors()

    async def collect(self, timeout_s: float = 0.5) -> EncodedBatch:
        """Finished results (each with its run-directory row encoded) since the last call; waits up to `timeout_s` for
        at least one, so the driver can block on every worker at once.

        Several calls may wait at once (the driver keeps the next one waiting while it records an
        answer): the first to run takes what finished, the others wait again. A call waits on a bare
        future rather than `asyncio.wait_for` on an event: when a wave of episodes ends together, every
        hop through the event loop waits behind hundreds of episodes' last steps, and `wait_for` took
        four hops from a result to Ray sending the answer where this takes two (bench/scheduler.py)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not self._done and not self._unreachable:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            waiter = loop.create_future()
            self._waiters.append(waiter)
            timer = loop.call_later(remaining, _release, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
                if waiter in self._waiters:  # timed out or cancelled: not left behind for a result to pop
                    self._waiters.remove(waiter)
        done, self._done = self._done, EncodedBatch()
        if self._unreachable:
            done.unreachable = tuple(sorted(self._unreachable))
            self._unreachable.clear()
        if self._notices:
            done.notices, self._notices[:] = tuple(f"{self.worker_id}: {line}" for line in self._notices), []
        return done

    async def run(self, unit: WorkUnit, row: EpisodeRow | None = None) -> EpisodeResult:
        """Play one unit. Never raises: infrastructure failures come back as `infra_error` (or `timeout`),
        a configuration the endpoint refuses as `config_error`. `row`, if given, is encoded as the
        episode plays (see `EpisodeRow`)."""
        try:
            bench = await self._benchmark(unit.benchmark)
            executor = self._offload_for(unit.benchmark)
            if executor is not None:
                env = await asyncio.get_running_loop().run_in_executor(
                    executor, bench.make_env, unit.task_id, unit.setting, unit.seed
                )
            else:
                env = bench.make_env(unit.task_id, unit.setting, unit.seed)
            policy = build_policy(self.models[unit.model], bench, env, unit, self.endpoints)
            helpers = build_helpers(bench.helper_models(), self.models, unit, self.endpoints)
            timed = _TimedEnv(env)
            result = await run_episode(
                timed,
                policy,
                unit,
                max_turns=bench.max_turns(unit.setting),
                offload=executor or False,
                timeout_s=self.timeout_s,
                helpers=helpers,
                on_turn=None if row is None else row.update,
            )
            if timed.calls:
                old = self._step_cost.get(unit.benchmark, timed.seconds / timed.calls)
                self._step_cost[unit.benchmark] = 0.9 * old + 0.1 * timed.seconds / timed.calls
        except InfraError as exc:
            result = EpisodeResult(unit=unit, termination=TerminationReason.INFRA_ERROR, error=str(exc))
        except EndpointConfigError as exc:
            result = EpisodeResult(unit=unit, termination=TerminationReason.CONFIG_ERROR, error=str(exc))
        except Exception:  # noqa: BLE001 - building the env or policy failed: the environment's fault
            result = EpisodeResult(
                unit=unit, termination=TerminationReason.ENV_ERROR, error=traceback.format_exc(limit=8)
            )
        result.node_id = self.node_id
        result.worker_id = self.worker_id
        return result

    def info(self) -> dict[str, Any]:
        return {"worker_id": self.worker_id, "node_id": self.node_id, "pid": os.getpid()}


IN_PROCESS_MODEL_KINDS = ("hf",)


def worker_options(models: Any) -> dict[str, Any]:
    """Ray actor options a rollout worker needs for these models (an iterable of model configs).

    Ray starts its workers at niceness 15 (`RAY_worker_niceness`), which keeps the raylet responsive
    when tasks are the machine's only load. A worker that hosts a model in-process (the transformers
    backend) is the sweep's compute, though: next to ordinary processes it got about 1/28 of their CPU
    share, so on a machine saturated by anything else its generation all but stopped (0 of 16 SmolLM2
    episodes finished under load, bench/hf_load.py). Such a worker runs at the ordinary niceness 0, as
    Ray runs its own job supervisors (and as toolsweep runs its vLLM servers' actors)."""
    if any(getattr(m, "kind", None) in IN_PROCESS_MODEL_KINDS for m in models):
        return {"runtime_env": {"env_vars": {"RAY_worker_niceness": "0"}}}
    return {}


_NOT_THE_MODELS = (TerminationReason.INFRA_ERROR, TerminationReason.TIMEOUT, TerminationReason.CONFIG_ERROR)


def _release(waiter: asyncio.Future) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _encode(result: EpisodeResult, row: EpisodeRow) -> EncodedResult:
    """The result's row. A trajectory holding a value JSON cannot hold (something an environment put in
    an observation or its `info`) ends the episode as `env_error`, so the unit still comes back (the
    exception once killed the task, and the sweep waited for the unit forever). Any other failure here
    is the worker's, not the episode's: `infra_error`, retried and never scored."""
    try:
        return encode_result(result, row)
    except (PydanticSerializationError, TypeError, ValueError):
        termination = TerminationReason.ENV_ERROR
        why = ("the episode cannot be recorded: its trajectory holds a value with no JSON form (an environment's "
               "observation or info)")
        trace = traceback.format_exc(limit=4)
    except Exception as exc:  # noqa: BLE001 - e.g. MemoryError: infrastructure
        termination, why = TerminationReason.INFRA_ERROR, f"encoding the result failed: {type(exc).__name__}"
        trace = traceback.format_exc(limit=4)
    return encode_result(EpisodeResult(unit=result.unit, termination=termination, node_id=result.node_id,
                                       worker_id=result.worker_id, error=f"{why}\n{trace}"))


RemoteRolloutWorker = ray.remote(RolloutWorker)
