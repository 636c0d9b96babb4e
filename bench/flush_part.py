"""What the driver's scheduler waits on when the write-ahead log becomes a Parquet part.

Every `part_rows` (2,000) recorded results the single writer turns its write-ahead log into a Parquet
part. Done on the scheduler's loop, no unit is leased and no result recorded meanwhile. This prints
that pause three ways, for rows of a short and of a long trajectory: the log parsed row by row with
`json.loads` and `Table.from_pylist` (as before), with Arrow's JSON reader, and sealed for the writer's
own thread to write (what the driver does now).

    python bench/flush_part.py [--rows 2000 --repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from toolsweep.evaluator.encoded import encode_result
from toolsweep.evaluator import rundir
from toolsweep.evaluator.rundir import SCHEMA, EpisodeWriter, RunDirectory
from toolsweep.evaluator.types import EpisodeResult, Message, Step, TerminationReason, Trajectory, Usage, WorkUnit


def results(n: int, turns: int, text: int) -> list:
    """`n` encoded results of `turns` turns whose messages hold `text` characters each."""
    out = []
    for i in range(n):
        trajectory = Trajectory(messages=[Message(role="user", content="start é ✓")])
        for t in range(turns):
            reply = Message(role="assistant", content=f"step {t} " + "x" * text)
            seen = Message(role="user", content=f'observation "{t}"\n' + "y" * text)
            trajectory.steps.append(Step(reply=reply, usage=Usage(prompt_tokens=100 + t, completion_tokens=20),
                                         observation=[seen], info={"t": t}))
            trajectory.messages += [reply, seen]
        unit = WorkUnit(sweep="s", model="m", benchmark="b", setting="x", task_id=f"t{i}", seed=0)
        out.append(encode_result(EpisodeResult(unit=unit, termination=TerminationReason.ANSWERED,
                                               metrics={"success": 1.0, "undefined": float("nan")},
                                               trajectory=trajectory, wall_time_s=0.5)))
    return out


def row_by_row(path: Path) -> pa.Table:
    """How a log was read before: `json.loads` a line at a time, then `Table.from_pylist`."""
    return pa.Table.from_pylist(rundir._log_rows(path), schema=SCHEMA)


def pause_ms(batch: list, how: str) -> float:
    """The scheduler's wait in the `append` whose results fill the log (`part_rows` = the batch)."""
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = RunDirectory(Path(tmp) / "run")
        writer = EpisodeWriter(run_dir, part_rows=len(batch), background=how == "background")
        writer.append(batch[:-1])
        read_log = rundir.read_log
        if how == "row by row":
            rundir.read_log = row_by_row
        try:
            t = time.perf_counter()
            writer.append(batch[-1:])
            elapsed = time.perf_counter() - t
        finally:
            rundir.read_log = read_log
        writer.close()
        assert run_dir.read_table(columns=["unit_id"]).num_rows == len(batch)
        return 1e3 * elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2000, help="rows in the log (the writer's part_rows)")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    ways = ("row by row", "Arrow", "background")
    print(f"the log of {args.rows} results into a part: the scheduler's pause (ms, median of {args.repeat});")
    print("  row by row = json.loads and from_pylist on the loop (before); Arrow = Arrow's JSON reader on the")
    print("  loop; background = sealed and written on the writer's thread (what the driver's writer does)")
    print(f"{'trajectory':>22} {'row KB':>7} " + " ".join(f"{w:>11}" for w in ways) + f" {'before/now':>11}")
    for turns, text in ((10, 40), (20, 1000)):
        batch = results(args.rows, turns, text)
        pause_ms(batch, "Arrow")  # warm-up: the first part a process writes sets up Parquet and zstd
        times: dict[str, list[float]] = {w: [] for w in ways}
        for _ in range(args.repeat):  # interleaved: the machine is noisy
            for way in ways:
                times[way].append(pause_ms(batch, way))
        med = {w: statistics.median(v) for w, v in times.items()}
        kb = len(batch[0].row_json) / 1024
        print(f"{f'{turns} turns x {text} chars':>22} {kb:>7.1f} " + " ".join(f"{med[w]:>11.1f}" for w in ways)
              + f" {med['row by row'] / med['background']:>11.0f}")


if __name__ == "__main__":
    main()
