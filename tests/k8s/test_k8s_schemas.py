"""Every kustomization under k8s/ renders, and every rendered document validates: RayCluster and RayJob
against the real KubeRay CRD schemas, core kinds against the Kubernetes schemas (strict). Typos fail."""

from __future__ import annotations

import copy
import shutil

import pytest
import yaml

KUSTOMIZATIONS = ["base", "cpu-smoke", "single-gpu", "multi-model", "managed-stores"]

STORES_KINDS = ["Namespace", "ConfigMap", "Service", "PersistentVolumeClaim", "PersistentVolumeClaim",
                "Deployment"] + ["NetworkPolicy"] * 3
SWEEP_KINDS = ["ConfigMap", "RayJob", "PodDisruptionBudget", "PodDisruptionBudget"] + ["NetworkPolicy"] * 3
BUNDLED_STORES = ["StatefulSet", "StatefulSet", "Service", "Service", "Job"] + ["NetworkPolicy"] * 4
EXPECTED_KINDS = {
    "base": STORES_KINDS + SWEEP_KINDS,
    "cpu-smoke": STORES_KINDS + BUNDLED_STORES + SWEEP_KINDS,
    "single-gpu": STORES_KINDS + BUNDLED_STORES + SWEEP_KINDS,
    "multi-model": STORES_KINDS + BUNDLED_STORES + SWEEP_KINDS,
    "managed-stores": STORES_KINDS + ["NetworkPolicy"] + SWEEP_KINDS,
}


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_kustomization_renders_the_whole_deployment(k8s, rendered, name):
    docs = rendered[name]
    assert sorted(d["kind"] for d in docs) == sorted(EXPECTED_KINDS[name])
    # The RayJob owns its cluster: there is no standing RayCluster to attach to.
    assert not [d for d in docs if d["kind"] == "RayCluster"]
    for d in docs:
        if d["kind"] != "Namespace":
            assert d["metadata"]["namespace"] == "toolsweep", d["metadata"]["name"]
        assert d["metadata"]["labels"]["app.kubernetes.io/part-of"] == "toolsweep"
    # Images are resolved by kustomize in the custom resources too (the bases name them only).
    ours = [c["image"] for d in docs for c in _containers(d) if "toolsweep" in c["image"]]
    prefix = "toolsweep" if name == "base" else "ghcr.io/example/toolsweep"
    assert ours and all(i.startswith(prefix) for i in ours), ours
    k8s.find(docs, "ConfigMap", "toolsweep-sweep")


def _containers(doc: dict) -> list[dict]:
    spec = doc.get("spec", {})
    templates = []
    if doc["kind"] in ("Deployment", "StatefulSet", "Job"):
        templates.append(spec["template"])
    if doc["kind"] == "RayJob":
        templates.append(spec["submitterPodTemplate"])
        cluster = spec["rayClusterSpec"]
        templates.append(cluster["headGroupSpec"]["template"])
        templates += [g["template"] for g in cluster["workerGroupSpecs"]]
    return [c for t in templates for c in t["spec"]["containers"]]


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_ray_documents_validate_against_the_kuberay_crds(k8s, rendered, name):
    assert k8s.crd_errors(k8s.find(rendered[name], "RayJob")) == [], name


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_core_documents_validate_strictly(k8s, rendered, name):
    for doc in rendered[name]:
        if not doc["apiVersion"].startswith("ray.io/"):
            assert k8s.core_errors(doc) == [], f"{name} {doc['kind']}/{doc['metadata']['name']}"


# -- a typo anywhere fails -------------------------------------------------------------------------


def _mutated(doc: dict, path: str, value) -> dict:
    """Copy of doc with `value` set at dotted `path` (integers index lists)."""
    out = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node = out
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    node[last] = value
    return out


