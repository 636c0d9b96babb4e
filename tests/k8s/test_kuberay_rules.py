"""KubeRay's controller rules (tests/k8s/kuberay_rules.py, a port of KubeRay 1.7.0): every rendered
RayJob passes them, and each rule refuses the spec it names."""

from __future__ import annotations

import copy

import pytest
from kuberay_rules import raycluster_errors, rayjob_errors

KUSTOMIZATIONS = ["base", "cpu-smoke", "single-gpu", "multi-model", "managed-stores"]


@pytest.mark.parametrize("name", KUSTOMIZATIONS)
def test_every_rendered_rayjob_is_accepted_by_the_controller(k8s, rendered, name):
    job = k8s.find(rendered[name], "RayJob")
    assert rayjob_errors(job) == []
    # The cluster KubeRay creates from it passes the RayCluster controller too.
    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
               "metadata": {"name": job["metadata"]["name"] + "-x7k2p", "labels": {"ray.io/originated-from-crd": "RayJob"}},
               "spec": job["spec"]["rayClusterSpec"]}
    assert raycluster_errors(cluster) == []


def container(name: str = "ray") -> dict:
    return {"name": name, "image": "toolsweep"}


def minimal_cluster() -> dict:
    return {
        "rayVersion": "2.60.0",
        "enableInTreeAutoscaling": True,
        "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [container("ray-head")]}}},
        "workerGroupSpecs": [
            {"groupName": "cpu-workers", "replicas": 1, "minReplicas": 1, "maxReplicas": 2,
             "rayStartParams": {}, "template": {"spec": {"containers": [container("ray-worker")]}}},
        ],
    }


def minimal_rayjob() -> dict:
    return {
        "apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "sweep"},
        "spec": {"entrypoint": "toolsweep run x.yaml", "shutdownAfterJobFinishes": True, "rayClusterSpec": minimal_cluster()},
    }


def test_the_minimal_documents_are_accepted():
    assert rayjob_errors(minimal_rayjob()) == []
    assert raycluster_errors({"metadata": {"name": "c"}, "spec": minimal_cluster()}) == []


def set_path(doc: dict, path: str, value) -> dict:
    out = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node = out
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node.setdefault(p, {})
    if value is DELETE:
        del node[last]
    else:
        node[last] = value
    return out


DELETE = object()
C = "spec.rayClusterSpec."


