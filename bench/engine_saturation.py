"""Engine saturation: does a sweep keep a vLLM engine as busy as the engine's own offline batch?

The same prompts (the first turn of real benchmark episodes: the environment's messages and tool
schemas) are sent
  (a) as one offline batch to a vLLM engine (`vllm.LLM.generate`, in a child process),
  (b) through `run_sweep`, the sweep's own path: an embedded Ray, the model server actor running a
      vLLM server of the same engine arguments, the scheduler, a rollout worker, the async
      OpenAI-compatible client and the environment parsing each reply (`bench/first_turn.py` cuts
      each episode to its first turn), as many episodes in flight as the model's cap allows,
  (c) the same, with the model's in-flight cap at 1 (on the first --sequential prompts: a rate).
Each request generates exactly --max-tokens tokens (ignore_eos), so tokens/s compare like for like;
(b) and (c) are timed over the scheduler's run (the engine's start is not counted).
Prints tokens/s of each and the ratios b/a (target >= 0.95) and b/c.

  python bench/engine_saturation.py --model-config configs/models/smollm2_vllm_cpu.yaml
  python bench/engine_saturation.py --model-config configs/models/qwen3_8b_vllm.yaml --episodes 512   # GPU

Needs vLLM in the running Python (the vllm-cpu extra on CPU, vllm on GPU).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from toolsweep.models.config import VLLMModelConfig, load_model_config  # noqa: E402


def collect_prompts(benchmark: str, options: dict[str, Any], setting: str, n: int) -> list[dict[str, Any]]:
    """The first turn of n real episodes: {task_id, messages, tools}."""
    from toolsweep.evaluator.registry import get_benchmark

    bench = get_benchmark(benchmark, options)
    out = []
    for task in bench.tasks(setting)[:n]:
        obs = bench.make_env(task, setting, 0).reset()
        out.append({
            "task_id": task,
            "messages": [m.model_dump(mode="json", exclude_none=True) for m in obs.messages],
            "tools": obs.tools,
        })
    if len(out) < n:
        out = (out * (n // max(len(out), 1) + 1))[:n]
    return out


def offline_kwargs(cfg: VLLMModelConfig) -> dict[str, Any]:
    """The server's engine arguments that `vllm.LLM` takes too (server-only flags dropped)."""
    from vllm.engine.arg_utils import EngineArgs

    known = {f.name for f in dataclasses.fields(EngineArgs)}
    args = cfg.engine_args.model_dump(exclude_none=True)
    return {k: v for k, v in args.items() if k in known and k not in ("chat_template",)}


def phase_offline(cfg: VLLMModelConfig, prompts: list[dict[str, Any]], max_tokens: int) -> dict[str, Any]:
    """(a): one offline batch. Runs in its own process so its engine's memory is freed after."""
    from transformers import AutoTokenizer
    from vllm import LLM, SamplingParams

    tok = AutoTokenizer.from_pretrained(cfg.path)
    if cfg.engine_args.chat_template:
        tok.chat_template = Path(cfg.engine_args.chat_template).read_text()
    texts = [tok.apply_chat_template(p["messages"], tools=p["tools"] or None, add_generation_prompt=True, tokenize=False) for p in prompts]
    llm = LLM(model=cfg.path, **offline_kwargs(cfg))
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True, seed=0)
    llm.generate(texts[:1], SamplingParams(temperature=0.0, max_tokens=4), use_tqdm=False)  # warm-up
    start = time.perf_counter()
    outs = llm.generate(texts, params, use_tqdm=False)
    wall = time.perf_counter() - start
    return {
        "wall_s": wall,
        "completion_tokens": sum(len(o.outputs[0].token_ids) for o in outs),
        "prompt_tokens": sum(len(o.prompt_token_ids) for o in outs),
    }


FIRST_TURN = {"first_turn": "first_turn:FirstTurn"}