@pytest.mark.parametrize(
    "kind, path, value, expected",
    [
        ("RayJob", "spec.rayClusterSpec.enableInTreeAutoscalling", True, "'enableInTreeAutoscalling' was unexpected"),
        ("RayJob", "spec.rayClusterSpec.headGroupSpec.rayStartParam", {}, "'rayStartParam' was unexpected"),
        ("RayJob", "spec.rayClusterSpec.workerGroupSpecs.1.minReplica", 1, "'minReplica' was unexpected"),
        ("RayJob", "spec.rayClusterSpec.workerGroupSpecs.1.template.spec.containers.0.volumeMount", [], "'volumeMount' was unexpected"),
        ("RayJob", "spec.rayClusterSpec.workerGroupSpecs.1.template.spec.volumes.0.emptyDir.medum", "Memory", "'medum' was unexpected"),
        ("RayJob", "spec.rayClusterSpec.headGroupSpec.template.spec.containers.0.resources.limit", {}, "'limit' was unexpected"),
        ("RayJob", "spec.rayClusterSpec.headGroupSpec.rayStartParams.num-gpus", 0, "0 is not of type 'string'"),
        ("RayJob", "spec.rayClusterSpec.workerGroupSpecs.0.maxReplicas", "8", "'8' is not of type 'integer'"),
        ("RayJob", "spec.rayClusterSpec.autoscalerOptions.upscalingMode", "Fast", "'Fast' is not one of"),
        ("RayJob", "spec.rayClusterSpec.authOptions.mode", "password", "'password' is not one of"),
        ("RayJob", "metadata.lables", {"a": "b"}, "'lables' was unexpected"),
        ("RayJob", "spec.entrypont", "toolsweep run x", "'entrypont' was unexpected"),
        ("RayJob", "spec.shutdownAfterJobFinish", True, "'shutdownAfterJobFinish' was unexpected"),
        ("RayJob", "spec.backoffLimit", "0", "'0' is not of type 'integer'"),
        ("RayJob", "spec.submitterPodTemplate.spec.containers.0.resource", {}, "'resource' was unexpected"),
    ],
)
def test_typo_in_a_ray_document_fails(k8s, rendered, kind, path, value, expected):
    doc = _mutated(k8s.find(rendered["base"], kind), path, value)
    errors = k8s.crd_errors(doc)
    assert any(expected in e for e in errors), errors


def test_duplicate_container_names_fail_the_list_map_rule(k8s, rendered):
    doc = copy.deepcopy(k8s.find(rendered["base"], "RayJob"))
    containers = doc["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"]
    containers.append(copy.deepcopy(containers[0]))
    assert any("duplicate keys ['name']" in e for e in k8s.crd_errors(doc))


def test_fields_guarded_by_cel_rules_are_not_passed_unchecked(k8s, rendered):
    doc = _mutated(k8s.find(rendered["base"], "RayJob"), "spec.managedBy", "kueue.x-k8s.io/multikueue")
    assert any("not evaluated offline" in e for e in k8s.crd_errors(doc))


@pytest.mark.parametrize(
    "kind, path, value",
    [
        ("Deployment", "spec.template.spec.containers.0.imagePullPolicyy", "Always"),
        ("Deployment", "spec.replica", 1),
        ("Service", "spec.port", []),
        ("PersistentVolumeClaim", "spec.accesModes", ["ReadWriteOnce"]),
        ("StatefulSet", "spec.volumeClaimTemplate", []),
        ("Job", "spec.template.spec.containers.0.securityContex", {}),
        ("ConfigMap", "datas", {}),
        ("NetworkPolicy", "spec.policyType", ["Ingress"]),
    ],
)
def test_typo_in_a_core_document_fails(k8s, rendered, kind, path, value):
    doc = _mutated([d for d in rendered["cpu-smoke"] if d["kind"] == kind][0], path, value)
    errors = k8s.core_errors(doc)
    assert errors and "was unexpected" in errors[0], errors


def test_typo_in_a_manifest_file_fails_render_and_validate(k8s, tmp_path):
    """End to end: an overlay whose patch misspells a field renders, and validation rejects it."""
    base = tmp_path / "base"
    shutil.copytree(k8s.K8S / "base", base)
    rayjob = yaml.safe_load((base / "rayjob.yaml").read_text())
    rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]["volumeMouts"] = []
    (base / "rayjob.yaml").write_text(yaml.safe_dump(rayjob))
    docs = k8s.render(base)
    errors = k8s.crd_errors(k8s.find(docs, "RayJob"))
    assert any("'volumeMouts' was unexpected" in e for e in errors), errors


def test_overlay_patches_check_the_group_they_change(k8s, tmp_path):
    """The overlays' JSON patches test each groupName first: a reordered base must not render."""
    shutil.copytree(k8s.K8S, tmp_path / "k8s")
    path = tmp_path / "k8s" / "base" / "rayjob.yaml"
    rayjob = yaml.safe_load(path.read_text())
    rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"].reverse()
    path.write_text(yaml.safe_dump(rayjob))
    k8s.render(tmp_path / "k8s" / "base")  # the base alone is fine
    for overlay in ("cpu-smoke", "single-gpu", "multi-model"):
        with pytest.raises(RuntimeError, match="testing value /spec/rayClusterSpec/workerGroupSpecs/0/groupName failed"):
            k8s.render(tmp_path / "k8s" / "overlays" / overlay)
