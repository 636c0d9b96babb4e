"""The TRAJECT-Bench public release, read from a folder (the benchmark's data *is* its recorded data).

Official layout (the authors' `public_data/` folder)::

    <data_dir>/tools/<Domain>_tool.json              tool definitions of one domain
    <data_dir>/parallel/<Domain>/simple_ver.json     parallel tasks, simple (explicit) queries
    <data_dir>/parallel/<Domain>/hard_ver.json       the same trajectories, hard (indirect) queries
    <data_dir>/sequential/<Domain>/traj_query.json   sequential tasks (one query style)

Domains are discovered from the folder, never assumed: the public copy holds some of the paper's ten
domains, and a user may point at a subset. Every record is validated with pydantic; a malformed
record or an unreadable file becomes one entry in `Dataset.issues` ("<file>[<index>]: ...") and is
skipped, so one bad file does not take the benchmark down (`strict=True` raises instead).

Loading is done once per process per folder (`load_dataset` caches), and the result is immutable,
so environments running in threads share it without locks.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator

SPLITS = ("par-simple", "par-hard", "seq")
"""Task splits: parallel tasks with simple / hard queries, and sequential tasks."""

SPLIT_FILES = {
    "par-simple": ("parallel", "simple_ver.json"),
    "par-hard": ("parallel", "hard_ver.json"),
    "seq": ("sequential", "traj_query.json"),
}

EXPECTED_LAYOUT = (
    "expected the TRAJECT-Bench public data layout:\n"
    "  <data_dir>/tools/<Domain>_tool.json\n"
    "  <data_dir>/parallel/<Domain>/simple_ver.json and hard_ver.json\n"
    "  <data_dir>/sequential/<Domain>/traj_query.json\n"
    "(the `public_data/` folder of the benchmark's repository, PengfeiHePower/TRAJECT-Bench); "
    "set the benchmark option `data_dir` to that folder"
)


class DataLayoutError(ValueError):
    """`data_dir` is missing or does not hold the official layout."""


class DataError(ValueError):
    """Malformed records or files (raised only with `strict=True`; otherwise reported as issues)."""


def canon_name(name: str) -> str:
    """A tool's identity: whitespace collapsed and stripped.

    The release spells a few names differently in tools and trajectories (a trailing space, a
    double space), which would otherwise make gold tools unreachable.
    """
    return " ".join(str(name).split())


# --------------------------------------------------------------------------------------------------
# Raw records (pydantic): exactly what the JSON files hold, with the release's key spellings.


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class ParamSpecRecord(_Lenient):
    name: str
    type: str = "STRING"
    description: str | None = ""
    default: Any = None


class ToolRecord(_Lenient):
    tool_name: str = Field(alias="tool name")
    tool_description: str = Field("", alias="tool description")
    parent_tool_name: str = Field("", alias="parent tool name")
    parent_tool_description: str | None = Field("", alias="parent tool description")
    api_name: str = Field("", alias="API name")
    domain_name: str = Field("", alias="domain name")
    required_parameters: list[ParamSpecRecord] = Field(default_factory=list)
    optional_parameters: list[ParamSpecRecord] = Field(default_factory=list)


class ParamValueRecord(_Lenient):
    name: str
    value: Any = None


class SequenceStepRecord(_Lenient):
    step_number: int | None = None
    tool_name: str = ""
    param_for_next_tool: str | None = ""


class CallRecord(_Lenient):
    tool_name: str = Field(alias="tool name")
    tool_description: str | None = Field("", alias="tool description")
    required: list[ParamValueRecord] = Field(
        default_factory=list,
        validation_alias=AliasChoices("required parameters", "required_parameters"),
    )
    optional: list[ParamValueRecord] = Field(
        default_factory=list,
        validation_alias=AliasChoices("optional parameters", "optional_parameters"),
    )
    executed_output: Any = ""
    sequence_step: SequenceStepRecord | None = None

    @field_validator("required", "optional", mode="before")
    @classmethod
    def _none_is_empty(cls, v: Any) -> Any:
        return [] if v is None else v


class TaskRecord(_Lenient):
    query: str
    tool_list: list[CallRecord] = Field(validation_alias=AliasChoices("tool list", "tool_list"))
    final_answer: Any = ""

    @field_validator("tool_list")
    @classmethod
    def _non_empty(cls, v: list[CallRecord]) -> list[CallRecord]:
        if not v:
            raise ValueError("empty tool list")
        return v


# --------------------------------------------------------------------------------------------------
# What the benchmark uses: small immutable records.


@dataclass(frozen=True)
class Param:
    name: str
    type: str
    description: str
    default: Any


@dataclass(frozen=True)
class ToolDef:
    """One tool as the model sees it (output_info, connected tools and code stay hidden, as in the
    paper). `synthesized` marks a tool that a gold trajectory uses but the release's tool file lacks:
    it is rebuilt from the gold calls so every gold trajectory stays reachable."""

    name: str
    description: str
    parent: str
    api_name: str
    domain: str
    required: tuple[Param, ...]
    optional: tuple[Param, ...]
    synthesized: bool = False
    raw_name: str = ""  # the tool file's own spelling (the authors' scripts compare names unchanged)

    @property
    def shown_name(self) -> str:
        return self.raw_name or self.name

    def visible(self) -> dict[str, Any]:
        """The fields the paper's prompts show, in its order."""

        def plist(ps: tuple[Param, ...]) -> list[dict[str, Any]]:
            return [
                {"name": p.name, "type": p.type, "description": p.description, "default": p.default}
                for p in ps
            ]

        return {
            "parent tool name": self.parent,
            "required_parameters": plist(self.required),
            "optional_parameters": plist(self.optional),
            "tool name": self.shown_name,  # as the authors' prompt shows it (the file's spelling)
            "tool description": self.description,
            "API name": self.api_name,
            "domain name": self.domain,
        }


