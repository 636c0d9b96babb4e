"""Driver-side lifecycle of the models under test: start servers before the sweep, hand workers
picklable endpoint specs, restart a dead replica, stop everything at the end.

Endpoint specs are plain dicts (`toolsweep.models.client.Endpoint` dumps): workers build their
clients from them (`build_policy(..., endpoints)`). A vLLM model's spec lists all its replicas'
URLs; the client routes each episode to one of them by its unit id (session-sticky, so the prefix
cache serves the growing conversation) and caps requests in flight per process at `max_in_flight`,
which the scheduler also reads to bound the episodes it leases per model.
"""

from __future__ import annotations

import secrets
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from toolsweep.models.client import Endpoint
from toolsweep.models.config import (
    HFModelConfig,
    OpenAIModelConfig,
    ScriptedModelConfig,
    VLLMModelConfig,
    lora_server_config,
    server_groups,
)
from toolsweep.models.factory import static_endpoint


class _Replica:
    def __init__(self, index: int) -> None:
        self.index = index
        self.actor: Any = None
        self.placement_group: Any = None
        self.address: dict[str, Any] = {}
        self.restarts = 0


class ModelRuntime:
    """Owns every model server of one sweep. Scripted, openai and hf models need none."""

    def __init__(
        self, models: list[Any], *, log_dir: str | None = None, health_timeout_s: float = 30.0,
        scale_up_timeout_s: float = 0.0, log: Any = None, helpers: list[str] | None = None,
        episode_tokens: dict[str, int] | None = None,
    ) -> None:
        self.models = list(models)
        # names of the models that are helpers only (placed beside every wave, see `plan_waves`)
        self.helpers = list(helpers or [])
        # One key per sweep on every server this runtime starts: a server bound to a node's address
        # answers only the sweep's own clients. It travels as an actor argument and sits in the
        # server's environment (VLLM_API_KEY), never on a command line, in a runtime_env or a log.
        self._api_key = secrets.token_urlsafe(32)
        # (time.time(), "up" | "down", model, wave label): when each model's servers served
        self.events: list[tuple[float, str, str, str]] = []
        self.wave_label = ""
        # per model, the tokens one episode holds at its longest (measured cells); sizes the in-flight cap
        self.episode_tokens = dict(episode_tokens or {})
        # per model, how its servers were sized and why (`toolsweep.models.sizing`)
        self.sizing: dict[str, dict[str, Any]] = {}
        # > 0: an autoscaling cluster; the models' GPUs are asked for and waited for this long.
        self.scale_up_timeout_s = scale_up_timeout_s
        self._log = log or (lambda _msg: None)
        self._asked_autoscaler = False
        self.log_dir = log_dir
        self.health_timeout_s = health_timeout_s
        self._replicas: dict[str, list[_Replica]] = {}
        self._endpoints: dict[str, dict[str, Any]] = {}
        self._describe: dict[str, dict[str, Any]] = {}
        self._generation: dict[str, int] = {}
        self._past_restarts: dict[str, int] = {}  # of servers already stopped (an earlier wave's)
        # actors (with their placement groups) of an earlier wave's servers, stopped and kept for the
        # next wave's replicas of the same shape; what the next wave cannot use is released
        self._parked: list[_Replica] = []
        self._describe_refs: dict[str, Any] = {}
        self._lock = threading.Lock()
        names = [m.name for m in self.models]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"models[].name must be unique; repeated: {', '.join(dupes)}")
        # servers by name -> the models each serves (LoRA adapters of one base share its server)
        self._servers = server_groups(self.vllm_models)
        self._server_of = {m.name: server for server, members in self._servers.items() for m in members}
        self._server_cfg: dict[str, tuple[VLLMModelConfig, dict[str, str]]] = {}

    @property
    def vllm_models(self) -> list[VLLMModelConfig]:
        return [m for m in self.models if isinstance(m, VLLMModelConfig)]

    # -- start --------------------------------------------------------------------------------
    def check_resources(self) -> None:
        """Fail before anything starts when the cluster cannot host the model servers (e.g. a
        GPU replica asked of a GPU-less cluster): `PlacementError` names the model and the fix."""
        if not self.vllm_models:
            return
        from toolsweep.cluster.placement import check_ray_cluster

        self._await_capacity(lambda: check_ray_cluster(self.models))

    def plan_waves(self) -> Any:
        """The sweep's waves (`placement.WavePlan`), checked against the cluster before anything starts:
        every wave fits with its helpers; only a model that does not fit alone is refused."""
        from toolsweep.cluster.placement import WavePlan, Wave, PlacementPlan, ray_waves

        under_test = [m for m in self.models if m.name not in self.helpers]
        helpers = [m for m in self.models if m.name in self.helpers]
        if not self.vllm_models:
            return WavePlan([Wave(1, [m.name for m in under_test], [h.name for h in helpers], PlacementPlan())])
        self.check_ray()
        return self._await_capacity(lambda: ray_waves(under_test, helpers))

    def check_ray(self) -> None:
        import ray

        if not ray.is_initialized():
            raise RuntimeError("vLLM models need a Ray cluster: call ray.init() (or `toolsweep run`) first")

    def _await_capacity(self, check: Any) -> Any:
        """`check()` now, or on an autoscaling cluster after asking for the models' GPUs and waiting."""
        self.check_ray()
        if self.scale_up_timeout_s <= 0:
            return check()
        from ray.autoscaler.sdk import request_resources

        from toolsweep.cluster.placement import wait_for_capacity

        def ask(bundles: list[dict[str, float]]) -> None:
            # The request is cluster-wide: withdraw only one this runtime made.
            request_resources(bundles=bundles)
            self._asked_autoscaler = bool(bundles)

        return wait_for_capacity(self.models, self.scale_up_timeout_s, check=check, request=ask, log=self._log)

    def start(self) -> dict[str, Any]:
        """Start every model's servers at once (they must all fit); returns name -> endpoint spec
        (picklable) for the workers. A sweep whose models do not fit at once runs them in waves
        (`plan_waves`, `start_models`, `stop_models`)."""
        self.check_resources()
        self.start_static()
        return self.start_models([m.name for m in self.vllm_models])

    def start_static(self) -> dict[str, Any]:
        """The endpoints of the models that need no server started here (openai, hf)."""
        for model in self.models:
            if isinstance(model, (OpenAIModelConfig, HFModelConfig)):
                self._endpoints[model.name] = static_endpoint(model).model_dump(mode="json")  # type: ignore[union-attr]
            elif not isinstance(model, (ScriptedModelConfig, VLLMModelConfig)):
                raise ValueError(f"model kind {getattr(model, 'kind', type(model).__name__)!r} is not supported")
        return dict(self._endpoints)

    def running(self) -> list[str]:
        """The vLLM models whose servers are up now."""
        return [m.name for server in self._replicas for m in self._servers[server]]

    def server_config(self, server: str) -> tuple[VLLMModelConfig, dict[str, str]]:
        """The config a server starts with and its LoRA modules (name -> adapter directory)."""
        if server not in self._server_cfg:
            self._server_cfg[server] = lora_server_config(server, self._servers[server])
        return self._server_cfg[server]

    def start_models(self, names: list[str]) -> dict[str, Any]:
        """Start the servers of these vLLM models that are not up yet (a wave's, and its helpers');
        returns every endpoint known now. Replicas start `start_stagger_s` apart (see the field); a
        failed start stops what this call started and raises."""
        import ray

        todo = [s for s, members in self._servers.items()
                if s not in self._replicas and any(m.name in names for m in members)]
        if not todo:
            return dict(self._endpoints)
        if not hasattr(self, "_bind_host"):
            self._bind_host = "127.0.0.1" if len([n for n in ray.nodes() if n.get("Alive")]) <= 1 else "0.0.0.0"
        for server in todo:
            self._replicas[server] = [_Replica(i) for i in range(self.server_config(server)[0].replicas)]
            # a server started again (a later wave, a resumed run) has new URLs: clients must not reuse old ones
            self._generation[server] = self._generation.get(server, -1) + 1
        self._reuse_parked(todo)
        jobs = [(s, r) for s in todo for r in self._replicas[s]]
        delays, at = [], 0.0
        for s, _ in jobs:
            delays.append(at)
            at += self.server_config(s)[0].start_stagger_s
        try:
            with ThreadPoolExecutor(max_workers=max(1, len(jobs))) as pool:
                list(pool.map(lambda job: self._start_replica(job[0][0], job[0][1], delay_s=job[1]), zip(jobs, delays)))
        except BaseException:
            self.stop_models([m.name for s in todo for m in self._servers[s]])
            raise
        now = time.time()
        for server in todo:
            for model in self._servers[server]:
                self._endpoints[model.name] = self._vllm_endpoint(model)
                self.events.append((now, "up", model.name, self.wave_label))
        return dict(self._endpoints)

    def _reuse_parked(self, servers: list[str]) -> None:
        """Give the new servers' replicas the parked actors of the same resource shape (their GPUs and
        placement groups already held), and release the parked ones left over before any new placement
        group is asked for."""
        from toolsweep.actors.model_server import replica_resources

        for server in servers:
            shape = replica_resources(self.server_config(server)[0])
            for replica in self._replicas[server]:
                match = next((p for p in self._parked if p.address.get("shape") == shape), None)
                if match is not None:
                    self._parked.remove(match)
                    replica.actor, replica.placement_group = match.actor, match.placement_group
                    replica.address = {"reused": True}
        for parked in self._parked:
            self._release(parked)
        self._parked.clear()

    @staticmethod
    def _release(replica: _Replica) -> None:
        import ray

        if replica.actor is not None:
            try:
                ray.kill(replica.actor, no_restart=True)
            except Exception:  # noqa: BLE001
                pass
            replica.actor = None
        if replica.placement_group is not None:
            try:
                ray.util.remove_placement_group(replica.placement_group)
            except Exception:  # noqa: BLE001
                pass
            replica.placement_group = None

    def _start_replica(self, server: str, replica: _Replica, delay_s: float = 0.0) -> None:
        import ray

        from toolsweep.actors.model_server import launch_replica

        model, loras = self.server_config(server)
        if delay_s > 0:
            time.sleep(delay_s)
        if replica.actor is not None and replica.address.get("reused"):
            # an earlier wave's actor on the GPUs this replica needs: it serves the new model instead
            ray.get(replica.actor.reset.remote(model.model_dump(mode="json"), replica.index, loras), timeout=120)
            replica.address = {}
        else:
            replica.actor, replica.placement_group = launch_replica(
                model, replica.index, bind_host=getattr(self, "_bind_host", "127.0.0.1"),
                log_dir=self.log_dir, placement_group=replica.placement_group, api_key=self._api_key,
                lora_modules=loras,
            )
        if replica.placement_group is not None:
            ray.get(replica.placement_group.ready(), timeout=model.startup_timeout_s)
        # A dead predecessor's /dev/shm segments are removed by its successor (same node or not).
        stale = replica.address.get("shm") if replica.address else None
        replica.address = ray.get(replica.actor.start.remote(stale), timeout=model.startup_timeout_s + 60)
        if server not in self._describe and server not in self._describe_refs:
            # read when the manifest needs it, not waited for here (a wave switch would wait on hashing)
            self._describe_refs[server] = replica.actor.describe.remote()

    def _per_replica_cap(self, server: str) -> int:
        """Requests in flight per replica of a server from the smallest KV capacity its replicas report
        and the longest measured episode of the models it serves (`sizing.in_flight_per_replica`);
        recorded with its reason."""
        from toolsweep.models.sizing import in_flight_per_replica

        model = self.server_config(server)[0]
        members = self._servers[server]
        kvs = [(r.address.get("kv") or {}).get("kv_tokens") for r in self._replicas[server]]
        kv = min((k for k in kvs if k), default=None)
        overrides = [m.max_in_flight for m in members if "max_in_flight" in m.model_fields_set]
        tokens = max((self.episode_tokens[m.name] for m in members if m.name in self.episode_tokens), default=None)
        cap, why = in_flight_per_replica(kv_tokens=kv, tokens_per_episode=tokens,
                                         max_num_seqs=model.engine_args.max_num_seqs, default=model.max_in_flight,
                                         override=min(overrides) if overrides else None)
        entry = {"in_flight_per_replica": cap, "replicas": model.replicas, "rule": why, "kv_tokens": kv,
                 "tokens_per_episode": tokens, "max_num_seqs": model.engine_args.max_num_seqs,
                 "serves": [m.name for m in members]}
        if self.sizing.get(server, {}).get("rule") != why:
            self._log(f"server {server}: {cap} requests in flight per replica ({why})")
        self.sizing[server] = {**self.sizing.get(server, {}), **entry}
        return cap

    def _vllm_endpoint(self, model: VLLMModelConfig) -> dict[str, Any]:
        """A model's endpoint: its server's replicas, under its own name there (a LoRA module's name, or
        the server's served name); the server's cap is shared by the models it serves."""
        server = self._server_of[model.name]
        config = self.server_config(server)[0]
        members = self._servers[server]
        return Endpoint(
            kind="openai",
            name=model.name,
            model=model.name if model.adapter else config.served_model_name,
            base_urls=[r.address["base_url"] for r in self._replicas[server]],
            max_in_flight=max(1, self._per_replica_cap(server) * config.replicas // len(members)),
            timeout_s=model.timeout_s,
            max_retries=model.max_retries,
            extra_body=model.extra_body,
            system_prompt=model.system_prompt,
            generation=self._generation[server],
            api_key=self._api_key,
        ).model_dump(mode="json")

    def _described(self, server: str) -> dict[str, Any]:
        """What the server's node says for the manifest (weights, template, command), once it is read."""
        import ray

        ref = self._describe_refs.pop(server, None)
        if ref is not None:
            try:
                self._describe[server] = ray.get(ref, timeout=600)
            except Exception:  # noqa: BLE001 - the replica died since: the driver's own reading stands
                pass
        return self._describe.get(server, {})

    def endpoints(self) -> dict[str, Any]:
        return dict(self._endpoints)

    # -- health -------------------------------------------------------------------------------
    def _alive(self, replica: _Replica) -> bool:
        import ray

        if replica.actor is None:
            return False
        try:
            status = ray.get(replica.actor.status.remote(), timeout=self.health_timeout_s)
        except Exception:  # noqa: BLE001 - RayActorError, GetTimeoutError: the replica is gone
            return False
        replica.address["shm"] = status.get("shm", [])
        return bool(status.get("healthy"))

    def ensure_healthy(self, model_name: str) -> dict[str, Any]:
        """Called after an infra_error of `model_name`: restart its dead replicas; returns every
        model's endpoint spec (the workers replace theirs with it; a restarted replica has a new
        URL). The scheduler requeues the episodes that were in flight on the dead replica."""
        server = self._server_of.get(model_name)
        if server is None:
            return dict(self._endpoints)
        import ray

        with self._lock:
            dead = [r for r in self._replicas.get(server, []) if not self._alive(r)]
            for replica in dead:
                if replica.actor is not None:
                    try:
                        ray.kill(replica.actor, no_restart=True)
                    except Exception:  # noqa: BLE001 - already dead
                        pass
                replica.actor = None
                replica.restarts += 1
                self._log(f"model {model_name}: replica {replica.index} is down; restarting it in its placement "
                          "group (the model's units wait, other models keep running)")
                began = time.monotonic()
                self._start_replica(server, replica)
                self._log(f"model {model_name}: replica {replica.index} is back after {time.monotonic() - began:.0f} s "
                          f"(restart {replica.restarts})")
            if dead:
                self._generation[server] += 1
                for member in self._servers[server]:  # every model the server serves gets the new URLs
                    self._endpoints[member.name] = self._vllm_endpoint(member)
            return dict(self._endpoints)

    def replica_status(self) -> dict[str, list[dict[str, Any]]]:
        """Per model, each replica's address, liveness and restart count."""
        return {
            name: [{"index": r.index, **r.address, "alive": self._alive(r), "restarts": r.restarts} for r in reps]
            for name, reps in self._replicas.items()
        }

    def restart_counts(self) -> dict[str, int]:
        """Replica restarts per served model in this run (summary.json and MLflow report them)."""
        counts = dict(self._past_restarts)
        for name, reps in self._replicas.items():
            counts[name] = counts.get(name, 0) + sum(r.restarts for r in reps)
        return counts

    def replica_actors(self, model_name: str) -> list[Any]:
        return [r.actor for r in self._replicas.get(self._server_of.get(model_name, model_name), [])]

    # -- manifest -----------------------------------------------------------------------------
    def manifest(self) -> dict[str, Any]:
        """Reproducibility record of every model (kind, path, weight hashes, engine args, chat
        template, tool parser, versions)."""
        from toolsweep.models.manifest import chat_template_info, config_hashes, library_versions, weight_hashes

        out: dict[str, Any] = {}
        for m in self.models:
            entry: dict[str, Any] = {"kind": m.kind, "config": m.model_dump(mode="json", exclude={"api_key_env"})}
            if isinstance(m, VLLMModelConfig):
                server = self._server_of[m.name]
                described = self._described(server)
                entry.update(
                    path=m.path,
                    device=m.device,
                    replicas=m.replicas,
                    engine_args=m.engine_args.model_dump(mode="json"),
                    tool_parser=m.engine_args.tool_call_parser,
                    weights_sha256=described.get("weights_sha256") or weight_hashes(m.path),
                    config_sha256=described.get("config_sha256") or config_hashes(m.path),
                    gpus=described.get("gpus"),
                    chat_template=described.get("chat_template") or chat_template_info(m.path, m.engine_args.chat_template),
                    versions=described.get("versions") or library_versions(),
                    server_command=described.get("command"),
                    server_env=described.get("env"),
                    server=server,
                )
                if m.adapter is not None:
                    from toolsweep.cluster.identity import adapter_hashes

                    entry.update(adapter=m.adapter, adapter_sha256=adapter_hashes(m.adapter), base=m.path)
            elif isinstance(m, HFModelConfig):
                entry.update(
                    path=m.path,
                    weights_sha256=weight_hashes(m.path, only=m.gguf_file),
                    config_sha256=config_hashes(m.path),
                    chat_template=chat_template_info(m.path, m.chat_template),
                    tool_parser=m.tool_parser,
                    versions=library_versions(),
                )
                if m.adapter is not None:
                    from toolsweep.cluster.identity import adapter_hashes

                    entry.update(adapter=m.adapter, adapter_sha256=adapter_hashes(m.adapter), base=m.path)
            elif isinstance(m, OpenAIModelConfig):
                entry.update(base_url=m.base_url, model=m.model, api_key_env_set=bool(m.api_key_env))
            out[m.name] = entry
        return out

    # -- stop ---------------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop every server this runtime started (no leftover processes or /dev/shm segments), and
        withdraw the request to the autoscaler so that the GPU nodes can go."""
        import ray

        if self._asked_autoscaler and ray.is_initialized():
            from ray.autoscaler.sdk import request_resources

            request_resources(bundles=[])
            self._asked_autoscaler = False
        self.stop_models(list(self._replicas))
        for parked in self._parked:
            self._release(parked)
        self._parked.clear()

    def stop_models(self, names: list[str], park: bool = False) -> None:
        """Stop these models' servers; their endpoints are withdrawn. The actors and placement groups are
        freed, or with `park` (a wave switch) kept for the next wave's replicas of the same shape
        (`start_models` releases what it cannot use before it asks for new placement groups)."""
        import ray

        from toolsweep.actors.model_server import replica_resources

        servers = {self._server_of.get(n, n) for n in names}
        stopping = {s: self._replicas[s] for s in servers if s in self._replicas}
        if not stopping:
            return
        refs = []
        for replicas in stopping.values():
            for r in replicas:
                if r.actor is not None:
                    try:
                        refs.append((r, r.actor.stop.remote()))
                    except Exception:  # noqa: BLE001
                        pass
        deadline = time.monotonic() + 60
        stopped_cleanly = set()
        for r, ref in refs:
            try:
                ray.get(ref, timeout=max(1.0, deadline - time.monotonic()))
                stopped_cleanly.add(id(r))
            except Exception:  # noqa: BLE001 - a dead actor's server died with it (PDEATHSIG)
                pass
        for server, replicas in stopping.items():
            for r in replicas:
                if park and id(r) in stopped_cleanly and r.placement_group is not None:
                    parked = _Replica(r.index)
                    parked.actor, parked.placement_group = r.actor, r.placement_group
                    parked.address = {"shape": replica_resources(self.server_config(server)[0])}
                    self._parked.append(parked)
                    r.actor = r.placement_group = None
                    continue
                if r.actor is not None:
                    try:
                        ray.kill(r.actor, no_restart=True)
                    except Exception:  # noqa: BLE001
                        pass
                    r.actor = None
                if r.placement_group is not None:
                    try:
                        ray.util.remove_placement_group(r.placement_group)
                    except Exception:  # noqa: BLE001
                        pass
                    r.placement_group = None
        now = time.time()
        for server in stopping:
            self._past_restarts[server] = self._past_restarts.get(server, 0) + sum(r.restarts for r in stopping[server])
            del self._replicas[server]
            for member in self._servers.get(server, []):
                self._endpoints.pop(member.name, None)
                self.events.append((now, "down", member.name, self.wave_label))
