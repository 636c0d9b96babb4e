"""A finished episode as a rollout worker hands it to the driver: its run-directory row already encoded.

Parsing a result back into pydantic in the driver cost more than playing the episode (about 0.6 ms
for a 10-turn trajectory against 0.3 ms to play it, bench/scheduler.py), and at a thousand episodes
in flight the driver was the bottleneck. So the worker, which built the result, encodes its row once;
the driver reads only the few fields the scheduler and the live table need, and writes the row to
the write-ahead log as it came, with the two fields only the driver knows (the attempt it was, and
when it was recorded) spliced onto its end.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from toolsweep.evaluator.rundir import result_to_row, sampling_json
from toolsweep.evaluator.types import EpisodeResult, Sampling, TerminationReason, WorkUnit

_DRIVER_FIELDS = ("attempts", "finished_at")


@dataclass(slots=True)
class EncodedResult:
    """The scheduler's and the sink's view of a finished episode, with its row as JSON.

    `unit` is the driver's own WorkUnit (from the lease), set by the scheduler on arrival: the worker
    sends only the id, so a unit is never re-validated or re-hashed on the way back."""

    unit_id: str
    termination: TerminationReason
    error: str | None
    metrics: dict[str, float]
    tokens: int  # every token the served models processed: the agent's and the helpers'
    row_json: str  # the run-directory row without `attempts` and `finished_at` (a JSON object)
    attempts: int = 1
    unit: WorkUnit | None = None

    def line(self, finished_at: float) -> str:
        """The write-ahead-log line: the worker's row with the driver's two fields appended."""
        return f'{self.row_json[:-1]},"attempts":{int(self.attempts)},"finished_at":{finished_at!r}}}'

    def __reduce__(self) -> Any:  # a plain tuple across processes (pickling slots dataclasses is slower)
        return (_rebuild, (self.unit_id, self.termination.value, self.error, self.metrics, self.tokens,
                           self.row_json, self.attempts))


def _rebuild(unit_id: str, termination: str, error: str | None, metrics: dict[str, float], tokens: int,
             row_json: str, attempts: int) -> EncodedResult:
    return EncodedResult(unit_id, TerminationReason(termination), error, metrics, tokens, row_json, attempts)


def encode_result(result: EpisodeResult) -> EncodedResult:
    """Encode a finished episode once, where it was played."""
    row = result_to_row(result, finished_at=math.nan)
    for key in _DRIVER_FIELDS:
        del row[key]
    return EncodedResult(
        unit_id=result.unit_id,
        termination=result.termination,
        error=result.error,
        metrics=result.metrics,
        tokens=row["prompt_tokens"] + row["completion_tokens"] + result.trajectory.helper_tokens,
        row_json=json.dumps(row, allow_nan=True),
        attempts=result.attempts,
        unit=result.unit,
    )


def encode_failure(unit: WorkUnit, termination: TerminationReason, error: str | None) -> EncodedResult:
    """A unit that produced no episode (the driver's own record of a dead worker's unit given up)."""
    return encode_result(EpisodeResult(unit=unit, termination=termination, error=error))


UnitWire = tuple
"""A unit as the driver leases it: (unit_id, sweep, model, benchmark, setting, task_id, seed, context,
sampling JSON). A tuple pickles in a fraction of a WorkUnit's JSON round trip, and the worker takes
the driver's id as it is rather than hashing the unit again."""


def pack_unit(unit: WorkUnit) -> UnitWire:
    """The unit for `submit`."""
    return (unit.unit_id, unit.sweep, unit.model, unit.benchmark, unit.setting, unit.task_id, unit.seed,
            unit.context, sampling_json(unit.sampling))


class UnitUnpacker:
    """Rebuilds leased units in a worker: each distinct sampling is validated once, the units are
    constructed from fields the driver's own WorkUnit already validated."""

    def __init__(self) -> None:
        self._samplings: dict[str, Sampling] = {}

    def __call__(self, wire: UnitWire) -> WorkUnit:
        unit_id, sweep, model, benchmark, setting, task_id, seed, context, sampling_text = wire
        sampling = self._samplings.get(sampling_text)
        if sampling is None:
            sampling = self._samplings[sampling_text] = Sampling.model_validate_json(sampling_text)
        unit = WorkUnit.model_construct(sweep=sweep, model=model, benchmark=benchmark, setting=setting,
                                        task_id=task_id, seed=seed, sampling=sampling, context=context)
        unit.__dict__["unit_id"] = unit_id  # the cached_property's slot: the driver's id, not recomputed
        return unit