@dataclass(frozen=True)
class GoldCall:
    name: str
    description: str
    required: tuple[tuple[str, Any], ...]
    optional: tuple[tuple[str, Any], ...]
    output: str
    next_param: str = ""
    raw_name: str = ""  # the trajectory file's own spelling (may differ from the tool file's)

    def args(self) -> dict[str, Any]:
        return {k: v for k, v in (*self.required, *self.optional)}

    def as_call(self) -> dict[str, Any]:
        """The call in the paper's trajectory JSON format."""
        return {
            "tool name": self.raw_name or self.name,
            "required_parameters": [{"name": k, "value": v} for k, v in self.required],
            "optional_parameters": [{"name": k, "value": v} for k, v in self.optional],
        }


@dataclass(frozen=True)
class Binding:
    """Gold data flow: call `src`'s output feeds parameter `param` of call `dst` (sequential)."""

    src: int
    dst: int
    param: str


@dataclass(frozen=True)
class Task:
    task_id: str
    domain: str
    split: str
    index: int
    query: str
    calls: tuple[GoldCall, ...]
    final_answer: str
    bindings: tuple[Binding, ...] = ()

    @property
    def sequential(self) -> bool:
        return self.split == "seq"

    @property
    def n(self) -> int:
        return len(self.calls)


@dataclass
class Dataset:
    data_dir: Path
    domains: list[str]
    raw_tool_counts: dict[str, int]
    pools: dict[str, tuple[str, ...]]
    catalog: dict[str, ToolDef]
    tasks: dict[str, list[Task]]
    task_by_id: dict[str, Task]
    issues: list[str]
    sha256: str
    load_seconds: float
    all_pool: tuple[str, ...] = field(default=())
    domain_defs: dict[str, dict[str, ToolDef]] = field(default_factory=dict)

    def tool_def(self, name: str, domain: str | None = None) -> ToolDef:
        """A tool as a task of `domain` sees it: that domain's file's definition where it differs."""
        return self.domain_defs.get(domain or "", {}).get(name) or self.catalog[name]

    def splits(self) -> list[str]:
        return [s for s in SPLITS if self.tasks.get(s)]

    def query_counts(self) -> dict[str, dict[str, int]]:
        """domain -> split -> number of tasks (Table 9's layout)."""
        out: dict[str, dict[str, int]] = {d: {} for d in self.domains}
        for split, tasks in self.tasks.items():
            for t in tasks:
                out[t.domain][split] = out[t.domain].get(split, 0) + 1
        return out


