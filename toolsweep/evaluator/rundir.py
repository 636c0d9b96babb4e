"""The run directory: the record of truth of a sweep.

    runs/<sweep>/<run-id>/
      manifest.json             written before the first unit runs
      episodes/part-*.parquet   one row per finished unit, unit_id unique across parts
      episodes/pending.jsonl    write-ahead log of results not yet in a part (flushed per batch)
      episodes/sealed-*.jsonl   full logs being written as the part of the same number
      summary.json, report.html

Every finished episode reaches `pending.jsonl` (flushed to the OS) before anything else happens to
it, so killing the driver loses at most the episodes in flight; the next run folds the logs into
Parquet parts. Resume = skip the unit_ids already here.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import re
import tempfile
import time
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from toolsweep.evaluator.unit_ids import (
    DIGEST,
    GrowingUnitIds,
    UnitIds,
    digests_from_hex,
    digests_from_hex_bytes,
)
from toolsweep.evaluator.types import EpisodeResult, Trajectory, WorkUnit, canonical_json

SCHEMA = pa.schema(
    [
        ("unit_id", pa.string()),
        ("sweep", pa.string()),
        ("model", pa.string()),
        ("benchmark", pa.string()),
        ("setting", pa.string()),
        ("task_id", pa.string()),
        ("seed", pa.int64()),
        ("sampling", pa.string()),
        ("termination", pa.string()),
        ("metrics", pa.string()),
        ("num_turns", pa.int64()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("wall_time_s", pa.float64()),
        ("attempts", pa.int64()),
        ("node_id", pa.string()),
        ("worker_id", pa.string()),
        ("error", pa.string()),
        ("finished_at", pa.float64()),
        ("trajectory", pa.string()),
    ]
)


def strict_json(obj: Any, **kw: Any) -> str:
    """JSON that any parser reads: NaN and infinities (an undefined metric) become null."""
    return json.dumps(_finite(obj), allow_nan=False, default=str, **kw)


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def read_summary(path: Path) -> dict[str, Any]:
    """summary.json as written (strict JSON), with the undefined metric values (null) back as NaN."""
    summary = json.loads(path.read_text())
    nan = float("nan")
    for cell in summary.get("cells", []):
        for stats in cell.get("metrics", {}).values():
            for k, v in stats.items():
                if v is None:
                    stats[k] = nan
    for pair in summary.get("paired", []):
        for k in ("value", "ci_low", "ci_high"):
            if pair.get(k, 0) is None:
                pair[k] = nan
    summary["composites"] = {k: nan if v is None else v for k, v in (summary.get("composites") or {}).items()}
    return summary


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# Read once, at import: os.umask can only be read by setting it, which is not safe to do while other
# threads (the MLflow mirror) create files.
_UMASK = _read_umask()


def atomic_write_text(path: Path, text: str) -> None:
    """Write via a temp file and os.replace, so a reader never sees half a file. The file gets the
    usual mode of a new file (0644 under the common umask), not mkstemp's owner-only 0600."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_SAMPLING_JSON: dict[int, tuple[Any, str]] = {}


def sampling_json(sampling: Any) -> str:
    """A unit's sampling as canonical JSON, encoded once per Sampling object (a sweep's units share
    one): the row's `sampling` column, and how a leased unit carries it to a worker."""
    hit = _SAMPLING_JSON.get(id(sampling))
    if hit is None or hit[0] is not sampling:
        if len(_SAMPLING_JSON) >= 256:
            _SAMPLING_JSON.clear()
        hit = _SAMPLING_JSON[id(sampling)] = (sampling, canonical_json(sampling.model_dump(mode="json")))
    return hit[1]


def result_to_row(result: EpisodeResult, finished_at: float | None = None) -> dict[str, Any]:
    return {**row_fields(result, finished_at), "trajectory": result.trajectory.model_dump_json(exclude_none=True)}


def row_fields(result: EpisodeResult, finished_at: float | None = None) -> dict[str, Any]:
    """A result's row without its trajectory (the last column; a worker encodes that as the episode goes)."""
    return {**unit_columns(result.unit), **outcome_columns(result, finished_at)}


