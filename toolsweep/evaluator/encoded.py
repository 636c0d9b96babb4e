"""A finished episode as a rollout worker hands it to the driver: its run-directory row already encoded.

Parsing a result back into pydantic in the driver cost more than playing the episode (about 0.6 ms
for a 10-turn trajectory against 0.3 ms to play it, bench/scheduler.py), and at a thousand episodes
in flight the driver was the bottleneck. So the worker, which built the result, encodes its row once
(its trajectory turn by turn, `TrajectoryJSON`); the driver reads only the few fields the scheduler and the live table need, and writes the row to
the write-ahead log as it came, with the two fields only the driver knows (the attempt it was, and
when it was recorded) spliced onto its end.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii
from typing import Any

from toolsweep.evaluator.rundir import outcome_columns, sampling_json, unit_columns
from toolsweep.evaluator.types import (
    ConsultStep, EpisodeResult, Message, Sampling, Step, TerminationReason, Trajectory, Usage, WorkUnit,
)

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
    started: str | None = None  # the lease token of the spare the worker started in this episode's slot (RolloutWorker.submit)

    def line(self, finished_at: float) -> str:
        """The write-ahead-log line: the worker's row with the driver's two fields appended."""
        return f'{self.row_json[:-1]},"attempts":{int(self.attempts)},"finished_at":{finished_at!r}}}'

    def __reduce__(self) -> Any:  # a plain tuple across processes (pickling slots dataclasses is slower)
        return (_rebuild, (self.unit_id, self.termination.value, self.error, self.metrics, self.tokens,
                           self.row_json, self.attempts, self.started))


_TERMINATIONS = {t.value: t for t in TerminationReason}


def _rebuild(unit_id: str, termination: str, error: str | None, metrics: dict[str, float], tokens: int,
             row_json: str, attempts: int, started: str | None = None) -> EncodedResult:
    return EncodedResult(unit_id, _TERMINATIONS[termination], error, metrics, tokens, row_json, attempts,
                         started=started)


class EncodedBatch(list):
    """The results one `collect` hands over. Pickled as one list per field, which costs about a third of
    pickling (and, in the driver, unpickling) each result on its own: a wave's last results come back
    in a batch of hundreds while the driver waits for them (bench/scheduler.py).

    `unreachable`: the models a request found nothing answering for since the last `collect`
    (`models.client.on_unreachable`), so the driver checks their endpoints without waiting for an episode
    to fail. `notices`: lines for the run's own output the worker's clients reported meanwhile (a model's
    requests in flight changed by its rate limit: `models.client.on_notice`)."""

    unreachable: tuple[str, ...] = ()
    notices: tuple[str, ...] = ()

    def __reduce__(self) -> Any:
        columns = (
            [r.unit_id for r in self], [r.termination.value for r in self], [r.error for r in self],
            [r.metrics for r in self], [r.tokens for r in self], [r.row_json for r in self], [r.attempts for r in self],
            [r.started for r in self],
        )
        state = {k: v for k, v in (("unreachable", self.unreachable), ("notices", self.notices)) if v}
        return (_rebuild_batch, columns, state or None)


def _rebuild_batch(*columns: list[Any]) -> EncodedBatch:
    return EncodedBatch(_rebuild(*fields) for fields in zip(*columns))


def _escaped(text: str) -> str:
    """`text` as it reads inside a JSON string (what `json.dumps` makes of it, without the quotes).
    Escaping maps each character on its own, so the escaped parts of a text join into the escaped text."""
    return encode_basestring_ascii(text)[1:-1]


def _json_of(model: type) -> Any:
    """`model`'s serialiser (what serialises a list entry of that type), without pydantic's Python wrapper."""
    to_json = model.__pydantic_serializer__.to_json
    return lambda entry, **include: to_json(entry, exclude_none=True, **include).decode()


_MESSAGE_JSON, _STEP_JSON, _CONSULT_JSON = _json_of(Message), _json_of(Step), _json_of(ConsultStep)
_USAGE_JSON = _json_of(Usage)
if tuple(Step.model_fields) != ("reply", "usage", "observation", "info"):  # what `_step_escaped` writes
    raise RuntimeError("Step's fields changed: TrajectoryJSON._step_escaped is out of date")


class _Entries:
    """One list of a trajectory, its entries encoded (escaped) in order."""

    __slots__ = ("encode", "parts", "last")

    def __init__(self, encode: Any) -> None:
        self.encode = encode  # an entry -> its JSON, escaped
        self.parts: list[str] = []
        self.last: Any = None

    def add(self, entries: list[Any]) -> None:
        done = len(self.parts)
        if done and (done > len(entries) or entries[done - 1] is not self.last):
            self.parts.clear()  # not the list encoded so far: encode it afresh
            done = 0
        if done < len(entries):
            self.parts += [self.encode(e) for e in entries[done:]]
            self.last = entries[-1]


class TrajectoryJSON:
    """A trajectory's JSON, escaped as the row's `trajectory` string, encoded entry by entry as the
    episode adds them.

    A worker's episodes of one wave finish within milliseconds of each other; encoding every row
    then was most of the wave's last burst of work, and the wave ended late by that much
    (bench/scheduler.py). `update` after each turn does the work while the episode waits for its
    model, and the end encodes only the last turn. The text is the same as `Trajectory.model_dump_json`
    (each entry serialised as its field's type); a trajectory only grows, and its entries are not
    changed once added (a list found shorter, or not ending in the entry last encoded, is encoded afresh).

    A step holds the same messages as the conversation (its reply, and what the environment showed):
    each is encoded once, and the step's text is put together from those parts: with 2 KB replies and
    4 KB tool outputs a 10-turn episode's encoding costs 0.57-0.62 of what it did with each step encoded
    whole (370-460 against 620-740 us); with messages of a few bytes, the same (bench/encode_turns.py)."""

    _OPEN = _escaped('{"messages":[')
    _BETWEEN = (_escaped('],"steps":['), _escaped('],"consults":['))
    _CLOSE = _escaped("]}")
    _STEP = (_escaped('{"reply":'), _escaped(',"usage":'), _escaped(',"observation":['), _escaped('],"info":{}'),
             _escaped("}"))  # the parts of a step between its encoded ones (an empty `info` as it reads)

    def __init__(self) -> None:
        # message id -> (the message, its latest escaped JSON): the message is held, so its id is not reused
        self._known: dict[int, tuple[Message, str]] = {}
        self._messages, self._steps, self._consults = (_Entries(self._message_escaped), _Entries(self._step_escaped),
                                                       _Entries(lambda c: _escaped(_CONSULT_JSON(c))))

    def _message_escaped(self, message: Message) -> str:
        """A conversation entry, encoded as it reads now (an object an environment sends again is encoded again)."""
        part = _escaped(_MESSAGE_JSON(message))
        self._known[id(message)] = (message, part)
        return part

    def _part_of(self, message: Message) -> str:
        """A step's message as its conversation entry was encoded (the conversation is encoded first)."""
        known = self._known.get(id(message))
        return known[1] if known is not None else self._message_escaped(message)

    def _step_escaped(self, step: Step) -> str:
        """The step's JSON as `Step`'s serialiser writes it, its messages taken as encoded already."""
        opening, usage, observation, info, end = self._STEP
        if step.info:
            info = _escaped(f'],"info":{_STEP_JSON(step, include={"info"})[8:-1]}')  # {"info":{...}} -> {...}
        return "".join((opening, self._part_of(step.reply), usage, _escaped(_USAGE_JSON(step.usage)),
                        observation, ",".join([self._part_of(m) for m in step.observation]), info, end))

    def update(self, trajectory: Trajectory) -> None:
        """Encode the entries added since the last call."""
        self._messages.add(trajectory.messages)
        self._steps.add(trajectory.steps)
        if trajectory.consults or self._consults.parts:
            self._consults.add(trajectory.consults)

    def escaped(self, trajectory: Trajectory) -> str:
        """The whole trajectory's JSON, escaped (what `json.dumps` puts between the quotes)."""
        self.update(trajectory)
        return "".join((self._OPEN, ",".join(self._messages.parts), self._BETWEEN[0], ",".join(self._steps.parts),
                        self._BETWEEN[1], ",".join(self._consults.parts), self._CLOSE))


class EpisodeRow:
    """An episode's row, encoded while the episode plays: its trajectory turn by turn (`TrajectoryJSON`),
    and the columns its unit decides (`unit_columns`) once, after its first turn.

    A worker's episodes of one wave start within milliseconds of each other and end within milliseconds
    of each other, and at both ends each waits behind the others' work; in between they wait on their
    model. So what can be encoded in between is, and the end encodes only what the end decides (how the
    episode ended, its metrics, its last turn): one worker's wave of 512 episodes of 10 turns, played
    alone, spent 33-35 ms on its last turn before and 26-31 ms after."""

    __slots__ = ("unit", "trajectory", "_head")

    def __init__(self, unit: WorkUnit) -> None:
        self.unit = unit
        self.trajectory = TrajectoryJSON()
        self._head: str | None = None

    def update(self, trajectory: Trajectory) -> None:
        """The episode's `on_turn`: encode what was added since the last call (and, once the first turn
        is in, the unit's columns)."""
        self.trajectory.update(trajectory)
        if self._head is None and trajectory.steps:
            self._head = _row_head(self.unit)

    def head(self, unit: WorkUnit) -> str:
        """The row's columns decided by `unit` (the one this row follows, unless a result was rebuilt)."""
        if unit is not self.unit:
            return _row_head(unit)
        if self._head is None:
            self._head = _row_head(unit)
        return self._head


def _row_head(unit: WorkUnit) -> str:
    """The row's first columns, those the unit decides, as `json.dumps` writes them (no closing brace)."""
    return json.dumps(unit_columns(unit))[:-1]


def encode_result(result: EpisodeResult, row: EpisodeRow | None = None) -> EncodedResult:
    """Encode a finished episode once, where it was played; `row` is the encoder that followed the
    episode's turns, if one did. The row's text is what `json.dumps` makes of `row_fields` (without the
    driver's two fields) followed by the trajectory: the columns the unit decides come encoded from `row`."""
    if row is None:
        head, escaped = _row_head(result.unit), _escaped(result.trajectory.model_dump_json(exclude_none=True))
    else:
        head, escaped = row.head(result.unit), row.trajectory.escaped(result.trajectory)
    outcome = outcome_columns(result, finished_at=math.nan)
    for key in _DRIVER_FIELDS:
        del outcome[key]
    fields = json.dumps(outcome, allow_nan=True)
    return EncodedResult(
        unit_id=result.unit_id,
        termination=result.termination,
        error=result.error,
        metrics=result.metrics,
        tokens=outcome["prompt_tokens"] + outcome["completion_tokens"] + result.trajectory.helper_tokens,
        row_json=f'{head}, {fields[1:-1]}, "trajectory": "{escaped}"}}',  # as json.dumps writes the whole row
        attempts=result.attempts,
        unit=result.unit,
    )


def encode_failure(unit: WorkUnit, termination: TerminationReason, error: str | None) -> EncodedResult:
    """A unit that produced no episode (the driver's own record of a dead worker's unit given up)."""
    return encode_result(EpisodeResult(unit=unit, termination=termination, error=error))


UnitWire = list
"""A unit as the driver leases it: [unit_id, sweep, model, benchmark, setting, task_id, seed, context,
sampling JSON]. Plain values pickle in a fraction of a WorkUnit's JSON round trip, and the worker takes
the driver's id as it is rather than hashing the unit again. A list, not a tuple: Ray packs a list of
strings and ints as it is, where it pickles each tuple on its own (0.3 against 0.75 ms for 512 units)."""


def pack_unit(unit: WorkUnit) -> UnitWire:
    """The unit for `submit`."""
    return [unit.unit_id, unit.sweep, unit.model, unit.benchmark, unit.setting, unit.task_id, unit.seed,
            unit.context, sampling_json(unit.sampling)]


class UnitUnpacker:
    """Rebuilds leased units in a worker: each distinct sampling is validated once, and shared by the
    units that have it."""

    def __init__(self) -> None:
        self._samplings: dict[str, Sampling] = {}

    def __call__(self, wire: UnitWire) -> WorkUnit:
        unit_id, sweep, model, benchmark, setting, task_id, seed, context, sampling_text = wire
        sampling = self._samplings.get(sampling_text)
        if sampling is None:
            sampling = self._samplings[sampling_text] = Sampling.model_validate_json(sampling_text)
        # validated, which costs half what model_construct does (pydantic-core against Python)
        unit = WorkUnit(sweep=sweep, model=model, benchmark=benchmark, setting=setting, task_id=task_id, seed=seed,
                        sampling=sampling, context=context)
        unit.__dict__["unit_id"] = unit_id  # the cached_property's slot: the driver's id, not recomputed
        return unit
