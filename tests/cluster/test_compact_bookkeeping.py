"""The driver's bookkeeping without a Python string per unit: the final summary reads only the
config's units, a run with everything recorded is seen as done, and the sink keeps a live table only
for an MLflow mirror that reads it (and frees it before the final summary builds its own)."""

from __future__ import annotations

import threading

import pytest

from toolsweep.actors.result_sink import ResultSink
from toolsweep.cluster.run_record import read_cells
from toolsweep.evaluator.protocols import MetricSpec
from toolsweep.evaluator.rundir import EpisodeWriter, RunDirectory
from toolsweep.evaluator.sweep import BenchmarkPlan, expand_units
from toolsweep.evaluator.unit_ids import UnitIds
from toolsweep.evaluator.types import EpisodeResult, Sampling, TerminationReason


def _space(tasks):
    return expand_units("s", ["m1", "m2"], [BenchmarkPlan("fake", {"small": tasks}, [0, 1])], Sampling())


def _record(rd, units):
    w = EpisodeWriter(rd, part_rows=5)
    w.append([EpisodeResult(unit=u, termination=TerminationReason.ANSWERED, metrics={"acc": 1.0}) for u in units])
    w.close()


def test_the_summary_reads_only_the_configs_units_and_counts_the_others(tmp_path):
    rd = RunDirectory(tmp_path / "run")
    old = list(_space(["gone-1", "gone-2", "kept"]))
    _record(rd, old)
    config = _space(["kept", "new"])  # a grown or changed config: 'kept' units stay, 'gone' ones are out
    for unit_ids in (config.id_set(), set(config.id_set())):
        table, kept, outside = read_cells(rd, unit_ids)
        assert (kept, outside) == (4, 8)
        assert {t for eps in table.cells.values() for t in eps.task_ids} == {"kept"}
    table, kept, outside = read_cells(rd, None)
    assert (kept, outside) == (12, 0) and sum(e.n for e in table.cells.values()) == 12


def test_a_config_is_done_only_when_every_unit_is_recorded(tmp_path):
    rd = RunDirectory(tmp_path / "run")
    units = list(_space(["a", "b", "c"]))
    _record(rd, units[:-1])
    space = _space(["a", "b", "c"])
    assert not space.id_set() <= rd.finished_unit_ids()
    assert [u.unit_id for u in space.select(rd.finished_unit_ids())] == [units[-1].unit_id]
    _record(rd, units[-1:])
    assert space.id_set() <= rd.finished_unit_ids() and not space.select(rd.finished_unit_ids())


class _Mirror:
    tracking_uri = "memory://"

    def __init__(self):
        self.logged = threading.Event()

    def log_summaries(self, summaries):
        self.logged.set()

    def log_artifacts(self, run_dir, summaries):
        pass

    def finish(self, status):
        pass


def _specs(benchmark, setting):
    return [MetricSpec(name="acc")]


def test_the_sink_keeps_a_live_table_only_for_a_mirror_and_frees_it_at_the_end(tmp_path):
    units = list(_space(["a", "b", "c"]))
    results = [EpisodeResult(unit=u, termination=TerminationReason.ANSWERED, metrics={"acc": 1.0}) for u in units]
    rd = RunDirectory(tmp_path / "run")
    _record(rd, units[:4])

    plain = ResultSink(rd, _specs, mirror=None)
    assert plain.table is None
    assert plain.known_unit_ids == UnitIds.from_hex(u.unit_id for u in units[:4])
    assert plain.add(results[2:6]) == results[4:6]  # recorded once, also without a table
    plain.close(None)

    mirror = _Mirror()
    sink = ResultSink(rd, _specs, mirror=mirror, flush_interval_s=0.05)
    assert sum(e.n for e in sink.table.cells.values()) == 6  # the record so far, for the live charts
    sink.start()
    assert sink.add(results) == results[6:]
    assert sum(e.n for e in sink.table.cells.values()) == len(units)
    assert mirror.logged.wait(10)
    sink.end_run()
    assert sink.table is None and sink._thread is None
    sink.close([])
    assert rd.finished_unit_ids() == {u.unit_id for u in units}


def test_recording_never_waits_for_the_live_summaries(tmp_path, monkeypatch):
    """The mirror's bootstrap (seconds for a large sweep) runs outside the table's lock: the scheduler's
    `add` goes on while it runs, and the summary is of the episodes copied when it started."""
    from toolsweep.evaluator import summary

    units = list(_space(["a", "b", "c", "d"]))
    results = [EpisodeResult(unit=u, termination=TerminationReason.ANSWERED, metrics={"acc": 1.0}) for u in units]
    mirror = _Mirror()
    logged = []
    mirror.log_summaries = lambda summaries: (logged.extend(summaries), mirror.logged.set())
    sink = ResultSink(RunDirectory(tmp_path / "run"), _specs, mirror=mirror)
    sink.add(results[:4])
    bootstrapping, release = threading.Event(), threading.Event()
    cell_summary = summary.cell_summary

    def slow_cell_summary(*args, **kwargs):
        bootstrapping.set()
        assert release.wait(30)
        return cell_summary(*args, **kwargs)

    monkeypatch.setattr(summary, "cell_summary", slow_cell_summary)
    flush = threading.Thread(target=sink._flush_mirror, args=(100,))
    flush.start()
    assert bootstrapping.wait(10)
    recording = threading.Thread(target=sink.add, args=(results[4:],))
    recording.start()
    recording.join(5)
    recording_waited = recording.is_alive()
    release.set()
    flush.join(30)
    recording.join(30)
    assert not recording_waited
    assert sum(s["n"] for s in logged) == 4  # the copy taken before the other results came
    assert sum(e.n for e in sink.table.cells.values()) == len(units)
    assert sink._dirty  # ... which the next flush summarises
    sink.close(None)


def test_the_live_summaries_take_at_most_a_third_of_a_core(tmp_path, monkeypatch):
    """A flush that costs more CPU than the interval between flushes (a big grid's bootstrap) is
    followed by twice its CPU time of rest, so the driver's scheduler (and, on a laptop, the workers)
    keep two thirds of a core. The mirror thread's CPU clock and its waits are recorded, not timed."""
    import queue as queue_module

    from toolsweep.actors import result_sink

    cpu_per_flush = iter([0.15, 0.15, 0.001, 3.2])
    clock = {"now": 0.0}

    def costly_summaries(cells, **kwargs):
        clock["now"] += next(cpu_per_flush)  # CPU, as a bootstrap spends it
        return []

    class RecordingQueue:
        """The mirror loop's stop queue: records each wait it is asked for, stops after four flushes."""

        def __init__(self):
            self.waits = []

        def get(self, timeout):
            self.waits.append(timeout)
            if len(self.waits) > 4:
                return True
            raise queue_module.Empty

        def put(self, item):
            pass

    monkeypatch.setattr(result_sink, "summarize_cells", costly_summaries)
    sink = ResultSink(RunDirectory(tmp_path / "run"), _specs, mirror=_Mirror(), flush_interval_s=0.1)
    sink._cpu_clock = lambda: clock["now"]
    sink._queue = waits = RecordingQueue()
    sink._mirror_loop()  # in this thread: four flushes, then the stop
    # the first wait is the interval; after each flush, the larger of the interval and twice its CPU
    assert waits.waits == pytest.approx([0.1, 0.3, 0.3, 0.1, 6.4])
    assert result_sink.rest_after_flush(0.15, 0.1) == 0.3 and result_sink.rest_after_flush(0.1, 2.0) == 2.0
    sink.close(None)
