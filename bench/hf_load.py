"""A transformers-backend sweep of SmolLM2 on a CPU-saturated machine: does it finish, and how slowly.

Starts `--burners` busy-looping processes (default: one per core, at the ordinary niceness), runs
`toolsweep run` on ToolMaze with SmolLM2-135M-Instruct through the hf backend (in a Ray rollout
worker), stops the burners, and prints what the run directory holds: units recorded, units given up,
wall-clock expiries (retried, never scored), exit code and wall time. `--burners 0` gives the
low-load reference. Needs the hf extra and `toolsweep models prepare smollm2`.

    python bench/hf_load.py [--burners N] [--settings C1-P0-std,C2-P1-std] [--tasks 8] [--timeout 300]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml


def start_burners(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def sweep_config(out: Path, settings: list[str], tasks: int, timeout_s: float, max_tokens: int) -> dict:
    from toolsweep.models.smollm2 import model_dir

    return {
        "name": "hf_load",
        "seeds": [0],
        "models": [{
            "name": "smollm2-hf", "kind": "hf", "path": str(model_dir()), "device": "cpu", "dtype": "float32",
            "max_batch_size": 8, "max_model_len": 8192, "tool_parser": "hermes",
            "num_threads": 1, "max_in_flight": 16,
        }],
        "benchmarks": [{"name": "toolmaze", "settings": settings, "tasks": {"limit": tasks}}],
        "sampling": {"temperature": 0.0, "max_tokens": max_tokens},
        "concurrency": {"workers": 1, "episodes_per_worker": 32},
        "episode_timeout_s": timeout_s,
        "output_dir": str(out / "runs"),
        "mlflow": False,
        "preflight": False,  # SmolLM2-135M often answers the tool-call probe in prose
    }


def measure(args: argparse.Namespace) -> dict:
    out = Path(tempfile.mkdtemp(prefix="hf-load-"))
    cfg = out / "sweep.yaml"
    cfg.write_text(yaml.safe_dump(sweep_config(out, args.settings.split(","), args.tasks, args.timeout,
                                               args.max_tokens)))
    burners = start_burners(args.burners)
    start = time.monotonic()
    try:
        env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
        proc = subprocess.run([sys.executable, "-m", "toolsweep.cluster.cli", "run", str(cfg), "--no-progress"],
                              env=env, capture_output=True, text=True)
    finally:
        for b in burners:
            b.send_signal(signal.SIGKILL)
            b.wait()
    wall = time.monotonic() - start
    run = next((out / "runs" / "hf_load").iterdir())
    summary = json.loads((run / "summary.json").read_text()) if (run / "summary.json").exists() else {}
    infra = summary.get("infrastructure", {})
    failures = run / "failures.jsonl"
    from toolsweep.evaluator.rundir import RunDirectory

    recorded = RunDirectory(run).read_table(columns=["unit_id"]).num_rows
    return {
        "burners": args.burners, "units": len(args.settings.split(",")) * args.tasks, "recorded": recorded,
        "given_up": len(failures.read_text().splitlines()) if failures.exists() else 0,
        "expiries": sum(infra.get("timeouts_by_cell", {}).values()), "exit": proc.returncode,
        "wall_s": wall, "stderr_tail": proc.stderr[-600:],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--burners", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--settings", default="C1-P0-std,C2-P1-std")
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=300.0, help="episode_timeout_s")
    ap.add_argument("--max-tokens", type=int, default=128)
    args = ap.parse_args()
    r = measure(args)
    print(f"{'burners':>8} {'units':>6} {'recorded':>9} {'given up':>9} {'expiries':>9} {'exit':>5} {'wall s':>8}")
    print(f"{r['burners']:>8} {r['units']:>6} {r['recorded']:>9} {r['given_up']:>9} {r['expiries']:>9} "
          f"{r['exit']:>5} {r['wall_s']:>8.0f}")
    if r["exit"]:
        print(r["stderr_tail"], file=sys.stderr)


if __name__ == "__main__":
    main()
