"""The traces are written while the summary is computed: once the episodes end, the run directory decides
which episodes are traced, so the sink starts writing them then, and the final MLflow step only waits
for what is left of that (bounded, said in the log). The store ends up as the inline export leaves it."""

from __future__ import annotations

import threading
from collections import Counter

from toolsweep.actors import traces as traces_module
from toolsweep.actors.result_sink import MlflowMirror, ResultSink, mirror_current
from toolsweep.actors.traces import pick_episodes
from toolsweep.cluster.run_record import read_cells
from toolsweep.evaluator.protocols import MetricSpec
from toolsweep.evaluator.rundir import EpisodeWriter, RunDirectory
from toolsweep.evaluator.sweep import BenchmarkPlan, expand_units
from toolsweep.evaluator.types import EpisodeResult, Sampling, TerminationReason

PER_CELL = 2


def _specs(benchmark, setting):
    return [MetricSpec(name="acc")]


def _run_dir(tmp_path) -> RunDirectory:
    """Two models (one the floor) x one setting x 8 tasks; every third episode runs out of turns."""
    rd = RunDirectory(tmp_path / "run")
    units = expand_units("s", ["floor", "model"], [BenchmarkPlan("fake", {"small": [f"t{i}" for i in range(8)]}, [0])],
                         Sampling())
    writer = EpisodeWriter(rd)
    writer.append([EpisodeResult(unit=u, termination=TerminationReason.MAX_TURNS if i % 3 == 0 else TerminationReason.ANSWERED,
                                 metrics={"acc": float(i % 3 != 0)}) for i, u in enumerate(units)])
    writer.close()
    return rd


def _final_summaries(rd: RunDirectory) -> list[dict]:
    cells = read_cells(rd, None)[0].summarize(_specs, n_resamples=50, confidence=0.95, seed=0)
    for c in cells:
        c["is_floor"] = c["model"] == "floor"
    return cells


def _traced_units(uri: str) -> dict[str, Counter]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    exp = client.get_experiment_by_name("overlap")
    found = client.search_traces(locations=[exp.experiment_id], max_results=1000, include_spans=False)
    out: dict[str, Counter] = {}
    for t in found:
        out.setdefault(t.info.tags["model"], Counter())[t.info.tags["toolsweep.unit_id"]] += 1
    return out


def _expected(rd: RunDirectory) -> dict[str, Counter]:
    rows = rd.read_table(columns=["model", "unit_id", "termination"]).to_pylist()
    out = {}
    for model in ("floor", "model"):
        eps = [(r["unit_id"], r["termination"]) for r in rows if r["model"] == model]
        out[model] = Counter(pick_episodes(eps, PER_CELL, *([PER_CELL] if model == "floor" else [])))
    return out


def _sink(rd: RunDirectory, uri: str, **kw) -> tuple[ResultSink, MlflowMirror, list[str]]:
    mirror = MlflowMirror(uri, "overlap", "main", traces_per_cell=PER_CELL)
    mirror.connect({"run_id": "main"}, {})
    logs: list[str] = []
    sink = ResultSink(rd, _specs, mirror=mirror, floor_model="floor", log=logs.append, **kw)
    sink.start()
    return sink, mirror, logs


def test_the_traces_are_in_mlflow_before_the_final_step_and_once_after_it(tmp_path):
    rd = _run_dir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sink, mirror, logs = _sink(rd, uri)
    sink.end_run()  # the episodes are over: the summary would be computed now
    assert mirror.wait_traces(120)
    expected = _expected(rd)
    assert _traced_units(uri) == expected  # written before the final step began, the floor's cut to PER_CELL
    sink.close(_final_summaries(rd))
    assert _traced_units(uri) == expected  # taken over by the final step, not written a second time
    assert mirror_current(rd, uri)
    assert not [m for m in logs if "MLflow at" in m], logs


def test_a_trace_export_past_its_bound_leaves_the_mirror_to_the_next_run(tmp_path, monkeypatch):
    release = threading.Event()
    real = traces_module.export_traces

    def slow(uri, traces):
        release.wait(60)
        return real(uri, traces)

    monkeypatch.setattr(traces_module, "export_traces", slow)
    rd = _run_dir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    sink, mirror, logs = _sink(rd, uri, trace_wait_s=0.5)
    sink.end_run()
    sink.close(_final_summaries(rd))
    assert any("for the traces being written since the episodes ended" in m for m in logs), logs
    assert any("running the same command again completes the mirror" in m for m in logs), logs
    assert not mirror_current(rd, uri)  # mlflow.json not written: the next run rebuilds the mirror
    release.set()
    assert mirror.wait_traces(60)
