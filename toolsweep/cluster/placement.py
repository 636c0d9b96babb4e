"""Do a sweep's models fit the cluster? Checked before any model server starts.

`plan_placement` checks one set of models that runs at once: the replicas of all of them together
must fit the cluster's GPUs, and each replica must fit on one node: a vLLM replica is one placement group with `tensor_parallel_size` GPUs packed on one node (the
same shape `ModelRuntime` asks Ray for). Failing here, with the model named and the numbers shown,
beats a sweep that hangs waiting for a placement group that can never be scheduled.

`plan_waves` groups a sweep's models into waves when they do not all fit together (DESIGN §3 "Model
waves"): every wave must fit (with the helper models its units consult), and only a model that does
not fit alone, with its helpers, is refused.

Pure functions over plain data: `ray.cluster_resources()`-style totals and `ray.nodes()`-style node
records. `check_ray_cluster` is the one place that reads them from a live Ray.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

_EPS = 1e-9

# Exact packing is a small search (replicas x nodes); past this many steps we stop and report that no
# packing was found, rather than stall the driver on a pathological cluster shape.
_SEARCH_BUDGET = 200_000


class PlacementError(ValueError):
    """The sweep's models cannot all be placed on this cluster; the message says what to change."""


@dataclass(frozen=True)
class ReplicaDemand:
    """What one replica of one model needs from a single node."""

    model: str
    replica: int
    gpus: float
    cpus: float
    why: str = ""  # e.g. "tensor_parallel_size=2"


@dataclass(frozen=True)
class NodeCapacity:
    node_id: str
    gpus: float
    cpus: float


@dataclass
class PlacementPlan:
    """A feasible assignment: model name -> the node of each replica (in replica order)."""

    assignments: dict[str, list[str]] = field(default_factory=dict)
    gpus_needed: float = 0.0
    gpus_total: float = 0.0
    cpus_needed: float = 0.0
    cpus_total: float = 0.0

    def describe(self) -> str:
        if not self.assignments:
            return "no model needs a dedicated server"
        parts = [f"{m}: {len(nodes)} replica(s) on {sorted(set(nodes))}" for m, nodes in self.assignments.items()]
        return f"GPUs {_n(self.gpus_needed)}/{_n(self.gpus_total)} used; " + "; ".join(parts)


# -- reading configs ------------------------------------------------------------------------------


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _engine_arg(engine_args: Any, name: str, default: Any) -> Any:
    if engine_args is None:
        return default
    value = _get(engine_args, name, None)
    if value is None and not isinstance(engine_args, Mapping):
        # pydantic models with extra="allow" keep unknown flags in model_extra
        value = (getattr(engine_args, "model_extra", None) or {}).get(name)
    return default if value is None else value


def model_demands(models: Iterable[Any]) -> list[ReplicaDemand]:
    """Per-replica resource needs of the models that run on the cluster's own resources.

    scripted and openai models need nothing here; a vLLM model needs, per replica, `num_cpus` CPUs
    and (device gpu) tensor_parallel_size x pipeline_parallel_size GPUs on one node; an hf model on
    a CUDA device needs one GPU.
    """
    from toolsweep.models.config import server_groups

    models = list(models)
    # LoRA adapters of one base share its server: the server is one demand, named after it
    shared = {m.name: server for server, members in server_groups(models).items() for m in members}
    seen_servers: set[str] = set()
    demands: list[ReplicaDemand] = []
    for model in models:
        kind = _get(model, "kind")
        name = str(_get(model, "name"))
        if kind == "vllm" and name in shared:
            if shared[name] in seen_servers:
                continue
            seen_servers.add(shared[name])
            name = shared[name]
        if kind == "vllm":
            engine_args = _get(model, "engine_args")
            tp = int(_engine_arg(engine_args, "tensor_parallel_size", 1))
            pp = int(_engine_arg(engine_args, "pipeline_parallel_size", 1))
            if tp < 1 or pp < 1:
                raise PlacementError(
                    f"model {name!r}: tensor_parallel_size and pipeline_parallel_size must be >= 1, "
                    f"got {tp} and {pp}"
                )
            device = _get(model, "device", "gpu") or "gpu"
            cpus = float(_get(model, "num_cpus", 1.0) or 0.0)
            replicas = int(_get(model, "replicas", 1))
            if device == "gpu":
                gpus = float(tp * pp)
                why = f"tensor_parallel_size={tp}" + (f" x pipeline_parallel_size={pp}" if pp > 1 else "")
            else:
                gpus, why = 0.0, "device=cpu"
            demands += [ReplicaDemand(name, i, gpus, cpus, why) for i in range(replicas)]
        elif kind == "hf":
            device = str(_get(model, "device", "cpu") or "cpu")
            if device.startswith("cuda"):
                demands.append(ReplicaDemand(name, 0, 1.0, 0.0, f"device={device}"))
    return demands


