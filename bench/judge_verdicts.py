"""A real model as the judge of ToolMaze's wise abort: SmolLM2-135M-Instruct (prepared with
`toolsweep models prepare smollm2`, run in-process through transformers on CPU) reads every sentence of
the acknowledgement corpus in tests/verdicts/ through the benchmark's own judge prompt
(`toolmaze.abort_judge`) and the judge protocol (`evaluator.judging.Reasking`: 3 asks, then undefined).
Prints its agreement with the labels beside the judge-free reading's, on the same sentences.

    python bench/judge_verdicts.py [--model-dir DIR] [--limit N] [--part held-out|tuning|all]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.verdicts.corpus import load_all, split  # noqa: E402
from toolsweep.benchmarks.toolmaze.abort_judge import abort_messages, parse_abort_verdict  # noqa: E402
from toolsweep.evaluator.judging import Reasking  # noqa: E402
from toolsweep.evaluator.verdicts import acknowledges_failure  # noqa: E402

QUERY = "Please complete the task I described, using the tools you have."


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", default=os.path.expanduser("~/.cache/toolsweep/models/smollm2-135m-instruct"))
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--part", choices=("held-out", "tuning", "all"), default="held-out")
    args = ap.parse_args()
    if not Path(args.model_dir).is_dir():
        sys.exit(f"no model at {args.model_dir}: run `toolsweep models prepare smollm2` first")

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(1)
    tok = AutoTokenizer.from_pretrained(args.model_dir)
    model = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype=torch.float32).eval()

    def generate(messages) -> str:
        chat = [{"role": m.role, "content": m.text()} for m in messages]
        ids = tok.apply_chat_template(chat, add_generation_prompt=True, return_tensors="pt", return_dict=True)
        with torch.no_grad():
            out = model.generate(**ids, max_new_tokens=48, do_sample=False, pad_token_id=tok.eos_token_id)
        return tok.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)

    examples = {"held-out": split("acknowledgement", True), "tuning": split("acknowledgement", False),
                "all": load_all("acknowledgement")}[args.part]
    if args.limit:
        examples = examples[:args.limit]
    t0 = time.perf_counter()
    right = judged = unreadable = asks = rule_right = 0
    verdict_counts = {True: 0, False: 0}
    for e in examples:
        verdicts: list = []
        pending: list = []
        judge = Reasking(abort_messages(QUERY, e.text), parse_abort_verdict, verdicts.append,
                         lambda msgs, handler: pending.append((msgs, handler)))
        pending.append((judge.messages, judge))
        while pending:
            msgs, handler = pending.pop(0)
            asks += 1
            handler(generate(msgs))
        v = verdicts[0]
        print(f"  label={int(e.label)} judge={'?' if v is None else int(v)}  {e.text[:70]}", flush=True)
        rule_right += acknowledges_failure(e.text) == e.label
        if v is None:
            unreadable += 1
            continue
        judged += 1
        verdict_counts[v] += 1
        right += v == e.label
    n = len(examples)
    print(f"SmolLM2-135M judge of the wise abort, acknowledgement corpus ({args.part}), n={n}, "
          f"{time.perf_counter() - t0:.0f} s, {asks} asks")
    print(f"  readable verdicts: {judged}/{n}; unreadable after 3 asks: {unreadable}")
    print(f"  judge agrees with the label: {right}/{judged} ({right / max(judged, 1):.1%}); "
          f"verdicts true/false: {verdict_counts[True]}/{verdict_counts[False]}")
    print(f"  judge-free reading agrees with the label: {rule_right}/{n} ({rule_right / max(n, 1):.1%})")


if __name__ == "__main__":
    main()
