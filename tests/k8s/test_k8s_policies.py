"""What the manifests promise beyond their schemas: resources, GPU isolation, shared memory, secrets,
the RayJob's wiring to the ConfigMap, the run volume and MLflow, and that each overlay's sweep fits its
cluster."""

from __future__ import annotations

import re
import shlex
import tomllib
from urllib.parse import urlparse

import pytest
import yaml

from toolsweep.cluster.config import load_config
from toolsweep.cluster.placement import PlacementError, plan_placement

KUSTOMIZATIONS = ["base", "single-gpu", "multi-model"]


def pod_templates(doc: dict) -> list[tuple[str, dict]]:
    spec = doc.get("spec", {})
    if doc["kind"] == "Deployment":
        return [(doc["metadata"]["name"], spec["template"])]
    if doc["kind"] == "RayCluster":
        return [("head", spec["headGroupSpec"]["template"])] + [
            (g["groupName"], g["template"]) for g in spec["workerGroupSpecs"]
        ]
    if doc["kind"] == "RayJob" and "submitterPodTemplate" in spec:
        return [("submitter", spec["submitterPodTemplate"])]
    return []


def group(raycluster: dict, name: str) -> dict:
    return next(g for g in raycluster["spec"]["workerGroupSpecs"] if g["groupName"] == name)


