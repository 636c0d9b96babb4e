"""The result sink: the single writer of a sweep's results.

Every finished episode is first made durable in the run directory (the record of truth), then
mirrored to MLflow from a background thread, in batches (`log_batch`, one call per cell per
flush, never one call per metric), so a slow or dead tracking server never slows the sweep.

It runs in the driver process on purpose: the run directory must land on the machine where the
user ran the command, whichever nodes the episodes ran on.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import queue
import re
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolsweep.evaluator.rundir import EpisodeWriter, RunDirectory, read_summary
from toolsweep.evaluator.summary import Cell, CellTable, SpecsFor, summarize_cells
from toolsweep.evaluator.unit_ids import UnitIds
from toolsweep.evaluator.types import EpisodeResult

DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
PARENT_TAG = "toolsweep.run_id"
MIRROR_REST = 2.0
"""After a live flush that took c seconds of CPU, the mirror waits at least MIRROR_REST * c before the next."""


def rest_after_flush(cpu_spent_s: float, flush_interval_s: float) -> float:
    """Seconds the live mirror waits after a flush that spent `cpu_spent_s` of CPU.

    The live bootstrap shares the driver's cores with the scheduler (and on a laptop with the workers):
    twelve PlanBench-XL cells cost 3.2 s of CPU a flush, more than the 2 s between flushes
    (bench/mirror_lock.py). So it takes at most a third of a core: after c seconds of work, 2c of rest,
    and never less than the configured interval."""
    return max(flush_interval_s, MIRROR_REST * cpu_spent_s)
TRACE_WAIT_S = 600.0
"""How long the final MLflow step waits for the traces written in the background (`ResultSink`)."""
TRACED_TAG = "toolsweep.traced"  # which episodes of a cell have a trace (see actors/traces.py)
LOGGED_TAG = "toolsweep.logged"  # "<step>|<hash of the values>" of the last point a run holds
CELL_TAG = "toolsweep.cell"
ROLE_TAG = "toolsweep.role"  # "floor" on the no-LLM floor's cell runs, "model" on the others of a sweep with a floor
FLOOR_TAG = "toolsweep.floor"  # on a model's cell run: the floor model it is judged against
PARTIAL_TAG = "toolsweep.partial"  # "<done>/<expected>" units on a partial cell's run, "no" on a whole one


def is_connection_failure(exc: BaseException) -> bool:
    """Whether MLflow could not be reached at all (no answer, refused, timed out), as opposed to an
    answer that refused what was sent or a fault in the mirror itself; looks through the causes MLflow
    and requests wrap it in."""
    import socket

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, (ConnectionError, TimeoutError, socket.timeout, urllib.error.URLError)):
            return True
        if type(exc).__module__.split(".")[0] in ("requests", "urllib3") and any(
                word in type(exc).__name__ for word in ("Connection", "Timeout", "MaxRetry", "NewConnection")):
            return True
        if "Max retries exceeded" in str(exc) or "Failed to establish a new connection" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return False


def mlflow_trouble(exc: BaseException) -> str:
    """What went wrong with MLflow, in the words that say what to fix: only a connection failure is
    "unreachable"; refused credentials and the mirror's own faults are named as what they are."""
    # MLflow maps a 401/403 answer (JSON or not) to an error code that reads back as that status.
    status = getattr(exc, "get_http_status_code", lambda: None)()
    if status in (401, 403):
        return ("refused the sweep's credentials (a server with authentication: set MLFLOW_TRACKING_USERNAME "
                "and MLFLOW_TRACKING_PASSWORD to a user that may write)")
    if is_connection_failure(exc):
        return "is unreachable"
    if isinstance(status, int) and status >= 400:
        return f"answered HTTP {status} to the mirror (the server refused a request)"
    from_mlflow = type(exc).__module__.startswith(("mlflow", "sqlalchemy", "sqlite3"))
    if from_mlflow:
        return "refused a request of the mirror (the store is reachable; see the error)"
    return "could not be mirrored to: the mirror failed (a toolsweep fault, not the store's; please report it)"


def resolve_tracking_uri(explicit: str | None) -> str:
    return explicit or os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_TRACKING_URI


def local_artifact_location(tracking_uri: str) -> str | None:
    """Artifacts of a new experiment in a sqlite store go beside the database (`mlflow.db` →
    `mlflow_artifacts/`), not into `./mlruns` of whatever directory the command ran in. A tracking
    server (http) or a file store decides for itself (None)."""
    prefix = "sqlite:///"
    if not tracking_uri.startswith(prefix):
        return None
    db = Path(tracking_uri[len(prefix):].split("?", 1)[0])
    if str(db) in ("", ":memory:"):
        return None
    db = db.resolve()
    return (db.parent / f"{db.stem}_artifacts").as_uri()


_KEY_WORDS = [(">=", "ge"), ("<=", "le"), (">", "gt"), ("<", "lt"), ("=", "eq"), ("%", "pct"), ("+", "plus")]
METRIC_NAMES_TAG = "toolsweep.metric_names"
"""On each cell's run: JSON {MLflow key: metric name} for every key that differs from its name."""


