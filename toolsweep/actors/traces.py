"""Episode transcripts as MLflow traces, linked to their cell's run: MLflow's own Traces view is the
transcript viewer (a span per turn: the model call with what it was shown and what it replied, its
tokens and latency; then what the environment answered), and the episode's termination and metrics
are the trace's tags and outputs.

Which episodes: every one that did not end as `answered` (up to `max_failures` per cell) and the first
`per_cell` answered ones in unit-id order, so a 50k-unit sweep logs a few hundred traces, not 50k.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import dataclass
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


@dataclass
class EpisodeTrace:
    """One episode's trace, built in memory: what `export_traces` writes in bulk."""

    info: Any  # mlflow.entities.TraceInfo
    spans: list[Any]  # mlflow.entities.Span, the root first


def trace_ids(run_id: str, unit_id: str, n_spans: int) -> tuple[str, list[str]]:
    """The trace's id and its spans' ids, derived from the cell's run and the unit: an export repeated
    after an interrupt (or a re-sync) writes the same trace again, never a second copy."""
    seed = hashlib.sha256(f"{run_id}|{unit_id}".encode()).hexdigest()
    spans = [hashlib.sha256(f"{seed}|{i}".encode()).hexdigest()[:16] for i in range(n_spans)]
    return "tr-" + seed[:32], spans


def trace_name(unit: Any) -> str:
    """What the Traces list shows for an episode: whose it is, on what, and which seed."""
    return f"{unit.model} | {unit.benchmark} | {unit.setting} | {unit.task_id} | seed {unit.seed}"


def _span(trace_id: str, span_id: str, parent: str | None, name: str, span_type: str, start_ns: int, end_ns: int,
          inputs: Any, outputs: Any, attributes: dict[str, Any] | None = None, status: Any = None) -> Any:
    """An ended span as MLflow's own Span entity, built from its dictionary form (attribute values as JSON)."""
    from mlflow.entities import Span, SpanStatus, SpanStatusCode

    status = status or SpanStatus(SpanStatusCode.OK)
    attrs = {"mlflow.traceRequestId": json.dumps(trace_id), "mlflow.spanType": json.dumps(span_type),
             "mlflow.spanInputs": json.dumps(inputs, default=str),
             "mlflow.spanOutputs": json.dumps(outputs, default=str),
             **{k: json.dumps(v, default=str) for k, v in (attributes or {}).items()}}
    return Span.from_dict({
        "trace_id": trace_id, "span_id": span_id, "parent_span_id": parent, "name": name,
        "start_time_unix_nano": start_ns, "end_time_unix_nano": end_ns, "events": [],
        "status": {"code": status.status_code.value, "message": status.description or ""},
        "attributes": attrs,
    })


PREVIEW_CHARS = 1000  # MLflow's own cut of a trace's request and response previews


