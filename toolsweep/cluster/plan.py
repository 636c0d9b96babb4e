"""`toolsweep plan`: the token budget of every (model, benchmark, setting) cell before a sweep, and
the check `run` makes before any engine starts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from toolsweep.evaluator.budget import CHARS_PER_TOKEN, CellBudget, Counter, approx_tokens, measure_cell

HELP = """\
Estimate, per model and (benchmark, setting), the prompt tokens of the first turn and of the oracle's
longest request (a lower bound: a model that explores needs more), add the reply budget
(sampling.max_tokens) and compare with the model's context window (vllm/hf: engine_args.max_model_len;
openai: context_window). Cells that cannot fit are named with their numbers.

Tokens: the model's own tokenizer when its local directory has a tokenizer.json (and the `tokenizers`
package is installed), otherwise characters / 4, said so in the table.

verdicts: fits | risky (a model that explores until its turn budget runs out overflows; the oracle's
          growth per turn carried to the budget) | tight (the oracle's longest request does not fit: a
          model's will not either) | cannot (the first prompt alone does not fit) | unknown (no window)

examples:
  toolsweep plan configs/sweeps/planbench_xl.yaml
  toolsweep plan my_sweep.yaml --tasks 10
"""


def context_window(model: Any) -> int | None:
    engine = getattr(model, "engine_args", None)
    if engine is not None and getattr(engine, "max_model_len", None):
        return int(engine.max_model_len)
    return getattr(model, "max_model_len", None) or getattr(model, "context_window", None)


def token_counter(model: Any) -> tuple[Counter, str]:
    """The model's own tokenizer when it is local, else the stated approximation."""
    path = getattr(model, "path", None)
    if path and (Path(path) / "tokenizer.json").exists():
        try:
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(str(Path(path) / "tokenizer.json"))
            return (lambda text: len(tok.encode(text).ids)), "tokenizer"
        except Exception:  # noqa: BLE001 - fall back to the approximation
            pass
    return approx_tokens, f"~chars/{CHARS_PER_TOKEN:.0f}"


def plan_rows(config: Any, n_tasks: int = 5) -> list[dict[str, Any]]:
    """One row per (LLM model, benchmark, setting) of the config."""
    from toolsweep.cluster.config import resolve_plans
    from toolsweep.evaluator.registry import get_benchmark

    llms = [m for m in config.models if getattr(m, "kind", "scripted") != "scripted"]
    if not llms:
        return []  # nothing has a context window: no benchmark needs loading to say so
    plans = resolve_plans(config, check_endpoints=False)  # budgets need no reachable model
    options = {e.name: e.options for e in config.benchmarks}
    rows = []
    cache: dict[tuple[str, str, str], CellBudget] = {}
    for model in llms:
        count, how = token_counter(model)
        window = context_window(model)
        for plan in plans:
            bench = get_benchmark(plan.benchmark, options.get(plan.benchmark))
            for setting in plan.tasks_by_setting:
                key = (how, plan.benchmark, setting)
                if key not in cache:
                    cache[key] = measure_cell(bench, setting, n_tasks, count)
                cell = cache[key]
                max_tokens = config.sampling.max_tokens
                rows.append({"model": model.name, "benchmark": plan.benchmark, "setting": setting,
                             "first_turn": cell.first_turn, "oracle_longest": cell.oracle_longest,
                             "oracle_turns": cell.oracle_turns, "at_turn_budget": cell.at_turn_budget,
                             "max_turns": cell.max_turns, "max_tokens": max_tokens,
                             "context_window": window, "tokens": how,
                             "verdict": cell.verdict(window, max_tokens)})
    return rows


def format_rows(rows: list[dict[str, Any]]) -> str:
    head = ("model", "benchmark", "setting", "first turn", "oracle max", "at turn budget", "max_tokens", "window",
            "tokens", "verdict")
    table = [head] + [(r["model"], r["benchmark"], r["setting"], str(r["first_turn"]), str(r["oracle_longest"]),
                       f"{r['at_turn_budget']} ({r['max_turns']} turns)", str(r["max_tokens"]),
                       str(r["context_window"] or "?"), r["tokens"], r["verdict"]) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in table)


def check_budgets(config: Any, log: Any, n_tasks: int = 2) -> None:
    """What `run` does before starting engines (config.budget_check): refuse or warn about cells whose
    prompts cannot fit the model's context window."""
    from toolsweep.cluster.config import ConfigError

    if config.budget_check == "off":
        return
    llms = [m for m in config.models if context_window(m)]
    if not llms:
        return
    narrowed = config.model_copy(update={"models": llms})
    rows = [r for r in plan_rows(narrowed, n_tasks) if r["verdict"] in ("cannot", "tight")]
    if not rows:
        return
    lines = [f"  {r['model']} {r['benchmark']}/{r['setting']}: {r['verdict']} (first turn {r['first_turn']}, "
             f"oracle max {r['oracle_longest']} + max_tokens {r['max_tokens']} vs {r['context_window']}, "
             f"{r['tokens']})" for r in rows[:20]]
    more = f"\n  ... and {len(rows) - 20} more" if len(rows) > 20 else ""
    message = ("cells that do not fit the model's context window (their episodes would end as "
               "context_exceeded):\n" + "\n".join(lines) + more + "\nraise max_model_len (e.g. Qwen3's YaRN rope "
               "scaling), lower sampling.max_tokens, or leave those cells out; `toolsweep plan` shows every cell")
    if config.budget_check == "refuse" and any(r["verdict"] == "cannot" for r in rows):
        raise ConfigError(message + "\n(budget_check: warn runs anyway)")
    log("warning: " + message)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="toolsweep plan", description=HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", help="sweep YAML")
    parser.add_argument("--tasks", type=int, default=5, help="tasks measured per setting (default 5)")
    args = parser.parse_args(argv)
    from toolsweep.cluster.config import ConfigError, load_config

    try:
        config = load_config(args.config)
        rows = plan_rows(config, args.tasks)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not rows:
        print("no served model in the config (scripted policies have no context window); "
              f"`toolsweep validate {args.config}` checks the rest of it")
        return 0
    print(format_rows(rows))
    bad = [r for r in rows if r["verdict"] in ("cannot", "tight", "risky")]
    print(f"\n{len(rows) - len(bad)} of {len(rows)} cells fit" + (f"; {len(bad)} do not" if bad else ""))
    return 1 if any(r["verdict"] == "cannot" for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
