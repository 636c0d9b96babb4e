"""One model's endpoint down, another model beside it: units finished per model per 5 s (issue 44).

Two models share one rollout worker (1 x 4 episodes): `served`, behind a real HTTP server on 127.0.0.1
that stops listening for `--down` seconds once it has answered a few requests, and the fake
benchmark's scripted `oracle`. The table counts each model's episodes by their `finished_at`, in 5-s
bins from the moment the endpoint went down; the oracle should keep finishing while `served` is down.

    python bench/outage_timeline.py [--tasks 200 --down 45 --step-delay 0.3 --max-retries 1]

Measured with the defaults (2 cores shared, load ~10): before units of the model under check waited
outside the lease look-ahead, the oracle finished 7, 8, 8, 4, then 0 per 5 s for the last 25 s of the
outage (27 units); after, 6-8 per 5 s throughout (69 units).

With `--tasks 120 --down 30 --step-delay 0.1 --max-retries 7` (the served model's requests retry
longer than the outage; load 22-28): before a down model's running episodes gave back their slots, the
oracle finished 9 units in the first 5 s, then none for 25 s (9 of 118 while `served` was down); after,
24, 25, 24, 25, 20 per 5 s (118 of 118, all done 5 s before the endpoint came back).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAKES = ROOT / "tests" / "fakes"
sys.path[:0] = [str(FAKES), str(ROOT / "tests" / "models")]
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ["PYTHONPATH"] = os.pathsep.join([str(FAKES), str(ROOT), os.environ.get("PYTHONPATH", "")])

BIN_S = 5.0


def adder(body: dict) -> dict:
    """The served model: calls `add` with the question's numbers, then answers with the tool's result."""
    from models_fake_server import text_reply, tool_reply

    messages = body["messages"]
    if messages[-1]["role"] == "tool":
        return text_reply(messages[-1]["content"])
    words = messages[-1]["content"].rstrip("?").split()
    return tool_reply("add", json.dumps({"a": int(words[2]), "b": int(words[4])}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=200, help="units per model (one seed)")
    ap.add_argument("--down", type=float, default=45.0, help="seconds the endpoint refuses connections")
    ap.add_argument("--step-delay", type=float, default=0.3, help="seconds per environment step")
    ap.add_argument("--max-retries", type=int, default=1,
                    help="the served model's client retries (7: each request retries for 31-63 s, longer "
                         "than the outage, so its running episodes would hold their slots throughout)")
    args = ap.parse_args()

    from models_fake_server import FakeOpenAIServer

    from toolsweep.cluster.config import SweepConfig
    from toolsweep.cluster.driver import run_sweep
    from toolsweep.evaluator.registry import register_benchmark
    from toolsweep.evaluator.rundir import RunDirectory

    register_benchmark("fake", "fake_bench:FakeBench")
    window: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAIServer(delay_s=0.05) as server:
        server.default = adder

        def outage() -> None:
            while len(server.requests) < 6:
                time.sleep(0.01)
            server.go_down()
            window["down"] = time.time()
            time.sleep(args.down)
            window["up"] = time.time()
            server.come_back()

        threading.Thread(target=outage, daemon=True).start()
        cfg = SweepConfig.model_validate({
            "name": "outage-timeline", "seeds": 1,
            "models": [{"name": "served", "kind": "openai", "base_url": server.base_url, "model": "m",
                        "max_retries": args.max_retries},
                       {"name": "oracle", "kind": "scripted", "policy": "oracle"}],
            "benchmarks": [{"name": "fake", "options": {"n_tasks": args.tasks, "delay_s": args.step_delay},
                            "settings": ["small"]}],
            "concurrency": {"workers": 1, "episodes_per_worker": 4},
            "bootstrap": {"n_resamples": 100, "live_n_resamples": 20},
            "output_dir": str(Path(tmp) / "runs"), "mlflow": False, "preflight": False,
            "outage_budget_s": 600,
        })
        import ray

        from toolsweep.cluster.ray_start import start_embedded_ray

        # a busy machine's Ray start can time out (Ray waits 30 s for its raylet): retried for 120 s
        start_embedded_ray(120, print, init=lambda: ray.init(
            address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False))
        try:
            out = run_sweep(cfg, progress=False, extra_benchmarks={"fake": "fake_bench:FakeBench"},
                            log=lambda line: None)
        finally:
            ray.shutdown()
        rows = RunDirectory(cfg.run_path()).read_table(["model", "finished_at"]).to_pylist()
    down, up = window["down"], window["up"]
    bins: dict[str, Counter] = {"served": Counter(), "oracle": Counter()}
    before = Counter()
    for r in rows:
        if r["finished_at"] < down:
            before[r["model"]] += 1
        else:
            bins[r["model"]][int((r["finished_at"] - down) // BIN_S)] += 1
    last = max([k for c in bins.values() for k in c] + [0])
    print(f"endpoint of `served` down {up - down:.0f} s; {out.done} done, {out.gave_up} given up")
    print(f"before the outage: served {before['served']}, oracle {before['oracle']}")
    print(f"{'seconds after it went down':<28}{'served':>8}{'oracle':>8}  endpoint")
    shown = min(last, int((up - down) // BIN_S) + 3)
    for k in range(shown + 1):
        lo = k * BIN_S
        state = "down" if down + lo + BIN_S <= up else ("up" if down + lo >= up else "comes back")
        print(f"{f'{lo:.0f}-{lo + BIN_S:.0f}':<28}{bins['served'][k]:>8}{bins['oracle'][k]:>8}  {state}")
    if shown < last:
        rest = [sum(v for k, v in bins[m].items() if k > shown) for m in ("served", "oracle")]
        print(f"{f'{(shown + 1) * BIN_S:.0f}-end':<28}{rest[0]:>8}{rest[1]:>8}  up")
    during = sum(v for k, v in bins["oracle"].items() if down + (k + 1) * BIN_S <= up)
    print(f"oracle units finished while `served` was down: {during} of {args.tasks - before['oracle']} left")


if __name__ == "__main__":
    main()
