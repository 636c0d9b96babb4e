"""No import circle among the cluster modules: their top-level imports form no cycle, and the modules of
the former driver -> plan -> power -> driver circle each import first in a fresh interpreter.

A circle breaks only when a module on it is the first imported (`record` first, importing the driver
that imports `record` back, half built: "cannot import name ... from partially initialized module"),
and a test process has imported most of them long before: so the graph is read from the source, and
the fresh interpreters check it end to end. The driver is imported only by the commands that run sweeps (`cli`, `adaptive`): what writes and
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


def _module_level_imports(path: Path) -> set[str]:
    """The cluster modules `path` imports when it is first imported (its top-level statements; an import
    inside a function runs later, on a built module, and makes no circle)."""
    found = set()
    for node in ast.parse(path.read_text()).body:
        for inner in ast.walk(node) if isinstance(node, (ast.If, ast.Try)) else [node]:
            if isinstance(inner, ast.Import):
                found |= {a.name for a in inner.names}
            elif isinstance(inner, ast.ImportFrom) and inner.module == "toolsweep.cluster":
                found |= {f"toolsweep.cluster.{a.name}" for a in inner.names}
            elif isinstance(inner, ast.ImportFrom) and inner.module:
                found.add(inner.module)
    return {name.rsplit(".", 1)[1] for name in found if name.startswith("toolsweep.cluster.")}


def test_no_circle_among_the_cluster_modules_top_level_imports():
    graph = {m: _module_level_imports(CLUSTER / f"{m}.py") & set(MODULES) for m in MODULES}
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for nxt in sorted(graph[module]):
            if state.get(nxt) == "open":
                raise AssertionError("import circle: " + " -> ".join(path[path.index(nxt):] + [nxt]))
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[module] = "done"

    for module in MODULES:
        if module not in state:
            visit(module, [module])


@pytest.mark.parametrize("module", ["record", "driver", "power"])
def test_a_module_on_a_former_circle_imports_first_in_a_fresh_interpreter(module):
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
