"""`toolsweep show`: read episodes of a run directory as transcripts in the terminal."""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import textwrap
from typing import Any

from toolsweep.evaluator.rundir import RunDirectory, row_to_result
from toolsweep.evaluator.types import EpisodeResult, Message

HELP = """\
Print episodes of a run directory as transcripts: the conversation turn by turn (the model's
replies and tool calls, what the environment answered), then how it ended and its metrics.
The same transcripts are MLflow traces on each cell's run (the Traces tab).

examples:
  toolsweep show runs/quickstart/main --failed --limit 3
  toolsweep show runs/quickstart/main --cell oracle/toolmaze/C1-P0-std --limit 1
  toolsweep show runs/quickstart/main --unit 3f2a9c      # a unit id or a prefix of one
"""


def _wrap(text: str, width: int, indent: str, first: str | None = None) -> str:
    """Every line at most `width` characters (long words, e.g. JSON, are broken too)."""
    lines: list[str] = []
    for line in (text or "").splitlines() or [""]:
        lead = first if first is not None and not lines else indent
        lines.extend(textwrap.wrap(line, width, initial_indent=lead, subsequent_indent=indent) or [lead])
    return "\n".join(lines)


def strict(value: Any) -> Any:
    """`value` with every non-finite number as null, so it prints as strict JSON (no NaN, no Infinity)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    return value


def terminal_width() -> int:
    """The terminal's width (100 when the output is not a terminal)."""
    return max(40, shutil.get_terminal_size((100, 24)).columns)


def _message(m: Message, width: int, max_chars: int) -> str:
    text = m.content or ""
    if len(text) > max_chars:
        text = text[:max_chars] + f" … [{len(text) - max_chars} more characters]"
    out = [f"[{m.role}{' ' + m.name if m.name else ''}]{cut_marker(m)}"]
    if text:
        out.append(_wrap(text, width, "  "))
    for tc in m.tool_calls or []:
        out.append(_wrap(f"{tc.function.name}({tc.function.arguments[:max_chars]})", width, "     ", first="  -> "))
    return "\n".join(out)


def cut_marker(m: Message) -> str:
    """' (cut at max_tokens (512))' for a reply the endpoint cut at its budget (finish_reason "length"),
    so it does not read as one the model ended itself; '' otherwise."""
    extra = m.model_extra or {}
    if not extra.get("truncated"):
        return ""
    budget = extra.get("max_tokens")
    return f" (cut at max_tokens ({budget}))" if budget else " (cut at max_tokens)"


def transcript(result: EpisodeResult, width: int = 100, max_chars: int = 1500) -> str:
    u = result.unit
    cut = sum(1 for s in result.trajectory.steps if cut_marker(s.reply))
    parts = [
        _wrap(f"{u.model} | {u.benchmark} | {u.setting} | task {u.task_id} | seed {u.seed} | unit {u.unit_id[:12]}",
              width, "   ", first="== "),
        _wrap(f"ended: {result.termination.value}; {len(result.trajectory.steps)} turns; "
              f"{result.trajectory.prompt_tokens}+{result.trajectory.completion_tokens} tokens"
              + (f"; {cut} of its replies cut at max_tokens" if cut else ""), width, "   "),
    ]
    parts.extend(_message(m, width, max_chars) for m in result.trajectory.messages)
    metrics = strict({k: v for k, v in result.metrics.items() if "/" not in k})
    text = json.dumps(metrics, default=str, allow_nan=False)
    if len(text) > max_chars:
        text = text[:max_chars] + f" … [{len(text) - max_chars} more characters]"
    parts.append(_wrap(text, width, "  ", first="metrics: "))
    if result.error:
        parts.append(_wrap(result.error[:max_chars], width, "  ", first="error: "))
    return "\n".join(parts)


def select(rows: list[dict[str, Any]], unit: str | None, cell: str | None, failed: bool) -> list[dict[str, Any]]:
    if unit:
        rows = [r for r in rows if r["unit_id"].startswith(unit)]
    if cell:
        parts = cell.split("/", 2)
        if len(parts) != 3:
            raise ValueError("--cell takes model/benchmark/setting, e.g. oracle/toolmaze/C1-P1-std")
        cells = sorted({"/".join((r["model"], r["benchmark"], r["setting"])) for r in rows})
        rows = [r for r in rows if (r["model"], r["benchmark"], r["setting"]) == tuple(parts)]
        if not rows:
            raise ValueError(f"--cell {cell}: no such cell in the run directory; it has {', '.join(cells[:12])}"
                             + (f" and {len(cells) - 12} more" if len(cells) > 12 else ""))
    if failed:
        rows = [r for r in rows if r["termination"] != "answered"]
    return sorted(rows, key=lambda r: r["unit_id"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="toolsweep show", description=HELP,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", help="runs/<sweep>/<run-id>")
    parser.add_argument("--unit", help="a unit id, or a prefix of one")
    parser.add_argument("--cell", help="model/benchmark/setting")
    parser.add_argument("--failed", action="store_true", help="only episodes that did not end as answered")
    parser.add_argument("--limit", type=int, default=5, help="episodes to print (default 5)")
    parser.add_argument("--width", type=int, default=None,
                        help="wrap every line at this width (default: the terminal's width, 100 when not a terminal)")
    args = parser.parse_args(argv)
    try:
        run_dir = RunDirectory(args.run_dir)
        run_dir.read_manifest()
        keys = run_dir.read_table(columns=["unit_id", "model", "benchmark", "setting", "termination"]).to_pylist()
        chosen = select(keys, args.unit, args.cell, args.failed)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not chosen:
        print("no episode matches", file=sys.stderr)
        return 1
    wanted = {r["unit_id"] for r in chosen[: args.limit]}
    table = run_dir.read_table()
    rows = [r for r in table.filter(_mask(table, wanted)).to_pylist()]
    for row in sorted(rows, key=lambda r: r["unit_id"]):
        print(transcript(row_to_result(row), max(20, args.width or terminal_width())))
        print()
    if len(chosen) > args.limit:
        print(f"({len(chosen) - args.limit} more match; --limit N shows more)")
    return 0


def _mask(table: Any, ids: set[str]) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.is_in(table.column("unit_id"), value_set=pa.array(sorted(ids)))


if __name__ == "__main__":
    raise SystemExit(main())
