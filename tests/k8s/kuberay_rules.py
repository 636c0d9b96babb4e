"""The checks KubeRay's controllers run on a RayJob and the RayCluster it creates, ported to Python.

Why: the CRD schema accepts specs that the operator then refuses to act on. KubeRay validates in its
reconcile loop (not in an admission webhook), so a refused spec is applied without error, an event
is recorded, and no pod is ever created: the RayJob waits forever. The schema tests cannot see that;
these rules can.

Ported from KubeRay v1.7.0 (the operator version docs/deploy.md pins), `ray-operator/`:
  controllers/ray/utils/validation.go   ValidateRayClusterMetadata, ValidateRayClusterSpec (and what it
                                        calls), ValidateRayClusterUpgradeOptions, ValidateRayJobMetadata,
                                        ValidateRayJobSpec, the deletion-strategy checks
  controllers/ray/utils/util.go         IsAutoscalingEnabled, IsAutoscalingV2Enabled, IsAuthEnabled, ...
  controllers/ray/utils/constant.go     name lengths, annotation keys, environment variable names
  controllers/ray/rayjob_controller.go  the order: metadata, spec, status (RayJob)
  controllers/ray/raycluster_controller.go  metadata, spec, upgrade options, status (RayCluster)
  pkg/features/features.go              feature gates and their defaults
and k8s.io/apimachinery/pkg/util/validation for the name rules. Like the Go code, each validation
stops at its first error. Inputs are documents as `kubectl kustomize` renders them.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

# pkg/features/features.go at v1.7.0: the gates and their defaults (what the Helm chart installs).
DEFAULT_FEATURE_GATES = {
    "RayClusterStatusConditions": True,
    "RayJobDeletionPolicy": True,
    "RayMultiHostIndexing": True,
    "RayServiceIncrementalUpgrade": True,
    "RayCronJob": False,
    "SidecarSubmitterRestart": False,
    "RayClusterNetworkPolicy": False,
    "GCSFaultToleranceEmbeddedStorage": False,
    "RayClusterMTLS": False,
    "RayClusterHistoryServer": False,
    "KubernetesWAS": False,
}

MAX_RAYCLUSTER_NAME_LENGTH = 53
MAX_RAYJOB_NAME_LENGTH = MAX_RAYCLUSTER_NAME_LENGTH - 6
RAY_CONTAINER_INDEX = 0
RAY_FT_ENABLED_ANNOTATION = "ray.io/ft-enabled"
RAY_EXTERNAL_STORAGE_NS_ANNOTATION = "ray.io/external-storage-namespace"
RAY_CLUSTER_SELECTOR_KEY = "ray.io/cluster"
RAY_REDIS_ADDRESS = "RAY_REDIS_ADDRESS"
REDIS_PASSWORD = "REDIS_PASSWORD"
REDIS_USERNAME = "REDIS_USERNAME"
RAY_ENABLE_AUTOSCALER_V2 = "RAY_enable_autoscaler_v2"
KUBERAY_GEN_AUTOSCALER_START_CMD = "KUBERAY_GEN_AUTOSCALER_START_CMD"
COLLECTOR_CONTAINER_NAME = "collector"


class Refused(Exception):
    """What the controller would record as the reason it does nothing."""


# -- k8s.io/apimachinery/pkg/util/validation ------------------------------------------------------------

_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _label_like(value: str, pattern: re.Pattern[str], shape: str) -> list[str]:
    """The apimachinery checks of a 63-character name: its length, then its shape."""
    errs = ["must be no more than 63 characters"] if len(value) > 63 else []
    return errs + ([] if pattern.match(value) else [shape])


def is_dns1035_label(value: str) -> list[str]:
    return _label_like(value, _DNS1035_LABEL, "a DNS-1035 label must consist of lower case alphanumeric "
                       "characters or '-', start with an alphabetic character, and end with an alphanumeric character")


def is_dns1123_label(value: str) -> list[str]:
    return _label_like(value, _DNS1123_LABEL, "a lowercase RFC 1123 label must consist of lower case alphanumeric "
                       "characters or '-', and must start and end with an alphanumeric character")


def is_qualified_name(value: str) -> list[str]:
    prefix, slash, name = value.rpartition("/")
    errs = []
    if slash:
        if not prefix:
            errs.append("prefix part must be non-empty")
        elif len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix):
            errs.append("prefix part must be a lowercase RFC 1123 subdomain")
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    elif not _QUALIFIED_NAME.match(name):
        errs.append("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
                    "end with an alphanumeric character")
    return errs


def is_valid_label_value(value: str) -> list[str]:
    return _label_like(value, _LABEL_VALUE, "a valid label must be an empty string or consist of alphanumeric "
                       "characters, '-', '_' or '.', and must start and end with an alphanumeric character")


def _parse_version(text: str) -> tuple[int, ...] | None:
    """version.ParseGeneric: dotted numbers, an optional leading v."""
    m = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", text.strip())
    return tuple(int(g or 0) for g in m.groups()) if m else None


# -- util.go predicates -----------------------------------------------------------------------------------


def is_autoscaling_enabled(spec: dict | None) -> bool:
    return bool(spec) and spec.get("enableInTreeAutoscaling") is True


def is_autoscaling_v2_enabled(spec: dict | None) -> bool:
    return bool(spec) and (spec.get("autoscalerOptions") or {}).get("version") == "v2"


def is_gcs_fault_tolerance_enabled(spec: dict, annotations: dict) -> bool:
    value = annotations.get(RAY_FT_ENABLED_ANNOTATION)
    return (value is not None and value.lower() == "true") or spec.get("gcsFaultToleranceOptions") is not None


def is_auth_enabled(spec: dict) -> bool:
    return (spec.get("authOptions") or {}).get("mode") == "token"


def is_k8s_auth_enabled(auth_options: dict | None) -> bool:
    return bool(auth_options) and auth_options.get("enableK8sTokenAuth") is True


def is_tls_enabled(spec: dict, gates: dict[str, bool]) -> bool:
    return gates["RayClusterMTLS"] and (spec.get("tlsOptions") or {}).get("enabled") is True


def env_var(name: str, env: list[dict] | None) -> dict | None:
    return next((e for e in env or [] if e.get("name") == name), None)


def _containers(template: dict) -> list[dict]:
    return ((template or {}).get("spec") or {}).get("containers") or []


def _ray_container(template: dict) -> dict:
    return _containers(template)[RAY_CONTAINER_INDEX]


# -- RayCluster -------------------------------------------------------------------------------------------


def validate_raycluster_metadata(metadata: dict) -> None:
    name = metadata.get("name", "")
    if len(name) > MAX_RAYCLUSTER_NAME_LENGTH:
        raise Refused(f"RayCluster name should be no more than {MAX_RAYCLUSTER_NAME_LENGTH} characters")
    if errs := is_dns1035_label(name):
        raise Refused(f"RayCluster name should be a valid DNS1035 label: {errs}")


def validate_ray_group_resources(group: str, ray_start_params: dict, resources: dict) -> None:
    """Ray resources come from rayStartParams or from the group's `resources`, never both."""
    from_params = any((ray_start_params or {}).get(k, "") != "" for k in ("num-cpus", "num-gpus", "memory", "resources"))
    if from_params and resources:
        raise Refused(f"resource fields should not be set in both rayStartParams and Resources for {group} group; "
                      "please use only one")


