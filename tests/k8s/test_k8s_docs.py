"""docs/deploy.md's Kubernetes commands, run or checked against what the manifests render.

- The image override block runs literally (bash, in a copy of k8s/), and every image of the stores
  and of every overlay is then the one the guide's build commands tag.
- The teardown command deletes only a sweep's own objects: no namespace, claim, Secret or store.
- Every object a `kubectl` command of the guide names (`-k` / `-f` paths, `rollout status`, `wait`,
  `logs`, `delete pvc`) is one the manifests have.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REGISTRY, TAG = "registry.example.test/team", "0.2.0-0123456789ab"
OURS = {"toolsweep": f"{REGISTRY}/toolsweep:{TAG}", "toolsweep-mlflow": f"{REGISTRY}/toolsweep-mlflow:{TAG}"}


def guide(k8s) -> str:
    return (k8s.REPO / "docs" / "deploy.md").read_text()


def marked_block(text: str, marker: str) -> str:
    m = re.search(rf"<!-- {marker}\b.*?-->\s*```bash\n(.*?)```", text, re.S)
    assert m, f"docs/deploy.md has no ```bash block marked <!-- {marker} -->"
    return m.group(1)


def bash_blocks(text: str) -> list[str]:
    section = text[text.index("## 3. Kubernetes with KubeRay"):]
    return re.findall(r"```bash\n(.*?)```", section, re.S)


def commands(block: str) -> list[list[str]]:
    """The block's commands (continuations joined, heredoc bodies and comments dropped)."""
    out, heredoc = [], None
    for line in re.sub(r"\\\n\s*", " ", block).splitlines():
        if heredoc:
            heredoc = None if line.strip() == heredoc else heredoc
            continue
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        m = re.search(r"<<-?'?(\w+)'?", line)
        if m:
            heredoc = m.group(1)
            line = line[: m.start()]
        for part in re.split(r"\s*(?:&&|\|)\s*", line):
            if part.startswith("kubectl"):
                out.append(shlex.split(part))
    return out


def pod_images(docs: list[dict]) -> list[str]:
    images = []
    for d in docs:
        spec = d.get("spec", {})
        templates = []
        if d["kind"] in ("Deployment", "StatefulSet", "Job"):
            templates.append(spec["template"])
        if d["kind"] == "RayJob":
            cluster = spec["rayClusterSpec"]
            templates += [spec["submitterPodTemplate"], cluster["headGroupSpec"]["template"]]
            templates += [g["template"] for g in cluster["workerGroupSpecs"]]
        images += [c["image"] for t in templates for c in t["spec"].get("initContainers", []) + t["spec"]["containers"]]
    return images


