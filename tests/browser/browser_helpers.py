"""Helpers of the browser tier's tests (the fixtures themselves are in conftest.py)."""

from __future__ import annotations

import base64
import socket
from pathlib import Path

WAIT_S = 90


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_text(driver, *needles: str, timeout: float = WAIT_S) -> str:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout).until(
        lambda d: all(n in d.execute_script("return document.body.innerText") for n in needles)
    )
    return driver.execute_script("return document.body.innerText")


def _full_page(driver, path: Path, height: int | None = None) -> None:
    """A screenshot of the whole page (or its first `height` pixels), not only the viewport."""
    h = height or driver.execute_script("return document.documentElement.scrollHeight")
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {"captureBeyondViewport": True, "clip": {"x": 0, "y": 0, "width": 1600, "height": min(h, 12000), "scale": 0.5}},
    )
    path.write_bytes(base64.b64decode(shot["data"]))
