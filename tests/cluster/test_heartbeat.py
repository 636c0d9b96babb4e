"""Off a terminal a line comes at least every `progress_interval_s` through every phase of a run, not
only while units run: before, nothing was printed while Ray, the model servers and the workers started
(the first line of a SmolLM2 sweep came at 5.3 min) or while MLflow was finished (~120 s)."""

from __future__ import annotations

from toolsweep.cluster.driver import PhaseClock
from toolsweep.cluster.heartbeat import Heartbeat
from conftest import FAKE_TARGET  # noqa: E402  (at import: a later conftest.py takes the name)


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_a_line_comes_only_after_every_s_of_quiet_and_names_the_phase():
    clock, lines = FakeClock(), []
    phases = PhaseClock()
    beat = Heartbeat("sweep", lines.append, 30.0, phases.current, clock=clock)
    beat.log("starting an embedded Ray (no cluster address given)")
    clock.t = 29.0
    assert not beat.beat() and len(lines) == 1
    clock.t = 31.0
    assert beat.beat()
    assert lines[-1].startswith("sweep: still working (phase: plan,") and "starting an embedded Ray" in lines[-1]
    clock.t = 40.0
    assert not beat.beat()  # its own line counts: the next is 30 s later
    clock.t = 61.0
    assert beat.beat() and len(lines) == 3
    assert "last line 61 s ago: starting an embedded Ray" in lines[-1]  # the run's line, not its own


def test_any_line_of_the_run_resets_the_wait():
    clock, lines = FakeClock(), []
    beat = Heartbeat("sweep", lines.append, 10.0, lambda: "episodes", clock=clock)
    for t in (9.0, 18.0, 27.0):
        clock.t = t
        beat.log(f"sweep: some units at {t}")
        assert not beat.beat()
    assert not any("still working" in line for line in lines)


def test_the_phase_follows_the_run_through_to_mlflow():
    phases = PhaseClock()
    seen = [phases.current()]
    for name in ("plan", "start", "episodes", "summary", "mlflow"):
        phases.lap(name)
        seen.append(phases.current())
    assert seen == ["plan", "Ray, models and workers", "episodes", "summary, report and plots", "MLflow", "shutdown"]


def test_a_slow_warm_up_is_not_silent(ray_local, tmp_path):

    from toolsweep.cluster.config import SweepConfig
    from toolsweep.cluster.driver import run_sweep

    cfg = SweepConfig.model_validate({
        "name": "beat", "seeds": 1, "models": [{"name": "oracle", "kind": "scripted", "policy": "oracle"}],
        "benchmarks": [{"name": "fake", "options": {"n_tasks": 2, "build_delay_s": 4.0}, "settings": ["small"]}],
        "concurrency": {"workers": 1}, "bootstrap": {"n_resamples": 200}, "progress_interval_s": 0.5,
        "mlflow": False, "output_dir": str(tmp_path / "runs"),
    })
    lines: list[str] = []
    out = run_sweep(cfg, progress=False, extra_benchmarks={"fake": FAKE_TARGET}, log=lines.append)
    assert out.done == 2
    # the warm-up sleeps 4 s: at one line per 0.5 s of quiet, several lines while the workers build
    during_warm_up = [line for line in lines if "still working" in line and "rollout workers" in line]
    assert len(during_warm_up) >= 2, lines
