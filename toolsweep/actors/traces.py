"""Episode transcripts as MLflow traces, linked to their cell's run: MLflow's own Traces view is the
transcript viewer (a span per turn: the model call with what it was shown and what it replied, its
tokens and latency; then what the environment answered), and the episode's termination and metrics
are the trace's tags and outputs.

Which episodes: every one that did not end as `answered` (up to `max_failures` per cell) and the first
`per_cell` answered ones in unit-id order, so a 50k-unit sweep logs a few hundred traces, not 50k.
"""

from __future__ import annotations

import hashlib
import math
import time
from typing import Any

from toolsweep.evaluator.types import EpisodeResult, Message



def pick_episodes(episodes: list[tuple[str, str]], per_cell: int = 5, max_failures: int = 20) -> list[str]:
    """Unit ids of one cell's episodes to trace, from (unit_id, termination) pairs: its failures first,
    then a deterministic sample of the answered ones."""
    ordered = sorted(episodes)
    failures = [u for u, t in ordered if t != "answered"][:max_failures]
    answered = [u for u, t in ordered if t == "answered"][:per_cell]
    return failures + answered


def traced_digest(unit_ids: list[str]) -> str:
    return hashlib.sha256("|".join(sorted(unit_ids)).encode()).hexdigest()[:16]


def trace_status(termination: str) -> Any:
    """The trace's state says how the episode ended: OK only when the agent answered; any other end
    (out of turns, a format error, an environment error...) is an error state whose description names
    it, so the Traces view never shows an episode that ran out of turns as a success."""
    from mlflow.entities import SpanStatus, SpanStatusCode

    if termination == "answered":
        return SpanStatus(SpanStatusCode.OK)  # OpenTelemetry keeps a description for errors only
    return SpanStatus(SpanStatusCode.ERROR, f"ended as {termination}")


def _msg(m: Message) -> dict[str, Any]:
    d: dict[str, Any] = {"role": m.role, "content": m.content or ""}
    if m.tool_calls:
        d["tool_calls"] = [tc.model_dump() for tc in m.tool_calls]
    if m.tool_call_id:
        d["tool_call_id"] = m.tool_call_id
    return d


def log_episode_trace(
    client: Any, experiment_id: str, run_id: str, result: EpisodeResult, finished_at: float | None = None
) -> str:
    """One episode as a trace: the root span holds the opening messages and the outcome, a child span
    per turn the model call (inputs: what was new since its last turn; outputs: its reply), and a
    span what the environment answered. Times are reconstructed from the recorded model latency and
    environment time of each turn, so the timeline shows where the episode spent its time; the trace starts when the
    episode did (`finished_at` less its wall time), so the MLflow UI's time filters find it."""
    unit, traj = result.unit, result.trajectory
    spent = max(result.wall_time_s, sum(max(s.usage.latency_s, 0.0) + max(s.usage.env_s, 0.0) for s in traj.steps))
    t = start = int(((finished_at if finished_at is not None else time.time()) - spent) * 1e9)
    opening = traj.messages[: len(traj.messages) - sum(1 + len(s.observation) for s in traj.steps)] or traj.messages[:2]
    root = client.start_trace(
        name=f"{unit.model} | {unit.benchmark} | {unit.setting} | {unit.task_id} | seed {unit.seed}",
        span_type="AGENT",
        inputs={"messages": [_msg(m) for m in opening]},
        tags={"toolsweep.unit_id": unit.unit_id, "toolsweep.termination": result.termination.value,
              "model": unit.model, "benchmark": unit.benchmark, "setting": unit.setting, "task_id": unit.task_id},
        experiment_id=experiment_id,
        run_id=run_id,
        start_time_ns=t,
    )
    trace_id = root.trace_id
    shown = [_msg(m) for m in opening]
    for i, step in enumerate(traj.steps, 1):
        latency_ns = int(max(step.usage.latency_s, 0.0) * 1e9)
        span = client.start_span(
            name=f"turn {i}", trace_id=trace_id, parent_id=root.span_id, span_type="CHAT_MODEL",
            inputs={"messages": shown}, start_time_ns=t,
            attributes={"prompt_tokens": step.usage.prompt_tokens, "completion_tokens": step.usage.completion_tokens,
                        "latency_s": step.usage.latency_s},
        )
        t += max(latency_ns, 1000)
        client.end_span(trace_id, span.span_id, outputs={"message": _msg(step.reply)}, end_time_ns=t)
        if step.observation:
            obs = client.start_span(name=f"turn {i}: environment", trace_id=trace_id, parent_id=root.span_id,
                                    span_type="TOOL", inputs={"message": _msg(step.reply)}, start_time_ns=t,
                                    attributes={"env_s": step.usage.env_s,
                                                **{k: str(v)[:500] for k, v in step.info.items()}})
            t += max(int(max(step.usage.env_s, 0.0) * 1e9), 1000)
            client.end_span(trace_id, obs.span_id, outputs={"messages": [_msg(m) for m in step.observation]},
                            end_time_ns=t)
        shown = [_msg(m) for m in step.observation]
    metrics = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in result.metrics.items()}
    client.end_trace(trace_id, outputs={"termination": result.termination.value, "metrics": metrics,
                                        "error": (result.error or "")[:2000]},
                     status=trace_status(result.termination.value),
                     end_time_ns=max(t + 1000, start + int(result.wall_time_s * 1e9)))
    return trace_id