def validate_ray_group_labels(group: str, ray_start_params: dict, labels: dict) -> None:
    if "labels" in (ray_start_params or {}):
        raise Refused(f"rayStartParams['labels'] is not supported for {group} group; please use the top-level "
                      "Labels field instead")
    errs = []
    for key, value in (labels or {}).items():
        errs += [f"invalid label key for {group} group: '{key}', error: {e}" for e in is_qualified_name(key)]
        errs += [f"invalid label value for key '{key}' in {group} group: '{value}', error: {e}"
                 for e in is_valid_label_value(value)]
    if errs:
        raise Refused("; ".join(errs))


def _autoscaler_v2_by_env(spec: dict) -> bool:
    var = env_var(RAY_ENABLE_AUTOSCALER_V2, _ray_container(spec["headGroupSpec"]["template"]).get("env"))
    return var is not None and var.get("value") in ("1", "true")


def validate_worker_group_idle_timeout(group: dict, spec: dict) -> None:
    timeout = group.get("idleTimeoutSeconds")
    if timeout is None:
        return
    if timeout < 0:
        raise Refused(f"worker group {group['groupName']}: idleTimeoutSeconds must be non-negative, got {timeout}")
    if is_autoscaling_v2_enabled(spec) or _autoscaler_v2_by_env(spec):
        return
    raise Refused(f"worker group {group['groupName']}: idleTimeoutSeconds is set, but autoscaler v2 is not enabled. "
                  "Please set .spec.autoscalerOptions.version to 'v2'")


