"""The async chat client every LLM is reached through, and the endpoint specs workers receive.

One interface (`ChatClient.chat`) for a hosted API, a vLLM server the cluster started, and the
in-process transformers backend. Failures follow `evaluator.failures`: transport failures (5xx, 429,
408, refused or dropped connections, a request timeout, an invalid body) are retried with exponential
backoff (Retry-After honoured) and become `InfraError` when the retries run out, so the scheduler
requeues the unit; 401/403/404, an unset key and an unusable URL are `EndpointConfigError`, which
stops the run; a context overflow becomes `ContextExceeded`, which the episode records as a result;
another 4xx is the request's fault and is never retried. Time spent waiting for a slot, in a backoff
or in a failed attempt is handed back to the episode's wall-clock guard. Error texts never carry the
API key.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from toolsweep.evaluator.episode import deadline_paused, exclude_from_deadline
from toolsweep.evaluator.failures import classify_status, describe, is_config, redact, retry_after_seconds
from toolsweep.evaluator.protocols import ContextExceeded, EndpointConfigError, InfraError
from toolsweep.evaluator.types import FunctionCall, Message, Sampling, ToolCall, stable_seed
from toolsweep.models.http import ConnectionPool, HTTPProtocolError, InvalidHeader, InvalidURL
from toolsweep.models.rate_limit import AdaptiveLimit


class ModelRequestError(Exception):
    """The endpoint rejected the request (400/422, not a context overflow): retrying would get the
    same answer. Once the model has spoken its own output may be why (the episode records it as the
    agent's error); on an episode's first request it cannot be, and `LLMPolicy` makes it an
    `EndpointConfigError`. 401/403/404 are `EndpointConfigError` from the start."""

    def __init__(self, status: int, body: str, url: str, model: str = "") -> None:
        super().__init__(f"HTTP {status} from {url}: {body[:500]}")
        self.status = status
        self.body = body
        self.model = model


class ChatResponse(BaseModel):
    """One model call: the assistant message and what it cost."""

    message: Message
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    finish_reason: str | None = None
    replica: str = ""
    attempts: int = 1


class ChatClient(Protocol):
    """The one-method interface every model kind implements."""

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        sampling: Sampling | None = None,
        seed: int | None = None,
        session: str | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> ChatResponse: ...


class Endpoint(BaseModel):
    """A picklable description of how to reach one model; workers build clients from it.

    `kind="openai"`: `base_urls` are the replicas of one model (session-sticky routing picks one per
    episode so the prefix cache serves its growing conversation). `kind="hf"`: `hf` is the
    `HFModelConfig` dump and the worker loads the model in-process.
    """

    model_config = ConfigDict(extra="forbid", protected_namespaces=())

    kind: Literal["openai", "hf"] = "openai"
    name: str = Field(description="The model's label in the sweep.")
    model: str = Field("", description="Model name sent in requests.")
    base_urls: list[str] = Field(default_factory=list)
    api_key_env: str | None = None
    api_key: str | None = Field(None, repr=False, description="A key given directly (the per-sweep key of the "
                                "servers the cluster starts); travels in actor arguments, never in a log.")
    max_in_flight: int = 64
    timeout_s: float = 600.0
    max_retries: int = 5
    rate_limit_wait_s: float = Field(600.0, description="How long one request keeps waiting out rate limits (429s "
                                     "cost no retry): the sweep's `outage_budget_s`; past it the request fails.")
    extra_body: dict[str, Any] = Field(default_factory=dict)
    system_prompt: str | None = None
    hf: dict[str, Any] | None = None
    generation: int = Field(0, description="Bumped when replicas are restarted (new URLs).")

    def cache_key(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True)


CHARS_PER_TOKEN_BOUND = 16
"""A reply longer than max_tokens x this many characters came from a server that ignored max_tokens;
it is cut there (and flagged truncated), so one endpoint cannot grow a trajectory without bound."""


class _Retryable(Exception):
    def __init__(self, reason: str, retry_after: float | None = None, cause: str = "server") -> None:
        super().__init__(reason)
        self.retry_after = retry_after
        self.cause = cause


def parse_message(raw: dict[str, Any]) -> Message:
    """An OpenAI response message as a `Message`, kept as the model produced it.

    Tool-call arguments stay raw strings (a dict is re-serialised); a missing id gets a stable one.
    Nothing is validated here: the environment judges the reply.
    """
    calls = []
    for i, call in enumerate(raw.get("tool_calls") or []):
        fn = call.get("function") or {}
        args = fn.get("arguments", "{}")
        if not isinstance(args, str):
            args = json.dumps(args)
        calls.append(
            ToolCall(id=call.get("id") or f"call_{i}", function=FunctionCall(name=fn.get("name") or "", arguments=args))
        )
    extra = {}
    for key in ("reasoning_content", "reasoning"):
        if raw.get(key):
            extra[key] = raw[key]
    content = raw.get("content")
    if content is None and not calls:
        content = ""
    return Message(role="assistant", content=content, tool_calls=calls or None, **extra)


def request_messages(messages: list[Message] | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as sent to an endpoint: only the standard OpenAI fields (no reasoning or extras)."""
    out = []
    for m in messages:
        msg = m if isinstance(m, Message) else Message.model_validate(m)
        d: dict[str, Any] = {"role": msg.role, "content": msg.content if msg.content is not None else ""}
        if msg.tool_calls:
            d["tool_calls"] = [tc.model_dump() for tc in msg.tool_calls]
            if not msg.content:
                d["content"] = None
        if msg.tool_call_id is not None:
            d["tool_call_id"] = msg.tool_call_id
        if msg.name is not None:
            d["name"] = msg.name
        out.append(d)
    return out


class PreEncoded(list):
    """Request messages or tool schemas (OpenAI dicts) that also carry their JSON (`json`), built by
    `LLMPolicy` as the conversation grows (a message is encoded once, the tools once while they stay
    the same), so the client does not encode the whole conversation again on every turn. Any other
    client takes it as the list it is."""

    __slots__ = ("json",)

    def __init__(self, messages: list[dict[str, Any]], encoded: str) -> None:
        super().__init__(messages)
        self.json = encoded


def encode_message(message: dict[str, Any]) -> str:
    """One request message as JSON, as the request body carries it."""
    return json.dumps(message, separators=(",", ":"))


def pick_replica(urls: list[str], session: str | None, attempt: int = 0) -> str:
    """Session-sticky choice: every request of one episode goes to the same replica (prefix cache);
    a retry after a transport error moves to the next one."""
    if not urls:
        raise InfraError("the endpoint has no replicas")
    if len(urls) == 1:
        return urls[0]
    index = (stable_seed("replica", session) if session else random.randrange(len(urls))) + attempt
    return urls[index % len(urls)]


@contextlib.asynccontextmanager
async def _connection_slot(limit: AdaptiveLimit) -> AsyncIterator[float]:
    """Hold one of the endpoint's slots (`max_in_flight`, fewer while it rate-limits) for one attempt;
    yields when the request started. The episode's guard is stopped while it waits for one: the wait is
    other episodes' requests, not this model's time, and a wait longer than the time the episode had
    left (many episodes over a slow endpoint) must not expire it before it is asked."""
    with deadline_paused():
        started = await limit.acquire()
    try:
        yield started
    finally:
        limit.release()


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


_UNREACHABLE_LISTENER: list[Callable[[str], Any]] = []
_NOTICE_LISTENER: list[Callable[[str], Any]] = []


def on_notice(listener: Callable[[str], Any] | None) -> None:
    """Have `listener(line)` called with each line the clients report for the run's own output (a change of
    an endpoint's requests in flight, and why): a rollout worker hands them to the driver, which logs them.
    The line goes to stderr as well. None: stderr only."""
    _NOTICE_LISTENER[:] = [listener] if listener is not None else []


def _notice(line: str) -> None:
    _stderr(line)
    for listener in _NOTICE_LISTENER:
        try:
            listener(line)
        except Exception:  # noqa: BLE001 - a report that failed never fails the request
            pass


def on_unreachable(listener: Callable[[str], Any] | None) -> None:
    """Have `listener(endpoint name)` called (on the request's event loop) when a request finds nothing
    answering at its endpoint (refused, reset, no route), at its first failed attempt: a rollout worker
    tells the driver, which probes the endpoint while the request's retries still run, so the episodes
    of a model that is down give back their slots at once instead of after the retries. None: no one."""
    _UNREACHABLE_LISTENER[:] = [listener] if listener is not None else []


class OpenAIClient:
    """Async client of OpenAI-compatible chat endpoints (`models.http`), one per process and endpoint.

    Safe to share between the episodes of a worker; an `AdaptiveLimit` per event loop caps the requests
    in flight at the endpoint's `max_in_flight`, and lower while the endpoint answers 429 (AIMD).
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        backoff_s: float = 0.5,
        backoff_max_s: float = 20.0,
    ) -> None:
        self.endpoint = endpoint
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self._per_loop: dict[int, tuple[asyncio.AbstractEventLoop, Any, AdaptiveLimit]] = {}
        self._lock = threading.Lock()
        self._jitter = random.Random(stable_seed("backoff", endpoint.name))

    def _api_key(self) -> str | None:
        if self.endpoint.api_key:
            return self.endpoint.api_key
        env = self.endpoint.api_key_env
        if not env:
            return None
        key = os.environ.get(env)
        if not key:
            raise EndpointConfigError(describe(self.endpoint.name, "auth", f"environment variable {env} is not set"),
                                      "auth")
        return key

    def _session(self) -> tuple[Any, AdaptiveLimit]:
        loop = asyncio.get_running_loop()
        # The hot path (every request of a worker's loop): this loop's live session, no lock taken.
        entry = self._per_loop.get(id(loop))
        if entry is not None and entry[0] is loop and not entry[1].closed:
            return entry[1], entry[2]
        with self._lock:
            for key, (old_loop, old_pool, _) in list(self._per_loop.items()):
                if old_loop.is_closed():
                    # The loop that owned it is gone (e.g. asyncio.run per call): close its sockets.
                    del self._per_loop[key]
                    try:
                        old_pool.close()
                    except Exception:  # noqa: BLE001 - best effort on a dead loop
                        pass
            entry = self._per_loop.get(id(loop))
            if entry is None or entry[0] is not loop or entry[1].closed:
                pool = ConnectionPool(max_idle=self.endpoint.max_in_flight + 4)
                entry = (loop, pool, AdaptiveLimit(self.endpoint.max_in_flight, log=_notice, name=self.endpoint.name))
                self._per_loop[id(loop)] = entry
            return entry[1], entry[2]

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._per_loop.pop(id(loop), None)
        if entry is not None:
            entry[1].close()

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        sampling: Sampling | None = None,
        seed: int | None = None,
        session: str | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> ChatResponse:
        sampling = sampling or Sampling()
        body: dict[str, Any] = {
            "model": self.endpoint.model,
            "messages": messages,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "max_tokens": sampling.max_tokens,
        }
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        if seed is not None:
            body["seed"] = seed
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
        body.update(self.endpoint.extra_body)
        body.update(extra_body or {})
        payload = self._encode(body)
        headers = {"Content-Type": "application/json"}
        key = self._api_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        http, limit = self._session()
        last, last_cause, hung = "", "unreachable", 0
        attempt = limited = 0  # failed attempts that count against max_retries; 429s waited out
        limited_since: float | None = None
        while True:
            url = pick_replica(self.endpoint.base_urls, session, attempt).rstrip("/") + "/chat/completions"
            async with _connection_slot(limit) as started:
                start = time.monotonic()
                try:
                    data = await self._post(http, url, payload, headers)
                except _Retryable as exc:
                    failure: _Retryable | None = exc
                else:
                    failure = None
                    limit.succeeded(started)
            if failure is None:
                return self._response(data, url, time.monotonic() - start, attempt + limited + 1, sampling.max_tokens)
            last, last_cause = f"{url}: {failure}", failure.cause
            if failure.cause == "overloaded":
                # rate limited: fewer requests in flight, and this one waits its turn, costing no retry
                limit.rate_limited(started)
                limited_since = limited_since if limited_since is not None else start
                if time.monotonic() - limited_since < self.endpoint.rate_limit_wait_s:
                    limited += 1
                    await asyncio.sleep(self._delay(min(limited - 1, 5), failure.retry_after))
                    exclude_from_deadline(time.monotonic() - start)
                    continue
                last = f"{last} (rate limited for {time.monotonic() - limited_since:.0f} s, `outage_budget_s`)"
                break
            if failure.cause == "unreachable" and attempt == 0:
                for listener in _UNREACHABLE_LISTENER:
                    try:
                        listener(self.endpoint.name)
                    except Exception:  # noqa: BLE001 - a report that failed never fails the request
                        pass
            if failure.cause == "slow":
                hung += 1
                if hung > 1:  # a request that hung twice will hang again: bound the cost at 2 x timeout_s
                    exclude_from_deadline(time.monotonic() - start)
                    break
            if attempt >= self.endpoint.max_retries:
                exclude_from_deadline(time.monotonic() - start)
                break
            await asyncio.sleep(self._delay(attempt, failure.retry_after))
            exclude_from_deadline(time.monotonic() - start)  # a failed attempt and its backoff
            attempt += 1
        raise InfraError(redact(
            f"model {self.endpoint.name!r} unreachable after {attempt + limited + 1} attempts; last: {last}",
            [key]), last_cause)

    def _encode(self, body: dict[str, Any]) -> bytes:
        """The request body as JSON. The conversation and the tool schemas come pre-encoded from the
        policy (`PreEncoded`, encoded as they appear): only the small rest is encoded per call."""
        messages, tools = body.get("messages"), body.get("tools")
        if not isinstance(messages, PreEncoded):
            return json.dumps(body, separators=(",", ":")).encode()
        rest = {k: v for k, v in body.items() if k not in ("messages", "tools")}
        parts = [json.dumps(rest, separators=(",", ":"))[:-1], ',"messages":[', messages.json, "]"]
        if tools is not None:
            parts += [',"tools":', tools.json if isinstance(tools, PreEncoded) else
                      json.dumps(tools, separators=(",", ":"))]
        parts.append("}")  # `rest` always holds "model", so the comma before "messages" has a field before it
        return "".join(parts).encode()

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.backoff_max_s)
        base = min(self.backoff_s * 2**attempt, self.backoff_max_s)
        return base * (0.5 + self._jitter.random() / 2)

    async def _post(self, http: ConnectionPool, url: str, payload: bytes, headers: dict[str, str]) -> dict[str, Any]:
        key = headers.get("Authorization", "").removeprefix("Bearer ")
        try:
            resp = await http.post(url, payload, headers, self.endpoint.timeout_s)
        except InvalidURL as exc:
            raise EndpointConfigError(describe(self.endpoint.name, "unreachable", f"unusable URL {url}: {exc}"),
                                      "unreachable") from exc
        except TimeoutError as exc:
            raise _Retryable(f"no response within {self.endpoint.timeout_s:.0f} s", cause="slow") from exc
        except OSError as exc:  # HTTPConnectionError among them
            raise _Retryable(f"{type(exc).__name__}: {exc}", cause="unreachable") from exc
        except InvalidHeader as exc:
            raise EndpointConfigError(describe(self.endpoint.name, "auth", str(exc)), "auth") from exc
        except HTTPProtocolError as exc:
            raise _Retryable(f"not an HTTP answer: {exc}", cause="bad_body") from exc
        except Exception as exc:  # noqa: BLE001 - whatever else the transport raises is not the model's doing:
            # retried, then reported as infrastructure, never scored as the agent's error
            raise _Retryable(f"transport failure {type(exc).__name__}: {exc}", cause="unreachable") from exc
        status, retry_after = resp.status, resp.headers.get("retry-after")
        text = redact(resp.body.decode("utf-8", "replace"), [key])
        if status >= 400:
            cause = classify_status(status, text)
            if is_config(cause):
                raise EndpointConfigError(describe(self.endpoint.name, cause, f"HTTP {status} from {url}: {text[:200]}"),
                                          cause)
            if cause == "context":
                raise ContextExceeded(f"HTTP {status} from {url}: {text[:500]}")
            if cause == "request":
                raise ModelRequestError(status, text, url, self.endpoint.name)
            raise _Retryable(f"HTTP {status}: {text[:200]}", retry_after_seconds(retry_after), cause=cause)
        try:
            data = json.loads(text)
            if not isinstance(data["choices"][0]["message"], dict):
                raise TypeError("the message is not an object")
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            # A proxy's HTML page, an empty `choices` or a truncated body: the server is not answering properly.
            raise _Retryable(f"malformed response body: {text[:200]!r}", cause="bad_body") from exc
        return data

    @staticmethod
    def _response(data: dict[str, Any], url: str, latency: float, attempts: int, max_tokens: int) -> ChatResponse:
        choice = data["choices"][0]
        usage = data.get("usage") or {}
        message = parse_message(choice["message"])
        finish = choice.get("finish_reason")
        bound = max(1, max_tokens) * CHARS_PER_TOKEN_BOUND
        if isinstance(message.content, str) and len(message.content) > bound:
            message = message.model_copy(update={"content": message.content[:bound]})
            finish = "length"  # the server ignored max_tokens; the reply is the model's, cut to its budget
        return ChatResponse(
            message=message,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            latency_s=latency,
            finish_reason=finish,
            replica=url.rsplit("/chat/completions", 1)[0],
            attempts=attempts,
        )


_clients: dict[str, ChatClient] = {}
_clients_lock = threading.Lock()


def client_for(endpoint: Endpoint | dict[str, Any]) -> ChatClient:
    """The process-wide client of an endpoint (built once; an in-process model is loaded once)."""
    ep = endpoint if isinstance(endpoint, Endpoint) else Endpoint.model_validate(endpoint)
    key = ep.cache_key()
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            if ep.kind == "hf":
                from toolsweep.models.hf import HFClient

                client = HFClient.shared(ep.hf or {})
            else:
                client = OpenAIClient(ep)
            _clients[key] = client
        return client
