"""Endpoint health: is a model's failure an outage of its endpoint, or a failure of one unit?

After an `infra_error` the scheduler asks here. The endpoint is probed (GET `<base_url>/models`, the
cheapest request an OpenAI-compatible server answers) with backoff until it answers or the sweep's
outage budget runs out. The verdict decides who pays:

- `up`: it answered at once, so the failure was the unit's own: the unit spends an attempt;
- `recovered`: it was down and came back: the units that failed meanwhile are requeued with no attempt
  spent (a one-minute restart of a serving endpoint costs a long sweep nothing);
- `exhausted`: it stayed down for the whole budget: the model's units are given up with a message
  naming the endpoint and the outage (other models keep running).

Any HTTP answer below 500 counts as up: a 401 or 404 is the configuration's problem, which the
request path already reports as such."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

PROBE_TIMEOUT_S = 5.0
BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0, 15.0)
"""Waits between probes; the last repeats (an endpoint back up is noticed within 15 s)."""


@dataclass(frozen=True)
class OutageVerdict:
    state: Literal["up", "recovered", "exhausted"]
    outage_s: float = 0.0
    where: str = ""  # the endpoint probed (URLs, never a key)
    last_error: str = ""


def probe_http(base_urls: list[str], api_key: str | None = None,
               timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """None if any replica answers below 500, else why none did."""
    if not base_urls:
        return None  # nothing served over HTTP (in-process or scripted): nothing to probe
    errors = []
    for url in base_urls:
        request = urllib.request.Request(url.rstrip("/") + "/models")
        if api_key:
            request.add_header("Authorization", f"Bearer {api_key}")
        try:
            with urllib.request.urlopen(request, timeout=timeout_s):
                return None
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                return None
            errors.append(f"{url}: HTTP {exc.code}")
        except Exception as exc:  # noqa: BLE001 - refused, reset, timed out, DNS: all mean "not answering"
            errors.append(f"{url}: {type(exc).__name__}: {str(getattr(exc, 'reason', exc))[:120]}")
    return "; ".join(errors)


def wait_for_endpoint(
    probe: Callable[[], str | None],
    budget_s: float,
    *,
    where: str = "",
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Any] = time.sleep,
    on_down: Callable[[str], Any] | None = None,
) -> OutageVerdict:
    """Probe until the endpoint answers or `budget_s` has passed since the first failed probe."""
    error = probe()
    if error is None:
        return OutageVerdict("up", where=where)
    if on_down is not None:
        on_down(error)
    began = clock()
    attempt = 0
    while clock() - began < budget_s:
        sleep(min(BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)], max(budget_s - (clock() - began), 0.0)))
        attempt += 1
        error_now = probe()
        if error_now is None:
            return OutageVerdict("recovered", clock() - began, where, error)
        error = error_now
    return OutageVerdict("exhausted", clock() - began, where, error)