def validate_worker_group_priority(group: dict, spec: dict) -> None:
    priority = group.get("priority")
    if not priority:
        return
    name = group["groupName"]
    if not spec.get("rayVersion"):
        raise Refused(f"worker group {name}: priority is set, but RayVersion was not specified. Ray version 2.56.0 or later is required")
    version = _parse_version(spec["rayVersion"])
    if version is None:
        raise Refused(f"worker group {name}: priority is set, but RayVersion format is invalid: {spec['rayVersion']}")
    if version < (2, 56, 0):
        raise Refused(f"worker group {name}: priority is set, but minimum Ray version is 2.56.0, got {spec['rayVersion']}")
    if is_autoscaling_v2_enabled(spec) or _autoscaler_v2_by_env(spec):
        return
    raise Refused(f"worker group {name}: priority is set to {priority}, but autoscaler v2 is not enabled. "
                  "Priority is only supported with autoscaler v2 enabled")


def _validate_worker_groups(spec: dict, autoscaling: bool) -> None:
    for group in spec.get("workerGroupSpecs") or []:
        name = group.get("groupName", "")
        if not _containers(group.get("template")):
            raise Refused("workerGroupSpec should have at least one container")
        lo, hi = group.get("minReplicas"), group.get("maxReplicas")
        if not autoscaling and (lo is None or hi is None):
            raise Refused(f"worker group {name} must set both minReplicas and maxReplicas when autoscaling is disabled")
        if lo is not None and lo < 0:
            raise Refused(f"worker group {name} has negative minReplicas {lo}")
        if hi is not None and hi < 0:
            raise Refused(f"worker group {name} has negative maxReplicas {hi}")
        if lo is not None and hi is not None and lo > hi:
            raise Refused(f"worker group {name} has minReplicas {lo} greater than maxReplicas {hi}")
        validate_ray_group_resources(name, group.get("rayStartParams"), group.get("resources"))
        validate_ray_group_labels(name, group.get("rayStartParams"), group.get("labels"))
        validate_worker_group_idle_timeout(group, spec)
        validate_worker_group_priority(group, spec)