def metric_key(name: str) -> str:
    """A metric name as an MLflow key (letters, digits, `_ - . /` and spaces on every platform): comparison
    and percent signs become words (`correct_bin_>20` → `correct_bin_gt20`), anything else `_`. Keys
    that differ from their names are recorded in METRIC_NAMES_TAG, so the mapping is reversible."""
    key = name
    for sign, word in _KEY_WORDS:
        key = key.replace(sign, word)
    return re.sub(r"[^\w\-. /]", "_", key, flags=re.ASCII)


def metric_keys(names: list[str]) -> dict[str, str]:
    """Each name's key, unique among these names (a clash gets `_2`, `_3`, ...), so no two metrics
    share a chart."""
    out: dict[str, str] = {}
    taken = {n for n in names if metric_key(n) == n}
    for name in names:
        key = metric_key(name)
        if key != name:
            base, i = key, 2
            while key in taken:
                key, i = f"{base}_{i}", i + 1
        taken.add(key)
        out[name] = key
    return out


def renamed_metrics(summary: dict[str, Any]) -> dict[str, str]:
    """{MLflow key: metric name} for the cell's metrics whose key differs from the name."""
    return {k: n for n, k in metric_keys(list(summary["metrics"])).items() if k != n}


def _put(out: dict[str, float], key: str, value: Any) -> None:
    """A finite number under `key` (MLflow rejects NaN in some backends; None is no reading)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        out[key] = float(value)


VARIANCE_FIELDS = ("var_task", "var_within", "icc", "design_effect", "effective_n", "n_tasks", "mean_seeds")
"""A cell's variance decomposition of each metric (summary.json's `variance`), logged as `<metric>.<field>`."""


def cell_metrics(summary: dict[str, Any]) -> dict[str, float]:
    """`<metric>`, `<metric>_ci_low`, `<metric>_ci_high` plus `n` and termination counts; from a final
    summary also, per metric, its variance decomposition (`<metric>.icc`, `.effective_n`, ...), pass^k
    (`<metric>.pass_k.<k>`) and, against the no-LLM floor, the floor's value (`<metric>.floor`, with
    `_ci_low`, `_ci_high`), model − floor (`<metric>.above_floor`, with `_ci_low`, `_ci_high`: the paired
    interval) and the judgement (`<metric>.vs_floor`: 1 above, 0 not distinguishable, -1 below); the
    replies cut at max_tokens (`truncated_replies`); and the cell's units (`units_done`, `units_expected`,
    `complete` 1 or 0)."""
    from toolsweep.evaluator.floor import JUDGEMENT_SIGN

    out: dict[str, float] = {"n": float(summary["n"])}
    keys = metric_keys(list(summary["metrics"]))
    for name, est in summary["metrics"].items():
        key = keys[name]
        for suffix, field_name in (("", "value"), ("_ci_low", "ci_low"), ("_ci_high", "ci_high")):
            _put(out, key + suffix, est[field_name])
    for reason, count in summary.get("terminations", {}).items():
        out[f"terminations.{reason}"] = float(count)
    for name, vc in (summary.get("variance") or {}).items():
        if name in keys:
            for field_name in VARIANCE_FIELDS:
                _put(out, f"{keys[name]}.{field_name}", vc.get(field_name))
    for name, curve in (summary.get("pass_k") or {}).items():
        if name in keys:
            for k, p in curve.items():
                _put(out, f"{keys[name]}.pass_k.{k}", p)
    for name, reading in ((summary.get("floor") or {}).get("metrics") or {}).items():
        if name not in keys:
            continue
        for prefix, part in ((".floor", reading.get("floor")), (".above_floor", reading.get("difference"))):
            for suffix, field_name in (("", "value"), ("_ci_low", "ci_low"), ("_ci_high", "ci_high")):
                _put(out, keys[name] + prefix + suffix, (part or {}).get(field_name))
        _put(out, f"{keys[name]}.vs_floor", JUDGEMENT_SIGN.get(str(reading.get("judgement"))))
    if "truncated_replies" in summary:  # replies cut at max_tokens: the cell measures the budget too
        _put(out, "truncated_replies", summary["truncated_replies"])
    if "units_expected" in summary:
        _put(out, "units_done", summary.get("units_done"))
        _put(out, "units_expected", summary["units_expected"])
        out["complete"] = 1.0 if summary.get("complete") else 0.0
    return out


def _as_params(values: dict[str, Any]) -> list[Any]:
    """MLflow params (strings as they are, anything else as JSON), cut to MLflow's value limit."""
    from mlflow.entities import Param

    return [Param(k, (v if isinstance(v, str) else json.dumps(v, default=str))[:5900]) for k, v in sorted(values.items())]



MAX_TAG_CHARS = 4900


