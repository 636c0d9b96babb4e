"""A result encoded by the worker that played it is recorded exactly as the driver would have
recorded the result itself, and crosses a process boundary without its trajectory being parsed."""

from __future__ import annotations

import json
import math
import pickle

import pytest

from toolsweep.evaluator.encoded import EncodedResult, encode_result
from toolsweep.evaluator.rundir import EpisodeWriter, RunDirectory, result_to_row
from toolsweep.evaluator.types import (
    EpisodeResult,
    Message,
    Step,
    TerminationReason,
    Trajectory,
    Usage,
    WorkUnit,
)


def _result(task: str = "t1") -> EpisodeResult:
    unit = WorkUnit(sweep="s", model="m", benchmark="b", setting="x", task_id=task, seed=3, context="c")
    reply = Message(role="assistant", content="hé \"quoted\"\n", tool_calls=None)
    traj = Trajectory(messages=[Message(role="user", content="q"), reply],
                      steps=[Step(reply=reply, usage=Usage(prompt_tokens=7, completion_tokens=2),
                                  observation=[Message(role="user", content="ok")], info={"flag": True})])
    return EpisodeResult(unit=unit, termination=TerminationReason.ANSWERED,
                         metrics={"acc": 1.0, "undefined": math.nan}, trajectory=traj,
                         error=None, wall_time_s=0.25, node_id="n", worker_id="w")


def test_the_encoded_line_is_the_row_the_driver_would_write():
    result = _result()
    result.attempts = 2
    encoded = encode_result(result)
    encoded.attempts = 2
    line = json.loads(encoded.line(1234.5))
    expected = json.loads(json.dumps(result_to_row(result, finished_at=1234.5), allow_nan=True))
    assert math.isnan(json.loads(line["metrics"])["undefined"])
    assert line == expected
    assert encoded.tokens == 9 and encoded.termination is TerminationReason.ANSWERED


def test_pickled_across_processes_it_carries_no_unit_and_keeps_every_field():
    encoded = encode_result(_result())
    back = pickle.loads(pickle.dumps(encoded))
    assert isinstance(back, EncodedResult) and back.unit is None  # the driver sets its own from the lease
    assert (back.unit_id, back.termination, back.row_json, back.tokens) == (
        encoded.unit_id, encoded.termination, encoded.row_json, encoded.tokens)


def test_the_writer_records_encoded_results_once_and_reads_them_back(tmp_path):
    run_dir = RunDirectory(tmp_path / "run")
    run_dir.path.mkdir()
    writer = EpisodeWriter(run_dir)
    first, second = encode_result(_result("t1")), encode_result(_result("t2"))
    assert writer.append([first, second]) == [first, second]
    assert writer.append([encode_result(_result("t1"))]) == []  # a unit is recorded once
    writer.close()
    rows = {r["task_id"]: r for r in run_dir.read_table().to_pylist()}
    assert set(rows) == {"t1", "t2"} and rows["t1"]["unit_id"] == first.unit_id
    assert run_dir.read_results()[0].trajectory.steps[0].info == {"flag": True}


def test_a_leased_unit_arrives_as_the_same_unit_with_the_drivers_id():
    from toolsweep.evaluator.encoded import UnitUnpacker, pack_unit
    from toolsweep.evaluator.types import Sampling

    unit = WorkUnit(sweep="s", model="m", benchmark="b", setting="x", task_id="t9", seed=1000, context="ctx",
                    sampling=Sampling(temperature=0.7, stop=["Observation:"]))
    unpack = UnitUnpacker()
    back = unpack(pickle.loads(pickle.dumps(pack_unit(unit))))
    assert back == unit and back.unit_id == unit.unit_id and back.rng_seed == unit.rng_seed
    # the id travels with the unit: a worker never re-hashes it (the driver's id is the record's key)
    wire = list(pack_unit(unit))
    wire[0] = "driver-id"
    assert unpack(tuple(wire)).unit_id == "driver-id"
    # one Sampling per distinct sampling JSON, shared by the units that have it
    other = unit.model_copy(update={"task_id": "t10"})
    assert unpack(pack_unit(other)).sampling is back.sampling


