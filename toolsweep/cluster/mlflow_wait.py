"""Waiting for an MLflow server that is still starting, with a bound.

Why: on Kubernetes the sweep's RayJob and the MLflow Deployment start independently, and MLflow's
first start migrates its database for minutes. A driver that found MLflow down would run the whole
sweep without the mirror (it goes on, by design, when MLflow is down). With `--mlflow-wait SECONDS`
the driver first waits for the server's /health, before any model server or GPU is taken, and a
server that never answers ends the run with what to check instead of a sweep nobody sees in MLflow.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from typing import Callable

from toolsweep.cluster.config import ConfigError


class MlflowNeverCame(ConfigError):
    """The tracking server did not answer within the wait the run was given."""


def mlflow_health(uri: str, timeout_s: float = 5.0) -> str | None:
    """None when the server's /health answers 200, else what went wrong (for the final message)."""
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout_s) as resp:
            return None if resp.status == 200 else f"/health answered {resp.status}"
    except urllib.error.HTTPError as err:
        return f"/health answered {err.code}"
    except (OSError, ValueError) as err:
        return f"{type(err).__name__}: {err}"


def wait_for_mlflow(
    uri: str,
    timeout_s: float,
    log: Callable[[str], None],
    *,
    poll_s: float = 5.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Return once the MLflow server at `uri` answers /health; raise `MlflowNeverCame` after
    `timeout_s` seconds without an answer. A URI that is no server (sqlite, a path) and a wait of
    0 return at once."""
    if timeout_s <= 0 or not uri.startswith(("http://", "https://")):
        return
    deadline = clock() + timeout_s
    said = False
    while True:
        trouble = mlflow_health(uri)
        if trouble is None:
            if said:
                log(f"MLflow at {uri} answers")
            return
        if clock() >= deadline:
            raise MlflowNeverCame(
                f"MLflow at {uri} did not answer within {timeout_s:g} s ({trouble}); nothing was run. Check "
                "that the tracking server is running and reachable from here (on Kubernetes: `kubectl -n "
                "toolsweep rollout status deployment/mlflow`, its logs, and the network policies), or run "
                "without waiting (leave out --mlflow-wait: the sweep then goes on without MLflow and "
                "`toolsweep sync-mlflow` mirrors it later)"
            )
        if not said:
            log(f"waiting up to {timeout_s:g} s for MLflow at {uri} ({trouble})")
            said = True
        sleep(max(0.0, min(poll_s, deadline - clock())))
