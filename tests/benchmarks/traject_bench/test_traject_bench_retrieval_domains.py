"""A task's tools are retrieved as its own domain describes them: the same task retrieves the same
tools whether or not other domains (which describe some shared tools differently) are loaded."""

from __future__ import annotations

import pytest
from traject_data import require_data

from toolsweep.benchmarks.traject_bench import TrajectBench

DATA = require_data()
DOMAIN = "Music"  # shares tools with eCommerce, which describes several of them differently


def only(tmp_path, domains: list[str]):
    root = tmp_path / "data"
    (root / "tools").mkdir(parents=True)
    for item in DATA.iterdir():
        if item.is_file():
            (root / item.name).symlink_to(item)
    for dom in domains:
        (root / "tools" / f"{dom}_tool.json").symlink_to(DATA / "tools" / f"{dom}_tool.json")
        for split in ("parallel", "sequential"):
            if (DATA / split / dom).exists():
                (root / split).mkdir(exist_ok=True)
                (root / split / dom).symlink_to(DATA / split / dom)
    return root


@pytest.fixture(scope="module")
def full() -> TrajectBench:
    return TrajectBench(data_dir=str(DATA), breakdowns=False)


def test_retrieval_does_not_depend_on_the_other_domains_loaded(full, tmp_path):
    alone = TrajectBench(data_dir=str(only(tmp_path, [DOMAIN])), breakdowns=False)
    shared = [n for n, t in full.dataset.domain_defs.get(DOMAIN, {}).items()
              if t.description != full.dataset.catalog[n].description]
    assert shared, "the data no longer has a tool the domains describe differently"
    settings = [s for s in alone.settings() if "/retrieval/" in s]
    assert settings
    compared = 0
    for setting in settings:
        for task in alone.tasks(setting):
            mine = alone.make_env(task, setting, 0).pool
            theirs = full.make_env(task, setting, 0).pool
            assert theirs == mine, (setting, task)
            compared += 1
    assert compared >= 50