# -- reading the cluster ---------------------------------------------------------------------------


def node_capacities(nodes: Iterable[Mapping[str, Any]]) -> list[NodeCapacity]:
    """Accepts `ray.nodes()` records ({"NodeID", "Alive", "Resources", "NodeManagerHostname"}) or plain
    resource dicts ({"GPU": 2, "CPU": 16}, optionally with "node_id"); dead nodes are ignored. Nodes
    are named by host (a pod name on Kubernetes), with the node id added where hosts repeat."""
    named: list[tuple[str, str, Mapping[str, Any]]] = []
    for i, node in enumerate(nodes):
        if "Resources" in node:
            if not node.get("Alive", True):
                continue
            host = str(node.get("NodeManagerHostname") or node.get("NodeManagerAddress") or f"node-{i}")
            named.append((host, str(node.get("NodeID", i))[:8], node["Resources"]))
        else:
            named.append((str(node.get("node_id", f"node-{i}")), str(i), node))
    hosts = [h for h, _, _ in named]
    return [
        NodeCapacity(
            host if hosts.count(host) == 1 else f"{host}/{suffix}",
            float(resources.get("GPU", 0.0)),
            float(resources.get("CPU", 0.0)),
        )
        for host, suffix, resources in named
    ]


# -- the check -------------------------------------------------------------------------------------


def _n(x: float) -> str:
    return str(int(x)) if abs(x - round(x)) < _EPS else f"{x:g}"


def _nodes_text(nodes: Sequence[NodeCapacity]) -> str:
    with_gpu = [f"{n.node_id}: {_n(n.gpus)}" for n in nodes if n.gpus > _EPS]
    if not with_gpu:
        return "no node has a GPU"
    return "GPUs per node: " + ", ".join(with_gpu)


def _model_need_text(name: str, reps: Sequence[ReplicaDemand]) -> str:
    per = reps[0]
    return (
        f"{len(reps)} replica(s) x {_n(per.gpus)} GPU(s) ({per.why}) = {_n(sum(r.gpus for r in reps))} GPU(s)"
    )


_ADVICE = (
    "Lower the model's `replicas` or `tensor_parallel_size`, drop a model from the sweep, or add GPU "
    "workers (on Kubernetes: the gpu-workers group's replicas and nvidia.com/gpu limit; on one machine: "
    "`ray start --num-gpus N`)."
)


def _pack(demands: list[ReplicaDemand], nodes: list[NodeCapacity]) -> list[int] | None:
    """Node index per demand (same order), or None. First-fit decreasing, then an exact search."""
    order = sorted(range(len(demands)), key=lambda i: (-demands[i].gpus, -demands[i].cpus, i))
    free_g = [n.gpus for n in nodes]
    free_c = [n.cpus for n in nodes]

    def fits(d: ReplicaDemand, j: int) -> bool:
        return free_g[j] + _EPS >= d.gpus and free_c[j] + _EPS >= d.cpus

    # First fit decreasing: the common case (identical GPU nodes) is solved here.
    assign = [-1] * len(demands)
    for i in order:
        d = demands[i]
        j = next((j for j in range(len(nodes)) if fits(d, j)), None)
        if j is None:
            break
        assign[i] = j
        free_g[j] -= d.gpus
        free_c[j] -= d.cpus
    else:
        return assign

    # Exact search with symmetry breaking (nodes with the same free capacity are interchangeable).
    free_g = [n.gpus for n in nodes]
    free_c = [n.cpus for n in nodes]
    assign = [-1] * len(demands)
    steps = 0

    def search(k: int) -> bool:
        nonlocal steps
        if k == len(order):
            return True
        steps += 1
        if steps > _SEARCH_BUDGET:
            return False
        d = demands[order[k]]
        tried: set[tuple[float, float]] = set()
        for j in range(len(nodes)):
            key = (round(free_g[j], 6), round(free_c[j], 6))
            if key in tried or not fits(d, j):
                continue
            tried.add(key)
            free_g[j] -= d.gpus
            free_c[j] -= d.cpus
            assign[order[k]] = j
            if search(k + 1):
                return True
            free_g[j] += d.gpus
            free_c[j] += d.cpus
        assign[order[k]] = -1
        return False

    return assign if search(0) else None