def _validate_gcs_fault_tolerance(spec: dict, annotations: dict, gates: dict[str, bool]) -> None:
    head = _ray_container(spec["headGroupSpec"]["template"])
    options = spec.get("gcsFaultToleranceOptions")
    if annotations.get(RAY_FT_ENABLED_ANNOTATION, "") != "" and options is not None:
        raise Refused(f"{RAY_FT_ENABLED_ANNOTATION} annotation and GcsFaultToleranceOptions are both set. "
                      "Please use only GcsFaultToleranceOptions to configure GCS fault tolerance")
    if not is_gcs_fault_tolerance_enabled(spec, annotations) and env_var(RAY_REDIS_ADDRESS, head.get("env")):
        raise Refused(f"{RAY_REDIS_ADDRESS} is set which implicitly enables GCS fault tolerance, but "
                      "GcsFaultToleranceOptions is not set. Please set GcsFaultToleranceOptions to enable GCS fault tolerance")
    if options is not None:
        if spec["headGroupSpec"].get("rayStartParams", {}).get("redis-password", ""):
            raise Refused("cannot set `redis-password` in rayStartParams when GcsFaultToleranceOptions is enabled "
                          "- use GcsFaultToleranceOptions.RedisPassword instead")
        if env_var(REDIS_PASSWORD, head.get("env")):
            raise Refused("cannot set `REDIS_PASSWORD` env var in head Pod when GcsFaultToleranceOptions is enabled "
                          "- use GcsFaultToleranceOptions.RedisPassword instead")
        if env_var(RAY_REDIS_ADDRESS, head.get("env")):
            raise Refused("cannot set `RAY_REDIS_ADDRESS` env var in head Pod when GcsFaultToleranceOptions is enabled "
                          "- use GcsFaultToleranceOptions.RedisAddress instead")
        if annotations.get(RAY_EXTERNAL_STORAGE_NS_ANNOTATION, ""):
            raise Refused("cannot set `ray.io/external-storage-namespace` annotation when GcsFaultToleranceOptions "
                          "is enabled - use GcsFaultToleranceOptions.ExternalStorageNamespace instead")
        if options.get("backend") == "rocksdb":
            if not gates["GCSFaultToleranceEmbeddedStorage"]:
                raise Refused("the embedded RocksDB GCS fault tolerance backend (GcsFaultToleranceOptions.Backend: "
                              "'rocksdb') requires the GCSFaultToleranceEmbeddedStorage feature gate to be enabled")
        elif options.get("storage") is not None:
            raise Refused("cannot set GcsFaultToleranceOptions.Storage when backend is 'redis' - it only applies "
                          "to the 'rocksdb' backend")
    if spec["headGroupSpec"].get("rayStartParams", {}).get("redis-username", "") or env_var(REDIS_USERNAME, head.get("env")):
        raise Refused("cannot set redis username in rayStartParams or environment variables - use "
                      "GcsFaultToleranceOptions.RedisUsername instead")


def _validate_autoscaler(spec: dict, autoscaling: bool, gates: dict[str, bool]) -> None:
    head_template = spec["headGroupSpec"]["template"]
    head_env = _ray_container(head_template).get("env")
    groups = spec.get("workerGroupSpecs") or []
    if not gates["RayJobDeletionPolicy"]:
        for g in groups:
            if g.get("suspend") is True:
                raise Refused(f"worker group {g['groupName']} can be suspended only when the RayJobDeletionPolicy "
                              "feature gate is enabled")
    if not autoscaling:
        var = env_var(RAY_ENABLE_AUTOSCALER_V2, head_env)
        if var is not None and var.get("value") in ("1", "true"):
            raise Refused(f"environment variable {RAY_ENABLE_AUTOSCALER_V2} cannot be set to '{var['value']}' when "
                          "enableInTreeAutoscaling is false")
        return
    for g in groups:
        if g.get("suspend") is True:
            raise Refused(f"worker group {g['groupName']} cannot be suspended with Autoscaler enabled")
    options = spec.get("autoscalerOptions") or {}
    if options.get("version") is not None and env_var(RAY_ENABLE_AUTOSCALER_V2, head_env):
        raise Refused(f"both .spec.autoscalerOptions.version and head Pod env var {RAY_ENABLE_AUTOSCALER_V2} are "
                      "set, please only use the former")
    if is_autoscaling_v2_enabled(spec):
        if head_template.get("spec", {}).get("restartPolicy", "") not in ("", "Never"):
            raise Refused("restartPolicy for head Pod should be Never or unset when using autoscaler V2")
        for g in groups:
            if g["template"].get("spec", {}).get("restartPolicy", "") not in ("", "Never"):
                raise Refused(f"restartPolicy for worker group {g['groupName']} should be Never or unset when using autoscaler V2")


