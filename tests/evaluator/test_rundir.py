"""The run directory: durable appends, one row per unit, recovery from a killed writer."""

import json
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from toolsweep.evaluator import rundir
from toolsweep.evaluator.rundir import SCHEMA, EpisodeWriter, RunDirectory
from toolsweep.evaluator.sweep import BenchmarkPlan, expand_units
from toolsweep.evaluator.types import (
    EpisodeResult, Message, Sampling, Step, TerminationReason, Trajectory, WorkUnit,
)


def _results(n, sweep="s"):
    units = expand_units(sweep, ["m"], [BenchmarkPlan("fake", {"small": [f"t{i}" for i in range(n)]}, [0])], Sampling())
    return [EpisodeResult(unit=u, termination=TerminationReason.ANSWERED, metrics={"accuracy": float(i % 2)}) for i, u in enumerate(units)]


def test_append_dedupes_and_survives_reopen(tmp_path):
    rd = RunDirectory(tmp_path / "run")
    w = EpisodeWriter(rd, part_rows=3)
    res = _results(7)
    assert len(w.append(res[:5])) == 5
    assert len(w.append(res[3:7])) == 2  # 3 and 4 already there
    w.close()
    assert len(rd.part_paths()) >= 2
    table = rd.read_table()
    assert sorted(table.column("unit_id").to_pylist()) == sorted(r.unit_id for r in res)
    w2 = EpisodeWriter(rd)
    assert w2.append(res) == []
    w2.close()
    back = {r.unit_id: r for r in rd.read_results()}
    assert back[res[1].unit_id].metrics == res[1].metrics


def test_a_killed_writer_loses_only_the_torn_line(tmp_path):
    rd = RunDirectory(tmp_path / "run")
    w = EpisodeWriter(rd)
    res = _results(4)
    w.append(res[:3])
    # Simulate kill -9: the log stays, a torn half line follows, no close().
    w._pending.write('{"unit_id": "torn')
    w._pending.flush()
    w._lock_file.close()  # the OS releases the lock when the process dies
    assert rd.finished_unit_ids() == {r.unit_id for r in res[:3]}
    w2 = EpisodeWriter(rd)
    assert not rd.pending_path.exists() or rd._pending_rows() == []
    assert len(w2.append(res)) == 1
    w2.close()
    assert rd.read_table().num_rows == 4


def test_second_writer_is_refused(tmp_path):
    rd = RunDirectory(tmp_path / "run")
    w = EpisodeWriter(rd)
    with pytest.raises(RuntimeError, match="another toolsweep process"):
        EpisodeWriter(rd)
    w.close()


def test_expansion_is_deterministic_and_rejects_duplicates():
    plan = BenchmarkPlan("fake", {"small": ["a", "b"], "large": ["a"]}, [0, 1])
    u1 = expand_units("s", ["m1", "m2"], [plan], Sampling())
    u2 = expand_units("s", ["m1", "m2"], [plan], Sampling())
    assert [u.unit_id for u in u1] == [u.unit_id for u in u2]
    assert len(u1) == 2 * 3 * 2
    with pytest.raises(ValueError, match="duplicate"):
        expand_units("s", ["m1", "m1"], [plan], Sampling())


def test_a_result_read_back_keeps_its_recorded_unit_id(tmp_path):
    """A unit's id also hashes its `context` (serving config, benchmark fingerprint), which a row does
    not keep: reading a row back must not recompute a different id."""
    rd = RunDirectory(tmp_path / "run")
    (r,) = _results(1)
    fields = r.unit.model_dump()
    r = r.model_copy(update={"unit": WorkUnit(**{**fields, "context": "served-by-x"})})
    w = EpisodeWriter(rd)
    w.append([r])
    w.close()
    (back,) = rd.read_results()
    assert back.unit_id == r.unit_id != WorkUnit(**{**fields, "context": ""}).unit_id


