"""The Dockerfile the manifests' images come from: it cannot be built here, so what it does is checked
against what is proven elsewhere (the install command the docs give and CI runs, the pinned versions)."""

from __future__ import annotations

import re
import shlex
import tomllib

import pytest


@pytest.fixture(scope="module")
def stages(k8s) -> dict[str, list[str]]:
    """Stage name -> its instructions (continuation lines joined)."""
    text = (k8s.REPO / "Dockerfile").read_text()
    text = re.sub(r"\\\n", " ", text)
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"FROM\s+(\S+)(?:\s+AS\s+(\S+))?", line, re.I)
        if m:
            current = m.group(2) or f"stage{len(out)}"
            out[current] = [line]
        else:
            assert current, "instruction before FROM"
            out[current].append(line)
    return out


def runs(stage: list[str]) -> list[list[str]]:
    """Every command of every RUN (split on &&)."""
    cmds = []
    for line in stage:
        if line.upper().startswith("RUN "):
            cmds += [shlex.split(c) for c in line[4:].split("&&")]
    return cmds


def test_default_target_is_the_cuda_image_with_the_gpu_extra(stages, k8s):
    name, final = list(stages.items())[-1]
    assert name == "toolsweep"
    assert re.match(r"FROM nvidia/cuda:\S+-runtime-", final[0]), final[0]
    installs = [c for c in runs(final) if c[:2] == ["pip", "install"] and any(a.startswith(".[") for a in c)]
    assert len(installs) == 1
    # The README's install command (which CI runs), with the gpu extra instead of its own.
    readme = (k8s.REPO / "README.md").read_text()
    m = re.search(r"^(pip install [^&\n]*?)\s*(?:&&|$)", readme, re.M)
    assert m, "README.md shows no pip install command"
    readme_cmd = shlex.split(m.group(1))
    assert installs[0] == [re.sub(r"^\.\[[^\]]*\]$", ".[gpu]", a) for a in readme_cmd], (installs[0], readme_cmd)
    assert ".[gpu]" in installs[0]
    # The single-GPU guide installs the same way.
    guide = (k8s.REPO / "docs" / "deploy.md").read_text()
    assert shlex.join(installs[0]).replace("'", '"') in guide
    # Everything the install reads is copied in before it runs.
    project = tomllib.loads((k8s.REPO / "pyproject.toml").read_text())["project"]
    copied = " ".join(line for line in final if line.upper().startswith("COPY "))
    for needed in ("pyproject.toml", project["readme"], "toolsweep"):
        assert needed in copied, needed
    # The gpu extra is what pyproject declares for GPU machines (vLLM's CUDA build).
    assert any(dep.startswith("vllm") for dep in project["optional-dependencies"]["gpu"])


def test_ray_pods_can_answer_kuberay_probes(stages):
    apt = [c for c in runs(stages["toolsweep"]) if c[:2] == ["apt-get", "install"]]
    assert apt and "wget" in apt[0], "KubeRay's default Ray pod probes call wget"


def test_mlflow_image_matches_the_pinned_mlflow_and_has_its_store_drivers(stages, k8s):
    pins = tomllib.loads((k8s.REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    mlflow_pin = next(p for p in pins if p.startswith("mlflow"))
    cmds = [c for c in runs(stages["mlflow"]) if c[:2] == ["pip", "install"]]
    packages = [a for c in cmds for a in c[2:] if not a.startswith("-")]
    assert mlflow_pin in packages
    assert any(p.startswith("psycopg2") for p in packages)  # postgresql+psycopg2:// backend store
    assert any(p.startswith("boto3") for p in packages)  # s3:// artifact destination


def test_manifest_images_name_the_dockerfile_targets(k8s, rendered):
    deployment = k8s.find(rendered["base"], "Deployment", "mlflow")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"].endswith("/toolsweep-mlflow:0.1.0")
    rc = k8s.find(rendered["base"], "RayCluster")
    images = {rc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["image"]}
    images |= {g["template"]["spec"]["containers"][0]["image"] for g in rc["spec"]["workerGroupSpecs"]}
    images.add(k8s.find(rendered["base"], "RayJob")["spec"]["submitterPodTemplate"]["spec"]["containers"][0]["image"])
    assert len(images) == 1 and images.pop().endswith("/toolsweep:0.1.0")
    version = tomllib.loads((k8s.REPO / "pyproject.toml").read_text())["project"]["version"]
    assert version == "0.1.0", "bump the image tags in k8s/base/kustomization.yaml with the version"