def manifest_tags(manifest: dict[str, Any]) -> list[Any]:
    """Short manifest entries as `manifest.<key>` tags; a longer one is not cut into invalid JSON but
    left to the `manifest.json` artifact, which its tag names."""
    from mlflow.entities import RunTag

    tags = []
    for key, value in sorted(manifest.items()):
        text = json.dumps(value, default=str)
        if len(text) > MAX_TAG_CHARS:
            text = json.dumps({"in_artifact": "manifest.json", "key": key, "chars": len(text)})
        tags.append(RunTag(f"manifest.{key}", text))
    return tags


def headline_metrics(summaries: list[dict[str, Any]], headlines: dict[str, str] | None = None) -> dict[str, float]:
    """Each cell's headline metric (its benchmark's, from summary.json's `headline_metrics`; else the
    cell's first) with its interval, for the sweep's parent run: `<model>/<benchmark>/<setting>/<metric>`
    (and `_ci_low`, `_ci_high`), so one run compares them all."""
    out: dict[str, float] = {}
    for s in summaries:
        metrics = s.get("metrics") or {}
        if not metrics:
            continue
        name = (headlines or {}).get(s["benchmark"])
        if name not in metrics:
            name = next(iter(metrics))
        stats = metrics[name]
        key = f"{s['model']}/{s['benchmark']}/{s['setting']}/{name}"
        for suffix, field in (("", "value"), ("_ci_low", "ci_low"), ("_ci_high", "ci_high")):
            v = stats.get(field)
            if isinstance(v, (int, float)) and math.isfinite(v):
                out[key + suffix] = float(v)
    return out

def cell_description(cell: Cell, params: dict[str, Any], docs: dict[str, str]) -> str:
    """A cell run's description (MLflow shows it on the run's page): what the cell is and what each of
    its `setting.<name>` params means."""
    model, benchmark, setting = cell
    lines = [f"Model **{model}** on benchmark **{benchmark}**, setting **{setting}**.", ""]
    if params:
        lines.append("Setting parameters (the `setting.*` params):")
        for name, value in params.items():
            doc = docs.get(name)
            lines.append(f"- `setting.{name}` = `{json.dumps(value, default=str)}`" + (f": {doc}" if doc else ""))
    return "\n".join(lines)[:4900]