def plan_placement(
    models: Iterable[Any],
    cluster_resources: Mapping[str, float],
    nodes: Iterable[Mapping[str, Any]] | None = None,
    *,
    reserve_cpus: float = 0.0,
) -> PlacementPlan:
    """Checks that every model's replicas fit the cluster at once; returns where they would go.

    `cluster_resources` is like `ray.cluster_resources()`; `nodes` like `ray.nodes()` (or plain
    per-node resource dicts). Without `nodes` only totals are checked. `reserve_cpus` is what must
    stay free for rollout workers. Raises PlacementError naming every model that does not fit.
    """
    models = list(models)
    demands = model_demands(models)
    total_gpus = float(cluster_resources.get("GPU", 0.0))
    total_cpus = float(cluster_resources.get("CPU", 0.0))
    caps = node_capacities(nodes) if nodes is not None else None

    by_model: dict[str, list[ReplicaDemand]] = {}
    for d in demands:
        by_model.setdefault(d.model, []).append(d)

    gpus_needed = sum(d.gpus for d in demands)
    cpus_needed = sum(d.cpus for d in demands)
    plan = PlacementPlan(gpus_needed=gpus_needed, gpus_total=total_gpus, cpus_needed=cpus_needed, cpus_total=total_cpus)
    if not demands:
        return plan

    where = f"the cluster has {_n(total_gpus)} GPU(s)" + (f" ({_nodes_text(caps)})" if caps is not None else "")
    problems: list[str] = []
    for name, reps in by_model.items():
        need = sum(r.gpus for r in reps)
        per = reps[0].gpus
        if need > total_gpus + _EPS:
            problems.append(f"model {name!r} needs {_model_need_text(name, reps)}, but {where}.")
        elif caps is not None and per > _EPS and per > max((n.gpus for n in caps), default=0.0) + _EPS:
            problems.append(
                f"model {name!r} needs {_n(per)} GPUs on one node per replica ({reps[0].why}), but "
                f"the largest node has {_n(max((n.gpus for n in caps), default=0.0))} ({_nodes_text(caps)})."
            )
        cpu_need = sum(r.cpus for r in reps)
        if cpu_need > total_cpus + _EPS:
            problems.append(
                f"model {name!r} needs {len(reps)} replica(s) x {_n(reps[0].cpus)} CPU(s) (num_cpus) = "
                f"{_n(cpu_need)} CPUs, but the cluster has {_n(total_cpus)} CPUs."
            )
    if not problems and gpus_needed > total_gpus + _EPS:
        listing = "; ".join(f"{m}: {_model_need_text(m, r)}" for m, r in by_model.items() if r[0].gpus > 0)
        problems.append(
            f"the models run at the same time and together need {_n(gpus_needed)} GPUs ({listing}), "
            f"but {where}."
        )
    if not problems and cpus_needed + reserve_cpus > total_cpus + _EPS:
        problems.append(
            f"the model servers need {_n(cpus_needed)} CPUs and rollout workers at least "
            f"{_n(reserve_cpus)}, but the cluster has {_n(total_cpus)} CPUs; lower the models' num_cpus "
            "or add CPU workers."
        )
    if problems:
        raise PlacementError("the sweep's models do not fit the cluster:\n  - " + "\n  - ".join(problems) + "\n" + _ADVICE)

    if caps is None:
        plan.assignments = {m: ["?"] * len(r) for m, r in by_model.items()}
        return plan

    assign = _pack(demands, caps)
    if assign is None:
        listing = "; ".join(
            f"{m}: {len(r)} x {_n(r[0].gpus)} GPU(s) ({r[0].why})" for m, r in by_model.items() if r[0].gpus > 0
        )
        raise PlacementError(
            "the sweep's models do not fit the cluster:\n  - "
            f"in total {_n(gpus_needed)} of {_n(total_gpus)} GPUs are needed, but each replica must sit on "
            f"one node and the replicas ({listing}) cannot be packed onto the nodes ({_nodes_text(caps)}; "
            f"CPUs per node: {', '.join(f'{n.node_id}: {_n(n.cpus)}' for n in caps)}).\n" + _ADVICE
        )
    for d, j in zip(demands, assign):
        plan.assignments.setdefault(d.model, []).append(caps[j].node_id)
    return plan