def test_the_documented_image_override_changes_every_image_of_the_stores_and_every_overlay(k8s, tmp_path):
    block = marked_block(guide(k8s), "image-override")
    shutil.copytree(k8s.K8S, tmp_path / "k8s")
    env = {**os.environ, "REGISTRY": REGISTRY, "TAG": TAG,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert f"image: {OURS['toolsweep']}" in run.stdout  # the block's own look at what it changed
    for original in k8s.APPLIED:
        docs = k8s.render(tmp_path / original.relative_to(k8s.REPO))
        before = pod_images(k8s.render(original))
        after = pod_images(docs)
        assert len(before) == len(after) and after, original
        for old, new in zip(before, after):
            if old.startswith("ghcr.io/example/"):  # ours: the guide's tag, everywhere
                name = old.removeprefix("ghcr.io/example/").split(":")[0]
                assert new == OURS[name], (original, old, new)
            else:  # third-party images (PostgreSQL, the S3 gateway) are left as pinned
                assert new == old
        assert not [i for i in after if "example" in i.split("/")[0] and i not in OURS.values()], after
    # Both images are in use: the Ray pods' (the sweeps) and MLflow's (the stores).
    assert OURS["toolsweep"] in pod_images(k8s.render(tmp_path / "k8s" / "overlays" / "single-gpu"))
    assert OURS["toolsweep-mlflow"] in pod_images(k8s.render(tmp_path / "k8s" / "stores" / "bundled"))


def test_the_image_override_block_stops_before_writing_when_registry_or_tag_is_unset(k8s, tmp_path):
    """In a new shell without the build block's variables the override block says what to set and writes
    nothing (it wrote `newName: /toolsweep` and `newTag: ""` before)."""
    block = marked_block(guide(k8s), "image-override")
    for unset in ("REGISTRY", "TAG"):
        shutil.copytree(k8s.K8S, tmp_path / unset / "k8s")
        target = tmp_path / unset / "k8s" / "components" / "images" / "kustomization.yaml"
        before = target.read_text()
        env = {k: v for k, v in {**os.environ, "REGISTRY": REGISTRY, "TAG": TAG}.items() if k != unset}
        run = subprocess.run(["bash", "-c", block], cwd=tmp_path / unset, env=env, capture_output=True,
                             text=True, timeout=120)
        assert run.returncode != 0 and f"set {unset}" in run.stderr, (unset, run.stderr)
        assert target.read_text() == before


# What outlives a sweep: deleting any of these loses results, credentials or the models' binding.
KEPT_KINDS = {"Namespace", "PersistentVolumeClaim", "PersistentVolume", "Secret", "StatefulSet", "StorageClass"}


def teardown_problems(k8s, root: Path, block: str) -> list[str]:
    problems = []
    deletes = [c for c in commands(block) if c[:2] == ["kubectl", "delete"]]
    if not deletes:
        return ["the teardown block deletes nothing"]
    for argv in deletes:
        if "-k" not in argv:
            problems.append(f"{shlex.join(argv)}: not a kustomization delete")
            continue
        target = argv[argv.index("-k") + 1]
        paths = [target.replace("OVERLAY", o) for o in ("cpu-smoke", "single-gpu", "multi-model")] if "OVERLAY" in target else [target]
        for path in paths:
            deleted = k8s.render(root / path)
            for d in deleted:
                if d["kind"] in KEPT_KINDS or (d["kind"], d["metadata"]["name"]) == ("Deployment", "mlflow"):
                    problems.append(f"`kubectl delete -k {path}` deletes {d['kind']}/{d['metadata']['name']}")
            # Nothing it deletes is also one of the stores' objects (a shared NetworkPolicy, ConfigMap...).
            stores = {(d["kind"], d["metadata"]["name"]) for s in ("bundled", "managed") for d in k8s.render(k8s.STORES[s])}
            problems += [f"`kubectl delete -k {path}` deletes the stores' {k}/{n}" for k, n in
                         {(d["kind"], d["metadata"]["name"]) for d in deleted} & stores]
    return problems


def test_the_documented_teardown_deletes_the_sweep_and_keeps_the_stores(k8s):
    block = marked_block(guide(k8s), "teardown")
    assert teardown_problems(k8s, k8s.REPO, block) == []
    # ... and the stores do hold what it keeps: the namespace, the run and models claims, the
    # databases' claim templates.
    stores = k8s.render(k8s.STORES["bundled"])
    assert {(d["kind"], d["metadata"]["name"]) for d in stores} >= {
        ("Namespace", "toolsweep"), ("PersistentVolumeClaim", "toolsweep-runs"),
        ("PersistentVolumeClaim", "toolsweep-models"), ("StatefulSet", "postgres"), ("StatefulSet", "s3")}


def test_the_teardown_check_catches_a_sweep_that_renders_the_namespace(k8s, tmp_path):
    shutil.copytree(k8s.K8S, tmp_path / "k8s")
    kustomization = tmp_path / "k8s" / "overlays" / "cpu-smoke" / "kustomization.yaml"
    shutil.copy(k8s.K8S / "stores" / "base" / "namespace.yaml", kustomization.parent)  # as the overlays once had it
    kustomization.write_text(kustomization.read_text().replace("  - ../../base\n", "  - ../../base\n  - namespace.yaml\n"))
    problems = teardown_problems(k8s, tmp_path, "kubectl delete -k k8s/overlays/cpu-smoke\n")
    assert problems == ["`kubectl delete -k k8s/overlays/cpu-smoke` deletes Namespace/toolsweep",
                        "`kubectl delete -k k8s/overlays/cpu-smoke` deletes the stores' Namespace/toolsweep"]


def rendered_objects(k8s) -> set[tuple[str, str]]:
    """(kind, name) of everything the guide's kustomizations create, with what KubeRay and the
    StatefulSets create from them: the RayJob's submitter Job and the stores' claims."""
    objects = set()
    for path in k8s.APPLIED:
        for d in k8s.render(path):
            name = d["metadata"]["name"]
            objects.add((d["kind"].lower(), name))
            if d["kind"] == "RayJob":
                objects.add(("job", name))  # KubeRay's submitter Job carries the RayJob's name
            if d["kind"] == "StatefulSet":
                for claim in d["spec"].get("volumeClaimTemplates", []):
                    objects.add(("persistentvolumeclaim", f"{claim['metadata']['name']}-{name}-0"))
    return objects


ALIASES = {"pvc": "persistentvolumeclaim", "pv": "persistentvolume", "svc": "service", "deploy": "deployment", "sts": "statefulset"}


def guide_objects(text: str) -> set[tuple[str, str]]:
    """Objects the guide applies from its own heredocs (the runs reader pod)."""
    return {(kind.lower(), name) for kind, name in re.findall(r"^kind: (\w+)\nmetadata: \{name: ([\w-]+)\}", text, re.M)}


def test_every_object_the_guides_kubectl_commands_name_exists(k8s):
    objects = rendered_objects(k8s) | guide_objects(guide(k8s))
    checked = 0
    for block in bash_blocks(guide(k8s)):
        for argv in commands(block):
            for flag in ("-k", "-f"):
                if flag in argv and argv[argv.index(flag) + 1] != "-":
                    path = argv[argv.index(flag) + 1]
                    if "OVERLAY" in path:
                        continue  # the teardown's placeholder (checked above)
                    target = k8s.REPO / path
                    assert (target / "kustomization.yaml").exists() if flag == "-k" else target.is_file(), shlex.join(argv)
                    checked += 1
            if argv[1:3] != ["-n", "toolsweep"] or len(argv) < 4:
                continue  # the operator's namespace, cluster-wide objects: not these manifests'
            refs = [a for a in argv[2:] if re.fullmatch(r"[a-z]+/[a-z0-9-]+", a)]
            verb = argv[3]
            if verb == "rollout":
                # kubectl's rollout status watches one resource: two fail ("resources were found")
                assert len(refs) == 1, f"{shlex.join(argv)}: rollout status takes one resource"
            if verb == "delete" and argv[4] == "pvc":
                refs = [f"pvc/{n}" for n in argv[5:]]
            for ref in refs:
                kind, name = ref.split("/")
                if kind in ("svc",) and "CLUSTER" in name:
                    continue
                assert (ALIASES.get(kind, kind), name) in objects, f"{shlex.join(argv)}: no {ref} in the manifests"
                checked += 1
    assert checked >= 10


BASH_WORDS = set("""if then else elif fi for in do done while until case esac function select time
    export read local declare set unset shift source cd echo printf test true false exit return eval exec
    wait trap type command builtin let alias pwd""".split())


def test_every_block_of_the_guide_sets_or_guards_what_it_reads_in_a_fresh_shell(k8s, tmp_path):
    """Each ```bash block of docs/deploy.md, run alone in a new shell (`bash -u`, an empty environment,
    every other command a stub that does nothing): a variable another block sets is either set again or
    guarded with `${NAME:?what to do}`, never read unset (the override block wrote `newName: /toolsweep`
    and `newTag: ""` that way); and each block parses (the API key block's guard message had an
    apostrophe that bash read as an open quote)."""
    text = guide(k8s)
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    assert len(blocks) >= 10
    stubs = tmp_path / "bin"
    stubs.mkdir()
    read_somewhere = 0
    for i, block in enumerate(blocks):
        for word in set(re.findall(r"(?<![\w$/.-])([a-z][a-z0-9_.-]*)", block)) - BASH_WORDS:
            stub = stubs / word
            if not stub.exists():
                stub.write_text("#!/bin/sh\nexit 0\n")
                stub.chmod(0o755)
        work = tmp_path / f"block-{i}"
        work.mkdir()
        bash = shutil.which("bash") or "/bin/bash"
        parsed = subprocess.run([bash, "-n", "-c", block], capture_output=True, text=True, timeout=60)
        assert parsed.returncode == 0, f"block {i} of docs/deploy.md does not parse:\n{block}\n{parsed.stderr}"
        run = subprocess.run([bash, "-u", "-c", block], cwd=work, env={"PATH": str(stubs), "HOME": str(work)},
                             stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        assert "unbound variable" not in run.stderr, f"block {i} of docs/deploy.md:\n{block}\n{run.stderr}"
        guarded = re.findall(r"\$\{(\w+):\?", block)
        if guarded:  # run with nothing set, it stops at its guard, naming what to set
            read_somewhere += 1
            assert run.returncode != 0 and guarded[0] in run.stderr, (block, run.stderr)
    assert read_somewhere >= 2  # the image override and the model API key blocks