def split_episodes_by_cell(run_dir: RunDirectory, cells: set[Cell], out: Path) -> dict[Cell, Path]:
    """Write each cell's episodes to `out/<i>/episodes.parquet` in one pass over the run directory;
    returns the folder of each cell that has episodes."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    writers: dict[Cell, Any] = {}
    folders: dict[Cell, Path] = {}
    try:
        for part in run_dir.iter_tables():
            keys = pc.binary_join_element_wise(part["model"], part["benchmark"], part["setting"], "\x1f")
            for key in pc.unique(keys).to_pylist():
                cell = tuple(key.split("\x1f"))
                if cell not in cells:
                    continue
                rows = part.filter(pc.equal(keys, key))
                if cell not in writers:
                    folders[cell] = out / str(len(folders))  # type: ignore[index]
                    folders[cell].mkdir(parents=True)  # type: ignore[index]
                    writers[cell] = pq.ParquetWriter(folders[cell] / "episodes.parquet", rows.schema)  # type: ignore[index]
                writers[cell].write_table(rows)  # type: ignore[index]
    finally:
        for w in writers.values():
            w.close()
    return folders  # type: ignore[return-value]


def _stage(src: Path, dst: Path) -> None:
    """`src` at `dst` for an upload: a hard link where the file system allows one, else a copy."""
    import shutil

    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


MIRROR_RECORD = "mlflow.json"
"""In the run directory: which tracking store was last brought fully up to date with which summary.json
(its sha256). Written only once a mirror finished every step, so an interrupt anywhere before leaves
it stale and the next run of the same command rebuilds the mirror from the run directory."""


def _summary_digest(run_dir: RunDirectory) -> str | None:
    path = run_dir.summary_path
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def mirror_current(run_dir: RunDirectory, tracking_uri: str) -> bool:
    """Whether `tracking_uri` holds everything of the run directory's current summary (a file read and
    a hash: a finished sweep re-run stays instant)."""
    path = run_dir.path / MIRROR_RECORD
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return record.get("tracking_uri") == tracking_uri and record.get("summary_sha256") == _summary_digest(run_dir)


def record_mirror(run_dir: RunDirectory, tracking_uri: str) -> None:
    """Note that `tracking_uri` now mirrors the run directory's summary completely (`mirror_current`)."""
    from toolsweep.evaluator.rundir import atomic_write_text

    atomic_write_text(run_dir.path / MIRROR_RECORD, json.dumps(
        {"tracking_uri": tracking_uri, "summary_sha256": _summary_digest(run_dir),
         "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=2))


@dataclass
class _TraceJob:
    """Traces being written in the background: for which cells, the episodes split by cell (kept for
    the artifacts), and the outcome."""

    cells: set[Cell]
    tmp: Any  # a tempfile.TemporaryDirectory holding `files`
    thread: threading.Thread | None = None
    files: dict[Cell, Path] = field(default_factory=dict)
    traced: list[tuple[Cell, str]] = field(default_factory=list)
    error: BaseException | None = None


class MlflowMirror:
    """Mirrors cells of one run directory into MLflow: experiment = sweep, a parent run per sweep
    run, a nested child run per (model, benchmark, setting). Finds existing runs on resume."""

    def __init__(
        self,
        tracking_uri: str,
        experiment: str,
        run_id: str,
        setting_params: dict[tuple[str, str], dict[str, Any]] | None = None,
        traces_per_cell: int = 5,
        param_docs: dict[str, dict[str, str]] | None = None,
    ) -> None:
        self.tracking_uri = tracking_uri
        # benchmark -> {setting parameter: what it means}, for the cell run's description
        self.param_docs = param_docs or {}
        self.traces_per_cell = traces_per_cell
        self.experiment = experiment
        self.run_id = run_id
        # (benchmark, setting) -> the setting's parameters, logged as params of each cell's run so
        # runs can be filtered by them (e.g. APB's k, n_e, stage, unsolvable_type)
        self.setting_params = setting_params or {}
        self.client: Any = None
        self.parent_id: str | None = None
        self.children: dict[Cell, str] = {}
        self._experiment_id: str | None = None
        # what each run already holds (step and values' hash, from its LOGGED_TAG): a re-run or a
        # re-sync that would log the same point again logs nothing, so histories are never doubled
        self._logged: dict[Any, tuple[int, str]] = {}
        self._traced: dict[Any, str] = {}
        self._names_tagged: set[Cell] = set()
        self._role_tags: dict[tuple[Cell, str], str] = {}
        self._found: set[Cell] = set()  # cells whose run existed when this mirror connected
        self.verify_traces = False  # sync-mlflow sets it: every cell's traces are checked, not trusted to a tag
        self._trace_job: _TraceJob | None = None  # traces written in the background (`start_traces`)

    def connect(self, manifest: dict[str, Any], params: dict[str, Any]) -> None:
        """Open (or find again) the parent run. Raises when MLflow cannot be reached."""
        # A dead server must fail fast, not after minutes of urllib3 retries.
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
        if self.tracking_uri.startswith(("http://", "https://")):
            urllib.request.urlopen(self.tracking_uri.rstrip("/") + "/health", timeout=5).read()
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=self.tracking_uri)
        exp = self.client.get_experiment_by_name(self.experiment)
        self._experiment_id = exp.experiment_id if exp else self.client.create_experiment(
            self.experiment, artifact_location=local_artifact_location(self.tracking_uri)
        )
        found = self.client.search_runs(
            [self._experiment_id], filter_string=f"tags.`{PARENT_TAG}` = '{self.run_id}'"
        )
        parents = [r for r in found if "mlflow.parentRunId" not in r.data.tags]
        for r in found:
            if "mlflow.parentRunId" in r.data.tags and CELL_TAG in r.data.tags:
                cell = tuple(r.data.tags[CELL_TAG].split("|"))
                self.children[cell] = r.info.run_id  # type: ignore[index]
                self._found.add(cell)  # type: ignore[arg-type]
                self._remember(cell, r.data.tags.get(LOGGED_TAG))
                self._traced[cell] = r.data.tags.get(TRACED_TAG, "")
        if parents:
            self.parent_id = parents[0].info.run_id
            self._remember("parent", parents[0].data.tags.get(LOGGED_TAG))
            self.client.update_run(self.parent_id, status="RUNNING")
            return
        run = self.client.create_run(
            self._experiment_id, run_name=f"{self.experiment}-{self.run_id}", tags={PARENT_TAG: self.run_id}
        )
        self.parent_id = run.info.run_id
        tags = manifest_tags(manifest)
        plist = _as_params(params)
        for i in range(0, max(len(plist), len(tags)), 90):
            self.client.log_batch(self.parent_id, params=plist[i : i + 90], tags=tags[i : i + 90])

    def _child(self, cell: Cell) -> str:
        if cell not in self.children:
            model, benchmark, setting = cell
            run = self.client.create_run(
                self._experiment_id,
                run_name=f"{model} | {benchmark} | {setting}",
                tags={
                    "mlflow.parentRunId": self.parent_id,
                    PARENT_TAG: self.run_id,
                    CELL_TAG: "|".join(cell),
                    "model": model,
                    "benchmark": benchmark,
                    "setting": setting,
                    "mlflow.note.content": cell_description(
                        cell, self.setting_params.get((benchmark, setting), {}), self.param_docs.get(benchmark, {})),
                },
            )
            self.children[cell] = run.info.run_id
            params = {"model": model, "benchmark": benchmark, "setting": setting}
            params.update({f"setting.{k}": v for k, v in self.setting_params.get((benchmark, setting), {}).items()})
            plist = _as_params(params)
            for i in range(0, len(plist), 90):
                self.client.log_batch(run.info.run_id, params=plist[i : i + 90])
        return self.children[cell]

    def _remember(self, key: Any, tag: str | None) -> None:
        if tag and "|" in tag:
            step, digest = tag.split("|", 1)
            self._logged[key] = (int(step), digest)

    def _already_logged(self, key: Any, step: int, values: dict[str, float]) -> tuple[bool, str]:
        digest = hashlib.sha256(json.dumps(sorted((k, repr(v)) for k, v in values.items())).encode()).hexdigest()[:16]
        seen = self._logged.get(key)
        return (seen is not None and (step < seen[0] or (step == seen[0] and digest == seen[1]))), digest

    def _log_once(self, key: Any, run_id: Callable[[], str], step: int, values: dict[str, float],
                  tags: dict[str, str] | None = None) -> None:
        """Log `values` at `step` unless the run already holds this point (or a later one); `run_id`
        is asked only when there is something to log (it may create the run). `tags` go in the same
        `log_batch` as the metrics, or alone when the point is not logged (one transaction, not two)."""
        from mlflow.entities import Metric, RunTag

        extra = [RunTag(k, v) for k, v in sorted((tags or {}).items())]
        skip, digest = self._already_logged(key, step, values)
        if skip:
            if extra:
                self.client.log_batch(run_id(), tags=extra)
            return
        run_id = run_id()
        now = int(time.time() * 1000)
        metrics = [Metric(k, v, now, step) for k, v in values.items()]
        first = [RunTag(LOGGED_TAG, f"{step}|{digest}"), *extra]
        for i in range(0, max(len(metrics), 1), 900):
            self.client.log_batch(run_id, metrics=metrics[i : i + 900], tags=first if i == 0 else [])
        self._logged[key] = (step, digest)

    def log_composites(self, values: dict[str, float]) -> None:
        """Metrics across cells that benchmarks' report tables compute (e.g. APB's Table 1 composites
        with their stratified or paired intervals), on the sweep's parent run."""
        finite = {k: float(v) for k, v in sorted(values.items()) if math.isfinite(v)}
        if finite:
            self._log_once("parent", lambda: self.parent_id, 0, finite)

    def log_summaries(self, summaries: list[dict[str, Any]]) -> None:
        """One log_batch per cell (its metrics and the tags it is due), step = episodes done in that
        cell; a point the run already holds is not logged again."""
        for s in summaries:
            cell = (s["model"], s["benchmark"], s["setting"])
            step = int(sum(s.get("terminations", {}).values()))
            tags = self._role_tags_due(cell, s)
            renamed = renamed_metrics(s)
            if renamed and cell not in self._names_tagged:
                tags[METRIC_NAMES_TAG] = json.dumps(renamed, sort_keys=True)
            self._log_once(cell, lambda cell=cell: self._child(cell), step, cell_metrics(s), tags)
            if renamed:
                self._names_tagged.add(cell)
            self._role_tags.update({(cell, k): v for k, v in tags.items() if k != METRIC_NAMES_TAG})

    def _role_tags_due(self, cell: Cell, summary: dict[str, Any]) -> dict[str, str]:
        """Tags a reader filters runs by, those not yet set to this value: the floor's cell runs
        `toolsweep.role = floor` (the reference, not a contender), the others name their floor
        (`toolsweep.floor`); a partial cell `toolsweep.partial = <done>/<expected>` (a later whole
        summary sets it to `no`)."""
        tags = {}
        floor = summary.get("floor") or {}
        if summary.get("is_floor"):
            tags[ROLE_TAG] = "floor"
        elif floor.get("model"):
            tags[ROLE_TAG] = "model"
            tags[FLOOR_TAG] = str(floor["model"])
        if "units_expected" in summary:
            tags[PARTIAL_TAG] = "no" if summary.get("complete") else f"{summary.get('units_done')}/{summary['units_expected']}"
        return {k: v for k, v in tags.items() if self._role_tags.get((cell, k)) != v}

    def log_artifacts(self, run_dir: RunDirectory, summaries: list[dict[str, Any]]) -> None:
        """The sweep's manifest, summary, report and benchmark plots (and the summary's composites as
        metrics) on the parent; each cell's episodes, summary, convergence plot and traces on its child.
        Episodes stream: one pass over the part files splits them by cell, so memory holds one part."""
        if run_dir.summary_path.exists():
            summary = read_summary(run_dir.summary_path)  # the record, so a re-sync logs the same values
            self.log_composites({**headline_metrics(summary.get("cells", []), summary.get("headline_metrics")), **(summary.get("composites") or {})})
        wanted = {(s["model"], s["benchmark"], s["setting"]): s for s in summaries}
        job = self._take_trace_job(set(wanted))
        with tempfile.TemporaryDirectory() as tmp:
            # each run's files are staged in one folder and logged in one call (MLflow resolves the
            # run's artifact store per call: a third of the calls)
            parent = Path(tmp) / "parent"
            for path in (run_dir.manifest_path, run_dir.summary_path, run_dir.report_path):
                if path.exists():
                    _stage(path, parent / path.name)
            for plot in sorted(run_dir.plots_dir.glob("*.svg")):
                _stage(plot, parent / "plots" / plot.name)
            if parent.exists():
                self.client.log_artifacts(self.parent_id, str(parent))
            files = job.files if job is not None else split_episodes_by_cell(run_dir, set(wanted), Path(tmp) / "cells")
            for cell, s in wanted.items():
                folder = files.get(cell)
                if folder is None:
                    continue
                (folder / "summary.json").write_text(json.dumps(s, indent=2, default=str))
                run_id = self._child(cell)
                plot = run_dir.cell_plot_path(cell)
                if plot.exists():
                    _stage(plot, folder / "plots" / plot.name)
                self.client.log_artifacts(run_id, str(folder))
            traced = job.traced if job is not None else self._write_traces(
                files, {cell: bool(s.get("is_floor")) for cell, s in wanted.items()})
        if job is not None:
            job.tmp.cleanup()
        self._tag_traced(traced)

    def start_traces(self, run_dir: RunDirectory, cells: dict[Cell, bool]) -> None:
        """Write the traces of `cells` ({cell: is the floor's}) from a background thread, while the
        summary is computed: the run directory holds every episode by then, and the picks depend on
        it alone. `log_artifacts` takes the result (`wait_traces` first bounds the wait)."""
        job = _TraceJob(set(cells), tempfile.TemporaryDirectory())

        def work() -> None:
            try:
                job.files = split_episodes_by_cell(run_dir, set(cells), Path(job.tmp.name) / "cells")
                job.traced = self._write_traces(job.files, cells)
            except BaseException as exc:  # noqa: BLE001 - raised again where it is waited for
                job.error = exc

        job.thread = threading.Thread(target=work, name="mlflow-traces", daemon=True)
        self._trace_job = job
        job.thread.start()

    def wait_traces(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for the background traces (`start_traces`); whether none is left running."""
        job = self._trace_job
        if job is None or job.thread is None:
            return True
        job.thread.join(timeout_s)
        return not job.thread.is_alive()

    def traces_pending(self) -> bool:
        job = self._trace_job
        return job is not None and job.thread is not None and job.thread.is_alive()

    def _take_trace_job(self, cells: set[Cell]) -> _TraceJob | None:
        """The background traces' result when they were written for these very cells; their error is
        raised here. Other cells (a caller that changed its mind) are traced again inline."""
        job, self._trace_job = self._trace_job, None
        if job is None:
            return None
        if job.thread is not None:
            job.thread.join()
        if job.error is not None:
            job.tmp.cleanup()
            raise job.error
        if job.cells != cells:
            job.tmp.cleanup()
            return None
        return job

    def _write_traces(self, files: dict[Cell, Path], floor: dict[Cell, bool]) -> list[tuple[Cell, str]]:
        """Build the traces of each cell with episodes (`_log_traces`) and write them in bulk; returns
        the (cell, digest) pairs whose runs the traces brought up to date."""
        traced: list[tuple[Cell, str]] = []
        traces: list[Any] = []  # built per cell, written in bulk at the end (`export_traces`)
        if self.traces_per_cell <= 0:
            return traced
        import pyarrow.parquet as pq

        for cell, is_floor in floor.items():
            folder = files.get(cell)
            if folder is None:
                continue
            # the floor's episodes are a scripted policy's: a few show what it does, and its every
            # failure is no finding (they doubled the quick start's traces and MLflow time)
            digest = self._log_traces(cell, pq.read_table(folder / "episodes.parquet"), traces,
                                      max_failures=self.traces_per_cell if is_floor else None)
            if digest is not None:
                traced.append((cell, digest))
        if traces:
            from toolsweep.actors.traces import export_traces

            export_traces(self.tracking_uri, traces)
        return traced

    def _tag_traced(self, traced: list[tuple[Cell, str]]) -> None:
        """Each run whose traces are now current says so (TRACED_TAG): a later run trusts it."""
        if traced:
            from mlflow.entities import RunTag

            for cell, digest in traced:
                if self._traced.get(cell) != digest:
                    self.client.log_batch(self.children[cell], tags=[RunTag(TRACED_TAG, digest)])
                self._traced[cell] = digest

    def _log_traces(self, cell: Cell, rows: Any, out: list[Any], max_failures: int | None = None) -> str | None:
        """Transcripts of the cell's failures and a few of its answered episodes: the cell's run ends up
        holding exactly one trace of each picked episode and none other. Unless the run's tag says its
        traces are current (with `verify_traces`, sync-mlflow, even then), the picked episodes' traces are
        built into `out` (the caller writes them in bulk, then tags the run) and the run's other traces,
        of episodes no longer picked or second copies, are deleted. A trace's id follows from the run
        and the unit, so writing it again over a half-written export completes it, never copies it.
        Returns the pick's digest when `out` brings the run up to date."""
        from toolsweep.actors.traces import episode_trace, pick_episodes, traced_digest
        from toolsweep.evaluator.rundir import row_to_result

        ids = rows.column("unit_id").to_pylist()
        episodes = list(zip(ids, rows.column("termination").to_pylist()))
        picked = pick_episodes(episodes, self.traces_per_cell, *([] if max_failures is None else [max_failures]))
        digest = traced_digest(picked)
        if self._traced.get(cell) == digest and not self.verify_traces:
            return None
        if not picked and cell not in self.children:
            return None
        run_id = self._child(cell)
        # a run this process made holds no trace yet: only runs found at connect are read
        existing = self._traces_of_run(run_id) if cell in self._found else {}
        index = {u: i for i, u in enumerate(ids)}
        fresh = {}
        for unit_id in picked:
            row = rows.slice(index[unit_id], 1).to_pylist()[0]
            fresh[unit_id] = episode_trace(self._experiment_id, run_id, row_to_result(row), row.get("finished_at"))
        # every copy but the one with the id the export writes (an older version's, a second copy) goes,
        # as do traces of episodes no longer picked; writing a trace again over its own id is harmless
        extra = [t for u, ts in existing.items() for t in ts if u not in fresh or t != fresh[u].info.trace_id]
        for i in range(0, len(extra), 100):
            self.client.delete_traces(self._experiment_id, trace_ids=extra[i : i + 100])
        out.extend(fresh.values())
        return digest

    def _traces_of_run(self, run_id: str) -> dict[str, list[str]]:
        """{unit id: trace ids, oldest first} of the traces a cell's run holds."""
        out: dict[str, list[tuple[int, str]]] = {}
        token = None
        while True:
            page = self.client.search_traces(
                locations=[self._experiment_id], filter_string=f"metadata.`mlflow.sourceRun` = '{run_id}'",
                max_results=500, include_spans=False, page_token=token,
            )
            for t in page:
                unit = t.info.tags.get("toolsweep.unit_id")
                if unit:
                    out.setdefault(unit, []).append((int(t.info.request_time or 0), t.info.trace_id))
            token = page.token
            if not token:
                break
        return {u: [tid for _, tid in sorted(ts)] for u, ts in out.items()}

    def finish(self, status: str) -> None:
        for run_id in self.children.values():
            self.client.set_terminated(run_id, status=status)
        if self.parent_id:
            self.client.set_terminated(self.parent_id, status=status)


class ResultSink:
    """Appends results to the run directory at once and feeds the MLflow mirror thread."""

    def __init__(
        self,
        run_dir: RunDirectory,
        specs_for: SpecsFor,
        *,
        mirror: MlflowMirror | None,
        live_n_resamples: int = 1000,
        confidence: float = 0.95,
        seed: int = 0,
        resample: str = "tasks",
        flush_interval_s: float = 2.0,
        log: Any = None,
        unit_ids: UnitIds | None = None,
        floor_model: str | None = None,
        trace_wait_s: float = TRACE_WAIT_S,
    ) -> None:
        """`unit_ids`: the units the record describes (the whole config's, also for a subset run); the
        live table mirrors only their episodes, so MLflow never shows a cell the final summary has not.
        `floor_model`: the config's no-LLM floor (its cells get fewer traces); `trace_wait_s`: how long
        the final MLflow step waits for the traces written in the background since the episodes ended."""
        self.floor_model = floor_model
        self.trace_wait_s = trace_wait_s
        self.run_dir = run_dir
        self.writer = EpisodeWriter(run_dir, background=True)  # a part is written off the scheduler's loop
        self.specs_for = specs_for
        self.mirror = mirror
        self.live_n_resamples = live_n_resamples
        self.confidence = confidence
        self.seed = seed
        self.resample = resample  # the bootstrap's scheme (config bootstrap.resample)
        self.flush_interval_s = flush_interval_s
        self.log = log or (lambda msg: print(msg, file=sys.stderr))
        # The live table feeds the MLflow mirror and nothing else: without a mirror it is not kept
        # (every episode would cost the driver memory that no one reads).
        self.table: CellTable | None = None
        self.unit_ids = unit_ids
        if mirror is not None:
            self.table = CellTable()
            columns = ["model", "benchmark", "setting", "task_id", "seed", "termination", "metrics"]
            for part in run_dir.iter_tables(columns=["unit_id", *columns]):  # a part at a time: a resumed million-row run stays small
                if unit_ids is not None:
                    import pyarrow as pa

                    from toolsweep.evaluator.rundir import unit_id_digests

                    part = part.filter(pa.array(unit_ids.contains(unit_id_digests(part.column("unit_id")))))
                self.table.add_columns({name: part.column(name).to_pylist() for name in columns})
        self._dirty: set[Cell] = set(self.table.cells) if self.table is not None else set()
        self._table_lock = threading.Lock()
        self._queue: queue.Queue[bool] = queue.Queue()
        self._thread: threading.Thread | None = None
        self.mlflow_ok = mirror is not None
        self.closed = False
        self._cpu_clock: Callable[[], float] = time.thread_time  # the mirror thread's own CPU time

    @property
    def known_unit_ids(self) -> UnitIds:
        """The units recorded in the run directory (a snapshot, 32 bytes an id)."""
        return self.writer.known_unit_ids

    def start(self) -> None:
        if self.mirror is not None:
            self._thread = threading.Thread(target=self._mirror_loop, name="mlflow-mirror", daemon=True)
            self._thread.start()

    def add(self, results: list[EpisodeResult]) -> list[EpisodeResult]:
        """Record results (durably, at once); returns the ones that were new."""
        fresh = self.writer.append(results)
        with self._table_lock:
            if self.table is not None:
                for r in fresh:
                    if self.unit_ids is None or r.unit.unit_id in self.unit_ids:
                        self._dirty.add(self.table.add_result(r))
        return fresh

    def end_run(self) -> None:
        """The run is over: the last episodes into a part, the live mirror stopped and its table freed
        before the final summary reads the run directory (so two tables are never held at once)."""
        self.writer.flush_part()
        self._stop_mirror_thread()
        with self._table_lock:
            cells = list(self.table.cells) if self.table is not None else []
            self.table, self._dirty = None, set()
        start = getattr(self.mirror, "start_traces", None)
        if self.mlflow_ok and cells and start is not None:
            # the run directory is final: its traces are written while the summary is computed
            start(self.run_dir, {cell: cell[0] == self.floor_model for cell in cells})

    def _stop_mirror_thread(self) -> None:
        if self._thread is not None:
            self._queue.put(True)
            self._thread.join(timeout=60)
            self._thread = None

    def _mirror_failed(self, exc: BaseException) -> None:
        if self.mlflow_ok:
            self.mlflow_ok = False
            with self._table_lock:
                self.table, self._dirty = None, set()  # nothing will read it again
            self.log(
                f"MLflow at {self.mirror.tracking_uri} {mlflow_trouble(exc)} ({type(exc).__name__}: "
                f"{str(exc)[:200]}); the sweep goes on without it. Results are safe in "
                f"{self.run_dir.path}; mirror them later with: toolsweep sync-mlflow {self.run_dir.path}"
            )

    def _flush_mirror(self, n_resamples: int) -> None:
        # Only the copy is taken under the lock: `add` (the scheduler) never waits for a bootstrap.
        with self._table_lock:
            dirty, self._dirty = self._dirty, set()
            cells = self.table.snapshot(self.specs_for, only=dirty) if dirty and self.table is not None else []
        summaries = summarize_cells(cells, n_resamples=n_resamples, confidence=self.confidence, seed=self.seed,
                                    resample=self.resample)
        if summaries:
            self.mirror.log_summaries(summaries)

    def _mirror_loop(self) -> None:
        wait = self.flush_interval_s
        while self.mlflow_ok:
            try:
                stop = self._queue.get(timeout=wait)
            except queue.Empty:
                stop = False
            if stop:
                return
            cpu = self._cpu_clock()
            try:
                self._flush_mirror(self.live_n_resamples)
            except Exception as exc:  # noqa: BLE001 - MLflow trouble never stops a sweep
                self._mirror_failed(exc)
            wait = rest_after_flush(self._cpu_clock() - cpu, self.flush_interval_s)

    def _await_traces(self) -> bool:
        """Wait, at most `trace_wait_s`, for the traces written since the episodes ended; a longer wait
        leaves the mirror to the next run of the same command (the run directory is whole, and
        mlflow.json is not updated, so that run completes the mirror)."""
        pending = getattr(self.mirror, "traces_pending", lambda: False)
        if not pending():
            return True
        self.log(f"MLflow: waiting up to {self.trace_wait_s:.0f} s for the traces being written since the episodes ended")
        t0 = time.perf_counter()
        if self.mirror.wait_traces(self.trace_wait_s):
            self.log(f"MLflow: the traces were written ({time.perf_counter() - t0:.1f} s waited)")
            return True
        self.log(f"MLflow: the traces are still being written after {self.trace_wait_s:.0f} s; the run directory "
                 f"{self.run_dir.path} is complete, and running the same command again completes the mirror")
        self.mlflow_ok = False
        return False

    def close(self, final_summaries: list[dict[str, Any]] | None, status: str = "FINISHED") -> None:
        """Flush the run directory; log final numbers and artifacts to MLflow if it is reachable.
        A second call does nothing (the driver closes a sink that an error left open)."""
        if self.closed:
            return
        self.closed = True
        self.writer.close()
        self._stop_mirror_thread()
        if self.mirror is not None and self.mlflow_ok:
            try:
                if final_summaries and not self._await_traces():
                    return
                if final_summaries:
                    self.log(f"MLflow: writing the final metrics, artifacts and traces to {self.mirror.tracking_uri}")
                    self.mirror.log_summaries(final_summaries)
                    self.mirror.log_artifacts(self.run_dir, final_summaries)
                self.mirror.finish(status)
                if final_summaries:
                    record_mirror(self.run_dir, self.mirror.tracking_uri)
            except Exception as exc:  # noqa: BLE001
                self._mirror_failed(exc)
