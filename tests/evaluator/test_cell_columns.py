"""Cell tables filled a part at a time, and the bootstrap fed 4-byte task keys: the same episodes and
the same intervals as row by row with the task id strings."""

import json
import random

import numpy as np

from toolsweep.evaluator.protocols import MetricSpec
from toolsweep.evaluator.stats import cell_summary
from toolsweep.evaluator.summary import CellEpisodes, CellTable, convergence_from_table, task_keys
from toolsweep.evaluator.types import stable_seed

SPECS = [MetricSpec(name="acc"), MetricSpec(name="r", kind="ratio", numerator="num", denominator="den")]


def _rows(n, seed=0):
    """Rows of two cells with unscored episodes, metrics some episodes lack and one that appears late."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        metrics = {"acc": rng.random(), "num": float(rng.randint(0, 3)), "den": 3.0}
        if i % 7 == 0:
            del metrics["num"]
        if i > n // 2:
            metrics["late"] = 1.0
        rows.append({"model": "m", "benchmark": "b", "setting": rng.choice(["s1", "s2"]),
                     "task_id": f"task-{rng.randint(0, n)}", "seed": rng.randint(0, 3),
                     "termination": "infra_error" if i % 11 == 0 else "answered",
                     "metrics": json.dumps(metrics), "finished_at": float(rng.randint(0, 10**6))})
    return rows


def _same(a: CellEpisodes, b: CellEpisodes) -> bool:
    return (a.task_ids == b.task_ids and a.seeds == b.seeds and a.terminations == b.terminations
            and list(a.columns) == list(b.columns)
            and all(np.array_equal(np.asarray(a.columns[k]), np.asarray(b.columns[k]), equal_nan=True)
                    for k in a.columns)
            and np.array_equal(np.asarray(a.finished_at), np.asarray(b.finished_at), equal_nan=True))


def test_a_part_added_in_columns_equals_its_rows_added_one_by_one():
    rows = _rows(500)
    one_by_one = CellTable()
    for r in rows:
        one_by_one.cells[(r["model"], r["benchmark"], r["setting"])].add(
            r["task_id"], r["seed"], r["termination"], json.loads(r["metrics"]), r["finished_at"])
    in_parts = CellTable()
    for start in range(0, len(rows), 128):  # parts, as the run directory is read
        part = rows[start : start + 128]
        in_parts.add_columns({k: [r[k] for r in part] for k in rows[0]})
    assert sorted(one_by_one.cells) == sorted(in_parts.cells) == [("m", "b", "s1"), ("m", "b", "s2")]
    assert all(_same(one_by_one.cells[c], in_parts.cells[c]) for c in one_by_one.cells)
    assert sum(e.terminations["infra_error"] for e in in_parts.cells.values()) == 46
    assert sum(e.n for e in in_parts.cells.values()) == 500 - 46


def test_task_keys_sort_like_the_task_ids():
    rng = random.Random(3)
    # more than 256 tasks (a little-endian key would sort rank 256 before rank 1), non-ASCII ids too
    for names in ([f"t{rng.random()}" for _ in range(700)], [f"tâche-{i}" for i in range(300)] + ["a", "z", "é"]):
        ids = [rng.choice(names) for _ in range(3000)]
        keys = task_keys(ids)
        assert keys.dtype == np.dtype("S4")
        assert np.array_equal(np.argsort(keys, kind="stable"), np.argsort(np.asarray(ids), kind="stable"))
        assert len(np.unique(keys)) == len(set(ids))


def test_the_bootstrap_on_task_keys_gives_the_intervals_of_the_ids():
    rng = np.random.default_rng(5)
    names = [f"task-{rng.integers(10**6)}" for _ in range(400)]
    ids = [names[i] for i in rng.integers(0, len(names), size=2000)]
    seeds = rng.integers(0, 4, size=2000)
    values = {"acc": rng.random(2000), "num": rng.random(2000), "den": np.ones(2000)}  # continuous: by index
    with_ids = cell_summary("m", "b", "s", ids, seeds, values, {}, SPECS, n_resamples=300, seed=9)
    with_keys = cell_summary("m", "b", "s", task_keys(ids), seeds, values, {}, SPECS, n_resamples=300, seed=9)
    assert with_keys == with_ids


def test_convergence_points_are_those_of_the_ids_on_growing_prefixes():
    table = CellTable()
    table.add_rows(_rows(1500, seed=4))  # over 256 tasks a cell
    got = convergence_from_table(table, lambda b, s: SPECS, checkpoints=5, n_resamples=200)
    for cell, (metric, points) in got.items():
        eps = table.cells[cell]
        assert len(set(eps.task_ids)) > 256
        order = np.argsort(np.asarray(eps.finished_at), kind="stable")
        tasks = [eps.task_ids[i] for i in order]  # the strings, as before the keys
        seeds = np.asarray(eps.seeds)[order]
        values = {k: v[order] for k, v in eps.values(SPECS[:1]).items()}
        for point in points:
            k = int(point["n"])
            est = cell_summary(*cell, tasks[:k], seeds[:k], {key: v[:k] for key, v in values.items()}, {},
                               SPECS[:1], n_resamples=200, seed=stable_seed(0, *cell))["metrics"][metric]
            assert point == {"n": float(k), "value": est["value"], "ci_low": est["ci_low"], "ci_high": est["ci_high"]}


def test_a_snapshot_is_a_copy_and_its_tasks_are_keyed_outside_the_sinks_lock(monkeypatch):
    """The result sink takes `snapshot` under its lock and summarises outside it: keying a cell's task ids
    (0.2 s for a million episodes) belongs to the summary, and what the table records after the copy
    must not reach the summary of it."""
    from toolsweep.evaluator import summary

    table = CellTable()
    table.add_rows(_rows(400))
    real, keyed = summary.task_keys, []
    monkeypatch.setattr(summary, "task_keys", lambda ids: keyed.append(len(ids)) or real(ids))
    specs_for = lambda benchmark, setting: SPECS  # noqa: E731
    snapshot = table.snapshot(specs_for)
    assert keyed == [], "task ids were keyed while the snapshot was taken"
    first = summary.summarize_cells(snapshot, n_resamples=200, confidence=0.95, seed=1)
    assert sorted(keyed) == sorted(table.cells[c].n for c in sorted(table.cells))

    table.add_rows(_rows(400, seed=1))  # the same cells grow after the copy
    assert summary.summarize_cells(snapshot, n_resamples=200, confidence=0.95, seed=1) == first
    assert table.summarize(specs_for, n_resamples=200, confidence=0.95, seed=1) != first
