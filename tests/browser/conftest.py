"""The browser tier's shared fixtures: the quick start runs once and Chromium starts once for the whole
tier (session scope), whichever modules look at them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("TOOLSWEEP_SCREENSHOT_DIR") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="session")
def quickstart(tmp_path_factory) -> dict:
    """The README's quick start, run from the command line into a fresh directory."""
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
