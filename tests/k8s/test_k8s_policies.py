"""What the manifests promise beyond their schemas: resources, GPU isolation, shared memory, secrets,
the RayJob's wiring to the ConfigMap, the run volume and MLflow, and that each overlay's sweep fits its
cluster."""

from __future__ import annotations

import copy
import re
import shlex
import shutil
import tomllib
from urllib.parse import urlparse

import pytest
import yaml

from toolsweep.cluster.config import load_config
from toolsweep.cluster.placement import PlacementError, plan_placement

KUSTOMIZATIONS = ["base", "cpu-smoke", "single-gpu", "multi-model", "managed-stores"]
DEPLOYABLE = ["cpu-smoke", "single-gpu", "multi-model", "managed-stores"]


def pod_templates(doc: dict) -> list[tuple[str, dict]]:
    spec = doc.get("spec", {})
    if doc["kind"] in ("Deployment", "StatefulSet", "Job"):
        return [(doc["metadata"]["name"], spec["template"])]
    if doc["kind"] == "RayJob":
        cluster = spec["rayClusterSpec"]
        return [("submitter", spec["submitterPodTemplate"]), ("head", cluster["headGroupSpec"]["template"])] + [
            (g["groupName"], g["template"]) for g in cluster["workerGroupSpecs"]
        ]
    return []


