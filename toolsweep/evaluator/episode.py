"""run_episode: one episode, no side effects, no Ray.

The same coroutine runs in a test, in a rollout worker and in a REPL. It never raises for anything
an agent or environment does; only `InfraError` (the model could not be reached) propagates, so the
scheduler can retry the unit elsewhere.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

from toolsweep.evaluator.protocols import ContextExceeded, Environment, InfraError, Policy
from toolsweep.evaluator.types import (
    EpisodeResult,
    Observation,
    Step,
    TerminationReason,
    Trajectory,
    WorkUnit,
)

T = TypeVar("T")


async def _call(fn: Callable[..., T], *args: Any, offload: bool) -> T:
    # Environment work is blocking Python; in a worker it goes to a thread so the event loop keeps
    # serving model replies for the other episodes in flight.
    if offload:
        return await asyncio.to_thread(fn, *args)
    return fn(*args)


async def run_episode(
    env: Environment,
    policy: Policy,
    unit: WorkUnit,
    *,
    max_turns: int = 200,
    offload: bool = False,
    timeout_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> EpisodeResult:
    """Play one episode of `env` with `policy` and return its result.

    `max_turns` is a hard cap on top of the environment's own budget (a buggy environment that never
    ends stops as `max_turns`). Exceptions from the environment end the episode as `env_error`;
    `ContextExceeded` from the policy as `context_exceeded`; `InfraError` propagates. With
    `timeout_s`, an episode still running after that wall-clock time ends as `timeout` and is scored
    by the environment like any other unfinished episode (a timeout is a result, not a lost unit).
    """
    start = clock()
    trajectory = Trajectory()
    termination: TerminationReason | None = None
    error: str | None = None

    def finish(reason: TerminationReason) -> EpisodeResult:
        return _result(env, unit, trajectory, reason, error, clock() - start)

    try:
        obs: Observation = await _call(env.reset, offload=offload)
    except Exception:  # noqa: BLE001 - any environment failure is a result, not a crash
        error = traceback.format_exc(limit=8)
        return finish(TerminationReason.ENV_ERROR)
    trajectory.messages.extend(obs.messages)
    tools = obs.tools

    while not obs.done:
        if len(trajectory.steps) >= max_turns:
            termination = TerminationReason.MAX_TURNS
            break
        remaining = None if timeout_s is None else timeout_s - (clock() - start)
        if remaining is not None and remaining <= 0:
            termination = TerminationReason.TIMEOUT
            break
        try:
            reply = await asyncio.wait_for(policy.act(list(trajectory.messages), tools), remaining)
        except asyncio.TimeoutError:
            error = f"episode exceeded {timeout_s:.0f} s wall-clock"
            termination = TerminationReason.TIMEOUT
            break
        except ContextExceeded as exc:
            error = str(exc)
            termination = TerminationReason.CONTEXT_EXCEEDED
            break
        except InfraError:
            raise
        except Exception:  # noqa: BLE001 - a broken policy is reported, not fatal to the sweep
            error = traceback.format_exc(limit=8)
            termination = TerminationReason.AGENT_FORMAT_ERROR
            break
        trajectory.messages.append(reply.message)
        try:
            obs = await _call(env.step, reply.message, offload=offload)
        except Exception:  # noqa: BLE001
            error = traceback.format_exc(limit=8)
            trajectory.steps.append(Step(reply=reply.message, usage=reply.usage))
            termination = TerminationReason.ENV_ERROR
            break
        trajectory.steps.append(
            Step(reply=reply.message, usage=reply.usage, observation=obs.messages, info=obs.info)
        )
        trajectory.messages.extend(obs.messages)
        if obs.tools:
            tools = obs.tools
    else:
        termination = obs.termination or TerminationReason.ANSWERED
    assert termination is not None
    return finish(termination)


def _result(
    env: Environment,
    unit: WorkUnit,
    trajectory: Trajectory,
    reason: TerminationReason,
    error: str | None,
    elapsed: float,
) -> EpisodeResult:
    try:
        metrics = env.result()
    except Exception:  # noqa: BLE001 - scoring failure is an environment error with no metrics
        metrics = {}
        error = (error or "") + traceback.format_exc(limit=8)
        reason = TerminationReason.ENV_ERROR
    return EpisodeResult(
        unit=unit,
        termination=reason,
        metrics={k: float(v) for k, v in metrics.items()},
        trajectory=trajectory,
        error=error,
        wall_time_s=elapsed,
    )
