"""Imports point one way: cluster -> actors -> models -> evaluator <- benchmarks (DESIGN §1).

Checked on the source text (AST), so a violation fails here even in a module no test imports.
"""

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "toolsweep"
HEAVY = {"ray", "vllm", "mlflow", "torch", "transformers"}
# What each layer may import from toolsweep itself.
ALLOWED = {
    "evaluator": {"evaluator"},
    "benchmarks": {"evaluator", "benchmarks"},
    "models": {"evaluator", "models"},
    "actors": {"evaluator", "models", "actors"},
    "cluster": {"evaluator", "models", "actors", "cluster"},
}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _files(layer: str) -> list[Path]:
    return sorted((PKG / layer).rglob("*.py"))


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layers_import_only_downwards(layer):
    bad = []
    for f in _files(layer):
        for name in _imports(f):
            parts = name.split(".")
            if parts[0] == "toolsweep" and len(parts) > 1 and parts[1] in ALLOWED and parts[1] not in ALLOWED[layer]:
                bad.append(f"{f.relative_to(PKG)} imports {name}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("layer", ["evaluator", "benchmarks"])
def test_pure_layers_import_no_heavy_runtime(layer):
    bad = [f"{f.relative_to(PKG)} imports {n}" for f in _files(layer) for n in _imports(f) if n.split(".")[0] in HEAVY]
    assert not bad, "\n".join(bad)


def test_models_import_heavy_libraries_only_inside_functions():
    bad = []
    for f in _files("models"):
        tree = ast.parse(f.read_text())
        for node in tree.body:  # module level only
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                bad += [f"{f.relative_to(PKG)}: {m}" for m in mods if m.split(".")[0] in {"vllm", "torch", "transformers"}]
    assert not bad, "\n".join(bad)


def _cluster_graph() -> dict[str, set[str]]:
    """Which cluster modules each cluster module imports (at any depth of its code, functions included)."""
    graph = {}
    for f in _files("cluster"):
        mod = f.stem
        graph[mod] = {n.split(".")[2] for n in _imports(f)
                      if n.startswith("toolsweep.cluster.") and n.split(".")[2] != mod}
    return graph


def test_the_driver_is_on_no_import_circle():
    """The driver reads as its phases; the commands that read or rewrite a finished run (the power table
    behind `plan --pilot`, report, sync-mlflow) share `run_record` and `record` with it and never import
    it back."""
    graph = _cluster_graph()
    seen, stack = set(), list(graph["driver"])
    while stack:
        mod = stack.pop()
        if mod in seen:
            continue
        seen.add(mod)
        stack.extend(graph.get(mod, ()))
    assert "driver" not in seen, f"a module the driver imports imports it back: {sorted(m for m in seen if 'driver' in graph.get(m, ()))}"
