"""The scheduler through real HTTP: the sweep's OpenAI-compatible client against a fixed-latency
server in its own process on 127.0.0.1, next to the in-process fixed-latency policy of
bench/scheduler.py on the same workload.

1. The server alone: K requests always in flight for a few seconds, so the server's own capacity at
   latency L (and its CPU per call) is known before the harness is blamed for anything.
2. The sweep: N episodes of T turns at concurrency K, scripted in-process (no HTTP) and through the
   HTTP client, with ideal/actual (ideal = ceil(N/K) * T * L) and the harness's CPU per model call
   (the driver process over the scheduler's run, the rollout workers read from /proc; the server
   excluded), and beside it the server's own CPU per call: on two cores the server, the workers and
   the driver share the machine, so what the server takes is what the sweep cannot have.

    python bench/scheduler_http.py [--episodes 256 --turns 10 --latency 0.05 --ks 16 64 256]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import uvloop

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])

from scheduler import EXTRA, sweep  # noqa: E402

SERVER = r'''
import asyncio, json, sys
from aiohttp import web
latency = float(sys.argv[2])
REPLY = json.dumps({"id": "x", "object": "chat.completion", "model": "m", "choices": [{"index": 0,
    "finish_reason": "stop", "message": {"role": "assistant", "content": "next"}}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}})
async def chat(request):
    await request.read()
    await asyncio.sleep(latency)
    return web.Response(text=REPLY, content_type="application/json")
async def health(request):
    return web.Response(text="ok")
app = web.Application()
app.router.add_post("/v1/chat/completions", chat)
app.router.add_get("/health", health)
# uvloop, as vLLM's own server (uvicorn) runs: the stand-in should not be slower than what it stands for
import uvloop
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None, loop=uvloop.new_event_loop())
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(port), str(latency)])
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc, url
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the fixed-latency server did not start")


async def server_capacity(url: str, k: int, seconds: float) -> tuple[float, float]:
    """Calls/s the server answers with k requests always in flight, and its CPU per call (ms). The load
    comes from the sweep's own lean HTTP client (toolsweep.models.http), so the load generator takes
    as little of the machine's two cores as the harness would."""
    import json

    from toolsweep.models.http import ConnectionPool

    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "count with me"}]}).encode()
    pool = ConnectionPool(max_idle=k)
    done = 0
    stop = time.perf_counter() + seconds

    async def one() -> None:
        nonlocal done
        while time.perf_counter() < stop:
            await pool.post(url + "/v1/chat/completions", body, {"Content-Type": "application/json"}, 60)
            done += 1

    start, cpu = time.perf_counter(), server_cpu()
    await asyncio.gather(*(one() for _ in range(k)))
    pool.close()
    return done / (time.perf_counter() - start), 1000 * (server_cpu() - cpu) / max(done, 1)


def _ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime
    except (OSError, IndexError, ValueError):
        return -1


def worker_cpu() -> float:
    """CPU seconds the rollout worker processes have used so far (read from /proc)."""
    ticks = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if b"ray::RolloutWorker" in cmd:
            ticks += max(0, _ticks(int(entry)))
    return ticks / os.sysconf("SC_CLK_TCK")


def driver_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


SCHEDULER_CPU: list[tuple[float, float, float]] = []
SERVER_PID: list[int] = []


def server_cpu() -> float:
    """CPU seconds the fixed-latency server has used so far (0 when none runs)."""
    return max(0, _ticks(SERVER_PID[0])) / os.sysconf("SC_CLK_TCK") if SERVER_PID else 0.0


def time_the_scheduler() -> None:
    """Record the driver's, the workers' and the server's CPU over each `Scheduler.run` (not the worker
    start-up, nor the plan and finish phases around it)."""
    from toolsweep.cluster import scheduler as sched

    run = sched.Scheduler.run

    def timed(self, units):  # type: ignore[no-untyped-def]
        c0, w0, s0 = driver_cpu(), worker_cpu(), server_cpu()
        try:
            return run(self, units)
        finally:
            SCHEDULER_CPU.append((driver_cpu() - c0, worker_cpu() - w0, server_cpu() - s0))

    sched.Scheduler.run = timed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=256)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--ks", type=int, nargs="*", default=[16, 64, 256])
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()

    import ray

    from toolsweep.evaluator.registry import register_benchmark

    register_benchmark("latency", EXTRA["latency"])
    time_the_scheduler()
    server, url = start_server(args.latency)
    SERVER_PID.append(server.pid)
    try:
        print(f"server alone (L={args.latency * 1000:.0f} ms), calls/s with K requests in flight:")
        for k in args.ks:
            rate, ms = uvloop.run(server_capacity(url, k, 4.0))
            print(f"  K={k:<5} {rate:8.0f} calls/s  (ideal {k / args.latency:8.0f}, {rate * args.latency / k:.3f} of it); "
                  f"server CPU {ms:.3f} ms/call")
        from toolsweep.cluster.ray_start import start_embedded_ray

        # a busy machine's Ray start can time out (Ray waits 30 s for its raylet): retried for 120 s
        start_embedded_ray(120, print, init=lambda: ray.init(
            address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False))
        n, t, lat = args.episodes, args.turns, args.latency
        print(f"\nsweep: N={n} episodes x T={t} turns, L={lat * 1000:.0f} ms, {args.workers} rollout workers")
        print(f"{'path':<8}{'K':>6}{'ideal s':>9}{'sweep s':>9}{'ideal/act':>10}{'calls/s':>9}"
              f"{'driver ms/call':>15}{'workers ms/call':>16}{'server ms/call':>15}")
        bench = {"name": "latency", "settings": ["chain"], "options": {"n_tasks": n, "turns": t, "latency_s": lat}}
        with tempfile.TemporaryDirectory() as tmp:
            for k in args.ks:
                per_worker = math.ceil(k / args.workers)
                for path, model in (
                    ("inproc", {"name": "fixed", "kind": "scripted", "policy": "fixed_latency", "max_in_flight": k}),
                    ("http", {"name": "served", "kind": "openai", "base_url": url + "/v1", "model": "m",
                              "max_in_flight": k, "timeout_s": 60, "max_retries": 0}),
                ):
                    _, out = sweep(tmp, f"{path}{k}", [model], bench, args.workers, per_worker, preflight=False)
                    driver_s, workers_s, server_s = SCHEDULER_CPU[-1]
                    calls = n * t
                    ideal = math.ceil(n / k) * t * lat
                    assert out.done == n, out
                    print(f"{path:<8}{k:>6}{ideal:>9.2f}{out.wall_s:>9.2f}{ideal / out.wall_s:>10.3f}"
                          f"{calls / out.wall_s:>9.0f}{1000 * driver_s / calls:>15.3f}"
                          f"{1000 * workers_s / calls:>16.3f}"
                          f"{(f'{1000 * server_s / calls:.3f}' if path == 'http' else '-'):>15}")
        ray.shutdown()
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