def unit_columns(unit: WorkUnit) -> dict[str, Any]:
    """The row's first columns: those the unit alone decides (a worker encodes them before the episode ends)."""
    return {
        "unit_id": unit.unit_id,
        "sweep": unit.sweep,
        "model": unit.model,
        "benchmark": unit.benchmark,
        "setting": unit.setting,
        "task_id": unit.task_id,
        "seed": unit.seed,
        "sampling": sampling_json(unit.sampling),
    }


def outcome_columns(result: EpisodeResult, finished_at: float | None = None) -> dict[str, Any]:
    """The row's other columns but the trajectory: how the episode went, and where and when it was recorded."""
    prompt = completion = 0
    for step in result.trajectory.steps:
        prompt += step.usage.prompt_tokens
        completion += step.usage.completion_tokens
    return {
        "termination": result.termination.value,
        "metrics": json.dumps(result.metrics, allow_nan=True),
        "num_turns": result.num_turns,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "wall_time_s": float(result.wall_time_s),
        "attempts": result.attempts,
        "node_id": result.node_id,
        "worker_id": result.worker_id,
        "error": result.error,
        "finished_at": time.time() if finished_at is None else finished_at,
    }


def _log_line(result: Any, now: float) -> str:
    """A result's write-ahead-log line (without its newline); an `EncodedResult` (evaluator.encoded)
    brings its row encoded by the worker that played it, so the driver does not encode it again."""
    if isinstance(result, EpisodeResult):
        return json.dumps(result_to_row(result, finished_at=now), allow_nan=True)
    return result.line(now)


def row_to_result(row: dict[str, Any]) -> EpisodeResult:
    unit = WorkUnit(
        sweep=row["sweep"],
        model=row["model"],
        benchmark=row["benchmark"],
        setting=row["setting"],
        task_id=row["task_id"],
        seed=row["seed"],
        sampling=json.loads(row["sampling"]),
    )
    if row.get("unit_id"):
        # the recorded id: it also covers the unit's `context` (the model's serving config and the
        # benchmark's fingerprint), which the row does not keep, so it cannot be recomputed from it
        unit.__dict__["unit_id"] = row["unit_id"]
    return EpisodeResult(
        unit=unit,
        termination=row["termination"],
        metrics=json.loads(row["metrics"]),
        trajectory=Trajectory.model_validate_json(row["trajectory"]),
        error=row["error"],
        wall_time_s=row["wall_time_s"],
        node_id=row["node_id"],
        worker_id=row["worker_id"],
        attempts=row["attempts"],
    )


