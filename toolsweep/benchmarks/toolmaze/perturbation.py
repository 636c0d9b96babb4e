"""The runtime perturbation engine (spec §4).

A profile per (task, P) says which tool or alternative group fails and what synthetic response it
returns. Explicit responses (P1/P2) are HTTP-style errors; implicit ones (P3/P4) are the tool's
clean response with one field corrupted so that it still validates against the output schema but
violates a declared constraint. Both are drawn per (task, tool) by seed and shared by the transient
and permanent variants, so only persistence differs. Responses are fixed per (task, P): every
model sees the same bytes. The engine state is per episode.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from toolsweep.benchmarks.toolmaze.tasks import Task, TaskSet
from toolsweep.benchmarks.toolmaze.tools import (
    CITIES,
    COMPANIES,
    CRYPTOS,
    DOCUMENTS,
    PEOPLE,
    PRODUCTS,
    ROOMS,
    TYPES,
    TZ_OFFSETS,
    OutField,
    Tool,
    canonical,
    constraint_violations,
    get_path,
    schema_valid,
    seeded_int,
    set_path,
)

MODES = {  # P id -> (manifestation, persistence)
    "P1": ("explicit", "transient"),
    "P2": ("explicit", "permanent"),
    "P3": ("implicit", "transient"),
    "P4": ("implicit", "permanent"),
}

EXPLICIT_POOL = {
    "http_404": {"error": {"status": 404, "code": "NOT_FOUND", "message": "The requested resource was not found."}},
    "http_429": {"error": {"status": 429, "code": "RATE_LIMITED", "message": "Too many requests."}},
    "http_500": {"error": {"status": 500, "code": "INTERNAL_ERROR", "message": "Internal server error."}},
    "http_503": {"error": {"status": 503, "code": "SERVICE_UNAVAILABLE", "message": "Service unavailable."}},
    "timeout": {"error": {"status": 504, "code": "TIMEOUT", "message": "Upstream request timed out after 30000 ms."}},
    "conn_reset": {"error": {"status": None, "code": "CONNECTION_ERROR", "message": "Connection reset by peer."}},
}

_OTHER_ENTITY = {  # echo-param type -> the world values an ENTITY_MISMATCH may switch to
    "company_name": [c for c, _ in COMPANIES], "ticker": [t for _, t in COMPANIES],
    "crypto_name": [c for c, _ in CRYPTOS], "crypto_symbol": [s for _, s in CRYPTOS],
    "city": [c[0] for c in CITIES], "airport_code": [c[1] for c in CITIES],
    "product_name": [p for p, _ in PRODUCTS], "product_id": [i for _, i in PRODUCTS],
    "room_name": [r for r, _ in ROOMS], "device_id": [d for _, d in ROOMS],
    "person_name": [p for p, _ in PEOPLE], "email_address": [e for _, e in PEOPLE],
    "document_name": [d for d, _ in DOCUMENTS], "document_id": [i for _, i in DOCUMENTS],
    "timezone": sorted(TZ_OFFSETS),
}


FAULT_BINDINGS = ("task", "first_call")


@dataclass(frozen=True)
class Rule:
    """One fault: a single tool (C1) or an alternative group. `victim` is the tool the fault is bound
    to when the task is made (a tool of s*, paper §3.4 "which tool on the preferred path s* should
    fail"); None means the group's first-called member takes it (the `first_call` binding)."""

    rule_id: str
    scope: str  # tool | group
    members: tuple[str, ...]
    responses: dict[str, str]  # tool -> synthetic response (JSON text)
    corrupted: dict[str, tuple[Any, ...]] = field(default_factory=dict)  # tool -> corrupted values
    operators: dict[str, str] = field(default_factory=dict)  # tool -> error class / operator
    victim: str | None = None

    @property
    def fault_tools(self) -> tuple[str, ...]:
        """The tools that can take this fault: the bound victim, or any member before activation."""
        return (self.victim,) if self.victim is not None else self.members


@dataclass(frozen=True)
class Profile:
    task_id: str
    mode: str  # P0..P4
    rules: tuple[Rule, ...]

    @property
    def manifestation(self) -> str | None:
        return MODES[self.mode][0] if self.mode in MODES else None

    @property
    def permanent(self) -> bool:
        return self.mode in ("P2", "P4")

    def to_json(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "mode": self.mode, "rules": [
            {"rule_id": r.rule_id, "scope": r.scope, "members": list(r.members), "responses": r.responses,
             "corrupted": {k: list(v) for k, v in r.corrupted.items()}, "operators": r.operators,
             "victim": r.victim}
            for r in self.rules]}


# ------------------------------------------------------------------------------------------------
# canonical clean responses and implicit corruption


def clean_call(task: Task, tool: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(canonical args, clean response) of a tool: its expected call on the first path that has it."""
    for exp in task.expected:
        if tool in exp:
            return exp[tool]["args"], exp[tool]["output"]
    raise KeyError(tool)


def consumed_fields(task: Task, tool: str) -> list[str]:
    """Fields of `tool` that some downstream node binds (so a corruption can propagate)."""
    out = []
    for b in task.bindings:
        for binds in b.values():
            for x in binds.values():
                if x[0] in ("edge", "free") and x[1] == tool and x[2] not in out:
                    out.append(x[2])
    return sorted(out)


def _operators(tool: Tool, f: OutField) -> list[str]:
    t = TYPES[f.type]
    ops: list[str] = []
    if t.dim == "money":
        ops.append("NONPOS_PRICE")
    elif f.type in ("stock_count", "word_count", "message_count", "distance_km", "distance_mi", "weight_kg",
                    "weight_lb", "energy_kwh", "energy_wh", "wind_kph", "wind_mph", "duration_min", "co2_kg"):
        ops.append("NEG_COUNT")
    elif t.json in ("number", "integer") and t.maximum is not None:
        ops.append("OUT_OF_RANGE")
    if t.fmt in ("date-time", "local-date-time", "slot", "date"):
        ops.append("BAD_DATETIME")
    if f.type == "text":
        ops.append("TEXT_GARBLED")
    if t.enum and f.how != "echo":
        ops.append("INVALID_ENUM")
    if f.type == "record_id":
        ops.append("CONTRADICTION")
    if f.how == "convert":
        ops.append("INCONSISTENT_CALC")
    if any(o.how == "echo" and o.type in _OTHER_ENTITY for o in tool.outputs):
        ops.append("ENTITY_MISMATCH")
    if t.pattern and f.type not in ("text", "record_id"):
        ops.append("MALFORMED_ID")
    return ops


def _apply(op: str, tool: Tool, f: OutField, clean: dict, args: dict, rng: random.Random,
           sim) -> dict | None:
    out = json.loads(json.dumps(clean))
    v = get_path(clean, f.path)
    t = TYPES[f.type]
    if op == "NONPOS_PRICE":
        set_path(out, f.path, -abs(float(v)) if v else -1.0)
    elif op == "NEG_COUNT":
        neg = -(abs(v) + 37)
        set_path(out, f.path, int(neg) if t.json == "integer" else round(float(neg), 2))
    elif op == "OUT_OF_RANGE":
        big = t.maximum + (t.maximum - (t.minimum or 0)) * 1.5 + 7
        set_path(out, f.path, int(big) if t.json == "integer" else round(float(big), 2))
    elif op == "BAD_DATETIME":
        bad = {"date-time": "2026-02-30T25:61:00Z", "local-date-time": "2026-02-30T25:61:00+01:00",
               "slot": "2026-02-30T25:61", "date": "2026-02-30"}[t.fmt]
        set_path(out, f.path, bad)
    elif op == "TEXT_GARBLED":
        s = str(v)
        set_path(out, f.path, s[: len(s) // 2] + "\ufffd\ufffd\ufffd" + s[len(s) // 2:])
    elif op == "INVALID_ENUM":
        set_path(out, f.path, "unknown")
    elif op == "CONTRADICTION":
        set_path(out, f.path, "")  # "confirmed" with no reference
    elif op == "INCONSISTENT_CALC":
        set_path(out, f.path, round(float(v) * 10, 2) if t.json == "number" else int(v) * 10)
    elif op == "MALFORMED_ID":
        set_path(out, f.path, str(v).lower() + "-??")
    elif op == "ENTITY_MISMATCH":
        echo = next(o for o in tool.outputs if o.how == "echo" and o.type in _OTHER_ENTITY)
        mine = str(args[echo.arg]).lower()
        others = [x for x in _OTHER_ENTITY[echo.type] if x.lower() != mine]
        other = rng.choice(sorted(others))
        alt = sim.respond(tool.name, {**args, echo.arg: other}, {})
        if "error" in alt:
            return None
        out = alt  # the response of another entity: echo and values no longer match the request
    else:
        raise KeyError(op)
    return out


def corrupt(task: Task, tool_name: str, sim, seed: int, mode_key: str = "implicit") -> tuple[dict, str, tuple]:
    """An implicit corruption of `tool_name`'s clean response (spec §4.3): schema-valid, violates a
    declared constraint, differs in a consumed field. Returns (response, operator, corrupted values)."""
    tool = sim.corpus.tools[tool_name]
    args, clean = clean_call(task, tool_name)
    rng = random.Random(seeded_int(seed, mode_key, task.task_id, tool_name))
    consumed = consumed_fields(task, tool_name)
    targets = [o for o in tool.outputs if o.path in consumed] or [tool.primary]
    target = targets[rng.randrange(len(targets))]
    ops = _operators(tool, target)
    rng.shuffle(ops)
    for op in ops:
        resp = _apply(op, tool, target, clean, args, rng, sim)
        if resp is None or not schema_valid(tool, resp):
            continue
        if not constraint_violations(tool, args, resp):
            continue
        if get_path(resp, target.path) == get_path(clean, target.path):
            continue
        bad = tuple(sorted({canonical(get_path(resp, o.path)) for o in tool.outputs
                            if get_path(resp, o.path) != get_path(clean, o.path)}))
        return resp, op, tuple(json.loads(b) for b in bad)
    raise RuntimeError(f"no implicit corruption applies to {tool_name} in {task.task_id}")


# ------------------------------------------------------------------------------------------------


def victims(task: Task, c4_fault_slots: str = "all", seed: int = 0) -> list[tuple[str, str, tuple[str, ...]]]:
    """(rule_id, scope, members): C1 one node of s*, C2/C3 the one group, C4 one rule per slot
    (`c4_fault_slots="all"`, spec A6) or one seeded slot (`"one"`, the alternative reading)."""
    if task.complexity == 1:
        return [("r1", "tool", (task.victim,))]
    rules = [(f"r{i + 1}", "group", g.tools) for i, g in enumerate(task.groups)]
    if task.complexity == 4 and c4_fault_slots == "one":
        rules = [rules[random.Random(seeded_int(seed, "c4slot", task.task_id)).randrange(len(rules))]]
    elif c4_fault_slots not in ("all", "one"):
        raise ValueError(f"c4_fault_slots must be 'all' or 'one', not {c4_fault_slots!r}")
    return rules


def bound_victim(task: Task, members: tuple[str, ...], seed: int) -> str:
    """The tool a fault is bound to when the task is made: the rule's tool on s* (paper §3.4: "a
    perturbation profile that specifies which tool on the preferred path s* should fail"; §1:
    "injected at pre-specified tool nodes rather than randomly"). In a many-to-many block whose s*
    member has two tools, one of them drawn by seed. Fixed before any call, so the order in which an
    agent calls a group's members cannot move it."""
    on_path = [t for t in task.default_path if t in members]
    if not on_path:
        raise ValueError(f"{task.task_id}: no tool of fault rule {members} lies on s*")
    return on_path[random.Random(seeded_int(seed, "bound-victim", task.task_id, *members)).randrange(len(on_path))]


def build_profile(ts: TaskSet, task: Task, mode: str, c4_fault_slots: str = "all",
                  fault_binding: str = "task") -> Profile:
    """The fault profile of (task, P). `fault_binding="task"` binds each fault to a tool of s* when the
    task is made; `"first_call"` keeps the paper's literal activation rule (§3.4, "Fault Activation
    Rules"): the group member the agent calls first takes the fault."""
    if fault_binding not in FAULT_BINDINGS:
        raise ValueError(f"fault_binding must be one of {FAULT_BINDINGS}, not {fault_binding!r}")
    if mode == "P0":
        return Profile(task.task_id, mode, ())
    manifestation, _ = MODES[mode]
    rules = []
    for rule_id, scope, members in victims(task, c4_fault_slots, ts.dataset_seed):
        responses, corrupted, ops = {}, {}, {}
        for m in members:
            if manifestation == "explicit":
                rng = random.Random(seeded_int(ts.dataset_seed, "explicit", task.task_id, m))
                cls = sorted(EXPLICIT_POOL)[rng.randrange(len(EXPLICIT_POOL))]
                responses[m] = canonical(EXPLICIT_POOL[cls])
                ops[m] = cls
            else:
                resp, op, bad = corrupt(task, m, ts.simulator, ts.dataset_seed)
                responses[m] = canonical(resp)
                corrupted[m] = bad
                ops[m] = op
        victim = bound_victim(task, tuple(members), ts.dataset_seed) if fault_binding == "task" else None
        rules.append(Rule(rule_id, scope, tuple(members), responses, corrupted, ops, victim))
    return Profile(task.task_id, mode, tuple(rules))


@dataclass
class Hit:
    rule_id: str
    response: str
    kind: str  # explicit | implicit


class Engine:
    """Per-episode fault state (spec §4.2). Matching is by tool name only; a perturbed call is never
    forwarded, so it has no side effects."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.assigned: dict[str, str | None] = {r.rule_id: None for r in profile.rules}
        self.ncalls: dict[tuple[str, str], int] = {}

    def on_call(self, tool: str) -> Hit | None:
        for r in self.profile.rules:
            if tool not in r.fault_tools:
                continue
            if self.assigned[r.rule_id] is None:
                self.assigned[r.rule_id] = tool  # activation on the first call into the group
            if self.assigned[r.rule_id] == tool:
                k = (r.rule_id, tool)
                self.ncalls[k] = self.ncalls.get(k, 0) + 1
                if self.profile.permanent or self.ncalls[k] == 1:
                    return Hit(r.rule_id, r.responses[tool], self.profile.manifestation or "")
            return None
        return None

    def faulty_tools(self) -> set[str]:
        """Tools permanently unavailable or corrupted (permanent modes, activated rules)."""
        if not self.profile.permanent:
            return set()
        return {t for t in self.assigned.values() if t is not None}