def quantity(value: str | int | float) -> float:
    """CPU / count quantities: "500m" -> 0.5, "8" -> 8."""
    text = str(value)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def gib(q: str) -> float:
    units = {"Gi": 1.0, "Mi": 1 / 1024, "Ti": 1024.0}
    for suffix, factor in units.items():
        if q.endswith(suffix):
            return float(q[: -len(suffix)]) * factor
    raise ValueError(q)


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_every_container_requests_what_it_limits(rendered, name):
    checked = []
    for doc in rendered[name]:
        for where, template in pod_templates(doc):
            for c in template["spec"]["containers"]:
                res = c.get("resources", {})
                assert res.get("requests") and res.get("requests") == res.get("limits"), f"{where}/{c['name']}"
                assert {"cpu", "memory"} <= set(res["limits"]), f"{where}/{c['name']}"
                checked.append(where)
        if doc["kind"] == "RayJob":  # the autoscaler sidecar KubeRay adds to the head pod
            res = doc["spec"]["rayClusterSpec"]["autoscalerOptions"]["resources"]
            assert res["requests"] == res["limits"]
    stores = ["postgres", "s3", "s3-create-bucket"] if name in ("cpu-smoke", "single-gpu", "multi-model") else []
    assert sorted(checked) == sorted(["mlflow", "submitter", "head", "cpu-workers", "gpu-workers"] + stores)


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_no_gpu_work_lands_on_the_head_or_the_cpu_workers(k8s, rendered, name):
    cluster = k8s.ray_cluster_spec(rendered[name])
    head = cluster["headGroupSpec"]
    # Ray resources are set one way only (rayStartParams); KubeRay refuses a group that also sets
    # `resources` (tests/k8s/test_kuberay_rules.py).
    assert head["rayStartParams"]["num-gpus"] == "0" and head["rayStartParams"]["num-cpus"] == "0"
    assert "resources" not in head
    head_c = head["template"]["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in head_c["resources"]["limits"]
    cpu = k8s.worker_group(rendered[name], "cpu-workers")
    assert cpu["rayStartParams"]["num-gpus"] == "0" and "resources" not in cpu
    container = cpu["template"]["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in container["resources"]["limits"]
    # No runtime default may hand these containers a GPU node's devices.
    for c in (head_c, container):
        assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in c["env"]


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_only_the_gpu_workers_see_the_nodes_gpus(k8s, rendered, name):
    """Every container that asks for no GPU (the submitter and the autoscaler sidecar KubeRay adds to
    the head included) hides the node's GPUs (NVIDIA_VISIBLE_DEVICES=void): with the NVIDIA container
    runtime as a node's default, a container whose environment says all (as CUDA base images do, or
    a runtime configured so) is handed every GPU of the node."""
    assert gpu_visibility_problems(k8s.find(rendered[name], "RayJob")) == []


def gpu_visibility_problems(rayjob: dict) -> list[str]:
    spec = rayjob["spec"]
    cluster = spec["rayClusterSpec"]
    containers = [("submitter", c) for c in spec["submitterPodTemplate"]["spec"]["containers"]]
    containers.append(("autoscaler", cluster["autoscalerOptions"]))
    containers += [("head", c) for c in cluster["headGroupSpec"]["template"]["spec"]["containers"]]
    for g in cluster["workerGroupSpecs"]:
        containers += [(g["groupName"], c) for c in g["template"]["spec"]["containers"]]
    problems = []
    for where, c in containers:
        gpus = int(c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu", 0))
        hidden = {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in c.get("env", [])
        if not gpus and not hidden:
            problems.append(f"{where}: asks for no GPU but sees the node's GPUs")
        if gpus and any(e["name"] == "NVIDIA_VISIBLE_DEVICES" for e in c.get("env", [])):
            problems.append(f"{where}: NVIDIA_VISIBLE_DEVICES set where the device plugin chooses the GPUs")
    return problems


def test_the_gpu_visibility_check_catches_a_sidecar_that_sees_every_gpu(k8s, rendered):
    job = copy.deepcopy(k8s.find(rendered["single-gpu"], "RayJob"))
    job["spec"]["rayClusterSpec"]["autoscalerOptions"].pop("env")
    assert gpu_visibility_problems(job) == ["autoscaler: asks for no GPU but sees the node's GPUs"]


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_submitter_leaves_the_submit_command_to_kuberay(k8s, rendered, name):
    # KubeRay fills in `ray job submit ...` only when the first container has no command.
    submitter = k8s.find(rendered[name], "RayJob")["spec"]["submitterPodTemplate"]["spec"]
    assert "command" not in submitter["containers"][0] and submitter["restartPolicy"] == "Never"


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_gpu_workers_have_gpus_shared_memory_and_read_only_models(k8s, rendered, name):
    docs = rendered[name]
    pod = k8s.worker_group(docs, "gpu-workers")["template"]["spec"]
    container = pod["containers"][0]
    limits = container["resources"]["limits"]
    assert int(limits["nvidia.com/gpu"]) >= 1
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    shm = volumes[mounts["/dev/shm"]["name"]]
    assert shm["emptyDir"]["medium"] == "Memory"
    # The shared memory counts against the pod's memory limit: it must leave room for the process.
    assert gib(shm["emptyDir"]["sizeLimit"]) <= gib(limits["memory"]) / 2


def reads_models(k8s, docs: list[dict]) -> bool:
    """Whether the deployment's sweep reads anything under /models (a model's weights, a benchmark's data)."""
    text = k8s.find(docs, "ConfigMap", "toolsweep-sweep")["data"]["sweep.yaml"]
    return "/models/" in text


@pytest.mark.parametrize("name", ["single-gpu", "multi-model", "managed-stores"])
def test_every_ray_pod_reads_models_and_data_from_the_pre_filled_volume(k8s, rendered, name):
    docs = rendered[name]
    assert reads_models(k8s, docs)
    _, *ray_pods = [t for _, t in pod_templates(k8s.find(docs, "RayJob"))]
    for template in ray_pods:  # head (budget checks, task lists), rollout workers (data), GPU workers (weights)
        pod = template["spec"]
        mounts = {m["mountPath"]: m for m in pod["containers"][0]["volumeMounts"]}
        assert mounts["/models"]["readOnly"] is True
        claim = {v["name"]: v for v in pod["volumes"]}[mounts["/models"]["name"]]["persistentVolumeClaim"]
        assert claim["readOnly"] is True
    pvc = k8s.find(docs, "PersistentVolumeClaim", claim["claimName"])["spec"]
    assert pvc["accessModes"] == ["ReadOnlyMany"]
    # Binds only to the pre-filled volume: a default StorageClass must not hand it an empty disk.
    assert pvc["storageClassName"] == "" and pvc["volumeName"] == claim["claimName"]


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_gpu_groups_scale_from_zero_and_cpu_groups_autoscale(k8s, rendered, name):
    cluster = k8s.ray_cluster_spec(rendered[name])
    assert cluster["enableInTreeAutoscaling"] is True
    assert cluster["autoscalerOptions"]["idleTimeoutSeconds"] <= 300
    for g in cluster["workerGroupSpecs"]:
        assert 0 <= g["minReplicas"] <= g["replicas"] <= g["maxReplicas"], g["groupName"]
    gpu = k8s.worker_group(rendered[name], "gpu-workers")
    assert gpu["minReplicas"] == gpu["replicas"] == 0
    assert gpu["maxReplicas"] == 0 if name == "cpu-smoke" else gpu["maxReplicas"] >= 1
    cpu = k8s.worker_group(rendered[name], "cpu-workers")
    assert cpu["maxReplicas"] > cpu["minReplicas"] >= 1


def test_overlays_size_the_gpu_group(k8s, rendered):
    single = k8s.worker_group(rendered["single-gpu"], "gpu-workers")
    multi = k8s.worker_group(rendered["multi-model"], "gpu-workers")
    assert single["maxReplicas"] == 1
    assert single["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert multi["maxReplicas"] == 4
    assert multi["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"


def test_multi_model_gpu_pods_land_only_on_gpus_big_enough_for_the_32b_model(k8s, rendered):
    pod = k8s.worker_group(rendered["multi-model"], "gpu-workers")["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [e for t in terms for e in t["matchExpressions"]] == [
        {"key": "nvidia.com/gpu.memory", "operator": "Gt", "values": ["70000"]}
    ]
    # The model that needs them is in that overlay's sweep, at tensor_parallel_size 2.
    config = sweep_config(k8s, rendered["multi-model"])
    assert any(m.kind == "vllm" and "32b" in m.name and m.engine_args.tensor_parallel_size == 2 for m in config.models)


def test_ray_version_matches_the_pinned_ray(k8s, rendered):
    pins = tomllib.loads((k8s.REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    ray_pin = next(p for p in pins if p.startswith("ray["))
    for name in KUSTOMIZATIONS:
        assert ray_pin.endswith("==" + k8s.ray_cluster_spec(rendered[name])["rayVersion"])


# -- the RayJob: its lifecycle and its wiring --------------------------------------------------------


def entrypoint_args(rayjob: dict) -> dict[str, str]:
    argv = shlex.split(rayjob["spec"]["entrypoint"])
    assert argv[:2] == ["toolsweep", "run"], argv
    config, flags = argv[2], argv[3:]
    out = {"config": config}
    i = 0
    while i < len(flags):  # `--name value`, or a switch (`--permanent-error-stops-job`): "true"
        assert flags[i].startswith("--"), flags
        if i + 1 < len(flags) and not flags[i + 1].startswith("--"):
            out[flags[i][2:]], i = flags[i + 1], i + 2
        else:
            out[flags[i][2:]], i = "true", i + 1
    return out


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_the_rayjob_owns_its_cluster_and_cleans_up_after_itself(k8s, rendered, name):
    spec = k8s.find(rendered[name], "RayJob")["spec"]
    assert "clusterSelector" not in spec and spec["rayClusterSpec"]
    assert spec["shutdownAfterJobFinishes"] is True and 0 < spec["ttlSecondsAfterFinished"] <= 600
    # Bounded in time: the cluster must come up, and the sweep must end.
    assert 0 < spec["preRunningDeadlineSeconds"] < spec["activeDeadlineSeconds"]
    # The driver waits for the GPU pods it asks for, within the time the job has.
    wait = float(entrypoint_args({"spec": spec})["scale-up-timeout"])
    assert 0 < wait < spec["activeDeadlineSeconds"]
    # Retries are bounded (each attempt has its own deadlines, so the bound is attempts x deadline).
    assert 1 <= spec["backoffLimit"] <= 5 and 1 <= spec["submitterConfig"]["backoffLimit"] <= 10
    # Ray's token authentication on the cluster's job API and GCS.
    assert spec["rayClusterSpec"]["authOptions"] == {"mode": "token"}


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_rayjob_runs_the_configmap_sweep_on_its_cluster(k8s, rendered, name):
    docs = rendered[name]
    job = k8s.find(docs, "RayJob")
    args = entrypoint_args(job)
    assert args["address"] == "auto"
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    volumes = {v["name"]: v for v in head["volumes"]}
    mounts = head["containers"][0]["volumeMounts"]

    def volume_at(path: str) -> tuple[dict, str]:
        hits = [(m, path[len(m["mountPath"]):].lstrip("/")) for m in mounts if path.startswith(m["mountPath"].rstrip("/") + "/")]
        assert len(hits) == 1, f"{path} is not under exactly one head mount"
        return volumes[hits[0][0]["name"]], hits[0][1]

    # The config file is a key of the mounted ConfigMap (by its exact, content-hashed name).
    vol, key = volume_at(args["config"])
    cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == vol["configMap"]["name"])
    assert key in cm["data"] and cm["metadata"]["name"] != "toolsweep-sweep"
    # The run directories land on a persistent volume of the head (the result sink runs in the driver).
    vol, _ = volume_at(args["output-dir"].rstrip("/") + "/x")
    k8s.find(docs, "PersistentVolumeClaim", vol["persistentVolumeClaim"]["claimName"])
    # The tracking URI is the MLflow Service, on its port.
    uri = urlparse(args["tracking-uri"])
    svc = k8s.find(docs, "Service", uri.hostname)
    assert uri.scheme == "http" and uri.port in [p["port"] for p in svc["spec"]["ports"]]


def test_a_changed_sweep_is_a_new_configmap_the_rayjob_mounts(k8s, tmp_path):
    """A fixed ConfigMap name would let a RayJob read the previous sweep; the name follows the content."""
    shutil.copytree(k8s.K8S, tmp_path / "k8s")
    overlay = tmp_path / "k8s" / "overlays" / "single-gpu"
    before = k8s.render(overlay)
    sweep = overlay / "sweep.yaml"
    sweep.write_text(sweep.read_text().replace("seeds: [42]", "seeds: [42, 43]"))
    after = k8s.render(overlay)

    def mounted(docs: list[dict]) -> tuple[str, str]:
        head = k8s.ray_cluster_spec(docs)["headGroupSpec"]["template"]["spec"]
        name = next(v["configMap"]["name"] for v in head["volumes"] if "configMap" in v)
        cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == name)
        return name, cm["data"]["sweep.yaml"]

    (name_before, text_before), (name_after, text_after) = mounted(before), mounted(after)
    assert name_before != name_after and "seeds: [42, 43]" in text_after and "seeds: [42, 43]" not in text_before


def sweep_config(k8s, docs: list[dict]):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sweep.yaml"
        path.write_text(k8s.find(docs, "ConfigMap", "toolsweep-sweep")["data"]["sweep.yaml"])
        return load_config(path)


def cluster_nodes(cluster: dict) -> list[dict]:
    """Ray resources of the pods the cluster can have: every group at maxReplicas (the autoscaler
    starts them when the driver asks), the head as its rayStartParams declare it."""
    head = cluster["headGroupSpec"]["rayStartParams"]
    nodes = [{"node_id": "head", "CPU": quantity(head["num-cpus"]), "GPU": quantity(head["num-gpus"])}]
    for g in cluster["workerGroupSpecs"]:
        limits = g["template"]["spec"]["containers"][0]["resources"]["limits"]
        gpus = quantity(g["rayStartParams"].get("num-gpus", limits.get("nvidia.com/gpu", 0)))
        for i in range(g["maxReplicas"]):
            nodes.append({"node_id": f"{g['groupName']}-{i}", "CPU": quantity(limits["cpu"]), "GPU": gpus})
    return nodes


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_each_sweep_config_is_valid_and_fits_its_cluster(k8s, rendered, name):
    docs = rendered[name]
    config = sweep_config(k8s, docs)
    nodes = cluster_nodes(k8s.ray_cluster_spec(docs))
    totals = {"GPU": sum(n["GPU"] for n in nodes), "CPU": sum(n["CPU"] for n in nodes)}
    plan = plan_placement(config.models, totals, nodes)
    assert "head" not in {node for where in plan.assignments.values() for node in where}
    assert not any(n.startswith("cpu-workers") for where in plan.assignments.values() for n in where)
    if name in ("single-gpu", "multi-model"):
        assert plan.gpus_needed >= 1  # the overlays do run models on their GPUs


def test_multi_model_overlay_is_full_and_one_more_replica_fails(k8s, rendered):
    docs = rendered["multi-model"]
    config = sweep_config(k8s, docs)
    nodes = cluster_nodes(k8s.ray_cluster_spec(docs))
    totals = {"GPU": sum(n["GPU"] for n in nodes), "CPU": sum(n["CPU"] for n in nodes)}
    assert plan_placement(config.models, totals, nodes).gpus_needed == totals["GPU"]
    biggest = max((m for m in config.models if m.kind == "vllm"), key=lambda m: m.engine_args.tensor_parallel_size)
    biggest.replicas += 1
    with pytest.raises(PlacementError, match=re.escape(f"model {biggest.name!r}") + "|" + re.escape(biggest.name)):
        plan_placement(config.models, totals, nodes)


def test_every_pod_mounts_only_what_its_sweep_uses(k8s, rendered):
    """The models claim binds only to a pre-made volume: a sweep that reads nothing under /models must
    not mount it (its pods would stay Pending on a cluster without one: kind, minikube), and a sweep
    that does must mount it on every Ray pod. Every other claim a pod mounts comes from the cluster's
    default StorageClass."""
    assert mount_problems(k8s, rendered["cpu-smoke"]) == []
    for name in KUSTOMIZATIONS:
        assert mount_problems(k8s, rendered[name]) == [], name
    assert not reads_models(k8s, rendered["cpu-smoke"])


def mount_problems(k8s, docs: list[dict]) -> list[str]:
    claims = {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "PersistentVolumeClaim"}
    uses_models = reads_models(k8s, docs)
    problems = []
    for doc in docs:
        for where, template in pod_templates(doc):
            pod = template["spec"]
            volumes = {v["name"]: v for v in pod.get("volumes", [])}
            for c in pod["containers"]:
                for m in c.get("volumeMounts", []):
                    if m["name"] not in volumes:  # a StatefulSet's claim template: the default StorageClass
                        continue
                    claim = volumes[m["name"]].get("persistentVolumeClaim", {}).get("claimName")
                    if claim is None:
                        continue
                    pre_made = claims[claim].get("storageClassName") == ""
                    if pre_made and not (uses_models and m["mountPath"] == "/models"):
                        problems.append(f"{where}: mounts {claim}, which binds only to a pre-made volume, and its sweep reads nothing there")
            if doc["kind"] == "RayJob" and where != "submitter" and uses_models:
                if "/models" not in {m["mountPath"] for m in pod["containers"][0].get("volumeMounts", [])}:
                    problems.append(f"{where}: its sweep reads /models, which it does not mount")
    return problems


def test_the_mount_check_catches_a_cpu_sweep_that_mounts_the_models_volume(k8s, rendered):
    docs = copy.deepcopy(rendered["cpu-smoke"])
    head = k8s.ray_cluster_spec(docs)["headGroupSpec"]["template"]["spec"]
    head["volumes"].append({"name": "models", "persistentVolumeClaim": {"claimName": "toolsweep-models", "readOnly": True}})
    head["containers"][0]["volumeMounts"].append({"name": "models", "mountPath": "/models", "readOnly": True})
    assert mount_problems(k8s, docs) == ["head: mounts toolsweep-models, which binds only to a pre-made volume, and its sweep reads nothing there"]


# -- drains ------------------------------------------------------------------------------------------


def budgets_for(docs: list[dict], labels: dict) -> list[dict]:
    return [d["spec"] for d in docs if d["kind"] == "PodDisruptionBudget"
            and d["spec"]["selector"]["matchLabels"].items() <= labels.items()]


def drain_problems(docs: list[dict]) -> list[str]:
    """The head and the GPU workers (model servers in use) may not be evicted voluntarily: a budget
    that refuses every eviction while the sweep runs (an integer minAvailable of at least the group's
    pods: a RayCluster has no scale subresource, so maxUnavailable and percentages cannot be computed)
    that still lets a broken pod go, and the annotations node autoscalers read."""
    cluster = next(d for d in docs if d["kind"] == "RayJob")["spec"]["rayClusterSpec"]
    groups = [("head", cluster["headGroupSpec"]["template"], 1)]
    groups += [(g["groupName"], g["template"], g["maxReplicas"]) for g in cluster["workerGroupSpecs"]
               if "nvidia.com/gpu" in g["template"]["spec"]["containers"][0]["resources"]["limits"]]
    problems = []
    for where, template, most in groups:
        labels = template["metadata"]["labels"]
        budgets = budgets_for(docs, labels)
        if len(budgets) != 1:
            problems.append(f"{where}: {len(budgets)} disruption budgets")
            continue
        budget = budgets[0]
        if "maxUnavailable" in budget or not isinstance(budget.get("minAvailable"), int) or budget["minAvailable"] < max(most, 1):
            problems.append(f"{where}: its budget allows evictions ({budget})")
        if budget.get("unhealthyPodEvictionPolicy") != "AlwaysAllow":
            problems.append(f"{where}: a pod that is not ready would block a drain")
        annotations = template["metadata"].get("annotations", {})
        if annotations.get("cluster-autoscaler.kubernetes.io/safe-to-evict") != "false":
            problems.append(f"{where}: the cluster autoscaler may evict it")
        if annotations.get("karpenter.sh/do-not-disrupt") != "true":
            problems.append(f"{where}: Karpenter may disrupt it")
    return problems


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_drains_wait_for_the_head_and_the_model_servers(k8s, rendered, name):
    docs = rendered[name]
    assert drain_problems(docs) == []
    # The rollout workers are not held: losing one costs its units in flight, which are leased again.
    cpu = k8s.worker_group(docs, "cpu-workers")["template"]
    assert budgets_for(docs, cpu["metadata"]["labels"]) == []


def test_the_drain_check_catches_a_budget_smaller_than_the_gpu_group(k8s, rendered):
    docs = copy.deepcopy(rendered["multi-model"])
    k8s.find(docs, "PodDisruptionBudget", "ray-gpu-workers")["spec"]["minAvailable"] = 1
    assert drain_problems(docs) and "gpu-workers: its budget allows evictions" in drain_problems(docs)[0]
    docs = copy.deepcopy(rendered["single-gpu"])
    k8s.ray_cluster_spec(docs)["headGroupSpec"]["template"]["metadata"].pop("annotations")
    assert drain_problems(docs) == ["head: the cluster autoscaler may evict it", "head: Karpenter may disrupt it"]


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_a_retried_attempt_resumes_the_same_run_directory(k8s, rendered, name):
    """KubeRay re-runs the entrypoint on a re-created head (submitter retries) or a new cluster
    (backoffLimit): each attempt must find the previous one's run directory, so the entrypoint names
    no run id of its own (the run directory is runs/<sweep>/main, which grows) and writes to a claim
    of the stores, which a retry, a deleted RayJob and a torn-down sweep all leave in place."""
    docs = rendered[name]
    job = k8s.find(docs, "RayJob")
    args = entrypoint_args(job)
    assert "run-id" not in args
    # The submitter's retries resubmit the entrypoint to a re-created head only in K8sJobMode and only
    # when that head has forgotten the job: with GCS fault tolerance it would still know the
    # submission id, and the retry would follow the dead job instead (KubeRay 1.7.0, reconcilePods).
    assert job["spec"]["submissionMode"] == "K8sJobMode"
    assert "gcsFaultToleranceOptions" not in job["spec"]["rayClusterSpec"]
    assert "ray.io/ft-enabled" not in job["metadata"].get("annotations", {})
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    mount = next(m for m in head["containers"][0]["volumeMounts"] if args["output-dir"].startswith(m["mountPath"]))
    claim = {v["name"]: v for v in head["volumes"]}[mount["name"]]["persistentVolumeClaim"]["claimName"]
    stores = k8s.render(k8s.DEPLOYMENTS[name][0])
    sweep = k8s.render(k8s.DEPLOYMENTS[name][1])
    assert [d for d in stores if d["kind"] == "PersistentVolumeClaim" and d["metadata"]["name"] == claim]
    assert not [d for d in sweep if d["kind"] == "PersistentVolumeClaim"]


# -- MLflow --------------------------------------------------------------------------------------


def mlflow_container(k8s, docs: list[dict]) -> dict:
    return k8s.find(docs, "Deployment", "mlflow")["spec"]["template"]["spec"]["containers"][0]


def option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def env_of(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env", [])}


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_mlflow_listens_on_all_interfaces_behind_its_service_with_auth_and_probes(k8s, rendered, name):
    # What the Host and CORS settings accept, and that the auth app really asks for a user, is
    # checked against a live server started with these arguments (test_k8s_entrypoint_local.py).
    docs = rendered[name]
    c = mlflow_container(k8s, docs)
    args = c["args"]
    assert c["command"][:2] == ["/bin/sh", "-c"] and "exec mlflow server \"$@\"" in c["command"][2]
    assert option(args, "--app-name") == "basic-auth"
    assert option(args, "--host") == "0.0.0.0"
    port = int(option(args, "--port"))
    assert c["ports"][0]["containerPort"] == port
    svc = k8s.find(docs, "Service", "mlflow")
    labels = k8s.find(docs, "Deployment", "mlflow")["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= labels.items()
    assert svc["spec"]["ports"][0]["targetPort"] in (port, c["ports"][0]["name"])
    assert option(args, "--allowed-hosts") and option(args, "--cors-allowed-origins")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"]["path"] == "/health", probe  # the one path auth leaves open
    env = env_of(c)
    for var in ("MLFLOW_AUTH_ADMIN_USERNAME", "MLFLOW_AUTH_ADMIN_PASSWORD", "MLFLOW_FLASK_SERVER_SECRET_KEY"):
        assert env[var]["valueFrom"]["secretKeyRef"]["name"] == "mlflow-auth", var
    # The sweep's driver logs as that user.
    head = k8s.ray_cluster_spec(docs)["headGroupSpec"]["template"]["spec"]["containers"][0]
    head_env = env_of(head)
    assert head_env["MLFLOW_TRACKING_USERNAME"]["valueFrom"]["secretKeyRef"] == {"name": "mlflow-auth", "key": "username"}
    assert head_env["MLFLOW_TRACKING_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "mlflow-auth", "key": "password"}


def store_settings(k8s, docs: list[dict]) -> dict[str, str]:
    return k8s.find(docs, "ConfigMap", "mlflow-stores")["data"]


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_mlflow_stores_are_postgres_and_s3_with_credentials_from_secrets(k8s, rendered, name):
    docs = rendered[name]
    c = mlflow_container(k8s, docs)
    env = env_of(c)
    uri = env["MLFLOW_BACKEND_STORE_URI"]["value"]
    assert uri.startswith("postgresql+psycopg2://$(MLFLOW_DB_USER):$(MLFLOW_DB_PASSWORD)@")
    for var in ("MLFLOW_DB_USER", "MLFLOW_DB_PASSWORD"):
        assert env[var]["valueFrom"]["secretKeyRef"]["name"] == "mlflow-postgres"
    # Kubernetes expands $(VAR) only from variables defined earlier in the list.
    names = [e["name"] for e in c["env"]]
    for ref in re.findall(r"\$\((\w+)\)", uri):
        assert names.index(ref) < names.index("MLFLOW_BACKEND_STORE_URI"), ref
    # Where the stores are is one ConfigMap, the one the Deployment reads (by its hashed name).
    stores = k8s.find(docs, "ConfigMap", "mlflow-stores")
    for var in ("MLFLOW_DB_HOST", "MLFLOW_DB_PORT", "MLFLOW_DB_NAME", "MLFLOW_ARTIFACTS_DESTINATION", "MLFLOW_S3_ENDPOINT_URL"):
        assert env[var]["valueFrom"]["configMapKeyRef"] == {"name": stores["metadata"]["name"], "key": var}, var
    assert stores["data"]["MLFLOW_ARTIFACTS_DESTINATION"].startswith("s3://")
    assert urlparse(stores["data"]["MLFLOW_S3_ENDPOINT_URL"]).scheme in ("http", "https")
    assert "--serve-artifacts" in c["args"]
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert env[var]["valueFrom"]["secretKeyRef"]["name"] == "mlflow-s3"
    assert env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"]["value"] == "false"


@pytest.mark.parametrize("name", ["cpu-smoke", "single-gpu", "multi-model"])
def test_bundled_stores_are_the_ones_mlflow_points_at(k8s, rendered, name):
    docs = rendered[name]
    stores = store_settings(k8s, docs)
    # PostgreSQL: a Service of that name and port, a StatefulSet with a volume, user and password
    # from the Secret MLflow reads, the database MLflow names.
    svc = k8s.find(docs, "Service", stores["MLFLOW_DB_HOST"])
    assert int(stores["MLFLOW_DB_PORT"]) in [p["port"] for p in svc["spec"]["ports"]]
    pg = k8s.find(docs, "StatefulSet", stores["MLFLOW_DB_HOST"])
    assert svc["spec"]["selector"].items() <= pg["spec"]["template"]["metadata"]["labels"].items()
    assert pg["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"]
    pg_env = env_of(pg["spec"]["template"]["spec"]["containers"][0])
    assert pg_env["POSTGRES_USER"]["valueFrom"]["secretKeyRef"] == {"name": "mlflow-postgres", "key": "username"}
    assert pg_env["POSTGRES_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": "mlflow-postgres", "key": "password"}
    assert pg_env["POSTGRES_DB"]["valueFrom"]["configMapKeyRef"]["key"] == "MLFLOW_DB_NAME"
    # The S3 gateway (versitygw): the endpoint's host and port, its root user = the key pair MLflow
    # uploads with (the gateway reads ROOT_ACCESS_KEY_ID / ROOT_SECRET_ACCESS_KEY), its health path
    # the one its probes ask for.
    endpoint = urlparse(stores["MLFLOW_S3_ENDPOINT_URL"])
    svc = k8s.find(docs, "Service", endpoint.hostname)
    assert endpoint.port in [p["port"] for p in svc["spec"]["ports"]]
    gateway = k8s.find(docs, "StatefulSet", endpoint.hostname)["spec"]
    container = gateway["template"]["spec"]["containers"][0]
    assert container["image"].startswith("ghcr.io/versity/versitygw:v")
    g_env = env_of(container)
    assert g_env["ROOT_ACCESS_KEY_ID"]["valueFrom"]["secretKeyRef"] == {"name": "mlflow-s3", "key": "AWS_ACCESS_KEY_ID"}
    assert g_env["ROOT_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "mlflow-s3", "key": "AWS_SECRET_ACCESS_KEY"}
    args = container["args"]
    assert option(args, "--port") == f":{container['ports'][0]['containerPort']}"
    assert svc["spec"]["ports"][0]["targetPort"] == container["ports"][0]["name"]
    assert args[-2:] == ["posix", container["volumeMounts"][0]["mountPath"]]
    assert container["volumeMounts"][0]["name"] == gateway["volumeClaimTemplates"][0]["metadata"]["name"]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == option(args, "--health")
    # Both stores keep their claims when their StatefulSets go.
    for sts in (gateway, k8s.find(docs, "StatefulSet", stores["MLFLOW_DB_HOST"])["spec"]):
        assert sts["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    # The bucket Job creates the bucket of MLflow's artifact destination, at that endpoint, with the
    # MLflow image's boto3.
    job = k8s.find(docs, "Job", "s3-create-bucket")["spec"]["template"]["spec"]["containers"][0]
    assert job["image"] == mlflow_container(k8s, docs)["image"]
    j_env = env_of(job)
    for var in ("MLFLOW_S3_ENDPOINT_URL", "MLFLOW_ARTIFACTS_DESTINATION"):
        assert j_env[var]["valueFrom"]["configMapKeyRef"]["key"] == var
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert j_env[var]["valueFrom"]["secretKeyRef"] == {"name": "mlflow-s3", "key": var}
    script = job["command"][-1]
    assert 'endpoint_url=os.environ["MLFLOW_S3_ENDPOINT_URL"]' in script and "s3.create_bucket(Bucket=bucket)" in script


def test_managed_stores_example_has_no_bundled_store_and_lets_mlflow_reach_out(k8s, rendered):
    docs = rendered["managed-stores"]
    assert not [d for d in docs if d["kind"] in ("StatefulSet", "Job")]
    stores = store_settings(k8s, docs)
    assert stores["MLFLOW_DB_HOST"] not in {d["metadata"]["name"] for d in docs if d["kind"] == "Service"}
    assert allowed(docs, MLFLOW, EXTERNAL, int(stores["MLFLOW_DB_PORT"]))
    assert allowed(docs, MLFLOW, EXTERNAL, 443)


# -- secrets ----------------------------------------------------------------------------------------


def secret_refs(obj, found=None) -> dict[str, set[str]]:
    """Secret name -> keys referenced (empty set for whole-secret envFrom)."""
    found = {} if found is None else found
    if isinstance(obj, dict):
        if "secretKeyRef" in obj:
            found.setdefault(obj["secretKeyRef"]["name"], set()).add(obj["secretKeyRef"]["key"])
        if "secretRef" in obj:
            found.setdefault(obj["secretRef"]["name"], set())
        for v in obj.values():
            secret_refs(v, found)
    elif isinstance(obj, list):
        for v in obj:
            secret_refs(v, found)
    return found


SENSITIVE = re.compile(r"PASSWORD|SECRET|TOKEN|API_KEY|ACCESS_KEY", re.I)


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_secrets_are_referenced_never_embedded_and_documented(k8s, rendered, name):
    docs = rendered[name]
    assert not [d for d in docs if d["kind"] == "Secret"]
    text = yaml.safe_dump_all(docs)
    for word in ("password:", "AWS_SECRET_ACCESS_KEY=", "stringData"):
        assert word not in text
    for doc in docs:
        for _, template in pod_templates(doc):
            for c in template["spec"]["containers"]:
                for e in c.get("env", []):
                    if SENSITIVE.search(e["name"]):
                        assert "valueFrom" in e and "value" not in e, f"{c['name']}: {e['name']}"
    refs = secret_refs(docs)
    assert set(refs) == {"mlflow-postgres", "mlflow-s3", "mlflow-auth", "toolsweep-model-api-keys"}
    guide = (k8s.REPO / "docs" / "deploy.md").read_text()
    for secret, keys in refs.items():
        m = re.search(rf"kubectl -n toolsweep create secret generic {secret}\b(.*?)(?:\n(?!\s)|$)", guide, re.S)
        assert m, f"docs/deploy.md does not show how to create Secret {secret}"
        for key in keys:
            assert f"--from-literal={key}=" in m.group(1), f"{secret}: key {key}"


# -- hardening -----------------------------------------------------------------------------------------


def all_pods(docs: list[dict]) -> list[tuple[str, dict]]:
    return [(f"{d['kind']}/{where}", t) for d in docs for where, t in pod_templates(d)]


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_namespace_enforces_the_restricted_pod_security_profile(k8s, rendered, name):
    labels = k8s.find(rendered[name], "Namespace")["metadata"]["labels"]
    for mode in ("enforce", "audit", "warn"):
        assert labels[f"pod-security.kubernetes.io/{mode}"] == "restricted"


def restricted_problems(where: str, pod: dict, containers: list[dict]) -> list[str]:
    """What the restricted Pod Security profile (and our read-only-root rule) refuses in a pod."""
    problems = []
    psc = pod.get("securityContext", {})
    if psc.get("runAsNonRoot") is not True:
        problems.append(f"{where}: runAsNonRoot is not true")
    if psc.get("runAsUser", 1) == 0:
        problems.append(f"{where}: runAsUser 0")
    if psc.get("seccompProfile", {}).get("type") != "RuntimeDefault":
        problems.append(f"{where}: seccompProfile is not RuntimeDefault")
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(key):
            problems.append(f"{where}: {key}")
    if any("hostPath" in v for v in pod.get("volumes", [])):
        problems.append(f"{where}: hostPath volume")
    for c in containers:
        sc = c.get("securityContext", {})
        name = f"{where}/{c.get('name', 'autoscaler')}"
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name}: allowPrivilegeEscalation is not false")
        if sc.get("capabilities", {}).get("drop") != ["ALL"] or sc.get("capabilities", {}).get("add"):
            problems.append(f"{name}: capabilities are not drop [ALL]")
        if sc.get("privileged"):
            problems.append(f"{name}: privileged")
        if sc.get("readOnlyRootFilesystem") is not True:
            problems.append(f"{name}: root filesystem is writable")
        elif "/tmp" not in {m["mountPath"] for m in c.get("volumeMounts", [])}:
            problems.append(f"{name}: read-only root without a writable /tmp")
    return problems


def hardening_problems(docs: list[dict]) -> list[str]:
    problems = []
    for where, template in all_pods(docs):
        problems += restricted_problems(where, template["spec"], template["spec"]["containers"])
    for doc in docs:
        if doc["kind"] == "RayJob":
            # KubeRay puts the autoscaler beside the head container with autoscalerOptions' settings.
            cluster = doc["spec"]["rayClusterSpec"]
            head = cluster["headGroupSpec"]["template"]["spec"]
            options = cluster["autoscalerOptions"]
            problems += restricted_problems("RayJob/autoscaler", head, [options])
            head_volumes = {v["name"] for v in head["volumes"]}
            problems += [f"autoscaler mounts unknown volume {m['name']}" for m in options.get("volumeMounts", [])
                         if m["name"] not in head_volumes]
    return problems


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_every_pod_is_hardened(rendered, name):
    assert hardening_problems(rendered[name]) == []


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda d: d["spec"]["template"]["spec"]["securityContext"].pop("runAsNonRoot"), "runAsNonRoot"),
        (lambda d: d["spec"]["template"]["spec"]["containers"][0]["securityContext"].update(allowPrivilegeEscalation=True), "allowPrivilegeEscalation"),
        (lambda d: d["spec"]["template"]["spec"]["containers"][0]["securityContext"]["capabilities"].update(add=["NET_ADMIN"]), "capabilities"),
        (lambda d: d["spec"]["template"]["spec"]["containers"][0]["securityContext"].update(readOnlyRootFilesystem=False), "writable"),
        (lambda d: d["spec"]["template"]["spec"]["containers"][0].update(volumeMounts=[]), "without a writable /tmp"),
        (lambda d: d["spec"]["template"]["spec"]["securityContext"].update(seccompProfile={"type": "Unconfined"}), "seccompProfile"),
        (lambda d: d["spec"]["template"]["spec"].update(hostNetwork=True), "hostNetwork"),
    ],
)
def test_the_hardening_check_catches_a_weakened_pod(k8s, rendered, mutate, expected):
    docs = copy.deepcopy(rendered["cpu-smoke"])
    mutate(k8s.find(docs, "Deployment", "mlflow"))
    assert any(expected in p for p in hardening_problems(docs)), hardening_problems(docs)


def test_the_hardening_check_covers_the_pods_kuberay_adds(k8s, rendered):
    docs = copy.deepcopy(rendered["cpu-smoke"])
    k8s.ray_cluster_spec(docs)["autoscalerOptions"]["securityContext"].pop("capabilities")
    assert any("autoscaler" in p and "capabilities" in p for p in hardening_problems(docs))
    docs = copy.deepcopy(rendered["cpu-smoke"])
    k8s.find(docs, "RayJob")["spec"]["submitterPodTemplate"]["spec"]["securityContext"]["runAsUser"] = 0
    assert any("submitter" in p and "runAsUser 0" in p for p in hardening_problems(docs))


@pytest.mark.parametrize("name", DEPLOYABLE)
def test_third_party_images_are_pinned(rendered, name):
    images = {c["image"] for d in rendered[name] for _, t in pod_templates(d) for c in t["spec"]["containers"]}
    for image in images:
        repo, _, tag = image.rpartition(":")
        assert repo and tag and tag != "latest" and "/" in repo, image
        assert re.search(r"\d", tag), image  # a version, not a moving name like "stable"


# -- network policies ----------------------------------------------------------------------------------
# A small evaluator of the rendered NetworkPolicies (pod selectors by matchLabels, namespace selectors
# by the kubernetes.io/metadata.name label, ipBlocks), checked flow by flow against what a sweep needs.

RAY_HEAD = {"ns": "toolsweep", "labels": {"ray.io/is-ray-node": "yes", "ray.io/node-type": "head", "app.kubernetes.io/component": "ray-head"}}
RAY_WORKER = {"ns": "toolsweep", "labels": {"ray.io/is-ray-node": "yes", "ray.io/node-type": "worker", "app.kubernetes.io/component": "ray-gpu-worker"}}
SUBMITTER = {"ns": "toolsweep", "labels": {"app.kubernetes.io/component": "ray-job-submitter", "ray.io/originated-from-crd": "RayJob"}}
MLFLOW = {"ns": "toolsweep", "labels": {"app.kubernetes.io/name": "mlflow"}}
POSTGRES = {"ns": "toolsweep", "labels": {"app.kubernetes.io/name": "postgres"}}
S3 = {"ns": "toolsweep", "labels": {"app.kubernetes.io/name": "s3"}}
BUCKET_JOB = {"ns": "toolsweep", "labels": {"app.kubernetes.io/name": "s3-create-bucket"}}
NODELOCAL_DNS = {"ip": "169.254.20.10"}  # NodeLocal DNSCache's link-local address on every node
METADATA_DNS = {"ip": "169.254.169.254"}  # GKE Cloud DNS answers here
OPERATOR = {"ns": "kuberay-system", "labels": {"app.kubernetes.io/name": "kuberay-operator"}}
DNS = {"ns": "kube-system", "labels": {"k8s-app": "kube-dns"}}
OTHER_NAMESPACE = {"ns": "default", "labels": {"app": "anything"}}
EXTERNAL = {"ip": "203.0.113.7"}


def _selects(selector: dict, labels: dict) -> bool:
    assert set(selector) <= {"matchLabels"}, f"evaluator only knows matchLabels: {selector}"
    return selector.get("matchLabels", {}).items() <= labels.items()


def _peer_matches(peer: dict, other: dict, policy_ns: str) -> bool:
    if "ipBlock" in peer:
        return "ip" in other and peer["ipBlock"]["cidr"] == "0.0.0.0/0" and not peer["ipBlock"].get("except")
    if "ip" in other:
        return False
    if "namespaceSelector" in peer:
        ns_ok = _selects(peer["namespaceSelector"], {"kubernetes.io/metadata.name": other["ns"]})
    else:
        ns_ok = other["ns"] == policy_ns
    return ns_ok and _selects(peer.get("podSelector", {}), other["labels"])


def _rule_allows(rule: dict, peers_key: str, other: dict, port: int, policy_ns: str) -> bool:
    ports = rule.get("ports")
    if ports and not any(p.get("port") == port for p in ports):
        return False
    peers = rule.get(peers_key)
    return not peers or any(_peer_matches(p, other, policy_ns) for p in peers)


def _direction_allows(docs, pod: dict, direction: str, other: dict, port: int) -> bool:
    if "ip" in pod:
        return True  # outside the cluster: not ours to restrict
    policies = [d for d in docs if d["kind"] == "NetworkPolicy" and d["metadata"]["namespace"] == pod["ns"]
                and _selects(d["spec"]["podSelector"], pod["labels"])
                and direction in d["spec"].get("policyTypes", ["Ingress"])]
    if not policies:
        return True  # not isolated in this direction
    key, peers_key = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    return any(_rule_allows(r, peers_key, other, port, d["metadata"]["namespace"])
               for d in policies for r in d["spec"].get(key, []))


def allowed(docs: list[dict], src: dict, dst: dict, port: int) -> bool:
    return _direction_allows(docs, src, "Egress", dst, port) and _direction_allows(docs, dst, "Ingress", src, port)


NEEDED = [
    ("submitter -> job API", SUBMITTER, RAY_HEAD, 8265),
    ("operator -> job API", OPERATOR, RAY_HEAD, 8265),
    ("worker -> GCS", RAY_WORKER, RAY_HEAD, 6379),
    ("head -> worker (object transfer)", RAY_HEAD, RAY_WORKER, 12345),
    ("worker -> worker (vLLM server)", RAY_WORKER, RAY_WORKER, 8000),
    ("driver -> MLflow", RAY_HEAD, MLFLOW, 5000),
    ("worker -> hosted model API", RAY_WORKER, EXTERNAL, 443),
    ("autoscaler -> Kubernetes API", RAY_HEAD, EXTERNAL, 6443),
    ("MLflow -> DNS", MLFLOW, DNS, 53),
    ("submitter -> DNS", SUBMITTER, DNS, 53),
    ("head -> NodeLocal DNSCache", RAY_HEAD, NODELOCAL_DNS, 53),
    ("MLflow -> NodeLocal DNSCache", MLFLOW, NODELOCAL_DNS, 53),
    ("worker -> Cloud DNS", RAY_WORKER, METADATA_DNS, 53),
]
NEEDED_WITH_BUNDLED_STORES = [
    ("MLflow -> PostgreSQL", MLFLOW, POSTGRES, 5432),
    ("MLflow -> S3", MLFLOW, S3, 7070),
    ("bucket Job -> S3", BUCKET_JOB, S3, 7070),
]
DENIED = [
    ("another namespace -> job API", OTHER_NAMESPACE, RAY_HEAD, 8265),
    ("another namespace -> MLflow", OTHER_NAMESPACE, MLFLOW, 5000),
    ("the internet -> MLflow", EXTERNAL, MLFLOW, 5000),
    ("submitter -> MLflow", SUBMITTER, MLFLOW, 5000),
    ("submitter -> GCS", SUBMITTER, RAY_HEAD, 6379),
    ("operator -> a worker", OPERATOR, RAY_WORKER, 8265),
    ("worker -> PostgreSQL", RAY_WORKER, POSTGRES, 5432),
    ("worker -> S3", RAY_WORKER, S3, 7070),
    ("MLflow -> the metadata server", MLFLOW, METADATA_DNS, 80),
    ("MLflow -> the internet", MLFLOW, EXTERNAL, 443),
    ("PostgreSQL -> the internet", POSTGRES, EXTERNAL, 443),
    ("MLflow -> a Ray pod", MLFLOW, RAY_WORKER, 8265),
]


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_network_policies_deny_by_default(k8s, rendered, name):
    deny = k8s.find(rendered[name], "NetworkPolicy", "default-deny")["spec"]
    assert deny == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}


@pytest.mark.parametrize("name", ["cpu-smoke", "single-gpu", "multi-model"])
def test_network_policies_allow_what_a_sweep_needs_and_nothing_else(rendered, name):
    docs = rendered[name]
    for what, src, dst, port in NEEDED + NEEDED_WITH_BUNDLED_STORES:
        assert allowed(docs, src, dst, port), f"needed flow blocked: {what}"
    for what, src, dst, port in DENIED:
        assert not allowed(docs, src, dst, port), f"flow allowed that nothing needs: {what}"


def test_the_network_policy_check_catches_an_open_door(k8s, rendered):
    docs = copy.deepcopy(rendered["cpu-smoke"])
    k8s.find(docs, "NetworkPolicy", "mlflow")["spec"]["ingress"][0].pop("from")
    assert allowed(docs, OTHER_NAMESPACE, MLFLOW, 5000)
    # Without the default deny, a pod no other policy isolates (the submitter) takes any connection.
    assert not allowed(rendered["cpu-smoke"], OTHER_NAMESPACE, SUBMITTER, 8080)
    docs = [d for d in copy.deepcopy(rendered["cpu-smoke"]) if d["metadata"]["name"] != "default-deny"]
    assert allowed(docs, OTHER_NAMESPACE, SUBMITTER, 8080)


# -- sizing --------------------------------------------------------------------------------------------


def resource_totals(docs: list[dict]) -> dict[str, dict[str, float]]:
    """CPU, memory (GiB) and GPUs the overlay's pods request: with the worker groups at their minimum
    ("start") and at their maximum ("peak"); the autoscaler sidecar and the submitter included, the
    bucket Job (a few seconds at install) not."""
    fixed = {"cpu": 0.0, "mem": 0.0, "gpu": 0.0}
    groups = []

    def add(into: dict, res: dict, times: int = 1) -> None:
        into["cpu"] += quantity(res["cpu"]) * times
        into["mem"] += gib(res["memory"]) * times
        into["gpu"] += quantity(res.get("nvidia.com/gpu", 0)) * times

    for d in docs:
        if d["kind"] in ("Deployment", "StatefulSet"):
            for c in d["spec"]["template"]["spec"]["containers"]:
                add(fixed, c["resources"]["requests"], d["spec"].get("replicas", 1))
        if d["kind"] == "RayJob":
            spec = d["spec"]
            cluster = spec["rayClusterSpec"]
            add(fixed, spec["submitterPodTemplate"]["spec"]["containers"][0]["resources"]["requests"])
            add(fixed, cluster["autoscalerOptions"]["resources"]["requests"])
            add(fixed, cluster["headGroupSpec"]["template"]["spec"]["containers"][0]["resources"]["requests"])
            groups = cluster["workerGroupSpecs"]
    out = {}
    for label, key in (("start", "minReplicas"), ("peak", "maxReplicas")):
        total = dict(fixed)
        for g in groups:
            add(total, g["template"]["spec"]["containers"][0]["resources"]["requests"], g[key])
        out[label] = total
    return out


def documented_totals(guide: str) -> dict[str, dict[str, str]]:
    block = guide.split("<!-- resource-totals -->", 1)[1].split("<!-- /resource-totals -->", 1)[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in block.strip().splitlines()[2:]]
    return {r[0].strip("`"): {"start": r[1], "peak": r[2]} for r in rows}


def totals_text(t: dict[str, float]) -> str:
    return f"{t['cpu']:g} CPU, {t['mem']:g} GiB" + (f", {t['gpu']:g} GPU" if t["gpu"] else "")


def test_the_docs_give_each_overlays_resource_totals(k8s, rendered):
    documented = documented_totals((k8s.REPO / "docs" / "deploy.md").read_text())
    assert set(documented) == {"cpu-smoke", "single-gpu", "multi-model"}
    for name, row in documented.items():
        totals = resource_totals(rendered[name])
        assert row == {"start": totals_text(totals["start"]), "peak": totals_text(totals["peak"])}, name


def test_the_single_gpu_overlay_fits_one_16_vcpu_64_gib_gpu_machine(rendered):
    peak = resource_totals(rendered["single-gpu"])["peak"]
    # What such a machine leaves to pods after the kubelet, the OS and the system daemons.
    assert peak["cpu"] <= 14 and peak["mem"] <= 56 and peak["gpu"] == 1
