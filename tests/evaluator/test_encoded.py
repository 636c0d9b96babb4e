"""A result encoded by the worker that played it is recorded exactly as the driver would have
recorded the result itself, and crosses a process boundary without its trajectory being parsed."""

from __future__ import annotations

import json
import math
import pickle

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