@dataclass
class Wave:
    """Models whose servers run together; `helpers` are the helper models their units consult, placed
    beside them (a helper is up in every wave that needs it)."""

    index: int  # 1-based, as the user reads it
    models: list[str]
    helpers: list[str]
    plan: PlacementPlan

    @property
    def label(self) -> str:
        return f"wave {self.index}"

    def describe(self) -> str:
        helpers = f" (+ helpers {', '.join(self.helpers)})" if self.helpers else ""
        return f"{self.label}: {', '.join(self.models)}{helpers}; {self.plan.describe()}"


@dataclass
class WavePlan:
    """The sweep's waves, in the order they run (one when every model fits at once)."""

    waves: list[Wave]

    def wave_of(self, model: str) -> Wave:
        return next(w for w in self.waves if model in w.models)

    def describe(self) -> str:
        if len(self.waves) == 1:
            return f"every model fits at once: {self.waves[0].plan.describe()}"
        return f"the models do not all fit at once; they run in {len(self.waves)} waves:\n  " + "\n  ".join(
            w.describe() for w in self.waves)

    def as_json(self) -> list[dict[str, Any]]:
        return [{"wave": w.index, "models": list(w.models), "helpers": list(w.helpers),
                 "gpus": w.plan.gpus_needed, "assignments": w.plan.assignments} for w in self.waves]


def _needs_resources(model: Any) -> bool:
    return any(d.gpus > _EPS or d.cpus > _EPS for d in model_demands([model]))


def plan_waves(
    models: Sequence[Any],
    cluster_resources: Mapping[str, float],
    nodes: Iterable[Mapping[str, Any]] | None = None,
    *,
    helpers: Sequence[Any] = (),
    reserve_cpus: float = 0.0,
) -> WavePlan:
    """Groups the models under test into waves that each fit the cluster with `helpers` beside them.

    First fit in config order: a model joins the first wave it fits in with that wave's models, else
    opens a new one. Config order (not size order) keeps the plan stable as a config grows: a model
    appended to the sweep never moves a model already planned, so the waves of a resumed run
    directory keep their names. Models that take no cluster resources (scripted, openai, hf on CPU)
    run in the first wave. Raises PlacementError naming each model that does not fit alone (with the
    helpers); two models that merely do not fit together are never refused."""
    models = list(models)
    helpers = [h for h in helpers if h.name not in {m.name for m in models}]
    nodes = list(nodes) if nodes is not None else None
    alone: list[str] = []
    for m in models:
        try:
            plan_placement([m, *helpers], cluster_resources, nodes, reserve_cpus=reserve_cpus)
        except PlacementError as err:
            alone.append(str(err).split("\n", 1)[1].rsplit("\n", 1)[0] if "\n" in str(err) else str(err))
    if alone:
        raise PlacementError(
            "a model does not fit the cluster even in a wave of its own"
            + (f" (with the helpers {', '.join(h.name for h in helpers)})" if helpers else "")
            + ":\n" + "\n".join(alone) + "\n" + _ADVICE)
    from toolsweep.models.config import server_groups

    # models that share a server (LoRA adapters of one base) are placed, and run, together
    together = {m.name: members for members in server_groups(models).values() for m in members}
    groups: list[list[Any]] = []
    free = [m for m in models if not _needs_resources(m)]
    placed: set[str] = set()
    for m in models:
        if not _needs_resources(m) or m.name in placed:
            continue
        unit = [x for x in together.get(m.name, [m]) if x.name not in placed]
        placed.update(x.name for x in unit)
        for group in groups:
            try:
                plan_placement([*group, *unit, *helpers], cluster_resources, nodes, reserve_cpus=reserve_cpus)
            except PlacementError:
                continue
            group.extend(unit)
            break
        else:
            groups.append(list(unit))
    if not groups:
        groups = [[]]
    groups[0][:0] = free
    order = {m.name: i for i, m in enumerate(models)}
    waves = []
    for i, group in enumerate(groups):
        group.sort(key=lambda m: order[m.name])
        plan = plan_placement([*group, *helpers], cluster_resources, nodes, reserve_cpus=reserve_cpus)
        waves.append(Wave(i + 1, [m.name for m in group], [h.name for h in helpers], plan))
    return WavePlan(waves)


