"""A reader sees one row per unit, the first record of it, whatever the files hold: a unit twice in one
part, in two parts, or in a part and a write-ahead log (a sealed log and its part exist together for a
moment; a killed writer can leave more). A count or a metric read twice would be a different result."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from toolsweep.evaluator import rundir
from toolsweep.evaluator.rundir import SCHEMA, RunDirectory
from toolsweep.evaluator.sweep import BenchmarkPlan, expand_units
from toolsweep.evaluator.types import EpisodeResult, Sampling, TerminationReason


def results(n: int, value: float) -> list[EpisodeResult]:
    units = expand_units("s", ["m"], [BenchmarkPlan("fake", {"small": [f"t{i}" for i in range(n)]}, [0])], Sampling())
    return [EpisodeResult(unit=u, termination=TerminationReason.ANSWERED, metrics={"accuracy": value}) for u in units]


def write_part(rd: RunDirectory, index: int, res: list[EpisodeResult]) -> None:
    rd.episodes_dir.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist([rundir.result_to_row(r) for r in res], schema=SCHEMA)
    pq.write_table(table, rd.episodes_dir / f"part-{index:05d}.parquet")


def read_back(rd: RunDirectory) -> dict[str, float]:
    table = rd.read_table()
    ids = table.column("unit_id").to_pylist()
    assert len(ids) == len(set(ids)), "a unit was read twice"
    return {r.unit_id: r.metrics["accuracy"] for r in rd.read_results()}


def test_a_unit_in_two_parts_is_read_once_from_the_first(tmp_path):
    rd = RunDirectory(tmp_path / "run")
    first, second = results(6, 1.0), results(6, 0.0)
    write_part(rd, 0, first[:3])
    write_part(rd, 1, second[1:5])  # units 1 and 2 again, with other values, then 3 and 4
    back = read_back(rd)
    assert back == {first[0].unit_id: 1.0, first[1].unit_id: 1.0, first[2].unit_id: 1.0,
                    second[3].unit_id: 0.0, second[4].unit_id: 0.0}


def test_a_unit_twice_in_one_part_is_read_once_from_the_first_row(tmp_path):
    rd = RunDirectory(tmp_path / "run")
    one, other = results(6, 1.0), results(6, 0.0)
    write_part(rd, 0, [one[0], other[0], one[1], other[1], other[1], one[2]])
    assert read_back(rd) == {one[0].unit_id: 1.0, one[1].unit_id: 1.0, one[2].unit_id: 1.0}


def test_a_unit_in_a_part_and_in_the_write_ahead_log_is_read_once(tmp_path):
    rd = RunDirectory(tmp_path / "run")
    one, other = results(6, 1.0), results(6, 0.0)
    write_part(rd, 0, one[:2])
    lines = [rundir.result_to_row(r) for r in (other[1], other[2], other[2], other[3])]
    rd.pending_path.write_text("".join(json.dumps(row) + "\n" for row in lines))
    assert read_back(rd) == {one[0].unit_id: 1.0, one[1].unit_id: 1.0, other[2].unit_id: 0.0, other[3].unit_id: 0.0}
