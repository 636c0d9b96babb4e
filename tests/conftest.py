"""Shared test setup: loopback-only Ray, one thread per op, the fake benchmark, one embedded Ray (also
under pytest-xdist)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FAKES = Path(__file__).resolve().parent / "fakes"
REPO = Path(__file__).resolve().parents[1]

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Ray workers inherit the environment at ray.init: this makes the fake benchmark importable there.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(FAKES), os.environ.get("PYTHONPATH", "")) if p)
sys.path.insert(0, str(FAKES))

from toolsweep.evaluator.registry import register_benchmark  # noqa: E402

FAKE_TARGET = "fake_bench:FakeBench"
register_benchmark("fake", FAKE_TARGET)


_MLFLOW_DIR: list[Path] = []


def session_mlflow_uri() -> str:
    """One sqlite MLflow store per test session: creating its tables costs seconds, so tests share
    it and keep apart by experiment name."""
    if not _MLFLOW_DIR:
        import tempfile

        _MLFLOW_DIR.append(Path(tempfile.mkdtemp(prefix="toolsweep-mlflow-")))
    return f"sqlite:///{_MLFLOW_DIR[0]}/mlflow.db"


def interruptible() -> None:
    """A child's `preexec_fn`: Ctrl-C (SIGINT) at its default, as a terminal gives it. A process started
    with SIGINT ignored (a background job of a script: `.ci/run ... &`, `nohup`) passes that on, and a
    CLI started from it would finish its run through a test's Ctrl-C and exit 0."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def shared_dir() -> Path:
    """The reference material beside the checkout (TOOLSWEEP_SHARED overrides)."""
    return Path(os.environ.get("TOOLSWEEP_SHARED", REPO.parent / "shared"))


# Tests that run Ray in this process (the worker's embedded Ray, a `ray.cluster_utils.Cluster`) or
# start Ray clusters of their own. Under pytest-xdist (`-n auto`) each such file is one scope, run whole
# by one worker: its tests share their module's fixtures, and a worker starts its embedded Ray once, on
# the first test that asks for it, and keeps it for every later Ray file it is given. Every worker can
# take Ray files, so Ray's waits (heartbeats, outages, restarts) overlap with other tests instead of
# queueing on one worker (the default tier's wall time was that one worker's: 915 s of Ray tests beside
# 471 s of the rest, 812 CPU-seconds in 938 s on two cores). With the slow tier in the same run the two
# cores' computation, not this grouping, sets the wall time. Clusters do not meet: an embedded Ray is
# `address="local"` with ports of its own, `ray start` clusters here use private temp dirs and ports,
# and the tests that look for processes look for their own model's or port's. (pytest-xdist's own
# `--dist loadgroup` does not group under pytest 9, whose node ids it can no longer suffix.)
RAY_PATHS = ("tests/cluster/", "tests/k8s/test_k8s_entrypoint_local.py", "tests/models/test_models_runtime.py")
# The browser tier runs whole on one worker too: its session fixtures (the quick start, one Chromium)
# are then made once, also when it runs beside tier 3 (`-m "tier3 or browser"`).
ONE_SCOPE_PATHS = ("tests/browser/",)
# Files whose tests read one costly computation (a module-level cache): split over two workers, each
# made it (the 4,000-sweep lognormal coverage row, ~40 s, was computed twice).
SHARED_COMPUTATION_FILES = ("tests/evaluator/test_interval_methods.py",)


def xdist_scope(nodeid: str) -> str:
    """The unit of work pytest-xdist hands a worker for a test: its Ray file or file of one shared
    computation, the browser tier, or the test alone."""
    for prefix in ONE_SCOPE_PATHS:
        if nodeid.startswith(prefix):
            return prefix
    file = nodeid.split("::", 1)[0]
    return file if nodeid.startswith(RAY_PATHS) or file in SHARED_COMPUTATION_FILES else nodeid


def pytest_collection_modifyitems(config, items):
    """Tests marked `long` first, the longest (`minutes`, as measured beside another test) first, the
    others in their order: pytest-xdist hands out its scopes in this order (after the scopes of several
    tests), and a six-minute tier-3 test handed out last keeps one worker busy alone while the other has
    nothing left."""

    def minutes(item) -> float:
        mark = item.get_closest_marker("long")
        return -float(mark.kwargs.get("minutes", 1)) if mark is not None else 0.0

    items.sort(key=minutes)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's: without it installed, pytest runs as usual