def check_ray_cluster(models: Iterable[Any], *, reserve_cpus: float = 0.0) -> PlacementPlan:
    """`plan_placement` against the Ray cluster this process is connected to (after ray.init)."""
    import ray

    return plan_placement(models, ray.cluster_resources(), ray.nodes(), reserve_cpus=reserve_cpus)


def ray_waves(models: Sequence[Any], helpers: Sequence[Any] = (), *, reserve_cpus: float = 0.0) -> WavePlan:
    """`plan_waves` against the Ray cluster this process is connected to (after ray.init)."""
    import ray

    return plan_waves(models, ray.cluster_resources(), ray.nodes(), helpers=helpers, reserve_cpus=reserve_cpus)


# -- autoscaling clusters ---------------------------------------------------------------------------


def demand_bundles(models: Iterable[Any]) -> list[dict[str, float]]:
    """One resource bundle per model-server replica, the shape the autoscaler is asked for."""
    bundles = []
    for d in model_demands(models):
        bundle = {"CPU": d.cpus} if d.cpus > _EPS else {}
        if d.gpus > _EPS:
            bundle["GPU"] = d.gpus
        if bundle:
            bundles.append(bundle)
    return bundles


def wait_for_capacity(
    models: Sequence[Any],
    timeout_s: float,
    *,
    check: Callable[[], PlacementPlan],
    request: Callable[[list[dict[str, float]]], None],
    log: Callable[[str], None] = lambda _msg: None,
    poll_s: float = 5.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> PlacementPlan:
    """On an autoscaling cluster (KubeRay's GPU groups start at zero pods) the GPUs a sweep needs
    appear only when asked for: ask the autoscaler for every replica's bundle, then re-check until
    the models fit or `timeout_s` passes. The request stays until `request([])` withdraws it (the
    caller does, when its servers stop), so the nodes are not released under a starting server.
    Raises the last PlacementError, extended with where to look, when the nodes never came."""
    try:
        return check()
    except PlacementError as first:
        if timeout_s <= 0:
            raise
        last = first
    bundles = demand_bundles(models)
    request(bundles)
    gpus = sum(b.get("GPU", 0.0) for b in bundles)
    log(f"asked the autoscaler for {len(bundles)} model-server bundle(s) ({_n(gpus)} GPU(s)); waiting up to {_n(timeout_s)} s")
    deadline = clock() + timeout_s
    while clock() < deadline:
        sleep(min(poll_s, max(0.0, deadline - clock())))
        try:
            plan = check()
        except PlacementError as err:
            last = err
            continue
        log(f"the cluster grew to fit the models: {plan.describe()}")
        return plan
    request([])
    raise PlacementError(
        f"{last}\nThe autoscaler was asked for these resources and did not provide them within "
        f"{_n(timeout_s)} s. On Kubernetes, the pending GPU pods say why (`kubectl -n toolsweep get pods`, "
        "`kubectl -n toolsweep describe pod <pod>`: no node with free GPUs, a node selector no node "
        "matches, a quota), and so do the RayCluster's events (`kubectl -n toolsweep describe raycluster`). "
        "Raise --scale-up-timeout when nodes take longer to join."
    )

