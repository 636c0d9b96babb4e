"""A pilot for `toolsweep plan --power` runs a seeded random sample of each setting's tasks
(tasks.sample), the same tasks on every run, and the plan says how its pilot chose them: a setting's
first tasks need not be typical of it (bench/power_pilot.py measures the bias they bring)."""

from __future__ import annotations

import textwrap

import pytest

from toolsweep.cluster.config import ConfigError, load_config, resolve_plans
from toolsweep.cluster.power import pilot_note

PILOT = """
name: pilot
seeds: 1
models:
  - {name: oracle, kind: scripted, policy: oracle}
benchmarks:
  - name: fake
    options: {n_tasks: 40}
    settings: [small, large]
    tasks: {TASKS}
"""


def config(tmp_path, tasks: str, name: str = "pilot"):
    p = tmp_path / f"{name}.yaml"
    p.write_text(textwrap.dedent(PILOT.replace("{TASKS}", tasks).replace("name: pilot", f"name: {name}")))
    return load_config(p)


def tasks_of(cfg) -> dict[str, list[str]]:
    (plan,) = resolve_plans(cfg)
    return plan.tasks_by_setting


def test_a_sample_is_seeded_random_and_the_same_on_every_run(tmp_path):
    every = tasks_of(config(tmp_path, "{}"))
    drawn = tasks_of(config(tmp_path, "{sample: 10}"))
    assert drawn == tasks_of(config(tmp_path, "{sample: 10}"))  # a re-run (or a resume) draws the same tasks
    for setting, ids in drawn.items():
        assert len(ids) == 10 == len(set(ids)) and set(ids) <= set(every[setting])
        assert ids != every[setting][:10]  # not the first tasks
        assert ids == [t for t in every[setting] if t in set(ids)]  # kept in the setting's order
    other = tasks_of(config(tmp_path, "{sample: 10}", name="another"))
    assert other != drawn  # seeded from the sweep, so two sweeps do not share one sample by accident


def test_a_sample_larger_than_the_setting_runs_every_task_and_sample_with_limit_is_refused(tmp_path):
    assert tasks_of(config(tmp_path, "{sample: 400}")) == tasks_of(config(tmp_path, "{}"))
    with pytest.raises((ConfigError, ValueError), match="sample"):
        tasks_of(config(tmp_path, "{sample: 5, limit: 5}"))


def test_the_plan_says_how_its_pilot_chose_tasks(tmp_path):
    sampled = pilot_note(list(config(tmp_path, "{sample: 15}").benchmarks))
    assert "seeded random sample of 15" in sampled
    first = pilot_note(list(config(tmp_path, "{limit: 15}").benchmarks))
    assert "first 15" in first and "not a random sample" in first and "tasks.sample" in first
