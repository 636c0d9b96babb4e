"""The pre-flight check that a sweep's models fit the cluster's GPUs (toolsweep.cluster.placement)."""

from __future__ import annotations

import pytest

from toolsweep.cluster.placement import PlacementError, model_demands, node_capacities, plan_placement
from toolsweep.models.config import HFModelConfig, ScriptedModelConfig, VLLMModelConfig


def vllm(name: str, replicas: int = 1, tp: int = 1, **kw) -> VLLMModelConfig:
    return VLLMModelConfig(name=name, path=f"/models/{name}", replicas=replicas, engine_args={"tensor_parallel_size": tp}, **kw)


def gpu_nodes(*gpus: float, cpus: float = 16.0) -> list[dict]:
    return [{"node_id": f"gpu{i}", "GPU": g, "CPU": cpus} for i, g in enumerate(gpus)]


def totals(nodes: list[dict]) -> dict[str, float]:
    return {"GPU": sum(n.get("GPU", 0) for n in nodes), "CPU": sum(n.get("CPU", 0) for n in nodes)}


def test_demands_follow_replicas_and_tensor_parallelism():
    models = [
        ScriptedModelConfig(name="oracle", policy="oracle"),
        vllm("big", replicas=3, tp=2),
        {"name": "pp", "kind": "vllm", "replicas": 1, "engine_args": {"tensor_parallel_size": 2, "pipeline_parallel_size": 2}},
        vllm("cpu-model", replicas=2, device="cpu", num_cpus=4),
        HFModelConfig(name="hf-gpu", path="/m", device="cuda:0"),
        HFModelConfig(name="hf-cpu", path="/m"),
    ]
    demands = model_demands(models)
    per_model = {}
    for d in demands:
        per_model.setdefault(d.model, []).append(d.gpus)
    assert per_model == {"big": [2.0, 2.0, 2.0], "pp": [4.0], "cpu-model": [0.0, 0.0], "hf-gpu": [1.0]}
    assert [d.cpus for d in demands if d.model == "cpu-model"] == [4.0, 4.0]


def test_multi_model_sweep_fits_and_every_replica_is_on_a_node_with_room():
    models = [vllm("a", replicas=2, tp=1), vllm("b", replicas=2, tp=1), vllm("c", replicas=2, tp=2)]
    nodes = [{"node_id": "head", "GPU": 0, "CPU": 0}] + gpu_nodes(2, 2, 2, 2)
    plan = plan_placement(models, totals(nodes), nodes)
    assert plan.gpus_needed == 8 and plan.gpus_total == 8
    used: dict[str, float] = {}
    need = {"a": 1, "b": 1, "c": 2}
    for model, where in plan.assignments.items():
        assert len(where) == 2
        for node in where:
            used[node] = used.get(node, 0) + need[model]
    assert "head" not in used
    assert all(v <= 2 for v in used.values()), used


def test_too_many_gpus_for_one_model_names_the_model_and_the_numbers():
    models = [ScriptedModelConfig(name="oracle", policy="oracle"), vllm("qwen-32b", replicas=3, tp=2)]
    nodes = gpu_nodes(2, 2)
    with pytest.raises(PlacementError) as err:
        plan_placement(models, totals(nodes), nodes)
    msg = str(err.value)
    assert "'qwen-32b'" in msg
    assert "3 replica(s) x 2 GPU(s) (tensor_parallel_size=2) = 6 GPU(s)" in msg
    assert "the cluster has 4 GPU(s)" in msg and "gpu0: 2, gpu1: 2" in msg
    assert "oracle" not in msg


def test_models_that_fit_alone_but_not_together_are_all_listed():
    models = [vllm("a", replicas=2), vllm("b", replicas=2)]
    nodes = gpu_nodes(1, 1, 1)
    with pytest.raises(PlacementError) as err:
        plan_placement(models, totals(nodes), nodes)
    msg = str(err.value)
    assert "together need 4 GPUs" in msg and "a: 2 replica(s)" in msg and "b: 2 replica(s)" in msg
    assert "has 3 GPU(s)" in msg