def _validate_auth(spec: dict) -> None:
    auth = spec.get("authOptions")
    if is_auth_enabled(spec):
        if not spec.get("rayVersion"):
            raise Refused("authOptions.mode is 'token' but RayVersion was not specified. Ray version 2.52.0 or later is required")
        version = _parse_version(spec["rayVersion"])
        if version is None:
            raise Refused(f"authOptions.mode is 'token' but RayVersion format is invalid: {spec['rayVersion']}")
        if version < (2, 52, 0):
            raise Refused(f"authOptions.mode is 'token' but minimum Ray version is 2.52.0, got {spec['rayVersion']}")
        if is_k8s_auth_enabled(auth):
            if version < (2, 55, 0):
                raise Refused(f"authOptions.enableK8sTokenAuth is enabled but minimum Ray version is 2.55.0, got {spec['rayVersion']}")
            if auth.get("secretName"):
                raise Refused("authOptions.enableK8sTokenAuth is enabled and authOptions.secretName is also set")
    elif is_k8s_auth_enabled(auth):
        raise Refused("authOptions.enableK8sTokenAuth is enabled but authOptions.mode not set to 'token'")


def validate_network_policy(spec: dict) -> None:
    np = spec.get("networkPolicy")
    if np is None:
        return
    mode = np.get("mode") or "DenyAll"

    def check(rules: dict | None, where: str) -> None:
        if not rules:
            return
        if mode == "DenyAllEgress" and rules.get("ingressRules"):
            raise Refused(f"networkPolicy.{where}.ingressRules cannot be set when mode is \"{mode}\" (ingress is not restricted)")
        if mode == "DenyAllIngress" and rules.get("egressRules"):
            raise Refused(f"networkPolicy.{where}.egressRules cannot be set when mode is \"{mode}\" (egress is not restricted)")

    check(np.get("head"), "head")
    check(np.get("worker"), "worker")
    names = set()
    for g in spec.get("workerGroupSpecs") or []:
        if errs := is_dns1123_label(g.get("groupName", "")):
            raise Refused(f"worker group name \"{g.get('groupName')}\" must be a valid DNS1123 label when networkPolicy "
                          f"is enabled (it is embedded in the NetworkPolicy name): {errs}")
        names.add(g["groupName"])
    for wg in np.get("workerGroups") or []:
        check(wg, f"workerGroups[\"{wg.get('groupName')}\"]")
        if wg.get("groupName") not in names:
            raise Refused(f"networkPolicy.workerGroups[\"{wg.get('groupName')}\"] does not match any group name in workerGroupSpecs")


def _validate_optional_features(spec: dict, gates: dict[str, bool]) -> None:
    history = spec.get("historyServerOptions")
    if history is not None:
        if not gates["RayClusterHistoryServer"]:
            raise Refused("RayClusterHistoryServer feature gate is not enabled")
        if history.get("collectorOptions") is None:
            raise Refused("historyServerOptions.collectorOptions must be set")
        templates = [spec["headGroupSpec"]["template"]] + [g["template"] for g in spec.get("workerGroupSpecs") or []]
        if any(c.get("name") == COLLECTOR_CONTAINER_NAME for t in templates for c in _containers(t)):
            raise Refused(f"pod templates must not define a container with name '{COLLECTOR_CONTAINER_NAME}' when "
                          "history server collector options are enabled")
    _validate_auth(spec)
    if spec.get("networkPolicy") is not None and not gates["RayClusterNetworkPolicy"]:
        raise Refused("spec.networkPolicy requires the RayClusterNetworkPolicy feature gate to be enabled")
    validate_network_policy(spec)
    if spec.get("tlsOptions") is not None and not gates["RayClusterMTLS"]:
        raise Refused("spec.tlsOptions requires the RayClusterMTLS feature gate to be enabled")


