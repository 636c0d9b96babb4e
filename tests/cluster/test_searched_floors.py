"""The searched floor beside every model, end to end on the embedded Ray (issue 42): with `floor: true`,
PlanBench-XL and TRAJECT-Bench add their `searched_floor` and APB its `heuristic` (per setting, the
strongest policy each one's adversary search found), summary.json marks its cells and judges every model against them, the
report names it, and its value is what the searched policy scores on the same tasks."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from conftest import session_mlflow_uri
from toolsweep.cluster.config import SweepConfig
from toolsweep.cluster.driver import run_sweep
from toolsweep.evaluator.exploits import aggregate, play
from toolsweep.evaluator.registry import get_benchmark

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "traject_bench"))
from traject_data import require_data  # noqa: E402

DATA = require_data()
TASKS = 4  # a cell under 4 tasks gets no floor mark
SETTINGS = {"planbench_xl": ("ratio_0.8", "accuracy", {}), "apb": ("stepwise_k1", "correct", {}),
            "traject_bench": ("seq/domain/direct", "usage", {"data_dir": str(DATA)})}
FLOORS = {"planbench_xl": "searched_floor", "apb": "heuristic", "traject_bench": "searched_floor"}


@pytest.mark.slow  # Ray and three benchmarks: 294 s at load 24-29
def test_each_benchmark_shows_its_searched_floor_beside_every_model(tmp_path):
    cfg = SweepConfig.model_validate({
        "name": "searched_floors", "seeds": 1, "floor": True,
        "models": [{"name": "oracle", "kind": "scripted", "policy": "oracle"},
                   {"name": "random", "kind": "scripted", "policy": "random"}],
        "benchmarks": [{"name": b, "options": opts, "settings": [s], "tasks": {"limit": TASKS}}
                       for b, (s, _, opts) in SETTINGS.items()],
        "concurrency": {"workers": 2, "episodes_per_worker": 4},
        "bootstrap": {"n_resamples": 200, "live_n_resamples": 50},
        "output_dir": str(tmp_path / "runs"), "tracking_uri": session_mlflow_uri(), "preflight": False,
        "ray_start_timeout_s": 300,  # the run starts Ray itself (or joins the session's), retrying a slow start
    })
    out = run_sweep(cfg, progress=False, log=lambda m: None)
    summary = json.loads(out.run_dir.summary_path.read_text())
    cells = {(c["benchmark"], c["model"]): c for c in summary["cells"]}
    page = out.run_dir.report_path.read_text()
    assert "floor (searched_floor)" in page and "floor (heuristic)" in page
    for name, (setting, metric, opts) in SETTINGS.items():
        floor = cells[(name, "floor")]
        assert floor["is_floor"] and floor["floor"]["policy"] == FLOORS[name], name
        bench = get_benchmark(name, opts)
        ids = bench.tasks(setting)[:TASKS]
        expected = aggregate(bench.metrics(setting), asyncio.run(play(bench, FLOORS[name], setting, ids)))
        assert floor["metrics"][metric]["value"] == pytest.approx(expected[metric]), name  # the floor played the searched policy
        for model in ("oracle", "random"):
            reading = cells[(name, model)]["floor"]["metrics"][metric]
            assert reading["floor"]["value"] == pytest.approx(expected[metric]) and reading["difference"] is not None, (name, model)
