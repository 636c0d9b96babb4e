"""Stands in for `python -m vllm.entrypoints.openai.api_server` in process-lifecycle tests.

Run as `models_fake_vllm.py -m vllm.entrypoints.openai.api_server --model P --served-model-name N
--host H --port P [engine flags]`: it serves /health, /v1/models and /v1/chat/completions (echo) on
that port, and holds a shared-memory segment in /dev/shm like a real engine does, so that the
server class's start, health check, stop and /dev/shm cleanup are exercised on a real process tree
(a child process holds the segment too, as vLLM's engine core does).
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import signal
import sys
import time


def hold_segment(path: str) -> None:
    import ctypes

    ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)  # die with the server, as vLLM's engine does
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    os.ftruncate(fd, 4096)
    mm = mmap.mmap(fd, 4096)
    mm[:4] = b"fake"
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    while True:
        time.sleep(1)


def main() -> None:
    argv = sys.argv[1:]
    if argv[:2] == ["-m", "vllm.entrypoints.openai.api_server"]:
        argv = argv[2:]
    p = argparse.ArgumentParser()
    p.add_argument("--model")
    p.add_argument("--served-model-name")
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    args, engine_flags = p.parse_known_args(argv)
    delay = float(os.environ.get("FAKE_VLLM_STARTUP_S", "0.3"))
    segment = f"/dev/shm/psm_toolsweep_fake_{args.port}"
    if os.fork() == 0:  # the "engine core": holds the segment until killed
        hold_segment(segment)
    time.sleep(delay)

    from aiohttp import web

    async def health(request):
        return web.Response(text="")

    async def models(request):
        return web.json_response({"object": "list", "data": [{"id": args.served_model_name, "object": "model"}]})

    async def chat(request):
        body = await request.json()
        last = [m for m in body["messages"] if m["role"] == "user"]
        content = json.dumps({"echo": last[-1]["content"] if last else "", "port": args.port, "flags": engine_flags,
                              "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")})
        return web.json_response({
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2},
        })

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/chat/completions", chat)
    web.run_app(app, host=args.host, port=args.port, print=None, handle_signals=True)


if __name__ == "__main__":
    main()
