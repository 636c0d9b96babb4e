"""run_episode: one episode, no side effects, no Ray.

The same coroutine runs in a test, in a rollout worker and in a REPL. It never raises for anything
an agent or environment does; only `InfraError` (the model could not be reached) propagates, so the
scheduler can retry the unit elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Executor
from typing import Any, TypeVar

from toolsweep.evaluator.protocols import ContextExceeded, EndpointConfigError, Environment, InfraError, Policy
from toolsweep.evaluator.types import (
    AgentReply,
    ConsultStep,
    EpisodeResult,
    Message,
    Observation,
    Step,
    TerminationReason,
    Trajectory,
    Usage,
    WorkUnit,
)

T = TypeVar("T")

_DEADLINE: contextvars.ContextVar[Any] = contextvars.ContextVar("toolsweep_episode_deadline", default=None)


def exclude_from_deadline(seconds: float) -> None:
    """Give the running episode's wall-clock guard `seconds` back: time spent waiting for a connection
    slot, in a backoff or in a failed attempt is the infrastructure's, not the model's (a no-op outside
    an episode)."""
    deadline = _DEADLINE.get()
    if deadline is not None and seconds > 0 and not deadline.expired():
        when = deadline.when()
        if when is not None:
            deadline.reschedule(when + seconds)


def deadline_credit() -> Callable[[float], None] | None:
    """A function that gives the running episode's wall-clock guard seconds back, bound to that guard, to
    be called later on the episode's event loop (from another thread: through `call_soon_threadsafe`);
    None outside an episode. For a model in this process whose generation is preempted by other work on
    the machine: that time is the machine's, not the episode's."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return None

    def give_back(seconds: float) -> None:
        when = deadline.when()
        if when is not None and seconds > 0 and not deadline.expired():
            try:
                deadline.reschedule(when + seconds)
            except RuntimeError:  # the episode has ended (cancelled) since: nothing to give back to
                pass

    return give_back


@contextlib.contextmanager
def deadline_paused() -> Iterator[None]:
    """Stop the running episode's wall-clock guard for the duration of the block, then give it back what
    it had left: for a wait that is the infrastructure's, not the model's (a request queued behind other
    episodes' batches). Unlike `exclude_from_deadline`, which credits a wait once it is over, the guard
    cannot expire during the wait, however long a saturated machine makes it (a no-op outside an episode)."""
    deadline = _DEADLINE.get()
    when = deadline.when() if deadline is not None else None
    if when is None or deadline.expired():  # no guard, or it has fired already (the task is being cancelled)
        yield
        return
    loop = asyncio.get_running_loop()
    left = when - loop.time()
    deadline.reschedule(None)
    try:
        yield
    finally:
        if not deadline.expired():
            deadline.reschedule(loop.time() + left)


async def _call(fn: Callable[..., T], *args: Any, offload: bool | Executor) -> T:
    # Environment work is blocking Python; in a worker it goes to a thread so the event loop keeps
    # serving model replies for the other episodes in flight.
    if isinstance(offload, Executor):
        return await asyncio.get_running_loop().run_in_executor(offload, fn, *args)
    if offload:
        return await asyncio.to_thread(fn, *args)
    return fn(*args)


