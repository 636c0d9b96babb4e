"""The KubeRay guide and manifests do what the guide says, in the order it says:

- every variable a command of the guide uses is set (or generated) before, or the command stops with a
  message when the reader must supply it (`${VAR:?...}`): `$MLFLOW_PASSWORD` was never set, and an
  empty password makes MLflow exit;
- a command that needs a Ready object comes after a `kubectl wait` for it (`kubectl cp` from the
  reader pod);
- the Retain loop patches a volume only once its claim is bound;
- a permanent driver error does not make the RayJob retry: the entrypoint stops its own Ray job (job
  status STOPPED, which KubeRay 1.7.0 marks Complete and never retries, rayjob_controller.go), while a
  lost head still fails and is retried;
- no pod of a sweep but the head (its autoscaler sidecar calls the Kubernetes API) mounts a
  service-account token.
"""

from __future__ import annotations

import re

from test_k8s_docs import bash_blocks, commands, guide

ASSIGN = re.compile(r"(?:^|[\s;(])(?:export\s+)?([A-Z_][A-Z0-9_]*)=")
USE = re.compile(r"\$\{?([A-Z_][A-Z0-9_]*)(:\?)?")
SHELL_OWN = {"PATH", "HOME", "PWD"}


def unset_variables(blocks: list[str]) -> list[str]:
    """Variables used before any block (or earlier line) sets them, unless the use stops with a message."""
    known: set[str] = set(SHELL_OWN)
    problems = []
    for block in blocks:
        heredoc_quoted = False
        for line in block.splitlines():
            code = line.split(" #", 1)[0]
            if re.search(r"<<-?'\w+'", code):
                heredoc_quoted = True  # a quoted heredoc's body is not expanded
            elif heredoc_quoted and code.strip() == "EOF":
                heredoc_quoted = False
                continue
            if heredoc_quoted and "<<" not in code:
                continue
            for name, guarded in USE.findall(code):
                if name not in known and not guarded and not re.search(rf"\bfor\s+{name}\b", code):
                    problems.append(f"${name} in: {line.strip()}")
            known.update(ASSIGN.findall(code))
            known.update(re.findall(r"\bfor\s+([A-Za-z_]\w*)\s+in\b", code))
    return problems


def test_every_variable_of_the_guide_is_set_before_it_is_used(k8s):
    assert unset_variables(bash_blocks(guide(k8s))) == []


def test_the_variable_check_catches_an_unset_password():
    assert unset_variables(['kubectl create secret generic a --from-literal=password="$MLFLOW_PASSWORD"']) == [
        '$MLFLOW_PASSWORD in: kubectl create secret generic a --from-literal=password="$MLFLOW_PASSWORD"']
    assert unset_variables(['X="$(openssl rand -hex 16)"', 'echo "$X" "${Y:?set Y}"']) == []


def test_the_generated_mlflow_password_is_long_enough_for_mlflow(k8s):
    text = guide(k8s)
    m = re.search(r"MLFLOW_PASSWORD=\"\$\(openssl rand -hex (\d+)\)\"", text)
    assert m and 2 * int(m.group(1)) >= 12  # hex: two characters a byte; MLflow refuses fewer than 12


def test_the_runs_are_copied_only_from_a_ready_reader_pod(k8s):
    cmds = [c for block in bash_blocks(guide(k8s)) for c in commands(block)]
    cp = next(i for i, c in enumerate(cmds) if c[1:2] == ["-n"] and "cp" in c)
    waits = [c for c in cmds[:cp] if "wait" in c and any("condition=Ready" in a for a in c)]
    assert any("pod/runs-reader" in c for c in waits), cmds[:cp]


def test_the_retain_loop_waits_for_each_claim_to_be_bound(k8s):
    text = guide(k8s)
    loop = text[text.index("for claim in toolsweep-runs"):]
    loop = loop[:loop.index("done") + 4]
    wait = loop.index("--for=jsonpath='{.status.phase}'=Bound")
    assert wait < loop.index("kubectl patch pv")


def test_the_entrypoint_stops_its_job_on_a_permanent_error(k8s, rendered):
    for overlay in ("cpu-smoke", "single-gpu", "multi-model"):
        job = k8s.find(rendered[overlay], "RayJob")
        assert "--permanent-error-stops-job" in job["spec"]["entrypoint"].split(), overlay
        assert job["spec"]["backoffLimit"] >= 1  # a lost head is still retried on a new cluster


def test_only_the_head_of_a_sweep_mounts_a_service_account_token(k8s, rendered):
    for overlay in ("cpu-smoke", "single-gpu", "multi-model"):
        spec = k8s.find(rendered[overlay], "RayJob")["spec"]
        for group in spec["rayClusterSpec"]["workerGroupSpecs"]:
            assert group["template"]["spec"].get("automountServiceAccountToken") is False, (overlay, group["groupName"])
        assert spec["submitterPodTemplate"]["spec"].get("automountServiceAccountToken") is False


def test_the_reader_pod_mounts_no_token(k8s):
    text = guide(k8s)
    pod = text[text.index("metadata: {name: runs-reader}"):]
    pod = pod[:pod.index("EOF")]
    assert "automountServiceAccountToken: false" in pod
