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
request path already reports as such (a run stops at the first: `EndpointMisconfigured`). Where the
endpoint names its model, a one-token chat request is probed too: a server that lists its models while
answering every chat request with a 5xx, or still with 429, is down (its units, a judge's included,
spend no attempt).

The scheduler's side of it: `wait_for_endpoints` probes a unit's model and the helpers its benchmark
consults, and the worst verdict decides; `heal_endpoints` restarts their dead replicas."""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

PROBE_TIMEOUT_S = 5.0
CHAT_PROBE: dict[str, Any] = {"messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}
"""The body of the health probe's chat request (with the endpoint's model): one token, the cheapest answer."""
BACKOFF_S = (0.5, 1.0, 2.0, 4.0, 8.0, 15.0)
"""Waits between probes; the last repeats (an endpoint back up is noticed within 15 s)."""


@dataclass(frozen=True)
class OutageVerdict:
    state: Literal["up", "recovered", "exhausted"]
    outage_s: float = 0.0
    where: str = ""  # the endpoint probed (URLs, never a key)
    last_error: str = ""


def probe_http(base_urls: list[str], api_key: str | None = None,
               timeout_s: float = PROBE_TIMEOUT_S, chat_model: str | None = None) -> str | None:
    """None if any replica answers below 500, else why none did. With `chat_model`, a replica whose
    `/models` answers must also answer a one-token chat request below 500: a server that lists its
    models while every chat request gets a 5xx (an engine that died behind its API front) is down for
    the calls that matter, and so is one that still answers chat with 429 (a unit whose request was
    rate limited past `outage_budget_s` then waits as in an outage: being rate limited is never the
    unit's fault). Only those count there: a slow (timed-out) chat probe is read as up, as before, so a
    loaded server is never taken for an outage."""
    if not base_urls:
        return None  # nothing served over HTTP (in-process or scripted): nothing to probe
    errors = []
    for url in base_urls:
        status = _http_status(urllib.request.Request(url.rstrip("/") + "/models"), api_key, timeout_s)
        if isinstance(status, str) or status >= 500:
            errors.append(f"{url}: {status if isinstance(status, str) else f'HTTP {status}'}")
            continue
        if chat_model:
            body = json.dumps({"model": chat_model, **CHAT_PROBE}).encode()
            chat = _http_status(urllib.request.Request(url.rstrip("/") + "/chat/completions", data=body,
                                                       headers={"Content-Type": "application/json"}),
                                api_key, timeout_s)
            if isinstance(chat, int) and (chat >= 500 or chat == 429):
                why = "rate limited (HTTP 429)" if chat == 429 else f"HTTP {chat}"
                errors.append(f"{url}: /models answers but /chat/completions answers {why}")
                continue
        return None
    return "; ".join(errors)


def _http_status(request: urllib.request.Request, api_key: str | None, timeout_s: float) -> int | str:
    """The request's HTTP status, or why nothing answered (refused, reset, timed out, DNS)."""
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except Exception as exc:  # noqa: BLE001 - refused, reset, timed out, DNS: all mean "not answering"
        return f"{type(exc).__name__}: {str(getattr(exc, 'reason', exc))[:120]}"


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


class EndpointMisconfigured(RuntimeError):
    """A model's endpoint refused the configuration (bad key, unknown model, unusable URL): the run
    stopped at its first such answer; episodes already finished are kept, none of it was scored."""


def heal_endpoints(runtime: Any, models: list[str]) -> dict[str, Any]:
    """After an infra_error: restart the dead replicas of the unit's model and of the helpers its
    environment consults (either may have failed); returns the current endpoints."""
    endpoints: dict[str, Any] = {}
    for name in models:
        endpoints = runtime.ensure_healthy(name)
    return endpoints


def wait_for_endpoints(runtime: Any, models: list[str], budget_s: float, log: Callable[[str], None],
                       on_down: Callable[[], Any] | None = None) -> OutageVerdict | None:
    """After an infra_error (or a request that found nothing answering): probe the HTTP endpoints of the
    unit's model and of its helpers until each answers or the outage budget runs out (`wait_for_endpoint`);
    the worst verdict decides. `on_down()` is called when one does not answer (the scheduler then stops
    the model's running episodes)."""
    verdicts = []
    for name in dict.fromkeys(models):
        spec = runtime.endpoints().get(name) or {}
        urls = list(spec.get("base_urls") or [])
        if spec.get("kind", "openai") != "openai" or not urls:
            continue
        key_env = spec.get("api_key_env")
        key = spec.get("api_key") or (os.environ.get(key_env) if key_env else None)  # a started server's sweep key
        where = ", ".join(urls)
        verdicts.append(wait_for_endpoint(
            lambda urls=urls, key=key, model=spec.get("model"): probe_http(urls, key, chat_model=model),
            budget_s, where=f"{name} at {where}",
            on_down=lambda error, name=name: _on_down(log, on_down,
                f"model {name}: its endpoint does not answer ({error[:200]}); its units wait (no attempt "
                f"spent) while it is probed, for up to {budget_s:.0f} s (outage_budget_s)"),
        ))
    order = {"exhausted": 0, "recovered": 1, "up": 2}
    return min(verdicts, key=lambda v: order[v.state]) if verdicts else None


def _on_down(log: Callable[[str], None], on_down: Callable[[], Any] | None, line: str) -> None:
    log(line)
    if on_down is not None:
        on_down()
