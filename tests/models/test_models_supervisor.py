"""The supervisor that runs a model server (`vllm_server.supervise`): a stop reaches the server as one
SIGTERM. A stop signals the supervisor's group and the supervisor forwards to its guard, so the guard
sees the signal twice; a second SIGTERM reaching the server can land after its graceful shutdown has
restored the default handler and end it before it finishes (a server's "down" was lost this way)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

SERVER = """
import signal, sys, time
log = sys.argv[1]
def on_term(signum, frame):
    with open(log, "a") as f:
        f.write("TERM\\n")
signal.signal(signal.SIGTERM, on_term)
open(log, "a").write("up\\n")
deadline = None
while True:
    time.sleep(0.05)
    if open(log).read().count("TERM") and deadline is None:
        deadline = time.monotonic() + 1.0  # a graceful shutdown that takes a while
    if deadline is not None and time.monotonic() > deadline:
        open(log, "a").write("down\\n")
        sys.exit(0)
"""


def test_a_stop_reaches_the_server_as_one_sigterm_and_lets_it_finish(tmp_path: Path):
    script, log = tmp_path / "server.py", tmp_path / "log"
    script.write_text(SERVER)
    read_end, lifeline = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolsweep.models.vllm_server", "--supervise", str(read_end), "--",
         sys.executable, str(script), str(log)],
        pass_fds=(read_end,), start_new_session=True)
    os.close(read_end)
    try:
        for _ in range(600):  # polls, not a time claim: the server writes "up" when it has started
            if log.exists() and "up" in log.read_text():
                break
            time.sleep(0.05)
        else:
            pytest.fail("the supervised server never started")
        os.killpg(proc.pid, signal.SIGTERM)  # as ModelServer.stop does
        proc.wait(30)
        assert log.read_text().split() == ["up", "TERM", "down"]
    finally:
        os.close(lifeline)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
