"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests: scripted replies, recorded requests.

It speaks the wire format (aiohttp web server in a thread), so the client under test does real
HTTP: status codes, bodies, refused connections, concurrency.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import deque
from typing import Any

from aiohttp import web


def text_reply(content: str, prompt_tokens: int = 11, completion_tokens: int = 5) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens},
    }


def tool_reply(name: str, arguments: str, call_id: str = "call_abc") -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}],
                },
            }
        ],
        "usage": {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52},
    }


# How long a caller waits for the server's event loop to start, stop or restart listening: seconds when
# idle, but the loop shares two cores with whole test runs in CI (10 s once ran out in a come_back).
LOOP_WAIT_S = 60

class FakeOpenAIServer:
    """Answers POST /v1/chat/completions from a queue of scripted responses.

    Each scripted item is a reply body (dict, status 200), a tuple (status, body), or (status, body,
    headers) (a 429 gets Retry-After 0.05 unless headers are given). With the queue
    empty, the default handler answers (by default: echo the last user message as text).
    """

    def __init__(self, delay_s: float = 0.0) -> None:
        self.script: deque[Any] = deque()
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.delay_s = delay_s
        self.in_flight = 0
        self.max_in_flight = 0
        self.default = self._echo
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self.port = 0

    @staticmethod
    def _echo(body: dict[str, Any]) -> dict[str, Any]:
        last = [m for m in body["messages"] if m["role"] == "user"]
        return text_reply(f"echo: {last[-1]['content'] if last else ''}")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            item = self.script.popleft() if self.script else self.default(body)
        finally:
            self.in_flight -= 1
        status, payload, *extra = item if isinstance(item, tuple) else (200, item)
        text = payload if isinstance(payload, str) else json.dumps(payload)
        headers = extra[0] if extra else ({"Retry-After": "0.05"} if status == 429 else None)
        return web.Response(status=status, text=text, content_type="application/json", headers=headers)

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _start(self, port: int = 0) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_get("/health", self._health)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def __enter__(self) -> "FakeOpenAIServer":
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(LOOP_WAIT_S)
        return self

    def go_down(self) -> None:
        """Stop listening (an outage: connections are refused) until `come_back`."""
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(LOOP_WAIT_S)
        self._runner = None

    def come_back(self) -> None:
        """Listen again on the same port."""
        asyncio.run_coroutine_threadsafe(self._start(self.port), self._loop).result(LOOP_WAIT_S)

    def __exit__(self, *exc: Any) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(LOOP_WAIT_S)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
