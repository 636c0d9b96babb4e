"""One classification of every failure a model endpoint can produce, and whose fault it is.

- configuration: 401/403 (bad or missing key), 404 (unknown model or path), an unset key variable, a
  URL that cannot be used. Every unit would fail the same way: the run stops with one message naming
  the model, the cause and the fix, and nothing is scored (`EndpointConfigError`).
- transient infrastructure: refused or reset connections, 5xx, 408/429, an invalid or empty body, a
  request with no response within its own timeout. Retried with backoff (Retry-After honoured), then
  the unit is requeued (`InfraError`); after `max_attempts` it goes to failures.jsonl, never to the
  episodes.
- a 400/422 on an episode's first request (nothing of the model's in it yet) is configuration too;
  later in an episode the model's own earlier output may be what the endpoint rejects, so it is the
  agent's error.
- the model's own behaviour: an unparseable reply, an invalid tool call, a context overflow, the
  benchmark's turn budget: scored.

The client, the preflight and the scheduler all read it from here; docs/failures.md has the table.
"""

from __future__ import annotations

import re
from typing import Literal

Cause = Literal["auth", "not_found", "unreachable", "slow", "overloaded", "server", "bad_body", "context",
                "request", "format", "prose"]

CONFIG_CAUSES: frozenset[str] = frozenset({"auth", "not_found"})

FIXES: dict[str, str] = {
    "auth": "the endpoint refused the credentials: check that `api_key_env` names a variable holding a valid key",
    "not_found": "the endpoint does not know this model or path: check `model` (the name the server serves, "
                 "e.g. `curl BASE_URL/models`) and that `base_url` ends in /v1",
    "unreachable": "nothing answers at the endpoint: check `base_url`, that the server is running and reachable "
                   "from every Ray node",
    "slow": "the endpoint did not answer within the request timeout: the server may be overloaded or hung; "
            "raise `timeout_s` for slow CPU models or lower the concurrency",
    "overloaded": "the endpoint is rate limiting (429): lower `max_in_flight` or the concurrency",
    "server": "the endpoint failed with a server error (5xx): check its logs",
    "bad_body": "the endpoint answered with a body that is not an OpenAI chat completion: check that `base_url` "
                "points at an OpenAI-compatible /v1 API, not a proxy page",
    "context": "the prompt does not fit the model's context window: raise max_model_len or lower max_tokens",
    "request": "the endpoint rejected the request (400/422) before the model had said anything: check "
               "`extra_body`, the sampling options and the server's flags (e.g. vLLM needs --enable-auto-tool-choice "
               "for tool calls)",
    "format": "the reply tried to call a tool (it holds tool-call markup) but does not parse as a valid action "
              "of the benchmark: check the chat template and the tool-call parser (e.g. vLLM's "
              "--enable-auto-tool-choice --tool-call-parser hermes)",
    "prose": "the model answered in prose, with no tool-call markup at all: it did not try to call a tool, so the "
             "chat template and the tool-call parser were not at fault; a weak or base (non-instruct) model, or a "
             "system prompt that does not ask for tools",
}

_TOOL_MARKUP = re.compile(
    r'<tool_call>|<function[=>\s]|\[TOOL_CALLS\]|<\|python_tag\|>|<\|tool_call|"(name|action|arguments|function)"\s*:')


def reply_cause(content: str | None, has_tool_calls: bool) -> Cause:
    """Why a reply that no environment could read failed, read from the raw reply: markup the parser or
    the benchmark rejected ("format"), or prose with no attempt at a tool call ("prose")."""
    if has_tool_calls or _TOOL_MARKUP.search(content or ""):
        return "format"
    return "prose"

_CONTEXT = re.compile(
    r"maximum context length|context length|context_length_exceeded|longer than the maximum model"
    r"|exceeds the model's maximum|prompt is too long|too many tokens|max_model_len",
    re.IGNORECASE,
)


def classify_status(status: int, body: str = "") -> Cause:
    """The cause of an HTTP error status (an answer that is not a 2xx)."""
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "not_found"
    if status == 429:
        return "overloaded"
    if status == 408:
        return "slow"
    if 400 <= status < 500:
        return "context" if _CONTEXT.search(body) else "request"
    return "server"


def is_config(cause: str) -> bool:
    return cause in CONFIG_CAUSES


def describe(model: str, cause: str, detail: str = "") -> str:
    """One message naming the model, the cause and the fix."""
    detail = f" ({detail.strip()[:300]})" if detail.strip() else ""
    return f"model {model!r}: {cause.replace('_', ' ')}{detail}; fix: {FIXES.get(cause, 'see docs/failures.md')}"


def redact(text: str, secrets: list[str | None]) -> str:
    """`text` with every secret (of 4 characters or more) replaced, before it is stored or logged."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[REDACTED]")
    return text


def retry_after_seconds(value: str | None) -> float | None:
    """A Retry-After header in seconds (the HTTP-date form is rare on model APIs and ignored)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
