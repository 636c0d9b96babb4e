"""Cell tables, paired differences and convergence points from run-directory rows."""

import json

import pytest

from toolsweep.evaluator.protocols import MetricSpec
from toolsweep.evaluator.summary import CellTable, convergence_points

SPECS = [MetricSpec(name="acc"), MetricSpec(name="r", kind="ratio", numerator="num", denominator="den")]


def _rows(model, values, t0=0.0, termination="answered"):
    return [
        {"model": model, "benchmark": "b", "setting": "s", "task_id": f"t{i}", "seed": 0,
         "termination": termination, "finished_at": t0 + i,
         "metrics": json.dumps({"acc": v, "num": v, "den": 2.0})}
        for i, v in enumerate(values)
    ]


def test_infra_errors_are_counted_but_never_scored():
    table = CellTable()
    table.add_rows(_rows("a", [1.0, 0.0, 1.0, 1.0]) + _rows("a", [0.0, 0.0], termination="infra_error"))
    [cell] = table.summarize(lambda b, s: SPECS, n_resamples=500, confidence=0.95, seed=1)
    assert cell["n"] == 4
    assert cell["terminations"] == {"answered": 4, "infra_error": 2}
    assert cell["metrics"]["acc"]["value"] == pytest.approx(0.75)
    assert cell["metrics"]["r"]["value"] == pytest.approx(3 / 8)


def test_paired_difference_between_models_on_shared_cells():
    table = CellTable()
    table.add_rows(_rows("a", [1.0] * 10) + _rows("b", [1.0] * 5 + [0.0] * 5))
    paired = table.paired(lambda b, s: SPECS, n_resamples=500, confidence=0.95, seed=1)
    acc = next(p for p in paired if p["metric"] == "acc")
    assert (acc["model_a"], acc["model_b"]) == ("a", "b")
    assert acc["value"] == pytest.approx(0.5) and acc["ci_low"] > 0


def test_convergence_ends_at_the_final_estimate_and_grows_in_n():
    rows = _rows("a", [1.0, 0.0] * 20)
    points = convergence_points(rows, lambda b, s: SPECS, checkpoints=5, n_resamples=200)
    [(label, pts)] = points.items()
    assert "acc" in label
    ns = [p["n"] for p in pts]
    assert ns == sorted(ns) and ns[-1] == 40 and len(ns) >= 5
    assert pts[-1]["value"] == pytest.approx(0.5)
    assert pts[-1]["ci_high"] - pts[-1]["ci_low"] < pts[0]["ci_high"] - pts[0]["ci_low"]


def test_convergence_draws_its_intervals_with_the_sweeps_resampling_scheme():
    """Tasks whose seeds disagree: the two-stage draw counts that spread twice, so the report's convergence
    chart must use the scheme the sweep's summary uses, or its last point disagrees with the table."""
    import numpy as np

    from toolsweep.evaluator.summary import convergence_from_table

    rows = []
    for seed in range(3):
        for i, r in enumerate(_rows("a", [float((i + seed) % 2) for i in range(30)], t0=100.0 * seed)):
            rows.append({**r, "seed": seed})
    table = CellTable()
    table.add_rows(rows)
    specs_for = lambda b, s: SPECS[:1]  # noqa: E731
    [cell] = table.summarize(specs_for, n_resamples=400, confidence=0.95, seed=0)
    final = {}
    for scheme in ("tasks", "tasks_then_seeds"):
        [(_, (_, pts))] = convergence_from_table(table, specs_for, n_resamples=400, resample=scheme).items()
        final[scheme] = pts[-1]["ci_high"] - pts[-1]["ci_low"]
    assert final["tasks_then_seeds"] > 1.2 * final["tasks"]
    assert np.isclose(final["tasks"], cell["metrics"]["acc"]["ci_high"] - cell["metrics"]["acc"]["ci_low"], rtol=0.25)