def pytest_xdist_make_scheduler(config, log):
    """A Ray test file is one scope (one worker, in collection order), so is the browser tier; every
    other test is its own."""
    from xdist.scheduler import LoadScopeScheduling

    class RayFilesWhole(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

    return RayFilesWhole(config, log)


@pytest.fixture
def ray_local():
    """One embedded Ray for the whole process (started on first use, ~5 s). `address="local"`: a new
    instance of its own, never the machine's latest `ray start` cluster (which a plain `ray.init()`
    joins, and then refuses num_cpus: "When connecting to an existing cluster ...")."""
    import ray

    from toolsweep.cluster.ray_start import start_embedded_ray

    if not ray.is_initialized():  # retried for 120 s: on a busy machine Ray's own 30-s start-up wait can pass
        start_embedded_ray(120, lambda line: None, init=lambda: ray.init(
            address="local", num_cpus=4, include_dashboard=False, logging_level="ERROR", log_to_driver=False))
    yield ray


_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session, exitstatus):
    import shutil

    _EXIT_STATUS.append(int(exitstatus))
    for d in _MLFLOW_DIR:
        shutil.rmtree(d, ignore_errors=True)
    try:
        import ray

        if ray.is_initialized():
            ray.shutdown()
    except Exception:  # noqa: BLE001
        pass


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """Exit with the session's status once pytest has reported it, without the interpreter's teardown.

    By then the results are final, but threads of Ray's, gRPC's, Arrow's and MLflow's native code are
    still alive, and the teardown that runs beside them once crashed the process (SIGSEGV, after every
    test had passed), which would turn a green run red for a reason no test is about."""
    if _EXIT_STATUS:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_EXIT_STATUS[-1])


# ----------------------------------------------------------------------------- the browser tier
# Session fixtures, so the quick start runs once and Chromium starts once for every module of
# tests/browser (a conftest.py there would shadow this one's module name for `from conftest import`).


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("TOOLSWEEP_SCREENSHOT_DIR") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def quickstart(tmp_path_factory) -> dict:
    """The README's quick start, run from the command line into a fresh directory; or, where
    TOOLSWEEP_QUICKSTART_DIR names a directory it has just been run into with `--output-dir DIR/runs
    --tracking-uri sqlite:///DIR/mlflow.db` (`.ci/run`'s README step), that run, read as it is."""
    given = os.environ.get("TOOLSWEEP_QUICKSTART_DIR")
    if given:
        work = Path(given)
        run_dir = work / "runs" / "quickstart" / "main"
        missing = [p for p in (run_dir / "report.html", work / "mlflow.db") if not p.exists()]
        assert not missing, (f"TOOLSWEEP_QUICKSTART_DIR={given} holds no finished quick start (no {missing[0]}): "
                             "unset it to run one here, or run the README's command with those two options")
        return {"work": work, "uri": f"sqlite:///{work / 'mlflow.db'}", "run_dir": run_dir}
    work = tmp_path_factory.mktemp("quickstart")
    uri = f"sqlite:///{work / 'mlflow.db'}"
    exe = Path(sys.executable).parent / "toolsweep"
    done = subprocess.run(
        [str(exe), "run", str(REPO / "configs/sweeps/quickstart.yaml"), "--no-progress",
         "--output-dir", str(work / "runs"), "--tracking-uri", uri],
        cwd=work, capture_output=True, text=True, timeout=900,
        env=dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0"),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return {"work": work, "uri": uri, "run_dir": work / "runs" / "quickstart" / "main"}


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    driver_bin = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    if not (Path(chromium).exists() and Path(driver_bin).exists()):
        pytest.fail("the browser tier needs Debian's chromium and chromium-driver: apt-get install chromium chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    # the machine's network is closed: without the background-networking flags Chromium keeps
    # trying to reach Google's hosts
    for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--window-size=1600,1000", f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"]:
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(driver_bin))
    try:
        yield driver
    finally:
        driver.quit()