def test_a_part_holds_exactly_the_rows_the_log_holds(tmp_path, monkeypatch):
    """The log becomes a part through Arrow's JSON reader: every row must come out as `json.loads` reads
    it, escapes, text beyond the BMP, nulls, NaN metrics and a row longer than a reader's block included."""
    res = _results(4)
    res[0].error = 'line 1\nline "2"\t\\ \u2028 é 😀'
    res[1].metrics = {"accuracy": float("nan"), "reward": float("inf")}
    res[2].trajectory = Trajectory(messages=[Message(role="user", content="z" * 3_000_000)])  # > a 1 MB block
    res[3].trajectory = Trajectory(steps=[Step(reply=Message(role="assistant", content="ok"), info={"n": None})])
    rd = RunDirectory(tmp_path / "run")
    w = EpisodeWriter(rd)
    w.append(res)
    expected = pa.Table.from_pylist([json.loads(line) for line in rd.pending_path.read_text().splitlines()], schema=SCHEMA)

    def row_by_row(path):
        raise AssertionError("a whole log is read by Arrow, not row by row")

    monkeypatch.setattr(rundir, "_log_rows", row_by_row)
    w.flush_part()
    monkeypatch.undo()
    (part,) = rd.part_paths()
    assert pq.read_table(part).equals(expected)
    back = {r.unit_id: r for r in rd.read_results()}
    assert back[res[0].unit_id].error == res[0].error
    assert back[res[2].unit_id].trajectory == res[2].trajectory
    assert back[res[1].unit_id].metrics["reward"] == float("inf")
    w.close()


@pytest.fixture
def held_parts(monkeypatch):
    """Part conversions wait until the yielded event is set (as a slow disk would keep them); set at the
    end of the test however it ends. A part held 10 s fails: only a writer that waits on a held part
    (the tests set the event themselves once they have looked) waits that long."""
    release = threading.Event()
    convert = rundir._seal_into_part

    def held(sealed, part):
        assert release.wait(10)
        convert(sealed, part)

    monkeypatch.setattr(rundir, "_seal_into_part", held)
    yield release
    release.set()


def test_a_background_part_never_holds_up_append_and_loses_nothing(tmp_path, held_parts):
    """With `background`, a full log is sealed and the next results go to a new log at once, while its
    part is still being written; readers and the once-only guard see every row throughout."""
    release = held_parts
    rd = RunDirectory(tmp_path / "run")
    w = EpisodeWriter(rd, part_rows=3, background=True)
    res = _results(8)
    assert len(w.append(res[:4])) == 4  # the log sealed at 4 rows; its part waits
    assert len(w.append(res[4:7])) == 3  # sealed again: two parts under way
    assert [p.name for p in rd.log_paths()] == ["sealed-00000.jsonl", "sealed-00001.jsonl", "pending.jsonl"]
    assert rd.part_paths() == []
    assert w.append(res[:7]) == []  # recorded once, though no part holds them yet
    assert sorted(rd.read_table().column("unit_id").to_pylist()) == sorted(r.unit_id for r in res[:7])
    assert set(rd.finished_unit_ids()) == {r.unit_id for r in res[:7]}
    release.set()
    w.append(res[7:])
    w.close()
    assert [p.name for p in rd.part_paths()] == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    assert rd.log_paths() == []
    ids = [i for p in rd.part_paths() for i in pq.read_table(p, columns=["unit_id"]).column(0).to_pylist()]
    assert sorted(ids) == sorted(r.unit_id for r in res)  # each unit in exactly one part


def test_append_waits_for_the_oldest_part_beyond_max_sealed(tmp_path, held_parts):
    """Parts that cannot keep up hold the writer back rather than piling up sealed logs."""
    release = held_parts
    rd = RunDirectory(tmp_path / "run")
    w = EpisodeWriter(rd, part_rows=1, background=True)
    res = _results(EpisodeWriter.MAX_SEALED + 2)
    for r in res[: EpisodeWriter.MAX_SEALED]:
        w.append([r])
    blocked = threading.Thread(target=w.append, args=([res[-2]],))
    blocked.start()
    blocked.join(0.5)
    assert blocked.is_alive()  # a third part would be under way: append waits for the first
    release.set()
    blocked.join(30)
    assert not blocked.is_alive()
    w.append([res[-1]])
    w.close()
    assert rd.read_table().num_rows == len(res)


