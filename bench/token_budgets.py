"""Planned prompt tokens against what the model's chat template and tokenizer make of the same
requests, per benchmark (and per TRAJECT-Bench domain, whose queries and tools span several
languages and scripts).

For each cell's first turns and the oracle's requests, four counts of the largest request:
- `raw/4`: the texts' characters / 4 (what `plan` counted before it rendered templates);
- `raw tok`: the texts counted by the tokenizer, no template;
- `served`: rendered by the chat template with the tool schemas and counted by the tokenizer (what a
  vLLM server with this model counts as prompt_tokens);
- `estimate`: the upper bound `plan` uses without a local tokenizer.
`est/served` must be >= 1 in every row (the estimate is an upper bound).

    python bench/token_budgets.py --model ~/.cache/toolsweep/models/smollm2-135m-instruct [--tasks 3]
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from toolsweep.evaluator.budget import approx_tokens, estimate_request_tokens, request_text, _oracle, _spread
from toolsweep.evaluator.episode import run_episode
from toolsweep.evaluator.registry import get_benchmark
from toolsweep.evaluator.types import WorkUnit
from toolsweep.models.tokens import template_counter


class Recorder:
    def __init__(self, inner) -> None:
        self.inner, self.requests = inner, []

    async def act(self, messages, tools):
        self.requests.append((list(messages), tools))
        return await self.inner.act(messages, tools)


def requests_of(bench, setting: str, n: int):
    out = []
    for task_id in _spread(bench.tasks(setting), n):
        env = bench.make_env(task_id, setting, 0)
        unit = WorkUnit(sweep="plan", model="oracle", benchmark=bench.name, setting=setting, task_id=task_id, seed=0)
        policy = Recorder(_oracle(bench, env, unit))
        asyncio.run(run_episode(env, policy, unit, max_turns=bench.max_turns(setting)))
        out += policy.requests
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a local model directory (tokenizer.json + chat template)")
    ap.add_argument("--tasks", type=int, default=3)
    ap.add_argument("--data-dir", default=str(Path(__file__).resolve().parents[2] / "shared" / "datasets" / "traject_bench"))
    args = ap.parse_args()
    from tokenizers import Tokenizer

    served = template_counter(Path(args.model))
    tok = Tokenizer.from_file(str(Path(args.model) / "tokenizer.json"))
    cells = [("toolmaze", s) for s in ("C1-P0-std", "C4-P0-std")]
    cells += [("planbench_xl", "default"), ("apb", "holistic"), ("apb", "stepwise_k1")]
    traject = get_benchmark("traject_bench", {"data_dir": args.data_dir})
    wanted = ("par-simple/domain/direct", "par-hard/domain/native", "seq/domain/react-domain", "seq/all/cot")
    cells += [("traject_bench", s) for s in traject.settings() if s in wanted]
    print(f"{'benchmark':13} {'setting':44} {'raw/4':>7} {'raw tok':>7} {'served':>7} {'estimate':>8} {'served/raw4':>11} {'est/served':>10}")
    worst = 9.9
    for name, setting in cells:
        bench = traject if name == "traject_bench" else get_benchmark(name)
        reqs = requests_of(bench, setting, args.tasks)
        if not reqs:
            continue
        raw4 = max(approx_tokens(request_text(m, t)) for m, t in reqs)
        rawtok = max(len(tok.encode(request_text(m, t)).ids) for m, t in reqs)
        srv = max(served(m, t) for m, t in reqs)
        est = max(estimate_request_tokens(m, t) for m, t in reqs)
        ratio = min(estimate_request_tokens(m, t) / served(m, t) for m, t in reqs)
        worst = min(worst, ratio)
        print(f"{name:13} {setting[:44]:44} {raw4:7d} {rawtok:7d} {srv:7d} {est:8d} {srv / raw4:11.2f} {ratio:10.2f}")
    print(f"\nsmallest estimate/served over every request: {worst:.2f} (>= 1: an upper bound)")


if __name__ == "__main__":
    main()