# --------------------------------------------------------------------------------------------------


def _read_json(path: Path, digest: Any, issues: list[str]) -> Any:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        issues.append(f"{path}: cannot read ({exc})")
        return None
    digest.update(path.name.encode())
    digest.update(raw)
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        issues.append(f"{path}: not valid JSON ({exc}); file skipped")
        return None


def _records(path: Path, data: Any, model: type[BaseModel], issues: list[str]) -> list[tuple[int, Any]]:
    if not isinstance(data, list):
        issues.append(f"{path}: expected a JSON list of records, got {type(data).__name__}; file skipped")
        return []
    out = []
    for i, item in enumerate(data):
        try:
            out.append((i, model.model_validate(item)))
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(x) for x in first["loc"])
            issues.append(f"{path}[{i}]: {first['msg']} at {loc or '<record>'}; record skipped")
    return out


def _params(ps: list[ParamSpecRecord]) -> tuple[Param, ...]:
    return tuple(Param(p.name, p.type or "STRING", p.description or "", p.default) for p in ps)


def _answer_text(v: Any) -> str:
    # Sequential records hold {"answer", "reason"}; parallel ones a string.
    if isinstance(v, dict):
        return str(v.get("answer", ""))
    return "" if v is None else str(v)


def _output_text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)


def _infer_type(values: list[Any]) -> str:
    if values and all(isinstance(v, bool) for v in values):
        return "BOOLEAN"
    if values and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return "NUMBER"
    return "STRING"


def _discover(root: Path) -> list[str]:
    found: set[str] = set()
    tools = root / "tools"
    if tools.is_dir():
        found |= {p.name[: -len("_tool.json")] for p in tools.glob("*_tool.json")}
    for split, (folder, fname) in SPLIT_FILES.items():
        base = root / folder
        if base.is_dir():
            found |= {p.parent.name for p in base.glob(f"*/{fname}")}
    return sorted(found)


def _check_layout(data_dir: str | Path) -> Path:
    if data_dir is None or str(data_dir).strip() == "":
        raise DataLayoutError(f"traject_bench: option `data_dir` is required; {EXPECTED_LAYOUT}")
    root = Path(data_dir).expanduser()
    if not root.exists():
        raise DataLayoutError(f"traject_bench: data_dir {str(root)!r} does not exist; {EXPECTED_LAYOUT}")
    if not root.is_dir():
        raise DataLayoutError(f"traject_bench: data_dir {str(root)!r} is not a folder; {EXPECTED_LAYOUT}")
    if not _discover(root):
        raise DataLayoutError(
            f"traject_bench: no domain files found under {str(root)!r}; {EXPECTED_LAYOUT}"
        )
    return root.resolve()


