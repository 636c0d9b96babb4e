"""Every command and subcommand teaches: `--help` exits 0 and shows an example; `--version` works."""

from __future__ import annotations

import subprocess
import sys

import pytest

COMMANDS = [[], ["run"], ["validate"], ["report"], ["sync-mlflow"], ["benchmarks"], ["plan"], ["preflight"], ["show"], ["compare"],
            ["models"], ["models", "prepare"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "toolsweep")
def test_help_exits_zero_and_shows_an_example(command):
    done = subprocess.run([sys.executable, "-m", "toolsweep.cluster.cli", *command, "--help"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-500:]
    assert ("example" in done.stdout.lower() or "quick start" in done.stdout) and "Traceback" not in done.stderr


def test_version():
    from importlib.metadata import version

    done = subprocess.run([sys.executable, "-m", "toolsweep.cluster.cli", "--version"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == f"toolsweep {version('toolsweep')}"
