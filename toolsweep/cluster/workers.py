"""The rollout workers' lifecycle: created spread over the nodes with the scheduler that drives them,
warmed up (their benchmarks built) in the background, and a worker that dies while warming up replaced
once before the run gives up (`WorkersFailed`).

The workers reach the models through the endpoints given here, with the sweep's outage budget as how
long a request waits out rate limits; a failure the scheduler cannot blame on one unit goes to
`endpoint_health` (restart the dead replicas, probe the endpoints)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from toolsweep.cluster.config import SweepConfig
from toolsweep.cluster.endpoint_health import heal_endpoints, wait_for_endpoints

Log = Callable[[str], None]


def start_workers(
    config: SweepConfig, ray: Any, todo: Any, endpoints: dict[str, Any],
    extra_benchmarks: dict[str, str], runtime: Any, log: Log,
) -> Any:
    """Create the rollout workers (spread over the nodes) and their scheduler, and start the workers'
    warm-up (`scheduler.warmups`)."""
    from toolsweep.actors.rollout_worker import RemoteRolloutWorker, worker_options
    from toolsweep.cluster.scheduler import Scheduler
    from toolsweep.models.secrets import Secrets

    n_workers = _worker_count(config, ray, len(todo))
    cpus = config.concurrency.worker_cpus
    if ray.available_resources().get("CPU", 0) < cpus * n_workers:
        cpus = 0  # a cluster whose CPUs are held by model servers still runs environments
    models = {m.name: m for m in config.served_models()}
    options = {e.name: e.options for e in config.benchmarks}
    # API keys the driver was given reach the workers on every node (validated as set before Ray
    # started) as a constructor argument, never as runtime_env env vars, which Ray's logs record.
    keys = Secrets.from_environment(getattr(m, "api_key_env", None) for m in models.values())
    endpoints = _rate_limit_budget(endpoints, config.outage_budget_s)

    def make_worker(i: int) -> Any:
        # Named so operators (and the fault tests) can find a sweep's workers.
        return RemoteRolloutWorker.options(
            name=f"toolsweep:{config.name}:{config.resolved_run_id()}:worker-{i}:{uuid.uuid4().hex[:6]}",
            num_cpus=cpus, scheduling_strategy="SPREAD", max_concurrency=10_000, **worker_options(models.values()),
        ).remote(
            f"worker-{i}", models, options, endpoints, extra_benchmarks,
            config.episode_timeout_s, config.concurrency.offload_env, keys,
        )

    scheduler = Scheduler(
        make_worker, n_workers, lambda results: None,
        per_worker=config.concurrency.episodes_per_worker,
        # a served model's cap as its runtime sized it (KV capacity); a later wave's is set when it starts
        per_model={m.name: endpoints[m.name]["max_in_flight"] if m.name in endpoints else m.in_flight_cap()
                   for m in config.models},
        spares_per_worker=config.concurrency.resolved_spares(),
        max_attempts=config.max_attempts,
        on_infra_error=lambda model: _rate_limit_budget(
            heal_endpoints(runtime, [model, *(h.name for h in config.helpers)]), config.outage_budget_s),
        wait_endpoint=lambda model, on_down: wait_for_endpoints(
            runtime, [model, *(h.name for h in config.helpers)], config.outage_budget_s, log, on_down),
        log=log,
    )
    plan = todo.settings_by_benchmark()
    log(f"preparing {n_workers} rollout workers ({', '.join(plan)})")
    scheduler.warmup_plan = plan
    scheduler.warmups = [w.warmup.remote(plan) for w in scheduler.workers]
    return scheduler


def _rate_limit_budget(endpoints: dict[str, Any] | None, budget_s: float) -> dict[str, Any] | None:
    """The endpoints with the sweep's outage budget as how long a request waits out 429s
    (`models.rate_limit`): a rate limit is given up on no sooner than an outage."""
    if not endpoints:
        return endpoints
    return {name: {**e, "rate_limit_wait_s": budget_s} if e.get("kind", "openai") == "openai" else e
            for name, e in endpoints.items()}


class WorkersFailed(RuntimeError):
    """Rollout workers could not start (a worker died twice while building its benchmarks)."""


def await_warmups(scheduler: Any, warmups: list[Any], log: Log) -> None:
    """Wait for the workers' warm-up; a worker that dies meanwhile is replaced once, then reported."""
    import ray

    dead = _dead_worker_errors()
    for i, ref in enumerate(warmups):
        try:
            ray.get(ref)
            continue
        except dead as exc:
            log(f"rollout worker {i} died while warming up ({_death_cause(exc)}); starting a new one")
        kill_quietly(ray, scheduler.workers[i])  # a worker the memory monitor hit may still hold its memory
        scheduler.workers[i] = scheduler.make_worker(i)
        try:
            ray.get(scheduler.workers[i].warmup.remote(scheduler.warmup_plan))
        except dead as exc:
            raise WorkersFailed(
                f"rollout worker {i} died twice while building its benchmarks ({_death_cause(exc)}: "
                f"{str(exc)[:300]}); check the workers' memory (a benchmark's data is loaded in each worker; "
                "fewer workers, concurrency.workers, need less) and the Ray logs under /tmp/ray/session_latest/logs"
            ) from None


def _dead_worker_errors() -> tuple[type[BaseException], ...]:
    """What `ray.get` raises for a worker that died: killed, crashed, or killed by Ray's memory monitor
    (`OutOfMemoryError`, which is no `RayActorError`)."""
    from ray.exceptions import OutOfMemoryError, RayActorError, WorkerCrashedError

    return (RayActorError, WorkerCrashedError, OutOfMemoryError)


def _death_cause(exc: BaseException) -> str:
    from toolsweep.cluster.scheduler import death_cause

    return death_cause(exc)


def kill_quietly(ray: Any, worker: Any) -> None:
    try:
        ray.kill(worker)
    except Exception:  # noqa: BLE001 - dead already
        pass


def _worker_count(config: SweepConfig, ray: Any, units: int) -> int:
    """The workers asked for; "auto": one per free CPU, and no more than the units to play when the sweep
    does not grow (`stop_when` adds rounds of units later): a worker with no unit is a process, Ray's
    import and a build of every benchmark, for nothing."""
    if config.concurrency.workers != "auto":
        return int(config.concurrency.workers)
    cpus = ray.available_resources().get("CPU", 1)
    per = config.concurrency.worker_cpus or 1
    by_cpu = max(1, int(cpus // per))
    return by_cpu if config.stop_when is not None else max(1, min(by_cpu, units))
