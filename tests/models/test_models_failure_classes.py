"""Every HTTP status an endpoint can answer has one cause and one treatment (docs/failures.md):
configuration (401/403/404) stops the run at the first request, 400/422 are never retried, 408/429
and 5xx are retried. Checked on the classification and over real HTTP against the fake server."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from models_fake_server import FakeOpenAIServer, text_reply

from toolsweep.evaluator import ContextExceeded
from toolsweep.evaluator.failures import classify_status, is_config
from toolsweep.evaluator.protocols import EndpointConfigError
from toolsweep.models.client import Endpoint, ModelRequestError, OpenAIClient

TABLE = {400: "request", 401: "auth", 403: "auth", 404: "not_found", 408: "slow", 409: "request",
         413: "request", 422: "request", 429: "overloaded", 499: "request", 500: "server", 502: "server",
         503: "server", 504: "server", 599: "server"}


def test_each_status_has_the_documented_cause():
    assert {s: classify_status(s) for s in TABLE} == TABLE
    assert classify_status(400, "This model's maximum context length is 2048 tokens") == "context"
    assert classify_status(500, "maximum context length") == "server"  # a server error stays one


@settings(max_examples=300, deadline=None)
@given(status=st.integers(400, 599), body=st.sampled_from(["", "oops", "prompt is too long"]))
def test_only_auth_and_unknown_model_are_configuration_and_only_4xx_are_the_requests(status, body):
    cause = classify_status(status, body)
    assert is_config(cause) == (status in (401, 403, 404))
    assert (cause in ("request", "context")) == (400 <= status < 500 and status not in (401, 403, 404, 408, 429))
    assert (cause == "server") == (status >= 500)


def client(server: FakeOpenAIServer) -> OpenAIClient:
    ep = Endpoint(name="m", model="served-m", base_urls=[server.base_url], max_retries=3)
    return OpenAIClient(ep, backoff_s=0.01, backoff_max_s=0.05)


@pytest.mark.parametrize(("status", "raised"), [(401, EndpointConfigError), (403, EndpointConfigError),
                                                (404, EndpointConfigError), (400, ModelRequestError),
                                                (422, ModelRequestError)])
def test_a_configuration_or_request_error_is_sent_once_and_raised(status, raised):
    with FakeOpenAIServer() as server:
        server.script.extend([(status, {"error": "no"}), text_reply("never fetched")])
        with pytest.raises(raised):
            asyncio.run(client(server).chat([{"role": "user", "content": "hi"}]))
        assert len(server.requests) == 1


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503])
def test_a_transient_status_is_retried_and_then_answered(status):
    with FakeOpenAIServer() as server:
        server.script.extend([(status, {"error": "later"}), text_reply("ok")])
        assert asyncio.run(client(server).chat([{"role": "user", "content": "hi"}])).message.content == "ok"
        assert len(server.requests) == 2


def test_a_context_overflow_is_raised_once_as_the_agents():
    with FakeOpenAIServer() as server:
        server.script.extend([(400, {"message": "prompt is too long for max_model_len"}), text_reply("never")])
        with pytest.raises(ContextExceeded):
            asyncio.run(client(server).chat([{"role": "user", "content": "hi"}]))
        assert len(server.requests) == 1
