"""No import circle among the cluster modules: each one imports first, on its own, in a fresh interpreter.

A circle breaks only when a module on it is the first imported (`record` first, importing the driver
that imports `record` back, half built: "cannot import name ... from partially initialized module"),
and a test process has imported most of them long before, so each module gets an interpreter of its
own. The driver is imported only by the commands that run sweeps (`cli`, `adaptive`): what writes and
reads the run record, the power table and the plan never import it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

CLUSTER = Path(__file__).resolve().parents[2] / "toolsweep" / "cluster"
ROOT = CLUSTER.parents[1]
MODULES = sorted(p.stem for p in CLUSTER.glob("*.py") if p.stem != "__init__")
RUN_SWEEPS = {"cli", "adaptive"}


@pytest.mark.parametrize("module", MODULES)
def test_each_cluster_module_imports_first_in_a_fresh_interpreter(module):
    done = subprocess.run([sys.executable, "-c", f"import toolsweep.cluster.{module}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"importing toolsweep.cluster.{module} first fails:\n{done.stderr[-3000:]}"


def test_only_the_commands_that_run_sweeps_import_the_driver():
    importers = set()
    for path in CLUSTER.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if isinstance(node, ast.ImportFrom) and node.module == "toolsweep.cluster":
                names = [f"toolsweep.cluster.{a.name}" for a in node.names]
            if "toolsweep.cluster.driver" in names:
                importers.add(path.stem)
    assert importers - {"driver"} <= RUN_SWEEPS, f"imports the driver: {sorted(importers - {'driver'} - RUN_SWEEPS)}"