def unit_id_digests(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A `unit_id` column as digests (see `unit_ids.DIGEST`), decoded in numpy: no Python string per row."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if len(arr) == 0:
        return np.zeros(0, dtype=DIGEST)
    if arr.null_count:
        raise ValueError("a recorded episode has no unit_id")
    try:
        fixed = arr.cast(pa.binary(64))
    except pa.ArrowInvalid:
        raise ValueError("a recorded unit_id is not a sha256 hex digest (64 characters)") from None
    raw = np.frombuffer(fixed.buffers()[1], dtype=np.uint8, count=64 * len(fixed), offset=64 * fixed.offset)
    return digests_from_hex_bytes(raw.reshape(-1, 64))


def read_part(path: Path, columns: list[str] | None = None) -> pa.Table:
    """One part file. Through `ParquetFile`, not `pq.read_table`: the dataset machinery behind the
    latter leaves ~70 MB resident in a process that reads hundreds of parts (measured on 500 parts),
    this ~15 MB."""
    with pq.ParquetFile(path) as f:
        return f.read(columns=columns)


def _size(path: Path) -> int:
    """A file's size; 0 once it is gone (the writer deletes a log whose part it has written)."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _log_rows(path: Path) -> list[dict[str, Any]]:
    rows = []
    try:
        with path.open() as f:
            for line in f:
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    break  # a torn last line from a killed writer: that episode was in flight
    except FileNotFoundError:
        pass  # a sealed log whose part was written since it was listed: its rows are in the part
    return rows


def read_log(path: Path) -> pa.Table:
    """A write-ahead log as a table, for a part. Arrow's JSON reader parses it in C++, off the GIL: 10
    against 50 ms for 2,000 rows of 5.5 KB with `json.loads` and `from_pylist` (bench/flush_part.py). A
    log it cannot read (a torn last line left by a killed writer) is read row by row, as far as it is whole."""
    size = _size(path)
    if size:
        # one block: a row longer than a block (a long trajectory) cannot be split across two
        options = pa_json.ReadOptions(block_size=min(size + 1, 2**31 - 1), use_threads=False)
        try:
            return pa_json.read_json(path, read_options=options,
                                     parse_options=pa_json.ParseOptions(explicit_schema=SCHEMA))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            pass
    return pa.Table.from_pylist(_log_rows(path) if size else [], schema=SCHEMA)


def _write_part(table: pa.Table, path: Path) -> None:
    """A part, whole and on disk (fsynced) before it takes its name."""
    tmp = path.with_suffix(".parquet.tmp")
    pq.write_table(table, tmp, compression="zstd")
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _seal_into_part(sealed: Path, part: Path) -> None:
    """A sealed log's part written, then the log deleted (a reader sees its rows throughout)."""
    _write_part(read_log(sealed), part)
    sealed.unlink()


def first_occurrences(digests: np.ndarray) -> np.ndarray:
    """A mask of the first occurrence of every digest (the first record of a unit wins)."""
    keep = np.zeros(len(digests), dtype=bool)
    keep[np.unique(digests, return_index=True)[1]] = True
    return keep


class RunDirectoryBusy(RuntimeError):
    """Another process holds the run directory's writer lock (a second `run` of the same sweep)."""


class RunDirectory:
    """Read access to a run directory (any process may read while a writer appends)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.episodes_dir = self.path / "episodes"
        self.manifest_path = self.path / "manifest.json"
        self.summary_path = self.path / "summary.json"
        self.report_path = self.path / "report.html"
        self.pending_path = self.episodes_dir / "pending.jsonl"
        self.plots_dir = self.path / "plots"

    def exists(self) -> bool:
        return self.manifest_path.exists()

    def read_manifest(self) -> dict[str, Any]:
        if not self.manifest_path.exists():
            raise FileNotFoundError(
                f"{self.path} is not a toolsweep run directory (no manifest.json); "
                "expected runs/<sweep>/<run-id>/ as written by `toolsweep run`"
            )
        return json.loads(self.manifest_path.read_text())

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        atomic_write_text(self.manifest_path, strict_json(manifest, indent=2, sort_keys=True))

    def part_paths(self) -> list[Path]:
        return sorted(self.episodes_dir.glob("part-*.parquet"))

    def log_paths(self) -> list[Path]:
        """The write-ahead logs, oldest first: sealed logs whose part is being written, then the open one.
        (Read while a writer runs, a log may become a part between listing and reading: its rows are
        then missing from that read, never doubled, as when a log became a part in place.)"""
        sealed = sorted(self.episodes_dir.glob("sealed-*.jsonl"))
        return [*sealed, self.pending_path] if self.pending_path.exists() else sealed

    def _pending_rows(self) -> list[dict[str, Any]]:
        """The rows of every write-ahead log, oldest first."""
        return [row for path in self.log_paths() for row in _log_rows(path)]

    def cell_plot_path(self, cell: tuple[str, str, str]) -> Path:
        """Where a (model, benchmark, setting) cell's convergence plot lives: a readable name, made
        unique by a hash of the cell."""
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", "__".join(cell)).strip("_")[:80]
        digest = hashlib.sha256("|".join(cell).encode()).hexdigest()[:8]
        return self.plots_dir / "cells" / f"{slug}-{digest}.svg"

    def iter_tables(self, columns: list[str] | None = None) -> Iterator[pa.Table]:
        """The recorded episodes a part file at a time (then the write-ahead log), one row per unit_id
        (the first record wins): memory holds one part, not the run."""
        wanted = columns if columns is None or "unit_id" in columns else [*columns, "unit_id"]
        seen = GrowingUnitIds()  # 32 bytes a unit, not a Python string
        pending = self._pending_rows()
        sources: list[Any] = [*self.part_paths(), *([pending] if pending else [])]
        for src in sources:
            if isinstance(src, Path):
                t = read_part(src, columns=wanted)
            else:
                t = pa.Table.from_pylist(src, schema=SCHEMA)
                t = t.select(wanted) if wanted else t
            digests = unit_id_digests(t.column("unit_id"))
            keep = first_occurrences(digests) & ~seen.contains(digests)
            seen.add(digests[keep])
            if not keep.all():
                t = t.filter(pa.array(keep))
            yield t.select(columns) if columns is not None and wanted != columns else t

    def read_table(self, columns: list[str] | None = None) -> pa.Table:
        """Every recorded episode, one row per unit_id (the first record wins)."""
        tables = list(self.iter_tables(columns))
        if not tables:
            schema = pa.schema([SCHEMA.field(c) for c in columns]) if columns else SCHEMA
            return schema.empty_table()
        return pa.concat_tables(tables)

    def records_signature(self) -> list[Any]:
        """Changes whenever an episode is recorded (part files and the write-ahead log): a summary made
        for the same signature is still current."""
        sizes = [(p.name, _size(p)) for p in [*self.part_paths(), *self.log_paths()]]
        return [[name, size] for name, size in sizes if size]

    def unit_ids_in_parts(self) -> UnitIds:
        """The unit ids of the Parquet parts (not the write-ahead log), read into one array sized from
        the parts' metadata and sorted where it lies: no list of pieces, no second copy."""
        parts = self.part_paths()
        sizes = [pq.read_metadata(p).num_rows for p in parts]
        digests = np.empty(sum(sizes), dtype=DIGEST)
        at = 0
        for path, size in zip(parts, sizes):
            digests[at : at + size] = unit_id_digests(read_part(path, columns=["unit_id"]).column(0))
            at += size
        return UnitIds.sorted_in_place(digests)

    def finished_unit_ids(self) -> UnitIds:
        """Every recorded unit id (parts and write-ahead log): a read-only set of hex ids held as
        sorted digests, 32 bytes an id, so a million-unit run's record costs 32 MB, not 140."""
        in_parts = self.unit_ids_in_parts()
        pending = self._pending_rows()
        return in_parts.union(UnitIds.from_hex(r["unit_id"] for r in pending)) if pending else in_parts

    def read_results(self) -> list[EpisodeResult]:
        return [row_to_result(r) for r in self.read_table().to_pylist()]


class EpisodeWriter:
    """The single writer of a run directory's episodes (an exclusive lock keeps it single).

    Every `part_rows` results the write-ahead log becomes a Parquet part. With `background`, the
    scheduler does not wait for that: the full log is renamed `sealed-<n>.jsonl`, a new log opens at
    once, and a thread of the writer's own writes part <n> and then deletes the sealed log. On the loop,
    a part of 2,000 long trajectories took 0.7 s, during which no unit was leased (bench/flush_part.py).
    Readers see a sealed log's rows until its part is there, and both for a moment: the first record
    of a unit wins. A failure to write a part is raised by the next `append` or `close`; its sealed
    log stays, and the next writer folds it."""

    MAX_SEALED = 2
    """Sealed logs whose part may be under way at once before `append` waits for the oldest."""

    def __init__(self, run_dir: RunDirectory, part_rows: int = 2000, *, background: bool = False) -> None:
        self.run_dir = run_dir
        self.part_rows = part_rows
        run_dir.episodes_dir.mkdir(parents=True, exist_ok=True)
        self._lock_file = (run_dir.episodes_dir / ".lock").open("w")
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_file.close()
            raise RunDirectoryBusy(
                f"another toolsweep process is writing to {run_dir.path}; wait for it to finish "
                "(or stop it) before running the same sweep again"
            ) from None
        # The once-only guard: every id in the parts (sorted digests, 32 bytes a unit) plus the ids
        # of the write-ahead logs (the open one and the sealed ones) as strings; a log's ids join the
        # digests when its part is written.
        self._in_parts = GrowingUnitIds(run_dir.unit_ids_in_parts())
        self._in_log: set[str] = set()
        parts = run_dir.part_paths()
        self._next_index = int(parts[-1].stem.split("-")[1]) + 1 if parts else 0
        self._fold_logs()
        self._pending = run_dir.pending_path.open("a")
        self._pending_ids: list[str] = []  # the ids in the open log
        # part conversions under way, oldest first: (future, the ids of its sealed log)
        self._sealed: deque[tuple[Future, list[str]]] = deque()
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolsweep-parts") if background else None

    def _part_path(self) -> Path:
        index, self._next_index = self._next_index, self._next_index + 1
        return self.run_dir.episodes_dir / f"part-{index:05d}.parquet"

    def _fold_logs(self) -> None:
        """Turn the write-ahead logs left by an earlier (possibly killed) writer into parts."""
        logs = self.run_dir.log_paths()
        for log in logs:
            table = read_log(log)
            if table.num_rows:
                digests = digests_from_hex(table.column("unit_id").to_pylist())
                keep = first_occurrences(digests) & ~self._in_parts.contains(digests)
                if keep.any():
                    _write_part(table.filter(pa.array(keep)), self._part_path())
                    self._in_parts.add(digests[keep])
        for log in logs:  # only once every part is written
            log.unlink(missing_ok=True)

    @property
    def known_unit_ids(self) -> UnitIds:
        """Every unit recorded in the run directory, now (a snapshot)."""
        in_parts = self._in_parts.frozen()
        return in_parts.union(UnitIds.from_hex(self._in_log)) if self._in_log else in_parts

    def append(self, results: Iterable[EpisodeResult]) -> list[EpisodeResult]:
        """Record results durably; returns those that were new (a unit is recorded once)."""
        self._settle()
        results = list(results)
        in_parts = self._in_parts.contains(digests_from_hex(r.unit_id for r in results)).tolist()
        fresh, lines = [], []
        now = time.time()  # when the batch was recorded: one stamp for all of it
        for result, recorded in zip(results, in_parts):
            if recorded or result.unit_id in self._in_log:
                continue
            self._in_log.add(result.unit_id)
            lines.append(_log_line(result, now))
            fresh.append(result)
        if fresh:
            # One write for the batch; flush() hands the lines to the OS, which keeps them if this
            # process is killed; a part is fsynced before its log is deleted (an OS crash).
            lines.append("")
            self._pending.write("\n".join(lines))
            self._pending.flush()
            self._pending_ids += [r.unit_id for r in fresh]
            if len(self._pending_ids) >= self.part_rows:
                if self._thread is None:
                    self.flush_part()
                else:
                    self._seal()
        return fresh

    def _seal(self) -> None:
        """The open log becomes the sealed log of the next part, written on the writer's thread."""
        self._settle(wait_for=len(self._sealed) + 1 - self.MAX_SEALED)
        self._pending.close()
        part = self._part_path()
        sealed = self.run_dir.episodes_dir / f"sealed-{part.stem.split('-')[1]}.jsonl"
        os.replace(self.run_dir.pending_path, sealed)
        self._sealed.append((self._thread.submit(_seal_into_part, sealed, part), self._pending_ids))
        self._pending = self.run_dir.pending_path.open("a")
        self._pending_ids = []

    def _settle(self, wait_for: int = 0) -> None:
        """Count the ids of the parts written since as in parts, waiting for the oldest `wait_for`
        first; a part that could not be written raises here."""
        while self._sealed and (wait_for > 0 or self._sealed[0][0].done()):
            future, ids = self._sealed.popleft()
            wait_for -= 1
            future.result()
            self._in_parts.add(digests_from_hex(ids))
            self._in_log.difference_update(ids)

    def flush_part(self) -> None:
        """Everything recorded into parts, now: the sealed logs' parts finished, the open log written
        as a part (part first, then truncate the log)."""
        self._settle(wait_for=len(self._sealed))
        self._pending.close()
        table = read_log(self.run_dir.pending_path)
        if table.num_rows:
            _write_part(table, self._part_path())
        self.run_dir.pending_path.unlink(missing_ok=True)
        self._in_parts.add(digests_from_hex(self._pending_ids))
        self._in_log.clear()
        self._pending = self.run_dir.pending_path.open("a")
        self._pending_ids = []

    def close(self) -> None:
        try:
            self.flush_part()
        finally:
            if self._thread is not None:
                self._thread.shutdown(wait=True)
            self._pending.close()
            if not self._pending_ids:
                self.run_dir.pending_path.unlink(missing_ok=True)
            fcntl.flock(self._lock_file, fcntl.LOCK_UN)
            self._lock_file.close()
