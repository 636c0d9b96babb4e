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
from toolsweep.models.config import HFModelConfig, OpenAIModelConfig, ScriptedModelConfig, VLLMModelConfig
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
        self._lock = threading.Lock()
        names = [m.name for m in self.models]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"models[].name must be unique; repeated: {', '.join(dupes)}")

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
        import ray

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
        return list(self._replicas)

    def start_models(self, names: list[str]) -> dict[str, Any]:
        """Start the servers of these vLLM models that are not up yet (a wave's, and its helpers');
        returns every endpoint known now. Replicas start `start_stagger_s` apart (see the field); a
        failed start stops what this call started and raises."""
        import ray

        todo = [m for m in self.vllm_models if m.name in names and m.name not in self._replicas]
        if not todo:
            return dict(self._endpoints)
        if not hasattr(self, "_bind_host"):
            self._bind_host = "127.0.0.1" if len([n for n in ray.nodes() if n.get("Alive")]) <= 1 else "0.0.0.0"
        for model in todo:
            self._replicas[model.name] = [_Replica(i) for i in range(model.replicas)]
            # a model started again (a later wave, a resumed run) has new URLs: clients must not reuse old ones
            self._generation[model.name] = self._generation.get(model.name, -1) + 1
        jobs = [(m, r) for m in todo for r in self._replicas[m.name]]
        delays, at = [], 0.0
        for m, _ in jobs:
            delays.append(at)
            at += m.start_stagger_s
        try:
            with ThreadPoolExecutor(max_workers=max(1, len(jobs))) as pool:
                list(pool.map(lambda job: self._start_replica(*job[0], delay_s=job[1]), zip(jobs, delays)))
        except BaseException:
            self.stop_models([m.name for m in todo])
            raise
        now = time.time()
        for model in todo:
            self._endpoints[model.name] = self._vllm_endpoint(model)
            self.events.append((now, "up", model.name, self.wave_label))
        return dict(self._endpoints)

    def _start_replica(self, model: VLLMModelConfig, replica: _Replica, delay_s: float = 0.0) -> None:
        import ray

        from toolsweep.actors.model_server import launch_replica

        if delay_s > 0:
            time.sleep(delay_s)
        replica.actor, replica.placement_group = launch_replica(
            model, replica.index, bind_host=getattr(self, "_bind_host", "127.0.0.1"),
            log_dir=self.log_dir, placement_group=replica.placement_group, api_key=self._api_key,
        )
        if replica.placement_group is not None:
            ray.get(replica.placement_group.ready(), timeout=model.startup_timeout_s)
        # A dead predecessor's /dev/shm segments are removed by its successor (same node or not).
        stale = replica.address.get("shm") if replica.address else None
        replica.address = ray.get(replica.actor.start.remote(stale), timeout=model.startup_timeout_s + 60)
        if model.name not in self._describe:
            self._describe[model.name] = ray.get(replica.actor.describe.remote(), timeout=600)

    def _per_replica_cap(self, model: VLLMModelConfig) -> int:
        """Requests in flight per replica from the smallest KV capacity its replicas report and the
        model's longest measured episode (`sizing.in_flight_per_replica`); recorded with its reason."""
        from toolsweep.models.sizing import in_flight_per_replica

        kvs = [(r.address.get("kv") or {}).get("kv_tokens") for r in self._replicas[model.name]]
        kv = min((k for k in kvs if k), default=None)
        override = model.max_in_flight if "max_in_flight" in model.model_fields_set else None
        cap, why = in_flight_per_replica(kv_tokens=kv, tokens_per_episode=self.episode_tokens.get(model.name),
                                         max_num_seqs=model.engine_args.max_num_seqs, default=model.max_in_flight,
                                         override=override)
        entry = {"in_flight_per_replica": cap, "replicas": model.replicas, "rule": why, "kv_tokens": kv,
                 "tokens_per_episode": self.episode_tokens.get(model.name),
                 "max_num_seqs": model.engine_args.max_num_seqs}
        if self.sizing.get(model.name, {}).get("rule") != why:
            self._log(f"model {model.name}: {cap} requests in flight per replica ({why})")
        self.sizing[model.name] = {**self.sizing.get(model.name, {}), **entry}
        return cap

    def _vllm_endpoint(self, model: VLLMModelConfig) -> dict[str, Any]:
        return Endpoint(
            kind="openai",
            name=model.name,
            model=model.served_model_name,
            base_urls=[r.address["base_url"] for r in self._replicas[model.name]],
            max_in_flight=self._per_replica_cap(model) * model.replicas,
            timeout_s=model.timeout_s,
            max_retries=model.max_retries,
            extra_body=model.extra_body,
            system_prompt=model.system_prompt,
            generation=self._generation[model.name],
            api_key=self._api_key,
        ).model_dump(mode="json")

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
        model = next((m for m in self.vllm_models if m.name == model_name), None)
        if model is None:
            return dict(self._endpoints)
        import ray

        with self._lock:
            dead = [r for r in self._replicas.get(model_name, []) if not self._alive(r)]
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
                self._start_replica(model, replica)
                self._log(f"model {model_name}: replica {replica.index} is back after {time.monotonic() - began:.0f} s "
                          f"(restart {replica.restarts})")
            if dead:
                self._generation[model_name] += 1
                self._endpoints[model_name] = self._vllm_endpoint(model)
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
        return [r.actor for r in self._replicas.get(model_name, [])]

    # -- manifest -----------------------------------------------------------------------------
    def manifest(self) -> dict[str, Any]:
        """Reproducibility record of every model (kind, path, weight hashes, engine args, chat
        template, tool parser, versions)."""
        from toolsweep.models.manifest import chat_template_info, config_hashes, library_versions, weight_hashes

        out: dict[str, Any] = {}
        for m in self.models:
            entry: dict[str, Any] = {"kind": m.kind, "config": m.model_dump(mode="json", exclude={"api_key_env"})}
            if isinstance(m, VLLMModelConfig):
                described = self._describe.get(m.name, {})
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
                )
            elif isinstance(m, HFModelConfig):
                entry.update(
                    path=m.path,
                    weights_sha256=weight_hashes(m.path, only=m.gguf_file),
                    config_sha256=config_hashes(m.path),
                    chat_template=chat_template_info(m.path, m.chat_template),
                    tool_parser=m.tool_parser,
                    versions=library_versions(),
                )
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

    def stop_models(self, names: list[str]) -> None:
        """Stop these models' servers and free their placement groups (their GPUs go to the next
        wave); their endpoints are withdrawn."""
        import ray

        stopping = {n: self._replicas[n] for n in names if n in self._replicas}
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
        for r, ref in refs:
            try:
                ray.get(ref, timeout=max(1.0, deadline - time.monotonic()))
            except Exception:  # noqa: BLE001 - a dead actor's server died with it (PDEATHSIG)
                pass
        for replicas in stopping.values():
            for r in replicas:
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
        for name in stopping:
            self._past_restarts[name] = self._past_restarts.get(name, 0) + sum(r.restarts for r in stopping[name])
            del self._replicas[name]
            self._endpoints.pop(name, None)
            self.events.append((now, "down", name, self.wave_label))