def episode_trace(experiment_id: str, run_id: str, result: EpisodeResult, finished_at: float | None = None) -> EpisodeTrace:
    """One episode as a trace: the root span holds the opening messages and the outcome, a child span
    per turn the model call (inputs: what was new since its last turn; outputs: its reply), and a
    span what the environment answered. Times are reconstructed from the recorded model latency and
    environment time of each turn, so the timeline shows where the episode spent its time; the trace
    starts when the episode did (`finished_at` less its wall time), so the MLflow UI's time filters
    find it. Its name and tags say model, benchmark, setting, task and seed (the Traces list shows them)."""
    from mlflow.entities import SpanStatusCode, TraceInfo, TraceLocation, TraceState
    from mlflow.tracing.constant import TRACE_SCHEMA_VERSION, TRACE_SCHEMA_VERSION_KEY, TraceMetadataKey

    unit, traj = result.unit, result.trajectory
    spent = max(result.wall_time_s, sum(max(s.usage.latency_s, 0.0) + max(s.usage.env_s, 0.0) for s in traj.steps))
    t = start = int(((finished_at if finished_at is not None else time.time()) - spent) * 1e9)
    opening = traj.messages[: len(traj.messages) - sum(1 + len(s.observation) for s in traj.steps)] or traj.messages[:2]
    n_spans = 1 + sum(2 if s.observation else 1 for s in traj.steps)
    trace_id, ids = trace_ids(run_id, unit.unit_id, n_spans)
    root_id, next_id = ids[0], iter(ids[1:])
    spans: list[Any] = []
    shown = [_msg(m) for m in opening]
    for i, step in enumerate(traj.steps, 1):
        end = t + max(int(max(step.usage.latency_s, 0.0) * 1e9), 1000)
        spans.append(_span(trace_id, next(next_id), root_id, f"turn {i}", "CHAT_MODEL", t, end,
                           {"messages": shown}, {"message": _msg(step.reply)},
                           {"prompt_tokens": step.usage.prompt_tokens,
                            "completion_tokens": step.usage.completion_tokens, "latency_s": step.usage.latency_s}))
        t = end
        if step.observation:
            end = t + max(int(max(step.usage.env_s, 0.0) * 1e9), 1000)
            spans.append(_span(trace_id, next(next_id), root_id, f"turn {i}: environment", "TOOL", t, end,
                               {"message": _msg(step.reply)}, {"messages": [_msg(m) for m in step.observation]},
                               {"env_s": step.usage.env_s, **{k: str(v)[:500] for k, v in step.info.items()}}))
            t = end
        shown = [_msg(m) for m in step.observation]
    metrics = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in result.metrics.items()}
    outputs = {"termination": result.termination.value, "metrics": metrics, "error": (result.error or "")[:2000]}
    status = trace_status(result.termination.value)
    end = max(t + 1000, start + int(result.wall_time_s * 1e9))
    name = trace_name(unit)
    inputs = {"messages": [_msg(m) for m in opening]}
    root = _span(trace_id, root_id, None, name, "AGENT", start, end, inputs, outputs, status=status)
    info = TraceInfo(
        trace_id=trace_id,
        trace_location=TraceLocation.from_experiment_id(experiment_id),
        request_time=start // 1_000_000,
        execution_duration=(end - start) // 1_000_000,
        state=TraceState.OK if status.status_code == SpanStatusCode.OK else TraceState.ERROR,
        request_preview=f"{name}: {_opening_question(opening)}"[:PREVIEW_CHARS],
        response_preview=json.dumps(outputs, default=str)[:PREVIEW_CHARS],
        trace_metadata={TraceMetadataKey.SOURCE_RUN: run_id, TRACE_SCHEMA_VERSION_KEY: str(TRACE_SCHEMA_VERSION)},
        tags={"mlflow.traceName": name, "toolsweep.unit_id": unit.unit_id,
              "toolsweep.termination": result.termination.value, "model": unit.model, "benchmark": unit.benchmark,
              "setting": unit.setting, "task_id": unit.task_id, "seed": str(unit.seed)},
    )
    return EpisodeTrace(info, [root, *spans])


def _opening_question(opening: list[Message]) -> str:
    """The last opening user message (the task as the agent got it), for the trace's request preview."""
    users = [m.content for m in opening if m.role == "user" and m.content]
    return (users[-1] if users else "").strip()


EXPORT_SPANS_PER_CALL = 400
"""Spans per `log_spans` call: one database transaction (or one HTTP request) writes many traces, the
request stays a few MB."""


def export_traces(tracking_uri: str, traces: list[EpisodeTrace]) -> list[str]:
    """Write finished traces in bulk: each trace's info (its tags, its run), then their spans, a few
    hundred per call. MLflow's own exporter writes a span per call from a queue that must be waited
    for (~0.2 s a trace on sqlite); this writes the same entities, ~50x fewer calls. Returns the ids."""
    from mlflow.tracing.client import TracingClient

    client = TracingClient(tracking_uri)
    for t in traces:
        client.start_trace(t.info)
    batch: list[Any] = []
    for t in traces:
        batch.extend(t.spans)
        if len(batch) >= EXPORT_SPANS_PER_CALL:
            client.log_spans(t.info.experiment_id, batch)
            batch = []
    if batch:
        client.log_spans(traces[-1].info.experiment_id, batch)
    return [t.info.trace_id for t in traces]


def log_episode_trace(
    client: Any, experiment_id: str, run_id: str, result: EpisodeResult, finished_at: float | None = None
) -> str:
    """One episode's trace written at once (`episode_trace`, `export_traces`); returns its id."""
    return export_traces(client.tracking_uri, [episode_trace(experiment_id, run_id, result, finished_at)])[0]
