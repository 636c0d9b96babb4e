"""Joining a Ray cluster or starting an embedded Ray, so that a failure is a message with a cause,
never a traceback.

A cluster address that nothing listens on is refused in seconds (Ray itself retries for minutes).

Ray 2.60 gives its raylet a fixed 30 s to register (`ray/_private/node.py`, not a setting) and then
raises "The current node timed out during startup". On a loaded machine (load 40-69 here) that
happens often, and the next start usually succeeds, so a failed start is retried: once always, and
again while `timeout_s` (the config's `ray_start_timeout_s`, `--ray-start-timeout`) has not passed
since the first try.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

RAY_OWN_WAIT_S = 30
"""How long one `ray.init` waits for its raylet before it gives up (fixed in Ray 2.60)."""


CLOUD_METADATA_HOSTS = ("169.254.169.254", "metadata.google.internal")
"""Where Ray's dashboard asks which cloud it runs on (`ray/_common/usage/usage_lib.py`)."""
_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


def quiet_environment(environ: dict[str, str] | None = None) -> None:
    """What the Ray this process starts (its GCS, dashboard and workers inherit this environment) must not
    send anywhere but the sweep's endpoints. Ray's dashboard, started even without one (its usage-stats
    module: `ray/_private/services.py`), asks the cloud metadata services which cloud it runs on before it
    reads whether usage stats are on; through a configured HTTP(S) proxy those requests left the machine
    (three a run). With a proxy variable set the metadata hosts are added to NO_PROXY and no_proxy (they
    then go direct: a link-local address, or nothing off a cloud); usage stats are off unless
    RAY_USAGE_STATS_ENABLED says otherwise."""
    env = os.environ if environ is None else environ
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if not any(env.get(k) for k in _PROXY_VARIABLES):
        return
    for key in ("NO_PROXY", "no_proxy"):
        hosts = [h.strip() for h in env.get(key, "").split(",") if h.strip()]
        env[key] = ",".join(hosts + [h for h in CLOUD_METADATA_HOSTS if h not in hosts])


class RayStartFailed(RuntimeError):
    """Ray could not be started or joined: nothing ran; the message says what to try."""


def _init_local() -> None:
    import ray

    ray.init(address="local", include_dashboard=False, logging_level="ERROR", log_to_driver=False)


def _shutdown() -> None:
    """What a failed start left behind (its half-started processes), so a retry begins clean."""
    try:
        import ray

        ray.shutdown()
    except Exception:  # noqa: BLE001 - nothing was started, or it is gone already
        pass


def start_embedded_ray(timeout_s: float, log: Callable[[str], None], *,
                       init: Callable[[], None] = _init_local,
                       clock: Callable[[], float] = time.monotonic) -> int:
    """Start an embedded Ray, retrying a failed start once and then while `timeout_s` seconds have
    not passed since the first try; returns the number of tries. Raises `RayStartFailed` naming
    every try's cause and what to do."""
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    quiet_environment()
    first = clock()
    causes: list[str] = []
    while True:
        try:
            init()
            return len(causes) + 1
        except Exception as exc:  # noqa: BLE001 - a start-up timeout under load, an unusable temp dir, ...
            causes.append(f"{type(exc).__name__}: {str(exc)[:300]}")
            _shutdown()
        elapsed = clock() - first
        if len(causes) >= 2 and elapsed >= timeout_s:
            break
        log(f"Ray did not start (try {len(causes)}: {causes[-1][:200]}); trying again "
            f"({elapsed:.0f} s of ray_start_timeout_s {timeout_s:.0f} s spent)")
    tries = "; ".join(f"try {i}: {c}" for i, c in enumerate(causes, 1))
    raise RayStartFailed(
        f"the embedded Ray did not start in {len(causes)} tries over {clock() - first:.0f} s ({tries}). "
        f"Nothing was run. On a loaded machine Ray's start-up can time out (it waits {RAY_OWN_WAIT_S} s for its "
        "raylet): wait longer with --ray-start-timeout SECONDS (config: ray_start_timeout_s), run again when the "
        "machine is less busy, or start a cluster once with `ray start --head` and pass --address auto; check "
        "that the temp folder (RAY_TMPDIR, default /tmp) is writable and has space."
    )


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """A host:port address that nothing listens on fails in seconds (Ray itself retries for minutes)."""
    import socket

    from toolsweep.cluster.config import ConfigError

    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        return  # "auto", or a form Ray resolves itself
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ConfigError(
            f"cannot reach a Ray cluster at {address!r} ({exc.strerror or exc}); start one with `ray start --head` "
            "and pass the address it prints, use --address auto on that machine, or leave out --address to use "
            "an embedded Ray"
        ) from None


def connect_ray(address: str | None, log: Callable[[str], None], ray_start_timeout_s: float) -> bool:
    """Connect to a cluster or start an embedded one (retried while `ray_start_timeout_s` lasts, as every
    path that starts Ray does: `ray_start`); returns True when this call started Ray."""
    import ray

    from toolsweep.cluster.config import ConfigError

    if ray.is_initialized():
        return False
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    if address:
        _check_reachable(address)
        try:
            ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        except ConnectionError as exc:
            raise ConfigError(
                f"cannot reach a Ray cluster at {address!r} ({exc}); start one with `ray start --head` "
                "or leave out --address to use an embedded Ray"
            ) from None
    else:
        log("starting an embedded Ray (no cluster address given)")
        start_embedded_ray(ray_start_timeout_s, log)
    return True
