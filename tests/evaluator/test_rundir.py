"""The run directory: durable appends, one row per unit, recovery from a killed writer."""


import pytest

from toolsweep.evaluator.rundir import EpisodeWriter, RunDirectory
from toolsweep.evaluator.sweep import BenchmarkPlan, expand_units
from toolsweep.evaluator.types import EpisodeResult, Sampling, TerminationReason, WorkUnit


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