@pytest.mark.parametrize(
    "changes, expected",
    [
        # The combination the deployment once had: Ray resources in rayStartParams and in `resources`.
        ({C + "headGroupSpec.rayStartParams": {"num-gpus": "0"}, C + "headGroupSpec.resources": {"CPU": "0", "GPU": "0"}},
         "resource fields should not be set in both rayStartParams and Resources for Head group"),
        ({C + "workerGroupSpecs.0.rayStartParams": {"num-cpus": "4"}, C + "workerGroupSpecs.0.resources": {"CPU": "4"}},
         "for cpu-workers group; please use only one"),
        ({C + "workerGroupSpecs.0.rayStartParams": {"labels": "a=b"}}, "rayStartParams['labels'] is not supported for cpu-workers group"),
        ({C + "headGroupSpec.labels": {"bad key!": "v"}}, "invalid label key for Head group: 'bad key!'"),
        ({C + "workerGroupSpecs.0.minReplicas": -1}, "worker group cpu-workers has negative minReplicas -1"),
        ({C + "workerGroupSpecs.0.minReplicas": 3}, "has minReplicas 3 greater than maxReplicas 2"),
        ({C + "enableInTreeAutoscaling": False, C + "workerGroupSpecs.0.maxReplicas": DELETE},
         "must set both minReplicas and maxReplicas when autoscaling is disabled"),
        ({C + "workerGroupSpecs.0.idleTimeoutSeconds": 60}, "idleTimeoutSeconds is set, but autoscaler v2 is not enabled"),
        ({C + "autoscalerOptions": {"idleTimeoutSeconds": -5}}, "autoscalerOptions.idleTimeoutSeconds must be non-negative"),
        ({C + "workerGroupSpecs.0.suspend": True}, "cannot be suspended with Autoscaler enabled"),
        ({C + "authOptions": {"mode": "token"}, C + "rayVersion": "2.50.0"}, "minimum Ray version is 2.52.0, got 2.50.0"),
        ({C + "authOptions": {"mode": "token"}, C + "rayVersion": DELETE}, "RayVersion was not specified"),
        ({C + "authOptions": {"mode": "token", "enableK8sTokenAuth": True}}, "K8s token auth mode is currently not supported for RayJob"),
        ({C + "networkPolicy": {"mode": "DenyAll"}}, "requires the RayClusterNetworkPolicy feature gate"),
        ({C + "headGroupSpec.template.spec.containers": []}, "headGroupSpec should have at least one container"),
        ({C + "headGroupSpec.template.spec.containers.0.env": [{"name": "RAY_REDIS_ADDRESS", "value": "redis:6379"}]},
         "RAY_REDIS_ADDRESS is set which implicitly enables GCS fault tolerance"),
        ({"spec.rayClusterSpec": DELETE}, "one of RayClusterSpec or ClusterSelector must be set"),
        ({"spec.rayClusterSpec": DELETE, "spec.clusterSelector": {"ray.io/cluster": "c"}, "spec.backoffLimit": 2},
         "BackoffLimit is incompatible with ClusterSelector mode"),
        ({"spec.rayClusterSpec": DELETE, "spec.clusterSelector": {"other": "c"}}, "cluster name in ClusterSelector should not be empty"),
        ({"spec.suspend": True, "spec.shutdownAfterJobFinishes": False}, "shutdownAfterJobFinishes set to false is not allowed to be suspended"),
        ({"spec.shutdownAfterJobFinishes": False, "spec.ttlSecondsAfterFinished": 300},
         "shutdownAfterJobFinishes set to false cannot have TTLSecondsAfterFinished"),
        ({"spec.ttlSecondsAfterFinished": -1}, "TTLSecondsAfterFinished must be a non-negative integer"),
        ({"spec.activeDeadlineSeconds": 0}, "activeDeadlineSeconds must be a positive integer"),
        ({"spec.preRunningDeadlineSeconds": -10}, "preRunningDeadlineSeconds must be a positive integer"),
        ({"spec.backoffLimit": -1}, "backoffLimit must be a positive integer"),
        ({"spec.submissionMode": "InteractiveMode", "spec.backoffLimit": 1}, "BackoffLimit is incompatible with InteractiveMode"),
        ({"spec.submissionMode": "SidecarMode", "spec.submitterPodTemplate": {"spec": {}}}, "SidecarMode doesn't support SubmitterPodTemplate"),
        ({"spec.runtimeEnvYAML": "pip: [a\nb: ]"}, "failed to unmarshal RuntimeEnvYAML"),
        ({"spec.deletionStrategy": {"onSuccess": {"policy": "DeleteCluster"}}}, "both DeletionStrategy.OnSuccess and DeletionStrategy.OnFailure must be set"),
        ({"spec.deletionStrategy": {"deletionRules": [{"policy": "DeleteSelf", "condition": {"jobStatus": "SUCCEEDED"}}]}},
         "shutdownAfterJobFinishes and spec.deletionStrategy.deletionRules are mutually exclusive"),
        ({"metadata.name": "Sweep"}, "RayJob name should be a valid DNS1035 label"),
        ({"metadata.name": "s" * 48}, "RayJob name should be no more than 47 characters"),
    ],
)
def test_each_rule_refuses_what_it_names(changes, expected):
    doc = minimal_rayjob()
    for path, value in changes.items():
        doc = set_path(doc, path, value)
    errors = rayjob_errors(doc)
    assert len(errors) == 1 and expected in errors[0], errors


def test_cluster_errors_of_a_rayjob_carry_the_rayjob_prefix():
    doc = set_path(minimal_rayjob(), C + "workerGroupSpecs.0.minReplicas", -1)
    assert rayjob_errors(doc)[0].startswith("The RayJob spec is invalid: worker group cpu-workers")


def test_feature_gates_default_as_the_helm_chart_installs_them_and_can_be_turned_on():
    doc = set_path(minimal_rayjob(), C + "networkPolicy", {"mode": "DenyAll"})
    assert rayjob_errors(doc) != []
    assert rayjob_errors(doc, {"RayClusterNetworkPolicy": True}) == []
    # RayJobDeletionPolicy is on by default in 1.7.0: deletion rules are accepted.
    doc = set_path(minimal_rayjob(), "spec.shutdownAfterJobFinishes", False)
    doc = set_path(doc, "spec.deletionStrategy", {"deletionRules": [
        {"policy": "DeleteCluster", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 60}},
        {"policy": "DeleteSelf", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 30}},
    ]})
    errors = rayjob_errors(doc)
    assert len(errors) == 1 and "DeleteSelf TTL (30) must be >= DeleteCluster TTL (60)" in errors[0]
    assert "feature gate must be enabled" in rayjob_errors(doc, {"RayJobDeletionPolicy": False})[0]


def test_a_raycluster_created_by_a_rayjob_may_not_set_an_upgrade_strategy():
    doc = {"metadata": {"name": "sweep-x7k2p", "labels": {"ray.io/originated-from-crd": "RayJob"}},
           "spec": {**minimal_cluster(), "upgradeStrategy": {"type": "Recreate"}}}
    assert raycluster_errors(doc) == ["upgradeStrategy cannot be set when RayCluster is created by RayJob"]
    doc["metadata"]["name"] = "Cluster_1"
    assert "valid DNS1035 label" in raycluster_errors(doc)[0]