def phase_run_sweep(model_config: str, bench_name: str, options: dict[str, Any], setting: str, episodes: int,
                    max_tokens: int, in_flight: int | None, work: Path) -> dict[str, Any]:
    """(b) and (c): `episodes` first turns through run_sweep; `in_flight` caps the model (None: its own cap)."""
    import yaml

    from toolsweep.cluster.config import SweepConfig
    from toolsweep.evaluator.registry import register_benchmark

    register_benchmark(*next(iter(FIRST_TURN.items())))  # the driver validates the config against it
    from toolsweep.cluster.driver import run_sweep

    model = yaml.safe_load(Path(model_config).read_text())
    model["extra_body"] = {**(model.get("extra_body") or {}), "ignore_eos": True}
    model["replicas"] = 1
    if in_flight is not None:
        model["max_in_flight"] = in_flight
    config = SweepConfig.model_validate({
        "name": f"saturation-{in_flight or 'all'}", "seeds": [0], "models": [model],
        "benchmarks": [{"name": "first_turn", "settings": ["first_turn"], "options": {
            "inner": bench_name, "inner_options": options, "inner_setting": setting, "episodes": episodes}}],
        "sampling": {"temperature": 0.0, "max_tokens": max_tokens},
        "concurrency": {"workers": 1, "episodes_per_worker": max(episodes, 1)},
        "output_dir": str(work), "mlflow": False, "preflight": False, "budget_check": "off",
    })
    outcome = run_sweep(config, progress=False, extra_benchmarks=FIRST_TURN, log=lambda m: None)
    rows = outcome.run_dir.read_table(columns=["completion_tokens", "prompt_tokens", "termination"]).to_pylist()
    return {
        "wall_s": outcome.wall_s,
        "completion_tokens": sum(r["completion_tokens"] for r in rows),
        "prompt_tokens": sum(r["prompt_tokens"] for r in rows),
        "terminations": sorted({r["termination"] for r in rows}),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model-config", default=str(REPO / "configs" / "models" / "smollm2_vllm_cpu.yaml"))
    # ToolMaze's first turn (system prompt + a few native tool schemas, ~700 tokens) is a typical
    # agent request; TRAJECT-Bench's retrieval settings (~5k tokens) stress prefill instead.
    p.add_argument("--benchmark", default="toolmaze")
    p.add_argument("--options", default=None, help="benchmark options as JSON (default: traject_bench's shared data_dir)")
    p.add_argument("--setting", default="C1-P0-std")
    p.add_argument("--episodes", type=int, default=32, help="prompts in (a) and (b)")
    p.add_argument("--sequential", type=int, default=6, help="prompts in (c), one at a time")
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--phase", choices=["all", "offline"], default="all", help=argparse.SUPPRESS)
    p.add_argument("--prompts-file", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    cfg = load_model_config(args.model_config)
    if not isinstance(cfg, VLLMModelConfig):
        p.error(f"{args.model_config} is not a vllm model config")
    if cfg.device == "cpu":
        for k, v in {"VLLM_CPU_KVCACHE_SPACE": "1", **cfg.env}.items():
            os.environ.setdefault(k, v)

    if args.phase == "offline":
        prompts = json.loads(Path(args.prompts_file).read_text())
        print("RESULT " + json.dumps(phase_offline(cfg, prompts, args.max_tokens)), flush=True)
        return 0

    options = json.loads(args.options) if args.options else (
        {"data_dir": str(REPO.parent / "shared" / "datasets" / "traject_bench")} if args.benchmark == "traject_bench" else {})
    prompts = collect_prompts(args.benchmark, options, args.setting, args.episodes)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(prompts, f)
    print(f"{len(prompts)} prompts from {args.benchmark}/{args.setting}; model {cfg.name} ({cfg.path}), "
          f"max_tokens {args.max_tokens}, engine args {cfg.engine_args.model_dump(exclude_none=True)}", flush=True)

    # bench/ on the path of the driver and of the Ray workers it starts (they load first_turn from it)
    bench_dir = str(Path(__file__).resolve().parent)
    sys.path.insert(0, bench_dir)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [bench_dir, str(REPO), os.environ.get("PYTHONPATH")]))
    import ray

    from toolsweep.cluster.ray_start import start_embedded_ray

    # a busy machine's Ray start can time out (Ray waits 30 s for its raylet): retried for 120 s
    start_embedded_ray(120, print, init=lambda: ray.init(
        address="local", include_dashboard=False, logging_level="ERROR", log_to_driver=False))
    try:
        with tempfile.TemporaryDirectory() as work:
            t0 = time.perf_counter()
            b = phase_run_sweep(args.model_config, args.benchmark, options, args.setting, len(prompts),
                                args.max_tokens, None, Path(work))
            print(f"(b) sweep done ({time.perf_counter() - t0:.0f}s incl. engine start)", flush=True)
            t0 = time.perf_counter()
            c = phase_run_sweep(args.model_config, args.benchmark, options, args.setting, args.sequential,
                                args.max_tokens, 1, Path(work))
            print(f"(c) sweep done ({time.perf_counter() - t0:.0f}s incl. engine start)", flush=True)
    finally:
        ray.shutdown()
    if b["terminations"] != ["answered"] or c["terminations"] != ["answered"]:
        print(f"episodes did not all answer: (b) {b['terminations']} (c) {c['terminations']}", file=sys.stderr)
        return 1

    # (a) last, in its own process: nothing of the sweeps' engines is left to compete with it
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, "--phase", "offline", "--prompts-file", f.name, "--model-config", args.model_config,
         "--max-tokens", str(args.max_tokens)],
        capture_output=True, text=True,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        print(proc.stdout[-3000:], proc.stderr[-5000:], file=sys.stderr)
        return 1
    a = json.loads(lines[-1][7:])
    print(f"(a) offline batch done ({time.perf_counter() - t0:.0f}s incl. engine start)", flush=True)


    rows = [("(a) offline batch", a), ("(b) run_sweep, all in flight", b), ("(c) run_sweep, one at a time", c)]
    print(f"\n{'mode':28} {'episodes':>8} {'prompt tok':>10} {'gen tok':>8} {'wall s':>8} {'gen tok/s':>10}")
    rate = {}
    for (name, r), n in zip(rows, (len(prompts), len(prompts), min(args.sequential, len(prompts)))):
        rate[name[:3]] = r["completion_tokens"] / r["wall_s"]
        print(f"{name:28} {n:>8} {r['prompt_tokens']:>10} {r['completion_tokens']:>8} {r['wall_s']:>8.1f} {rate[name[:3]]:>10.1f}")
    print(f"\nb/a = {rate['(b)'] / rate['(a)']:.2f}  (target >= 0.95)")
    print(f"b/c = {rate['(b)'] / rate['(c)']:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