def test_tensor_parallel_group_must_fit_on_one_node():
    nodes = gpu_nodes(1, 1, 1, 1)
    with pytest.raises(PlacementError) as err:
        plan_placement([vllm("wide", tp=2)], totals(nodes), nodes)
    assert "'wide' needs 2 GPUs on one node per replica (tensor_parallel_size=2)" in str(err.value)
    assert "largest node has 1" in str(err.value)


def test_fragmented_cluster_is_detected_even_when_totals_fit():
    # 6 GPUs needed, 6 GPUs present, but 2-GPU replicas cannot be packed onto two 3-GPU nodes.
    nodes = gpu_nodes(3, 3)
    with pytest.raises(PlacementError) as err:
        plan_placement([vllm("tp2", replicas=3, tp=2)], totals(nodes), nodes)
    assert "cannot be packed" in str(err.value) and "6 of 6 GPUs" in str(err.value)


def test_exact_search_finds_packings_first_fit_misses():
    # First fit puts the 2-GPU replica on the big-CPU node, stranding the CPU-heavy one; the only
    # packing swaps them.
    nodes = [{"node_id": "roomy", "GPU": 2, "CPU": 8}, {"node_id": "lean", "GPU": 2, "CPU": 1}]
    models = [vllm("wide", tp=2, num_cpus=1), vllm("cpu-heavy", tp=1, num_cpus=8)]
    plan = plan_placement(models, totals(nodes), nodes)
    assert plan.assignments == {"wide": ["lean"], "cpu-heavy": ["roomy"]}


def test_cpu_needs_of_servers_and_workers_are_checked():
    nodes = [{"node_id": "n0", "CPU": 4, "GPU": 0}]
    with pytest.raises(PlacementError) as err:
        plan_placement([vllm("cpu-model", replicas=3, device="cpu", num_cpus=2)], totals(nodes), nodes)
    assert "'cpu-model' needs 3 replica(s) x 2 CPU(s) (num_cpus) = 6 CPUs" in str(err.value)
    with pytest.raises(PlacementError, match="rollout workers at least 2"):
        plan_placement([vllm("cpu-model", replicas=2, device="cpu", num_cpus=2)], totals(nodes), nodes, reserve_cpus=2)
    plan = plan_placement([vllm("cpu-model", replicas=1, device="cpu", num_cpus=2)], totals(nodes), nodes, reserve_cpus=2)
    assert plan.assignments == {"cpu-model": ["n0"]}


def test_models_without_servers_need_nothing_even_on_a_gpu_less_cluster():
    models = [ScriptedModelConfig(name="oracle", policy="oracle"),
              {"name": "api", "kind": "openai", "base_url": "http://x/v1", "model": "m"}]
    plan = plan_placement(models, {"CPU": 1}, [{"CPU": 1}])
    assert plan.assignments == {} and plan.gpus_needed == 0


def test_ray_nodes_records_are_read_and_dead_nodes_ignored():
    records = [
        {"NodeID": "aaa", "Alive": True, "NodeManagerHostname": "h1", "Resources": {"CPU": 4.0, "GPU": 1.0}},
        {"NodeID": "bbb", "Alive": False, "NodeManagerHostname": "h2", "Resources": {"CPU": 4.0, "GPU": 8.0}},
        {"NodeID": "ccc", "Alive": True, "NodeManagerHostname": "h1", "Resources": {"CPU": 2.0}},
    ]
    caps = node_capacities(records)
    assert [(c.gpus, c.cpus) for c in caps] == [(1.0, 4.0), (0.0, 2.0)]
    assert [c.node_id for c in caps] == ["h1/aaa", "h1/ccc"]
    with pytest.raises(PlacementError, match="'m' needs 2 GPUs on one node"):
        plan_placement([vllm("m", tp=2)], {"GPU": 2.0, "CPU": 6.0}, records)


def test_totals_only_check_without_node_records():
    assert plan_placement([vllm("m", replicas=2)], {"GPU": 2, "CPU": 8}).gpus_needed == 2
    with pytest.raises(PlacementError, match="'m' needs 3 replica"):
        plan_placement([vllm("m", replicas=3)], {"GPU": 2, "CPU": 8})


# -- waiting for an autoscaler -------------------------------------------------------------------