def test_a_part_that_cannot_be_written_is_raised_and_its_log_kept(tmp_path, monkeypatch):
    rd = RunDirectory(tmp_path / "run")
    w = EpisodeWriter(rd, part_rows=2, background=True)

    release = threading.Event()

    def disk_full(table, path):
        release.wait(30)  # the part fails after the next append, whatever the thread's timing
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(rundir, "_write_part", disk_full)
    res = _results(4)
    w.append(res[:2])  # sealed: its part fails
    w.append(res[2:3])  # the open log
    release.set()
    with pytest.raises(OSError, match="No space left"):
        w.close()
    assert [p.name for p in rd.log_paths()] == ["sealed-00000.jsonl", "pending.jsonl"]
    monkeypatch.undo()
    w2 = EpisodeWriter(rd)  # the next run folds what the failed one kept
    assert sorted(rd.read_table().column("unit_id").to_pylist()) == sorted(r.unit_id for r in res[:3])
    assert len(w2.append(res)) == 1
    w2.close()
    assert rd.part_paths() and rd.log_paths() == [] and rd.read_table().num_rows == 4


def test_a_writer_killed_between_a_part_and_its_log_counts_nothing_twice(tmp_path):
    """Killed after part 0 took its name but before its sealed log was deleted, and with the log of
    part 1 sealed but not written: the next writer folds both, and every unit is in one part."""
    rd = RunDirectory(tmp_path / "run")
    w = EpisodeWriter(rd, part_rows=2)
    res = _results(5)
    w.append(res[:2])  # part-00000
    w.append(res[2:4])  # part-00001
    w._lock_file.close()  # killed
    part0 = rd.part_paths()[0]
    sealed0 = rd.episodes_dir / "sealed-00000.jsonl"
    sealed0.write_text("".join(json.dumps(r) + "\n" for r in pq.read_table(part0).to_pylist()))
    sealed1 = rd.episodes_dir / "sealed-00001.jsonl"
    sealed1.write_text("".join(json.dumps(r) + "\n" for r in pq.read_table(rd.part_paths()[1]).to_pylist()))
    rd.part_paths()[1].unlink()  # part 1 never written
    rd.pending_path.write_text(json.dumps(pq.read_table(part0).to_pylist()[0]) + "\n")  # a duplicate too
    w2 = EpisodeWriter(rd)
    assert [p.name for p in rd.log_paths()] == ["pending.jsonl"] and rd._pending_rows() == []  # a new log
    ids = [i for p in rd.part_paths() for i in pq.read_table(p, columns=["unit_id"]).column(0).to_pylist()]
    assert sorted(ids) == sorted(r.unit_id for r in res[:4])
    assert len(w2.append(res)) == 1
    w2.close()


def test_a_log_gone_between_listing_and_reading_reads_as_empty(tmp_path, monkeypatch):
    """A reader beside a running writer: a sealed log listed, then deleted once its part is written."""
    rd = RunDirectory(tmp_path / "run")
    w = EpisodeWriter(rd)
    w.append(_results(2))
    sealed = rd.episodes_dir / "sealed-00007.jsonl"
    sealed.write_text(rd.pending_path.read_text())
    listed = rd.log_paths()
    sealed.unlink()
    monkeypatch.setattr(RunDirectory, "log_paths", lambda self: listed)
    assert rd.records_signature() == [["pending.jsonl", rd.pending_path.stat().st_size]]
    assert rd.read_table().num_rows == 2 and rundir.read_log(sealed).num_rows == 0
    w.close()
