"""Unit ids held as sha256 digests: the same ids as `WorkUnit.unit_id`, sets that read like sets of
hex strings, and the writer's once-only guard kept without a Python string per recorded unit."""

import hashlib
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from toolsweep.evaluator.rundir import SCHEMA, EpisodeWriter, RunDirectory, result_to_row, unit_id_digests
from toolsweep.evaluator.sweep import BenchmarkPlan, expand_units
from toolsweep.evaluator.unit_ids import DIGEST, GrowingUnitIds, UnitIds, digests_from_hex, hex_of
from toolsweep.evaluator.types import EpisodeResult, Sampling, TerminationReason, WorkUnit

PLANS = [BenchmarkPlan("fake", {"small": ["a", "b", "c"], "large": ["a", "é"]}, [0, 7]),
         BenchmarkPlan("other", {"only": ["x"]}, [3])]


def _space():
    return expand_units("s", ["m1", "m2"], PLANS, Sampling(temperature=0.5),
                        contexts={("m1", "fake"): "ctx-1", ("m2", "other"): "ctx-2"})


def _results(units):
    return [EpisodeResult(unit=u, termination=TerminationReason.ANSWERED, metrics={"acc": 1.0}) for u in units]


def test_every_unit_has_the_id_workunit_computes_in_id_order():
    space = _space()
    units = list(space)
    assert len(units) == 2 * (3 * 2 + 2 * 2 + 1)
    fresh = [WorkUnit(**u.model_dump()).unit_id for u in units]  # hashed again from the unit's fields
    assert [u.unit_id for u in units] == fresh == sorted(fresh)
    assert list(space.ids) == fresh and space[-1].unit_id == fresh[-1]
    assert {u.context for u in units} == {"", "ctx-1", "ctx-2"}


def test_select_leaves_out_exactly_the_recorded_ids():
    space = _space()
    ids = list(space.ids)
    recorded = set(random.Random(0).sample(ids, 7))
    expected = [i for i in ids if i not in recorded]
    for skip in (recorded, UnitIds.from_hex(recorded)):
        todo = space.select(skip)
        assert [u.unit_id for u in todo] == expected
        later = set(expected[:3])
        assert [u.unit_id for u in todo.without(UnitIds.from_hex(later))] == expected[3:]
    assert [u.unit_id for u in space.select()] == ids


def test_unit_ids_read_like_a_frozenset_of_hex_ids():
    ids = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(50)]
    s = UnitIds.from_hex(ids + ids[:5])  # duplicates collapse
    assert len(s) == 50 and list(s) == sorted(ids)
    assert s == set(ids) and set(ids) == s and s != set(ids[1:])
    assert ids[3] in s and "not-an-id" not in s and ids[3].upper() not in s and 42 not in s
    assert UnitIds.from_hex(ids[:10]) <= s and not s <= UnitIds.from_hex(ids[:10])
    assert set(ids[:10]) <= s and s - set(ids[:10]) == set(ids[10:])
    with pytest.raises(ValueError):
        UnitIds.from_hex(["abc"])


def test_digests_with_zero_bytes_keep_every_byte():
    """numpy drops trailing zero bytes of an S32 element it hands out; ids must not lose them."""
    raw = [bytes(31) + b"\x01", b"\x01" + bytes(31), bytes(32), b"\xff" * 31 + b"\x00"]
    hexes = [r.hex() for r in raw]
    digests = digests_from_hex(hexes)
    assert [hex_of(digests, i) for i in range(4)] == hexes
    s = UnitIds.from_hex(hexes)
    assert list(s) == sorted(hexes) and all(h in s for h in hexes)


def test_growing_ids_find_everything_added_across_runs():
    ids = np.unique(digests_from_hex(hashlib.sha256(str(i).encode()).hexdigest() for i in range(1000)))
    order = np.random.default_rng(1).permutation(len(ids))
    seen = GrowingUnitIds(UnitIds(ids[order[:100]]), run_size=64)
    for k in range(100, 1000, 37):
        batch = ids[order[k : k + 37]]
        assert not seen.contains(batch).any()
        seen.add(batch)
        assert seen.contains(ids[order[: k + 37]]).all()
    assert len(seen) == 1000 and seen.frozen() == UnitIds(ids)
    assert hex_of(ids, 5) in seen


def test_the_writer_refuses_a_duplicate_in_the_log_in_a_part_and_after_a_reopen(tmp_path):
    rd = RunDirectory(tmp_path / "run")
    res = _results(list(_space()))
    w = EpisodeWriter(rd, part_rows=4)
    assert w.append(res[:3]) == res[:3]
    assert w.append([res[1]]) == []  # still in the write-ahead log
    assert w.append(res[2:6]) == res[3:6]  # 2 is known; the log became a part at 4 rows
    assert rd.part_paths() and w.append(res[:6]) == []  # now in a part
    assert res[0].unit_id in w.known_unit_ids and res[6].unit_id not in w.known_unit_ids
    assert w.known_unit_ids == {r.unit_id for r in res[:6]}
    w.close()
    w2 = EpisodeWriter(rd)
    assert w2.append(res) == res[6:]
    w2.close()
    ids = rd.read_table(columns=["unit_id"]).column("unit_id").to_pylist()
    assert sorted(ids) == sorted(r.unit_id for r in res)  # each unit once


def test_a_killed_writers_log_is_folded_once_and_still_guards(tmp_path):
    rd = RunDirectory(tmp_path / "run")
    res = _results(list(_space()))
    w = EpisodeWriter(rd, part_rows=100)
    w.append(res[:4])
    w._lock_file.close()  # killed: the log stays, no part was written
    assert not rd.part_paths() and rd.finished_unit_ids() == {r.unit_id for r in res[:4]}
    w2 = EpisodeWriter(rd)
    assert len(rd.part_paths()) == 1 and w2.append(res[:4]) == []
    assert w2.append(res[3:5]) == [res[4]]
    w2.close()
    assert rd.read_table().num_rows == 5


def test_the_first_record_of_a_unit_wins_across_parts(tmp_path):
    rd = RunDirectory(tmp_path / "run")
    rd.episodes_dir.mkdir(parents=True)
    res = _results(list(_space())[:4])
    first = [result_to_row(r, finished_at=1.0) for r in res[:3]]
    again = [result_to_row(r, finished_at=2.0) for r in res[1:]]  # 1 and 2 recorded twice
    for i, rows in enumerate([first, again]):
        pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), rd.episodes_dir / f"part-{i:05d}.parquet")
    table = rd.read_table(columns=["unit_id", "finished_at"])
    by_id = dict(zip(table.column("unit_id").to_pylist(), table.column("finished_at").to_pylist()))
    assert table.num_rows == 4 == len(by_id)
    assert [by_id[r.unit_id] for r in res] == [1.0, 1.0, 1.0, 2.0]
    assert rd.finished_unit_ids() == set(by_id)


def test_a_unit_id_column_decodes_to_the_digests_of_its_ids():
    ids = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(10)]
    column = pa.chunked_array([pa.array(ids[:4]), pa.array(ids[4:])]).slice(2)
    assert unit_id_digests(column).dtype == DIGEST
    assert [hex_of(unit_id_digests(column), i) for i in range(8)] == ids[2:]
    with pytest.raises(ValueError, match="sha256"):
        unit_id_digests(pa.array(["short"]))
