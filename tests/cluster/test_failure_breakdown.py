"""The exit message's breakdown of units given up, by model and cause, read from the results the
scheduler gives up (the texts below are the ones it writes)."""

from __future__ import annotations

from toolsweep.cluster.record import failure_breakdown
from toolsweep.evaluator.types import EpisodeResult, TerminationReason, WorkUnit


def _gave_up(model: str, termination: TerminationReason, error: str, attempts: int = 3) -> EpisodeResult:
    unit = WorkUnit(sweep="s", model=model, benchmark="fake", setting="small", task_id="t0", seed=0)
    return EpisodeResult(unit=unit, termination=termination, error=error, attempts=attempts)


def test_each_cause_is_named_per_model():
    timeout = ("gave up after 3 attempts: episode exceeded 300 s of working wall-clock time (an infrastructure "
               "guard: retried, not scored)")
    results = [
        _gave_up("hf", TerminationReason.TIMEOUT, timeout),
        _gave_up("hf", TerminationReason.TIMEOUT, timeout),
        _gave_up("served", TerminationReason.INFRA_ERROR,
                 "endpoint http://127.0.0.1:1/v1 down for 61 s, past the sweep's outage budget (outage_budget_s=60)"),
        _gave_up("served", TerminationReason.INFRA_ERROR, "gave up after 3 attempts: rollout worker died"),
        _gave_up("served", TerminationReason.INFRA_ERROR, "gave up after 2 attempts: HTTP 500", attempts=2),
    ]
    assert failure_breakdown(results) == (
        "hf: 2 timeout; served: 1 endpoint outage, 1 rollout worker died, 1 infra error after 2 attempts")