def validate_raycluster_spec(spec: dict, annotations: dict | None = None, gates: dict[str, bool] | None = None) -> None:
    """ValidateRayClusterSpec. (The TLS env/mount conflicts it checks apply only with the
    RayClusterMTLS gate on, and are not ported.)"""
    gates = {**DEFAULT_FEATURE_GATES, **(gates or {})}
    annotations = annotations or {}
    head = spec.get("headGroupSpec") or {}
    if not _containers(head.get("template")):
        raise Refused("headGroupSpec should have at least one container")
    validate_ray_group_resources("Head", head.get("rayStartParams"), head.get("resources"))
    validate_ray_group_labels("Head", head.get("rayStartParams"), head.get("labels"))
    autoscaling = is_autoscaling_enabled(spec)
    _validate_worker_groups(spec, autoscaling)
    _validate_gcs_fault_tolerance(spec, annotations, gates)
    _validate_autoscaler(spec, autoscaling, gates)
    options = spec.get("autoscalerOptions") or {}
    if options.get("idleTimeoutSeconds") is not None and options["idleTimeoutSeconds"] < 0:
        raise Refused(f"autoscalerOptions.idleTimeoutSeconds must be non-negative, got {options['idleTimeoutSeconds']}")
    if env_var(KUBERAY_GEN_AUTOSCALER_START_CMD, options.get("env")):
        raise Refused(f"autoscalerOptions.env must not contain {KUBERAY_GEN_AUTOSCALER_START_CMD}: it is managed by "
                      "KubeRay and injected automatically into the autoscaler container")
    _validate_optional_features(spec, gates)


def validate_raycluster_upgrade_options(doc: dict) -> None:
    strategy = (doc.get("spec", {}).get("upgradeStrategy") or {}).get("type")
    if strategy is None:
        return
    if strategy not in ("Recreate", "None"):
        raise Refused(f"The RayCluster spec is invalid: Spec.UpgradeStrategy.Type value {strategy} is invalid, "
                      "valid options are Recreate or None")
    creator = (doc.get("metadata", {}).get("labels") or {}).get("ray.io/originated-from-crd")
    if creator in ("RayJob", "RayService"):
        raise Refused(f"upgradeStrategy cannot be set when RayCluster is created by {creator}")


def raycluster_errors(doc: dict, feature_gates: dict[str, bool] | None = None) -> list[str]:
    """What the RayCluster controller refuses in `doc`, in its order; [] when it would create pods."""
    checks = [
        lambda: validate_raycluster_metadata(doc.get("metadata", {})),
        lambda: validate_raycluster_spec(doc.get("spec", {}), doc.get("metadata", {}).get("annotations"), feature_gates),
        lambda: validate_raycluster_upgrade_options(doc),
    ]
    return _run(checks)


# -- RayJob -----------------------------------------------------------------------------------------------


def validate_rayjob_metadata(metadata: dict) -> None:
    name = metadata.get("name", "")
    if len(name) > MAX_RAYJOB_NAME_LENGTH:
        raise Refused(f"The RayJob metadata is invalid: RayJob name should be no more than {MAX_RAYJOB_NAME_LENGTH} characters")
    if errs := is_dns1035_label(name):
        raise Refused(f"The RayJob metadata is invalid: RayJob name should be a valid DNS1035 label: {errs}")


def _validate_deletion_rules(spec: dict) -> None:
    selector_mode = bool(spec.get("clusterSelector"))
    by_status: dict[tuple[str, str], dict[str, int]] = {}
    errs = []
    for i, rule in enumerate(spec["deletionStrategy"]["deletionRules"]):
        cond = rule.get("condition") or {}
        has_job, has_deploy = "jobStatus" in cond, "jobDeploymentStatus" in cond
        if has_job and has_deploy:
            errs.append(f"deletionRules[{i}]: cannot set both JobStatus and JobDeploymentStatus at the same time")
            continue
        if not has_job and not has_deploy:
            errs.append(f"deletionRules[{i}]: exactly one of JobStatus and JobDeploymentStatus must be set")
            continue
        if cond.get("ttlSeconds", 0) < 0:
            errs.append(f"deletionRules[{i}]: TTLSeconds must be non-negative")
            continue
        policy = rule.get("policy")
        if selector_mode and policy in ("DeleteCluster", "DeleteWorkers"):
            errs.append(f"deletionRules[{i}]: DeletionPolicyType '{policy}' not supported when ClusterSelector is set")
            continue
        if is_autoscaling_enabled(spec.get("rayClusterSpec")) and policy == "DeleteWorkers":
            errs.append(f"deletionRules[{i}]: DeletionPolicyType 'DeleteWorkers' not supported with autoscaling enabled")
            continue
        key = ("JobStatus", cond["jobStatus"]) if has_job else ("JobDeploymentStatus", cond["jobDeploymentStatus"])
        ttls = by_status.setdefault(key, {})
        if policy in ttls:
            errs.append(f"deletionRules[{i}]: duplicate rule for DeletionPolicyType '{policy}' and {key[0]} '{key[1]}'")
            continue
        ttls[policy] = cond.get("ttlSeconds", 0)
    for (kind, value), ttls in by_status.items():
        previous = None
        for policy in ("DeleteWorkers", "DeleteCluster", "DeleteSelf"):
            if policy not in ttls:
                continue
            if previous is not None and ttls[policy] < previous[1]:
                errs.append(f"for {kind} '{value}': {policy} TTL ({ttls[policy]}) must be >= {previous[0]} TTL ({previous[1]})")
            previous = (policy, ttls[policy])
    if errs:
        raise Refused("\n".join(errs))


