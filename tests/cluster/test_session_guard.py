"""A killed driver takes its embedded Ray session with it: the guard `toolsweep run` starts ends every
process the driver started (Ray's DashboardAgent and RuntimeEnvAgent outlived a kill -9 by about 62 s),
touches nothing else, and a re-run resumes the sweep."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import FAKE_TARGET, FAKES
from toolsweep.cluster.session_guard import alive, descendants
from toolsweep.evaluator.rundir import RunDirectory

REPO = Path(__file__).resolve().parents[2]
GONE_WITHIN_S = 30.0
"""A bound far above the guard's few seconds (one scan interval, then SIGTERM, a grace, SIGKILL) even on a
loaded machine, and far below the minute Ray's agents lived on without it."""


def _wait_gone(seen: dict[int, int], within_s: float) -> dict[int, str]:
    """Wait until none of `seen` is alive; pid -> command line of those still alive after `within_s`."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not any(alive(pid, start) for pid, start in seen.items()):
            return {}
        time.sleep(0.2)
    return {pid: _cmdline(pid) for pid, start in seen.items() if alive(pid, start)}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _kill_all(seen: dict[int, int]) -> None:
    for pid, start in seen.items():
        if alive(pid, start):
            os.kill(pid, signal.SIGKILL)


# A stand-in driver: starts the guard, then a child that ignores SIGTERM and outlives it, which starts a
# grandchild in a session of its own (as Ray's raylet starts its agents; as a model server's supervisor
# starts the server).
FAKE_DRIVER = textwrap.dedent("""
    import subprocess, sys, time
    from toolsweep.cluster.session_guard import start_guard

    start_guard(interval_s=0.2, grace_s=1.0)
    child = subprocess.Popen([sys.executable, "-c", (
        "import signal, subprocess, sys, time\\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True)\\n"
        "time.sleep(600)\\n")])
    print(child.pid, flush=True)
    if sys.argv[1] == "exit":
        time.sleep(2)
        sys.exit(0)  # leaves the child behind
    time.sleep(600)
""")


@pytest.mark.parametrize("end", ["kill", "exit"])
def test_guard_ends_the_drivers_processes_and_nothing_else(end):
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # not the driver's
    driver = subprocess.Popen([sys.executable, "-c", FAKE_DRIVER, end], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    seen: dict[int, int] = {}
    try:
        child = int(driver.stdout.readline())
        deadline = time.monotonic() + 60
        while len(seen) < 3 and time.monotonic() < deadline:  # the guard, the child, the grandchild
            seen = descendants(driver.pid)
            time.sleep(0.1)
        assert child in seen and len(seen) == 3, {pid: _cmdline(pid) for pid in seen}
        time.sleep(0.5)  # the guard has read the grandchild too
        if end == "kill":
            os.kill(driver.pid, signal.SIGKILL)
        assert driver.wait(timeout=60) in (0, -signal.SIGKILL)
        left = _wait_gone(seen, GONE_WITHIN_S)
        assert not left, f"still alive {GONE_WITHIN_S:.0f} s after the driver: {left}"
        assert bystander.poll() is None, "a process the driver did not start was touched"
    finally:
        _kill_all(seen)
        if driver.poll() is None:
            driver.kill()
        bystander.kill()
        bystander.wait()


def _sweep_yaml(tmp_path: Path) -> Path:
    p = tmp_path / "guarded.yaml"
    p.write_text(textwrap.dedent(f"""
        name: guarded
        seeds: 2
        models:
          - {{name: oracle, kind: scripted, policy: oracle}}
          - {{name: random, kind: scripted, policy: random}}
        benchmarks:
          - name: fake
            options: {{n_tasks: 15, delay_s: 0.1}}
            settings: [small, large]
        concurrency: {{workers: 2, episodes_per_worker: 4}}
        bootstrap: {{n_resamples: 1000, live_n_resamples: 100}}
        output_dir: {tmp_path / 'runs'}
        mlflow: false
    """))
    return p


@pytest.mark.slow  # two embedded Ray starts: about a minute
def test_killed_driver_leaves_no_ray_process_and_the_rerun_resumes(tmp_path):
    cmd = [sys.executable, "-m", "toolsweep.cluster.cli", "run", str(_sweep_yaml(tmp_path)), "--no-progress"]
    env = dict(os.environ, TOOLSWEEP_EXTRA_BENCHMARKS=f"fake={FAKE_TARGET}", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
               PYTHONPATH=os.pathsep.join([str(REPO), str(FAKES), os.environ.get("PYTHONPATH", "")]))
    total = 2 * 2 * 15 * 2
    # Its own session, so that a failing test can end whatever is left with one killpg.
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    seen: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            logs = list((tmp_path / "runs").rglob("pending.jsonl"))
            if logs and sum(1 for _ in logs[0].open()) >= 10:
                break
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            time.sleep(0.1)
        else:
            pytest.fail("the sweep never got going")
        seen = descendants(proc.pid)
        names = {_cmdline(pid).split(" ")[0].rsplit("/", 1)[-1] for pid in seen}
        # the processes that outlived a killed driver before are among what it started
        assert {"raylet", "ray::DashboardAgent", "ray::RuntimeEnvAgent"} <= names, names
        os.kill(proc.pid, signal.SIGKILL)  # the driver alone: what it started is left to the guard
        proc.wait(timeout=60)
        left = _wait_gone(seen, GONE_WITHIN_S)
        assert not left, f"still alive {GONE_WITHIN_S:.0f} s after the driver was killed: {left}"
    finally:
        _kill_all(seen)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    run_path = next((tmp_path / "runs" / "guarded").iterdir())
    before = RunDirectory(run_path).read_table(columns=["unit_id"]).num_rows
    assert 10 <= before < total
    done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    ids = RunDirectory(run_path).read_table(columns=["unit_id"]).column("unit_id").to_pylist()
    assert len(ids) == len(set(ids)) == total  # nothing lost, nothing counted twice