def _tricky_trajectory() -> Trajectory:
    """Everything the JSON of a trajectory has to get right: escapes, non-ASCII (in and beyond the BMP),
    None and NaN inside `info`, tool calls, a message's extra fields, list content and consults."""
    from toolsweep.evaluator.types import ConsultStep, FunctionCall, ToolCall

    call = ToolCall(id="c\u00e91", function=FunctionCall(name="look", arguments='{"q": "a\\"b"}'))
    reply = Message(role="assistant", content=None, tool_calls=[call], reasoning="\U0001f914 hmm")
    shown = [Message(role="tool", tool_call_id="c\u00e91", content="line1\nline2\t\u2028 \\ \x01"),
             Message(role="user", content=[{"type": "text", "text": "caf\u00e9"}])]
    return Trajectory(
        messages=[Message(role="system", content="be brief"), Message(role="user", content="\"hi\""), reply, *shown],
        steps=[Step(reply=reply, usage=Usage(prompt_tokens=3, completion_tokens=4, latency_s=0.5), observation=shown,
                    info={"none": None, "nan": math.nan, "inf": math.inf, "nested": {"k": [1, None, "\u00fc"]}}),
               # a step whose messages the conversation does not hold, with nothing shown and no info
               Step(reply=Message(role="assistant", content="late \u00e9"), usage=Usage(latency_s=math.nan))],
        consults=[ConsultStep(role="judge", request=[Message(role="user", content="grade")],
                              reply=Message(role="assistant", content="YES"), error=None)],
    )


def test_a_trajectory_encoded_turn_by_turn_reads_exactly_as_one_encoded_at_the_end():
    from toolsweep.evaluator.encoded import EpisodeRow

    full = _tricky_trajectory()
    growing = Trajectory()
    encoder = EpisodeRow(_result().unit)
    # the order run_episode grows a trajectory in, with an update after every addition
    for add in ([full.messages[0], full.messages[1]], [full.messages[2]]):
        growing.messages.extend(add)
        encoder.update(growing)
    growing.consults.append(full.consults[0])
    encoder.update(growing)
    growing.steps.append(full.steps[0])
    growing.messages.extend(full.messages[3:])
    encoder.update(growing)
    growing.steps.append(full.steps[1])
    result = EpisodeResult(unit=_result().unit, termination=TerminationReason.ANSWERED, trajectory=growing)
    assert encode_result(result, encoder).row_json == encode_result(result).row_json
    assert json.loads(json.loads(encode_result(result, encoder).row_json)["trajectory"]) == json.loads(
        full.model_dump_json(exclude_none=True))


def test_an_encoder_never_serves_a_list_it_did_not_encode():
    from toolsweep.evaluator.encoded import EpisodeRow

    full = _tricky_trajectory()
    encoder = EpisodeRow(_result().unit)
    encoder.update(full)
    shorter = full.model_copy(update={"messages": full.messages[:2]})  # truncated
    assert json.loads(_unescape(encoder.trajectory.escaped(shorter))) == json.loads(shorter.model_dump_json(exclude_none=True))
    swapped = full.model_copy(update={"messages": [Message(role="user", content=f"m{i}") for i in range(5)]})
    assert json.loads(_unescape(encoder.trajectory.escaped(swapped))) == json.loads(swapped.model_dump_json(exclude_none=True))
    empty = EpisodeResult(unit=_result().unit, termination=TerminationReason.ENV_ERROR, error="boom")
    assert encode_result(empty, encoder).row_json == encode_result(empty).row_json  # a result rebuilt after a failure