def _validate_legacy_deletion_policies(spec: dict) -> None:
    strategy = spec["deletionStrategy"]
    on_success, on_failure = strategy.get("onSuccess"), strategy.get("onFailure")
    if on_success is None or on_failure is None:
        raise Refused("both DeletionStrategy.OnSuccess and DeletionStrategy.OnFailure must be set when using the "
                      "legacy deletion policy fields of DeletionStrategy")
    if on_success.get("policy") is None:
        raise Refused("the DeletionPolicyType field of DeletionStrategy.OnSuccess cannot be unset when DeletionStrategy is enabled")
    if on_failure.get("policy") is None:
        raise Refused("the DeletionPolicyType field of DeletionStrategy.OnFailure cannot be unset when DeletionStrategy is enabled")
    policies = (on_success["policy"], on_failure["policy"])
    if spec.get("clusterSelector"):
        for when, policy in zip(("on success", "on failure"), policies):
            if policy in ("DeleteCluster", "DeleteWorkers"):
                raise Refused(f"the ClusterSelector mode doesn't support DeletionStrategy={policy} {when}")
    if "DeleteWorkers" in policies and is_autoscaling_enabled(spec.get("rayClusterSpec")):
        raise Refused("DeletionStrategy=DeleteWorkers currently does not support RayCluster with autoscaling enabled")
    if spec.get("shutdownAfterJobFinishes") and "DeleteNone" in policies:
        raise Refused("The RayJob spec is invalid: shutdownAfterJobFinshes is set to 'true' while deletion policy is 'DeleteNone'")


def validate_deletion_configuration(spec: dict, gates: dict[str, bool]) -> None:
    shutdown = spec.get("shutdownAfterJobFinishes", False)
    if not shutdown and spec.get("ttlSecondsAfterFinished", 0) > 0:
        raise Refused("The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false cannot have "
                      "TTLSecondsAfterFinished")
    strategy = spec.get("deletionStrategy")
    if strategy is None:
        return
    if not gates["RayJobDeletionPolicy"]:
        raise Refused("RayJobDeletionPolicy feature gate must be enabled to use DeletionStrategy")
    legacy = strategy.get("onSuccess") is not None or strategy.get("onFailure") is not None
    rules = bool(strategy.get("deletionRules"))
    if rules and shutdown:
        raise Refused("The RayJob spec is invalid: spec.shutdownAfterJobFinishes and spec.deletionStrategy.deletionRules "
                      "are mutually exclusive")
    if rules and legacy:
        raise Refused("The RayJob spec is invalid: Cannot use both legacy onSuccess/onFailure fields and deletionRules simultaneously")
    if legacy:
        _validate_legacy_deletion_policies(spec)
    elif rules:
        _validate_deletion_rules(spec)
    else:
        raise Refused("The RayJob spec is invalid: DeletionStrategy requires either BOTH onSuccess and onFailure, OR "
                      "the deletionRules field (cannot be empty)")