class FakeAutoscalingCluster:
    """A cluster whose GPU nodes join `join_after` seconds after the autoscaler is asked (a clock
    the test advances, no real time passes)."""

    def __init__(self, join_after: float | None, gpus_per_node: float = 2.0, nodes: int = 2) -> None:
        self.now = 0.0
        self.asked_at: float | None = None
        self.requests: list[list[dict]] = []
        self.join_after, self.gpus_per_node, self.nodes = join_after, gpus_per_node, nodes

    def request(self, bundles: list[dict]) -> None:
        self.requests.append(bundles)
        self.asked_at = self.now if bundles else None

    def current_nodes(self) -> list[dict]:
        joined = (self.asked_at is not None and self.join_after is not None
                  and self.now >= self.asked_at + self.join_after)
        head = [{"node_id": "head", "GPU": 0.0, "CPU": 0.0}, {"node_id": "cpu-0", "GPU": 0.0, "CPU": 4.0}]
        return head + (gpu_nodes(*[self.gpus_per_node] * self.nodes, cpus=8.0) if joined else [])

    def check(self, models):
        nodes = self.current_nodes()
        return plan_placement(models, totals(nodes), nodes)

    def sleep(self, s: float) -> None:
        self.now += s


def test_an_autoscaling_cluster_is_asked_for_every_replica_and_waited_for():
    from toolsweep.cluster.placement import wait_for_capacity

    models = [vllm("small", replicas=2, tp=1), vllm("big", replicas=1, tp=2)]
    cluster = FakeAutoscalingCluster(join_after=42.0)
    lines: list[str] = []
    plan = wait_for_capacity(
        models, 600, check=lambda: cluster.check(models), request=cluster.request, log=lines.append,
        poll_s=5.0, clock=lambda: cluster.now, sleep=cluster.sleep,
    )
    # One bundle per replica, in the shape each replica takes on one node.
    assert cluster.requests == [[{"CPU": 1.0, "GPU": 1.0}, {"CPU": 1.0, "GPU": 1.0}, {"CPU": 1.0, "GPU": 2.0}]]
    assert 42.0 <= cluster.now < 42.0 + 5.0 + 1e-9  # found at the first poll after the nodes joined
    assert plan.gpus_needed == 4 and "head" not in {n for where in plan.assignments.values() for n in where}
    assert "4 GPU(s)" in lines[0] and "600 s" in lines[0]


def test_a_cluster_that_already_fits_asks_the_autoscaler_for_nothing():
    from toolsweep.cluster.placement import wait_for_capacity

    models = [vllm("small")]
    cluster = FakeAutoscalingCluster(join_after=0.0)
    cluster.asked_at = 0.0  # nodes are already there
    wait_for_capacity(models, 600, check=lambda: cluster.check(models), request=cluster.request,
                      clock=lambda: cluster.now, sleep=cluster.sleep)
    assert cluster.requests == [] and cluster.now == 0.0


def test_nodes_that_never_come_fail_in_bounded_time_with_where_to_look():
    from toolsweep.cluster.placement import wait_for_capacity

    models = [vllm("big", replicas=1, tp=2)]
    cluster = FakeAutoscalingCluster(join_after=None)
    with pytest.raises(PlacementError) as info:
        wait_for_capacity(models, 120, check=lambda: cluster.check(models), request=cluster.request,
                          poll_s=5.0, clock=lambda: cluster.now, sleep=cluster.sleep)
    text = str(info.value)
    assert "'big'" in text and "within 120 s" in text and "kubectl -n toolsweep describe pod" in text
    assert "--scale-up-timeout" in text
    assert 120.0 <= cluster.now <= 125.0
    assert cluster.requests[-1] == []  # the request is withdrawn: no node is started for a sweep that gave up


def test_without_a_scale_up_timeout_the_check_fails_at_once():
    from toolsweep.cluster.placement import wait_for_capacity

    models = [vllm("big", tp=2)]
    cluster = FakeAutoscalingCluster(join_after=1.0)
    with pytest.raises(PlacementError):
        wait_for_capacity(models, 0, check=lambda: cluster.check(models), request=cluster.request,
                          clock=lambda: cluster.now, sleep=cluster.sleep)
    assert cluster.requests == [] and cluster.now == 0.0
