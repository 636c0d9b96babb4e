"""Stands in for `python -m vllm.entrypoints.openai.api_server` in process-lifecycle tests.

Run as `models_fake_vllm.py -m vllm.entrypoints.openai.api_server --model P --served-model-name N
--host H --port P [engine flags]`: it serves /health, /v1/models and /v1/chat/completions (echo) on
that port, and holds a shared-memory segment in /dev/shm like a real engine does, so that the
server class's start, health check, stop and /dev/shm cleanup are exercised on a real process tree
(a child process holds the segment too, as vLLM's engine core does).

Like vLLM it requires `Authorization: Bearer $VLLM_API_KEY` on /v1 when that variable is set, and
reports its KV-cache capacity on /metrics (`vllm:cache_config_info`, num_gpu_blocks x block_size;
FAKE_VLLM_KV_BLOCKS). It plays the fake benchmark's agent (calls `add`, answers its result), so a
sweep runs through it. FAKE_VLLM_EVENTS names a file where it appends "up", "req" and "down" lines
(time, served name, port): when its process began and ended, and each chat request.
FAKE_VLLM_KEYFILE: where it writes the key it was given (for tests that look for it in logs).
"""

from __future__ import annotations

import argparse
import asyncio
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
    p.add_argument("--lora-modules", nargs="+", default=[])
    args, engine_flags = p.parse_known_args(argv)
    loras = dict(m.split("=", 1) for m in args.lora_modules)  # name -> adapter directory, as vLLM takes them
    served = [args.served_model_name, *loras]
    if loras:
        engine_flags += ["--lora-modules", *args.lora_modules]
    delay = float(os.environ.get("FAKE_VLLM_STARTUP_S", "0.3"))
    latency = float(os.environ.get("FAKE_VLLM_LATENCY_S", "0"))
    key = os.environ.get("VLLM_API_KEY")
    events = os.environ.get("FAKE_VLLM_EVENTS")

    def event(kind: str, name: str | None = None) -> None:
        if events:
            with open(events, "a") as f:
                f.write(f"{time.time():.6f} {kind} {name or args.served_model_name} {args.port}\n")

    event("up")
    if key and os.environ.get("FAKE_VLLM_KEYFILE"):
        with open(os.environ["FAKE_VLLM_KEYFILE"], "a") as f:
            f.write(key + "\n")
    segment = f"/dev/shm/psm_toolsweep_fake_{args.port}"
    if os.fork() == 0:  # the "engine core": holds the segment until killed
        hold_segment(segment)
    time.sleep(delay)

    from aiohttp import web

    async def health(request):
        return web.Response(text="")

    def reply(message: dict, finish: str = "stop"):
        return web.json_response({
            "choices": [{"index": 0, "finish_reason": finish, "message": message}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 8},
        })

    async def models(request):
        if not authorized(request):
            return denied()
        return web.json_response({"object": "list", "data": [{"id": name, "object": "model"} for name in served]})

    def authorized(request) -> bool:
        return not key or request.headers.get("Authorization") == f"Bearer {key}"

    def denied():
        return web.json_response({"error": {"message": "Unauthorized"}}, status=401)

    async def metrics(request):
        blocks = int(os.environ.get("FAKE_VLLM_KV_BLOCKS", "2048"))
        return web.Response(text=(
            "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
            "# TYPE vllm:cache_config_info gauge\n"
            f'vllm:cache_config_info{{block_size="16",cache_dtype="auto",enable_prefix_caching="True",'
            f'gpu_memory_utilization="0.9",num_cpu_blocks="None",num_gpu_blocks="{blocks}"}} 1.0\n'))

    async def chat(request):
        if not authorized(request):
            return denied()
        body = await request.json()
        if body.get("model") not in served:  # as vLLM: a model (or LoRA module) it does not serve
            return web.json_response({"error": {"message": f"model {body.get('model')} does not exist"}}, status=404)
        event("req", body["model"])
        if latency:
            await asyncio.sleep(latency)
        messages = body["messages"]
        tools = [t["function"]["name"] for t in body.get("tools") or []]
        if "add" in tools and messages[-1]["role"] == "tool":
            return reply({"role": "assistant", "content": messages[-1]["content"]})
        if "add" in tools and str(messages[-1].get("content", "")).startswith("What is"):
            words = messages[-1]["content"].rstrip("?").split()
            call = {"id": "c1", "type": "function",
                    "function": {"name": "add", "arguments": json.dumps({"a": int(words[2]), "b": int(words[4])})}}
            return reply({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls")
        if "get_weather" in tools:  # the preflight's probes, answered as a capable model would
            call = {"id": "c1", "type": "function",
                    "function": {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}
            return reply({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls")
        if "weather" in str(messages[-1].get("content", "")):
            return reply({"role": "assistant", "content": '{"action": "get_weather", "arguments": {"city": "Paris"}}'})
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
    app.router.add_get("/metrics", metrics)
    try:
        web.run_app(app, host=args.host, port=args.port, print=None, handle_signals=True)
    finally:
        event("down")


if __name__ == "__main__":
    main()