def quantity(value: str | int | float) -> float:
    """CPU / count quantities: "500m" -> 0.5, "8" -> 8."""
    text = str(value)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_every_container_requests_what_it_limits(rendered, name):
    checked = 0
    for doc in rendered[name]:
        for where, template in pod_templates(doc):
            for c in template["spec"]["containers"]:
                res = c.get("resources", {})
                assert res.get("requests") and res.get("requests") == res.get("limits"), f"{where}/{c['name']}"
                assert {"cpu", "memory"} <= set(res["limits"]), f"{where}/{c['name']}"
                checked += 1
        if doc["kind"] == "RayCluster":  # the autoscaler sidecar KubeRay adds to the head pod
            res = doc["spec"]["autoscalerOptions"]["resources"]
            assert res["requests"] == res["limits"]
    assert checked == 5  # mlflow, head, cpu-workers, gpu-workers, the RayJob's submitter


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_no_gpu_work_lands_on_the_head(k8s, rendered, name):
    rc = k8s.find(rendered[name], "RayCluster")
    head = rc["spec"]["headGroupSpec"]
    assert head["rayStartParams"]["num-gpus"] == "0"
    assert head["resources"] == {"CPU": "0", "GPU": "0"}
    head_limits = head["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert "nvidia.com/gpu" not in head_limits
    cpu = group(rc, "cpu-workers")["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert "nvidia.com/gpu" not in cpu


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_submitter_leaves_the_submit_command_to_kuberay(k8s, rendered, name):
    # KubeRay fills in `ray job submit ...` only when the first container has no command.
    submitter = k8s.find(rendered[name], "RayJob")["spec"]["submitterPodTemplate"]["spec"]
    assert "command" not in submitter["containers"][0] and submitter["restartPolicy"] == "Never"


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_gpu_workers_have_gpus_shared_memory_and_read_only_models(k8s, rendered, name):
    docs = rendered[name]
    rc = k8s.find(docs, "RayCluster")
    gpu = group(rc, "gpu-workers")
    pod = gpu["template"]["spec"]
    container = pod["containers"][0]
    limits = container["resources"]["limits"]
    assert int(limits["nvidia.com/gpu"]) >= 1
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    shm = volumes[mounts["/dev/shm"]["name"]]
    assert shm["emptyDir"]["medium"] == "Memory"
    # The shared memory counts against the pod's memory limit: it must leave room for the process.
    assert _gib(shm["emptyDir"]["sizeLimit"]) <= _gib(limits["memory"]) / 2
    models = mounts["/models"]
    assert models["readOnly"] is True
    claim = volumes[models["name"]]["persistentVolumeClaim"]
    assert claim["readOnly"] is True
    pvc = k8s.find(docs, "PersistentVolumeClaim", claim["claimName"])
    assert pvc["spec"]["accessModes"] == ["ReadOnlyMany"]


def _gib(q: str) -> float:
    units = {"Gi": 1.0, "Mi": 1 / 1024, "Ti": 1024.0}
    for suffix, factor in units.items():
        if q.endswith(suffix):
            return float(q[: -len(suffix)]) * factor
    raise ValueError(q)


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_autoscaling_bounds_hold(k8s, rendered, name):
    rc = k8s.find(rendered[name], "RayCluster")
    assert rc["spec"]["enableInTreeAutoscaling"] is True
    for g in rc["spec"]["workerGroupSpecs"]:
        assert 0 <= g["minReplicas"] <= g["replicas"] <= g["maxReplicas"], g["groupName"]
    assert group(rc, "cpu-workers")["maxReplicas"] > group(rc, "cpu-workers")["minReplicas"]


def test_overlays_size_the_gpu_group(k8s, rendered):
    single = group(k8s.find(rendered["single-gpu"], "RayCluster"), "gpu-workers")
    multi = group(k8s.find(rendered["multi-model"], "RayCluster"), "gpu-workers")
    assert single["replicas"] == single["maxReplicas"] == 1
    assert single["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert multi["replicas"] >= 2 and multi["minReplicas"] == multi["replicas"]


def test_ray_version_matches_the_pinned_ray(k8s, rendered):
    pins = tomllib.loads((k8s.REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    ray_pin = next(p for p in pins if p.startswith("ray["))
    for name in KUSTOMIZATIONS:
        assert ray_pin.endswith("==" + k8s.find(rendered[name], "RayCluster")["spec"]["rayVersion"])


# -- the RayJob's wiring ---------------------------------------------------------------------------


def entrypoint_args(rayjob: dict) -> dict[str, str]:
    argv = shlex.split(rayjob["spec"]["entrypoint"])
    assert argv[:2] == ["toolsweep", "run"], argv
    config, flags = argv[2], argv[3:]
    assert len(flags) % 2 == 0 and all(f.startswith("--") for f in flags[::2]), flags
    return {"config": config, **{k[2:]: v for k, v in zip(flags[::2], flags[1::2])}}


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_rayjob_runs_the_configmap_sweep_on_the_cluster(k8s, rendered, name):
    docs = rendered[name]
    rc, job = k8s.find(docs, "RayCluster"), k8s.find(docs, "RayJob")
    assert job["spec"]["clusterSelector"] == {"ray.io/cluster": rc["metadata"]["name"]}
    args = entrypoint_args(job)
    assert args["address"] == "auto"
    head = rc["spec"]["headGroupSpec"]["template"]["spec"]
    volumes = {v["name"]: v for v in head["volumes"]}
    mounts = head["containers"][0]["volumeMounts"]

    def volume_at(path: str) -> tuple[dict, str]:
        hits = [(m, path[len(m["mountPath"]):].lstrip("/")) for m in mounts if path.startswith(m["mountPath"].rstrip("/") + "/")]
        assert len(hits) == 1, f"{path} is not under exactly one head mount"
        return volumes[hits[0][0]["name"]], hits[0][1]

    # The config file is a key of the mounted ConfigMap, and that key holds a valid sweep.
    vol, key = volume_at(args["config"])
    cm = k8s.find(docs, "ConfigMap", vol["configMap"]["name"])
    assert key in cm["data"]
    # The run directories land on a persistent volume of the head (the result sink runs in the driver).
    vol, _ = volume_at(args["output-dir"].rstrip("/") + "/x")
    k8s.find(docs, "PersistentVolumeClaim", vol["persistentVolumeClaim"]["claimName"])
    # The tracking URI is the MLflow Service, on its port.
    uri = urlparse(args["tracking-uri"])
    svc = k8s.find(docs, "Service", uri.hostname)
    assert uri.scheme == "http" and uri.port in [p["port"] for p in svc["spec"]["ports"]]


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_each_sweep_config_is_valid_and_fits_its_cluster(k8s, rendered, name, tmp_path):
    docs = rendered[name]
    path = tmp_path / "sweep.yaml"
    path.write_text(k8s.find(docs, "ConfigMap", "toolsweep-sweep")["data"]["sweep.yaml"])
    config = load_config(path)
    nodes = cluster_nodes(k8s.find(docs, "RayCluster"))
    totals = {"GPU": sum(n["GPU"] for n in nodes), "CPU": sum(n["CPU"] for n in nodes)}
    plan = plan_placement(config.models, totals, nodes)
    assert "head" not in {node for where in plan.assignments.values() for node in where}
    if name != "base":
        assert plan.gpus_needed >= 1  # the overlays do run models on their GPUs


def cluster_nodes(raycluster: dict) -> list[dict]:
    """Ray resources of the pods a RayCluster starts with (minReplicas of each group)."""
    spec = raycluster["spec"]
    head = spec["headGroupSpec"]
    nodes = [{"node_id": "head", "CPU": quantity(head["resources"]["CPU"]), "GPU": quantity(head["resources"]["GPU"])}]
    for g in spec["workerGroupSpecs"]:
        limits = g["template"]["spec"]["containers"][0]["resources"]["limits"]
        for i in range(g["minReplicas"]):
            nodes.append({
                "node_id": f"{g['groupName']}-{i}",
                "CPU": quantity(limits["cpu"]),
                "GPU": quantity(limits.get("nvidia.com/gpu", 0)),
            })
    return nodes


def test_multi_model_overlay_is_full_and_one_more_replica_fails(k8s, rendered, tmp_path):
    docs = rendered["multi-model"]
    path = tmp_path / "sweep.yaml"
    path.write_text(k8s.find(docs, "ConfigMap", "toolsweep-sweep")["data"]["sweep.yaml"])
    config = load_config(path)
    nodes = cluster_nodes(k8s.find(docs, "RayCluster"))
    totals = {"GPU": sum(n["GPU"] for n in nodes), "CPU": sum(n["CPU"] for n in nodes)}
    assert plan_placement(config.models, totals, nodes).gpus_needed == totals["GPU"]
    biggest = max((m for m in config.models if m.kind == "vllm"), key=lambda m: m.engine_args.tensor_parallel_size)
    biggest.replicas += 1
    with pytest.raises(PlacementError, match=re.escape(f"model {biggest.name!r}") + "|" + re.escape(biggest.name)):
        plan_placement(config.models, totals, nodes)


# -- MLflow --------------------------------------------------------------------------------------


def mlflow_container(k8s, docs: list[dict]) -> dict:
    return k8s.find(docs, "Deployment", "mlflow")["spec"]["template"]["spec"]["containers"][0]


def option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_mlflow_listens_on_all_interfaces_behind_its_service(k8s, rendered, name):
    # What the Host and CORS settings accept is checked against a live server started with these
    # arguments (test_k8s_entrypoint_local.py).
    docs = rendered[name]
    c = mlflow_container(k8s, docs)
    args = c["args"]
    assert c["command"] == ["mlflow", "server"]
    assert option(args, "--host") == "0.0.0.0"
    port = int(option(args, "--port"))
    assert c["ports"][0]["containerPort"] == port
    svc = k8s.find(docs, "Service", "mlflow")
    assert svc["spec"]["selector"].items() <= c_labels(k8s, docs).items()
    assert svc["spec"]["ports"][0]["targetPort"] in (port, c["ports"][0]["name"])
    assert option(args, "--allowed-hosts") and option(args, "--cors-allowed-origins")


def c_labels(k8s, docs) -> dict:
    return k8s.find(docs, "Deployment", "mlflow")["spec"]["template"]["metadata"]["labels"]


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_mlflow_stores_are_postgres_and_s3_with_credentials_from_secrets(k8s, rendered, name):
    env = {e["name"]: e for e in mlflow_container(k8s, rendered[name])["env"]}
    uri = env["MLFLOW_BACKEND_STORE_URI"]["value"]
    assert uri.startswith("postgresql+psycopg2://$(MLFLOW_DB_USER):$(MLFLOW_DB_PASSWORD)@")
    for var in ("MLFLOW_DB_USER", "MLFLOW_DB_PASSWORD"):
        assert env[var]["valueFrom"]["secretKeyRef"]["name"] == "mlflow-postgres"
    # Kubernetes expands $(VAR) only from variables defined earlier in the list.
    names = [e["name"] for e in mlflow_container(k8s, rendered[name])["env"]]
    for ref in re.findall(r"\$\((\w+)\)", uri):
        assert names.index(ref) < names.index("MLFLOW_BACKEND_STORE_URI"), ref
    assert env["MLFLOW_ARTIFACTS_DESTINATION"]["value"].startswith("s3://")
    assert "--serve-artifacts" in mlflow_container(k8s, rendered[name])["args"]
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert env[var]["valueFrom"]["secretKeyRef"]["name"] == "mlflow-s3"
    assert env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"]["value"] == "false"


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
    assert set(refs) == {"mlflow-postgres", "mlflow-s3", "toolsweep-model-api-keys"}
    guide = (k8s.REPO / "docs" / "deploy.md").read_text()
    for secret, keys in refs.items():
        m = re.search(rf"kubectl -n toolsweep create secret generic {secret}\b(.*?)(?:\n(?!\s)|$)", guide, re.S)
        assert m, f"docs/deploy.md does not show how to create Secret {secret}"
        for key in keys:
            assert f"--from-literal={key}=" in m.group(1), f"{secret}: key {key}"