def _build(root: Path) -> Dataset:
    t0 = time.perf_counter()
    issues: list[str] = []
    digest = hashlib.sha256()
    domains = _discover(root)

    catalog: dict[str, ToolDef] = {}
    domain_defs: dict[str, dict[str, ToolDef]] = {}
    pools: dict[str, list[str]] = {}
    raw_counts: dict[str, int] = {}
    for d in domains:
        path = root / "tools" / f"{d}_tool.json"
        pools[d] = []
        if not path.exists():
            issues.append(f"{path}: missing; domain {d!r} gets only the tools its trajectories use")
            continue
        data = _read_json(path, digest, issues)
        if data is None:
            continue
        recs = _records(path, data, ToolRecord, issues)
        raw_counts[d] = len(recs)
        seen: set[str] = set()
        for _, r in recs:
            name = canon_name(r.tool_name)
            if name in seen:  # the release repeats some tools within a file; keep the first
                continue
            seen.add(name)
            pools[d].append(name)
            tool = ToolDef(
                name=name,
                description=r.tool_description or "",
                parent=r.parent_tool_name or name.split(": ")[0],
                api_name=r.api_name or name.partition(": ")[2],
                domain=r.domain_name or d,
                required=_params(r.required_parameters),
                optional=_params(r.optional_parameters),
                raw_name=r.tool_name,
            )
            if name not in catalog:
                catalog[name] = tool
            elif catalog[name] != tool:
                # a tool several domains share, described differently in each file: each domain's
                # prompts show its own description, whichever domains are loaded with it
                domain_defs.setdefault(d, {})[name] = tool

    tasks: dict[str, list[Task]] = {s: [] for s in SPLITS}
    gold_only: dict[str, dict[str, Any]] = {}  # name -> info to synthesize a ToolDef
    for split, (folder, fname) in SPLIT_FILES.items():
        for d in domains:
            path = root / folder / d / fname
            if not path.exists():
                continue
            data = _read_json(path, digest, issues)
            if data is None:
                continue
            for i, rec in _records(path, data, TaskRecord, issues):
                calls = []
                for c in rec.tool_list:
                    name = canon_name(c.tool_name)
                    nxt = (c.sequence_step.param_for_next_tool or "") if c.sequence_step else ""
                    calls.append(
                        GoldCall(
                            name=name,
                            description=c.tool_description or "",
                            required=tuple((p.name, p.value) for p in c.required),
                            optional=tuple((p.name, p.value) for p in c.optional),
                            output=_output_text(c.executed_output),
                            next_param=nxt.strip(),
                            raw_name=c.tool_name,
                        )
                    )
                    if name not in pools[d]:
                        pools[d].append(name)
                    if name not in catalog:
                        info = gold_only.setdefault(
                            name, {"domain": d, "desc": c.tool_description or "", "req": {}, "opt": {}, "raw": c.tool_name}
                        )
                        for p in c.required:
                            info["req"].setdefault(p.name, []).append(p.value)
                        for p in c.optional:
                            info["opt"].setdefault(p.name, []).append(p.value)
                bindings = []
                if split == "seq":
                    for j in range(len(calls) - 1):
                        q = calls[j].next_param
                        if q and q in calls[j + 1].args():
                            bindings.append(Binding(j, j + 1, q))
                task_id = f"{d}/{split}/{i}"
                tasks[split].append(
                    Task(
                        task_id=task_id,
                        domain=d,
                        split=split,
                        index=i,
                        query=rec.query,
                        calls=tuple(calls),
                        final_answer=_answer_text(rec.final_answer),
                        bindings=tuple(bindings),
                    )
                )

    for name, info in sorted(gold_only.items()):
        req = {k: v for k, v in info["req"].items()}
        opt = {k: v for k, v in info["opt"].items() if k not in req}
        catalog[name] = ToolDef(
            name=name,
            description=info["desc"],
            parent=name.split(": ")[0],
            api_name=name.partition(": ")[2],
            domain=info["domain"],
            required=tuple(Param(k, _infer_type(v), "", None) for k, v in req.items()),
            optional=tuple(Param(k, _infer_type(v), "", None) for k, v in opt.items()),
            synthesized=True,
            raw_name=info["raw"],
        )

    all_pool: list[str] = []
    seen_all: set[str] = set()
    for d in domains:
        for n in pools[d]:
            if n not in seen_all:
                seen_all.add(n)
                all_pool.append(n)
    task_by_id = {t.task_id: t for ts in tasks.values() for t in ts}
    return Dataset(
        data_dir=root,
        domains=domains,
        raw_tool_counts=raw_counts,
        pools={d: tuple(p) for d, p in pools.items()},
        catalog=catalog,
        tasks=tasks,
        task_by_id=task_by_id,
        issues=issues,
        sha256=digest.hexdigest(),
        load_seconds=time.perf_counter() - t0,
        all_pool=tuple(all_pool),
        domain_defs=domain_defs,
    )


_cache: dict[Path, Dataset] = {}
_lock = threading.Lock()


def load_dataset(data_dir: str | Path, *, strict: bool = False) -> Dataset:
    """The dataset in `data_dir`, loaded once per process (thread-safe).

    Raises `DataLayoutError` when the folder is missing or holds no domain files, and `DataError`
    with every issue listed when `strict` and anything was malformed.
    """
    root = _check_layout(data_dir)
    with _lock:
        ds = _cache.get(root)
        if ds is None:
            ds = _build(root)
            _cache[root] = ds
    if strict and ds.issues:
        raise DataError(
            f"traject_bench: {len(ds.issues)} problem(s) in {root}:\n  " + "\n  ".join(ds.issues)
        )
    return ds