def test_a_message_object_sent_again_after_a_change_reads_as_it_was_each_time():
    """An environment may keep one Message object and send it again with new content: each entry of the
    conversation reads as it was when added, and each step shows what its conversation entry showed
    (a step's messages are taken from the conversation's encoding, never from an older one)."""
    from toolsweep.evaluator.encoded import TrajectoryJSON

    status = Message(role="user", content="")
    trajectory = Trajectory(messages=[Message(role="system", content="s")])
    encoder = TrajectoryJSON()
    for turn in (1, 2):
        status.content = f"step {turn}"
        reply = Message(role="assistant", content=f"r{turn}")
        trajectory.messages.append(reply)
        trajectory.steps.append(Step(reply=reply, observation=[status]))
        trajectory.messages.append(status)
        encoder.update(trajectory)
    written = json.loads(_unescape(encoder.escaped(trajectory)))
    assert [m["content"] for m in written["messages"]] == ["s", "r1", "step 1", "r2", "step 2"]
    assert [step["observation"][0]["content"] for step in written["steps"]] == ["step 1", "step 2"]


@pytest.mark.parametrize("wall", [0.25, 1e-7, 12345678.9, math.nan, math.inf])
def test_the_row_is_byte_for_byte_what_json_dumps_makes_of_the_rows_columns(wall):
    """The row is written column by column (the unit's columns encoded before the episode ends): the
    text must stay exactly `json.dumps` of `row_fields`, whatever the values; a column added to the row
    and not to the encoder fails here."""
    from toolsweep.evaluator.encoded import EpisodeRow
    from toolsweep.evaluator.rundir import row_fields

    for error in (None, "boom \"x\"\n\u00e9\U0001f914 \x01"):
        result = _result()
        result.trajectory = _tricky_trajectory()
        result.metrics = {"acc": 0.5, "nan": math.nan, "inf": -math.inf}
        result.wall_time_s, result.error, result.node_id, result.worker_id = wall, error, "n\u00f6de", 'w"1'
        columns = row_fields(result, finished_at=0.0)
        del columns["attempts"], columns["finished_at"]
        columns["trajectory"] = result.trajectory.model_dump_json(exclude_none=True)
        expected = json.dumps(columns, allow_nan=True)
        assert encode_result(result).row_json == expected
        row = EpisodeRow(result.unit)
        row.update(result.trajectory)  # the unit's columns are encoded here, before the end
        assert encode_result(result, row).row_json == expected
        rebuilt = EpisodeResult(unit=result.unit.model_copy(update={"task_id": "other"}),
                                termination=TerminationReason.ENV_ERROR, error=error)
        assert json.loads(encode_result(rebuilt, row).row_json)["task_id"] == "other"  # not the row's unit


def _unescape(escaped: str) -> str:
    return json.loads(f'"{escaped}"')


def test_a_batch_crosses_processes_as_columns_and_arrives_as_the_same_results():
    from toolsweep.evaluator.encoded import EncodedBatch

    batch = EncodedBatch([encode_result(_result("t1")), encode_result(_result("t2"))])
    batch[1].attempts, batch[1].error = 3, "late"
    back = pickle.loads(pickle.dumps(batch))
    assert isinstance(back, EncodedBatch) and len(back) == 2
    fields = lambda r: (r.unit_id, r.termination, r.error, json.dumps(r.metrics), r.tokens, r.row_json,  # noqa: E731
                        r.attempts)  # (the metrics hold a NaN)
    assert [fields(r) for r in back] == [fields(r) for r in batch]
    assert all(r.unit is None for r in back) and back[0].termination is TerminationReason.ANSWERED
    assert pickle.loads(pickle.dumps(EncodedBatch())) == []
    # the side channels cross too: the models found unreachable, and the lines for the driver's log
    batch.unreachable, batch.notices = ("m",), ("worker-0: model m: 4 requests in flight (was 8; most requests rate limited (429))",)
    back = pickle.loads(pickle.dumps(batch))
    assert back.unreachable == ("m",) and back.notices == batch.notices