def validate_rayjob_spec(doc: dict, gates: dict[str, bool] | None = None) -> None:
    gates = {**DEFAULT_FEATURE_GATES, **(gates or {})}
    spec = doc.get("spec", {})
    suspend = spec.get("suspend", False)
    if suspend and not spec.get("shutdownAfterJobFinishes", False):
        raise Refused("The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to false is not allowed to be suspended")
    if spec.get("ttlSecondsAfterFinished", 0) < 0:
        raise Refused("The RayJob spec is invalid: TTLSecondsAfterFinished must be a non-negative integer")
    validate_deletion_configuration(spec, gates)
    selector_mode = bool(spec.get("clusterSelector"))
    mode = spec.get("submissionMode", "K8sJobMode")
    backoff = spec.get("backoffLimit")
    if suspend and selector_mode:
        raise Refused("The RayJob spec is invalid: the ClusterSelector mode doesn't support the suspend operation")
    if spec.get("rayClusterSpec") is None and not selector_mode:
        raise Refused("The RayJob spec is invalid: one of RayClusterSpec or ClusterSelector must be set")
    if selector_mode:
        if not spec["clusterSelector"].get(RAY_CLUSTER_SELECTOR_KEY, ""):
            raise Refused("cluster name in ClusterSelector should not be empty")
        if mode == "SidecarMode":
            raise Refused("ClusterSelector is not supported in SidecarMode")
        if backoff is not None and backoff > 0:
            raise Refused("The RayJob spec is invalid: BackoffLimit is incompatible with ClusterSelector mode")
    if mode == "InteractiveMode" and backoff is not None and backoff > 0:
        raise Refused("The RayJob spec is invalid: BackoffLimit is incompatible with InteractiveMode")
    if mode == "SidecarMode":
        if spec.get("submitterPodTemplate") is not None:
            raise Refused("Currently, SidecarMode doesn't support SubmitterPodTemplate")
        if spec.get("submitterConfig") is not None:
            raise Refused("Currently, SidecarMode doesn't support SubmitterConfig")
        head_policy = spec["rayClusterSpec"]["headGroupSpec"]["template"].get("spec", {}).get("restartPolicy", "")
        if head_policy not in ("", "Never"):
            raise Refused("restartPolicy for head Pod should be Never or unset when using SidecarMode")
    cluster = spec.get("rayClusterSpec")
    if cluster is not None:
        if is_k8s_auth_enabled(cluster.get("authOptions")):
            raise Refused("The RayJob spec is invalid: K8s token auth mode is currently not supported for RayJob")
        try:
            validate_raycluster_spec(cluster, doc.get("metadata", {}).get("annotations"), gates)
        except Refused as err:
            raise Refused(f"The RayJob spec is invalid: {err}") from None
    try:
        yaml.safe_load(spec.get("runtimeEnvYAML", "") or "")
    except yaml.YAMLError as err:
        raise Refused(f"failed to unmarshal RuntimeEnvYAML: {err}") from None
    if spec.get("activeDeadlineSeconds") is not None and spec["activeDeadlineSeconds"] <= 0:
        raise Refused("The RayJob spec is invalid: activeDeadlineSeconds must be a positive integer")
    if spec.get("preRunningDeadlineSeconds") is not None and spec["preRunningDeadlineSeconds"] <= 0:
        raise Refused("The RayJob spec is invalid: preRunningDeadlineSeconds must be a positive integer")
    if backoff is not None and backoff < 0:
        raise Refused("The RayJob spec is invalid: backoffLimit must be a positive integer")


def rayjob_errors(doc: dict, feature_gates: dict[str, bool] | None = None) -> list[str]:
    """What the RayJob controller refuses in `doc` (its cluster spec included); [] when it would go on.
    The cluster it then creates is named `<rayjob>-<5 random characters>` and validated as a
    RayCluster too."""
    cluster_name = doc.get("metadata", {}).get("name", "") + "-abcde"
    checks = [
        lambda: validate_rayjob_metadata(doc.get("metadata", {})),
        lambda: validate_rayjob_spec(doc, feature_gates),
        lambda: validate_raycluster_metadata({"name": cluster_name}),
    ]
    return _run(checks)


def _run(checks: list[Any]) -> list[str]:
    """The controller stops at the first refusal."""
    for check in checks:
        try:
            check()
        except Refused as err:
            return [str(err)]
    return []