async def run_episode(
    env: Environment,
    policy: Policy,
    unit: WorkUnit,
    *,
    max_turns: int = 200,
    offload: bool | Executor = False,
    timeout_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    helpers: Mapping[str, Policy] | None = None,
    on_turn: Callable[[Trajectory], None] | None = None,
) -> EpisodeResult:
    """Play one episode of `env` with `policy` and return its result.

    `max_turns` is a hard cap on top of the environment's own budget (a buggy environment that never
    ends stops as `max_turns`). `offload` runs reset/step in a thread (True: the default pool; or
    a given executor). Exceptions from the environment end the episode as `env_error`;
    `ContextExceeded` from the policy as `context_exceeded`; `InfraError` and `EndpointConfigError`
    propagate. `timeout_s` is an infrastructure guard, not a budget of the model's: an episode still
    running after that much working time (waits for a slot, backoffs and failed attempts excluded,
    see `exclude_from_deadline`) ends as `timeout`, which the scheduler retries and never scores.

    `helpers` answer the environment's consults (`Observation.consult`) by role, e.g. an LLM judge:
    the exchange goes into `trajectory.consults`, never into the agent's conversation. A helper
    that fails or overflows its context answers with an empty message (the environment decides
    what an unreadable answer means); only `InfraError` propagates, as for the agent.

    `on_turn(trajectory)` is called after the first observation and after each turn is added, before
    the agent is asked again (a worker encodes the trajectory there, while the episode waits).
    """
    start = clock()
    trajectory = Trajectory()
    error: str | None = None

    def finish(reason: TerminationReason) -> EpisodeResult:
        return _result(env, unit, trajectory, reason, error, clock() - start)

    async def consult_helpers(obs: Observation) -> tuple[Observation, list[Message]]:
        """Answer the environment's consults until it has something for the agent."""
        shown = list(obs.messages)
        while obs.consult is not None and not obs.done:
            request = obs.consult
            helper = (helpers or {}).get(request.role)
            if helper is None:
                raise LookupError(
                    f"the environment consults a {request.role!r} model but the benchmark configured none"
                )
            failure = None
            try:
                answer = await helper.act(list(request.messages), [])
            except (InfraError, EndpointConfigError, asyncio.CancelledError):
                raise
            except Exception as exc:  # noqa: BLE001 - a helper's failure is the environment's to score
                failure = f"{type(exc).__name__}: {exc}"
                answer = AgentReply(message=Message(role="assistant", content=""))
            trajectory.consults.append(ConsultStep(
                role=request.role, request=request.messages, reply=answer.message, usage=answer.usage, error=failure,
            ))
            obs = await _call(env.consult_reply, request.role, answer.message, offload=offload)
            shown.extend(obs.messages)
        return obs, shown

    async def play() -> TerminationReason:
        nonlocal error
        try:
            obs: Observation = await _call(env.reset, offload=offload)
            obs, shown = await consult_helpers(obs) if obs.consult is not None else (obs, obs.messages)
        except (InfraError, EndpointConfigError, asyncio.CancelledError):
            raise
        except Exception:  # noqa: BLE001 - any environment failure is a result, not a crash
            error = traceback.format_exc(limit=8)
            return TerminationReason.ENV_ERROR
        trajectory.messages.extend(shown)
        tools = obs.tools
        while not obs.done:
            if on_turn is not None:
                on_turn(trajectory)
            if len(trajectory.steps) >= max_turns:
                return TerminationReason.MAX_TURNS
            asked = clock()
            try:
                reply = await policy.act(list(trajectory.messages), tools)
            except ContextExceeded as exc:
                error = str(exc)
                return TerminationReason.CONTEXT_EXCEEDED
            except (InfraError, EndpointConfigError, asyncio.CancelledError):
                raise
            except Exception:  # noqa: BLE001 - a broken policy is reported, not fatal to the sweep
                error = traceback.format_exc(limit=8)
                return TerminationReason.AGENT_FORMAT_ERROR
            trajectory.messages.append(reply.message)
            answered = clock()
            try:
                # inline when not offloaded: a coroutine per call is a measurable share of a turn
                obs = env.step(reply.message) if offload is False else await _call(env.step, reply.message,
                                                                                  offload=offload)
                obs, shown = await consult_helpers(obs) if obs.consult is not None else (obs, obs.messages)
            except (InfraError, EndpointConfigError, asyncio.CancelledError):
                raise
            except Exception:  # noqa: BLE001
                error = traceback.format_exc(limit=8)
                trajectory.steps.append(Step(reply=reply.message, usage=_timed(reply.usage, answered - asked, clock() - answered)))
                return TerminationReason.ENV_ERROR
            trajectory.steps.append(Step(reply=reply.message, usage=_timed(reply.usage, answered - asked, clock() - answered),
                                         observation=shown, info=obs.info))
            trajectory.messages.extend(shown)
            if obs.tools:
                tools = obs.tools
        return obs.termination or TerminationReason.ANSWERED

    # One deadline for the whole episode (cheaper than a timer per turn), pushed back by the time the
    # client reports as spent waiting on infrastructure.
    try:
        async with asyncio.timeout(timeout_s) as deadline:
            token = _DEADLINE.set(deadline)
            try:
                termination = await play()
            finally:
                _DEADLINE.reset(token)
    except TimeoutError:
        error = f"episode exceeded {timeout_s:.0f} s of working wall-clock time (an infrastructure guard: retried, not scored)"
        termination = TerminationReason.TIMEOUT
    return finish(termination)


TRUNCATED_REPLIES = "truncated_replies"
"""The episode's metric (present only when non-zero) counting the agent's replies cut at max_tokens;
summary.json sums it per cell. The benchmark's own metrics score the cut replies as they are."""


def truncated_replies(trajectory: Trajectory) -> int:
    """The agent's replies the endpoint cut at max_tokens (finish_reason "length": the client flags them)."""
    return sum(1 for step in trajectory.steps if (step.reply.model_extra or {}).get("truncated"))


def _timed(usage: Usage, act_s: float, env_s: float) -> Usage:
    """The turn's usage with the environment's time, and the policy's own time where the policy
    reported no latency (a scripted policy; a served model's client measures its call itself)."""
    update: dict[str, float] = {"env_s": max(env_s, 0.0)}
    if usage.latency_s <= 0:
        update["latency_s"] = max(act_s, 0.0)
    return usage.model_copy(update=update)


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
    metrics = {k: float(v) for k, v in metrics.items()}
    cut = truncated_replies(trajectory)
    if cut:
        metrics[TRUNCATED_REPLIES] = float(cut)
    return EpisodeResult(
        unit=unit,
        termination=reason,
        metrics=metrics,
        trajectory=trajectory,
        error=error,
        wall_time_s=elapsed,
    )
