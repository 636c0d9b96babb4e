"""How many rollout workers a sweep starts: `workers: auto` is one per free CPU, never more than the units
left to play, unless the sweep grows in rounds (`stop_when`) and later rounds bring more units."""

from __future__ import annotations

from toolsweep.cluster.config import SweepConfig
from toolsweep.cluster.workers import _worker_count


class _FourCpus:
    """Ray as `_worker_count` reads it: the cluster's free resources."""

    @staticmethod
    def available_resources() -> dict[str, float]:
        return {"CPU": 4.0}


def _config(**extra) -> SweepConfig:
    return SweepConfig.model_validate({"name": "n", "models": [{"name": "o", "kind": "scripted", "policy": "oracle"}],
                                       "benchmarks": [{"name": "fake", "settings": ["small"]}], **extra})


def test_auto_starts_no_worker_without_a_unit_to_play():
    assert _worker_count(_config(), _FourCpus, units=2) == 2
    assert _worker_count(_config(), _FourCpus, units=50) == 4
    assert _worker_count(_config(), _FourCpus, units=1) == 1


def test_a_growing_sweep_and_an_explicit_count_keep_their_workers():
    growing = _config(stop_when={"ci_half_width": 0.05})
    assert _worker_count(growing, _FourCpus, units=2) == 4  # later rounds add units
    assert _worker_count(_config(concurrency={"workers": 3}), _FourCpus, units=1) == 3
    assert _worker_count(_config(concurrency={"worker_cpus": 2}), _FourCpus, units=50) == 2
