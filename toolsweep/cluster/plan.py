"""`toolsweep plan`: the token budget of every (model, benchmark, setting) cell before a sweep, and
the check `run` makes before any engine starts."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from toolsweep.evaluator.budget import ESTIMATE_LABEL, CellBudget, Counter, estimate_request_tokens, measure_cell

HELP = """\
Estimate, per model and (benchmark, setting), the prompt tokens of the first turn and of the oracle's
longest request (a lower bound: a model that explores needs more), add the reply budget
(sampling.max_tokens) and compare with the model's context window (vllm/hf: engine_args.max_model_len;
openai: context_window). Cells that cannot fit are named with their numbers.

Tokens: each request rendered by the model's chat template (tool schemas included) and counted by its
tokenizer, when its local directory has a tokenizer.json and a template (and the `tokenizers` package is
installed); otherwise an estimate that is an upper bound (every digit and every byte of non-Latin text
a token, other text at 2.5 characters a token, plus the template's markers), said so in the table.

verdicts: fits | risky (a model that explores until its turn budget runs out overflows; the oracle's
          growth per turn carried to the budget) | tight (the oracle's longest request does not fit: a
          model's will not either) | cannot (the first prompt alone does not fit) | unknown (no window)

examples:
  toolsweep plan configs/sweeps/planbench_xl.yaml
  toolsweep plan my_sweep.yaml --tasks 10
  toolsweep plan configs/sweeps/quickstart.yaml --power runs/quickstart/main --half-width 0.05
"""


def context_window(model: Any) -> int | None:
    engine = getattr(model, "engine_args", None)
    if engine is not None and getattr(engine, "max_model_len", None):
        return int(engine.max_model_len)
    return getattr(model, "max_model_len", None) or getattr(model, "context_window", None)


def token_counter(model: Any) -> tuple[Counter, str]:
    """The model's chat template and tokenizer when they are local, else the stated upper-bound estimate."""
    from toolsweep.models.tokens import template_counter

    path = getattr(model, "path", None)
    if path and Path(path).is_dir():
        try:
            count = template_counter(Path(path), getattr(model, "chat_template", None))
        except Exception:  # noqa: BLE001 - a template this renderer cannot compile: estimate instead
            count = None
        if count is not None:
            return count, "template+tokenizer"
    return estimate_request_tokens, ESTIMATE_LABEL


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


def _power(args: argparse.Namespace) -> int:
    from toolsweep.cluster.power import format_power, pilot_note_of, power_rows
    from toolsweep.evaluator.rundir import RunDirectory

    run_dir = RunDirectory(args.power)
    if not run_dir.exists():
        print(f"error: {args.power} is not a run directory (run a pilot sweep first, e.g. seeds: 2 and a task "
              "limit, then point --power at runs/<sweep>/main)", file=sys.stderr)
        return 2
    cells, pairs = power_rows(run_dir, half=args.half_width, difference=args.difference, power=args.target_power,
                              metric=args.metric)
    if not cells:
        print(f"error: no cell of {args.power} has the metric {args.metric!r}" if args.metric
              else f"error: {args.power} holds no episodes yet", file=sys.stderr)
        return 2
    print(pilot_note_of(run_dir))
    print(format_power(cells, pairs, half=args.half_width, difference=args.difference, power=args.target_power,
                       confidence=0.95))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="toolsweep plan", description=HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config", help="sweep YAML")
    parser.add_argument("--tasks", type=int, default=5, help="tasks measured per setting (default 5)")
    power = parser.add_argument_group(
        "power (instead of token budgets)",
        "toolsweep plan --power runs/<sweep>/main: from a pilot run directory, the tasks x seeds each cell "
        "needs for a target interval half-width, and the paired differences each model pair can detect")
    power.add_argument("--power", metavar="RUN_DIR", help="a pilot run directory")
    power.add_argument("--half-width", type=float, default=0.03, help="target interval half-width (default 0.03)")
    power.add_argument("--difference", type=float, default=0.05,
                       help="paired difference to detect (default 0.05)")
    power.add_argument("--target-power", type=float, default=0.8, help="power to detect it (default 0.8)")
    power.add_argument("--metric", help="metric to plan for (default: each setting's first metric)")
    args = parser.parse_args(argv)
    if args.power:
        return _power(args)
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
