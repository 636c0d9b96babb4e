"""The health probe on every HTTP status class, and the verdict over a model and its helpers in every
combination of their states. Real HTTP servers on 127.0.0.1 that answer what they are told to.

The probe's documented intent (`endpoint_health`): any answer below 500 is up (a 401 or 404 is the
configuration's problem, reported by the request path); a 5xx, a refused connection or a dead socket is
not. Over a model and its helpers the worst verdict wins: a judge down for the whole budget beside a
healthy model means the unit's model is given up, not that the unit spends an attempt."""

from __future__ import annotations

import itertools
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from toolsweep.cluster.endpoint_health import probe_http, wait_for_endpoints


class StatusServer:
    """Answers GET /v1/models with the next status of `script` (the last one repeats), and POST
    /v1/chat/completions with the next of `chat` (the last one repeats; 200 when not given)."""

    def __init__(self, *script: int, chat: tuple[int, ...] = (200,)) -> None:
        self.script, self.served = list(script), 0
        self.chat, self.chats = list(chat), []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server hook
                outer.chats.append((self.path, json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
                self._answer(outer.chat[min(len(outer.chats) - 1, len(outer.chat) - 1)], b'{"choices": []}')

            def do_GET(self) -> None:  # noqa: N802 - the http.server hook
                code = outer.script[min(outer.served, len(outer.script) - 1)]
                outer.served += 1
                self._answer(code, b'{"data": []}')

            def _answer(self, code: int, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                       daemon=True)

    def __enter__(self) -> StatusServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


UP_CODES = [200, 201, 204, 301, 304, 400, 401, 403, 404, 405, 409, 422, 429, 499]
DOWN_CODES = [500, 501, 502, 503, 504, 599]


def closed_url() -> str:
    with StatusServer(200) as s:
        url = s.base_url
    return url  # the server is closed: nothing listens there now


@pytest.mark.parametrize("code", UP_CODES)
def test_an_answer_below_500_is_up(code):
    with StatusServer(code) as s:
        assert probe_http([s.base_url]) is None
        assert s.served == 1


@pytest.mark.parametrize("code", DOWN_CODES)
def test_a_5xx_answer_is_not_up_and_names_the_status(code):
    with StatusServer(code) as s:
        why = probe_http([s.base_url])
        assert why is not None and f"HTTP {code}" in why and s.base_url in why


def test_a_closed_port_is_not_up_and_one_answering_replica_is_enough():
    dead = closed_url()
    why = probe_http([dead])
    assert why is not None and why.startswith(dead)  # the reason names the replica that did not answer
    with StatusServer(503) as bad, StatusServer(200) as good:
        why = probe_http([dead, bad.base_url])
        assert why is not None and dead in why and f"{bad.base_url}: HTTP 503" in why  # every replica's cause
        assert probe_http([dead, bad.base_url, good.base_url]) is None


@pytest.mark.parametrize("chat", [500, 502, 503])
def test_models_answering_while_every_chat_request_gets_a_5xx_is_down(chat):
    # a judge whose engine died behind its API front once read as up: 16 units spent 3 attempts each
    with StatusServer(200, chat=(chat,)) as s:
        why = probe_http([s.base_url], chat_model="judge-model")
        assert why is not None and f"/chat/completions answers HTTP {chat}" in why and s.base_url in why
        path, body = s.chats[0]
        assert path == "/v1/chat/completions" and body["model"] == "judge-model" and body["max_tokens"] == 1
        assert probe_http([s.base_url]) is None  # without a model to ask, /models alone decides, as before


def test_a_chat_probe_still_rate_limited_is_down():
    with StatusServer(200, chat=(429,)) as s:
        why = probe_http([s.base_url], chat_model="m")
        assert why is not None and "rate limited (HTTP 429)" in why


@pytest.mark.parametrize("chat", [200, 400, 404, 422])
def test_a_chat_probe_answered_below_500_is_up(chat):
    with StatusServer(200, chat=(chat,)) as s:
        assert probe_http([s.base_url], chat_model="m") is None and len(s.chats) == 1


def test_a_chat_5xx_storm_of_a_judge_is_an_outage_that_recovers():
    # the judge's endpoint lists its models throughout; its chat answers 503 twice, then 200
    with StatusServer(200) as agent, StatusServer(200, chat=(503, 503, 200)) as judge:
        runtime = Runtime({"agent": agent.base_url, "judge": judge.base_url}, model="served")
        verdict = wait_for_endpoints(runtime, ["agent", "judge"], budget_s=30, log=lambda line: None)
    assert verdict.state == "recovered" and verdict.where.startswith("judge at ") and len(judge.chats) == 3
    assert "/chat/completions answers HTTP 503" in verdict.last_error


# ---------------------------------------------------------------- the verdict over a model and its helpers

# how an endpoint behaves while it is probed: up at once; down at first, then back; down for the whole budget
STATES = {"up": (200,), "recovers": (503, 200), "down": (503,)}
VERDICT = {"up": "up", "recovers": "recovered", "down": "exhausted"}
SEVERITY = {"up": 0, "recovered": 1, "exhausted": 2}


class Runtime:
    """What `wait_for_endpoints` reads of the models' runtime: each model's endpoint spec."""

    def __init__(self, urls: dict[str, str], model: str = "") -> None:
        self.urls, self.model = urls, model

    def endpoints(self) -> dict[str, dict]:
        return {name: {"kind": "openai", "base_urls": [url], "model": self.model} for name, url in self.urls.items()}


@pytest.mark.parametrize("states", list(itertools.product(STATES, repeat=3)), ids="-".join)
def test_the_worst_verdict_of_a_model_and_its_helpers_decides(states):
    names = ["agent", "judge", "critic"]
    servers = [StatusServer(*STATES[s]) for s in states]
    with servers[0], servers[1], servers[2]:
        runtime = Runtime({n: s.base_url for n, s in zip(names, servers)})
        verdict = wait_for_endpoints(runtime, names, budget_s=0.3, log=lambda line: None)
    worst = max((VERDICT[s] for s in states), key=SEVERITY.get)
    assert verdict.state == worst, states
    if worst != "up":  # the verdict names an endpoint that was down
        down = [n for n, s in zip(names, states) if VERDICT[s] == worst]
        assert any(verdict.where.startswith(f"{n} at ") for n in down), verdict.where


def test_a_model_without_http_endpoints_has_no_verdict_and_does_not_hide_a_helper():
    class Mixed(Runtime):
        def endpoints(self) -> dict[str, dict]:
            return {"scripted": {"kind": "scripted"}, **super().endpoints()}

    assert wait_for_endpoints(Mixed({}), ["scripted"], budget_s=0.3, log=lambda line: None) is None
    with StatusServer(503) as judge:
        verdict = wait_for_endpoints(Mixed({"judge": judge.base_url}), ["scripted", "judge"], budget_s=0.3,
                                     log=lambda line: None)
    assert verdict.state == "exhausted"
