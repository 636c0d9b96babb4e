"""The seeded, LLM-free ToolMaze task generator (spec §3.2).

Per complexity level C1-C4, 100 tasks are drawn tool-first: a DAG skeleton of the level's shape
(§2.1) is filled with type-compatible tools of the task's primary domain (plus General utilities),
every parameter is bound exactly once (an upstream output of the same semantic type, a user slot,
or - for free-text parameters - the upstream value rendered as text), the full solution set S is
enumerated (one member per alternative group), every path is run on the clean simulator and must
produce the same final Action arguments, supersets are pruned, s* is the shortest path, and the
query is verbalised from per-family templates and parsed back (reverse validation).
"""

from __future__ import annotations

import itertools
import random
import re
import threading
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from toolsweep.benchmarks.toolmaze.tools import (
    ACTION,
    DOMAINS,
    PROCESSOR,
    SOURCE,
    TYPES,
    Corpus,
    M2MGroup,
    Simulator,
    Tool,
    World,
    build_corpus,
    canonical,
    get_path,
    is_error,
    render,
    seeded_int,
)

TASKS_PER_LEVEL = 100
LEVELS = (1, 2, 3, 4)
_DOMAIN_OFFSET = {1: 0, 2: 2, 3: 4, 4: 0}  # spec §3.2 step 1
_MAX_ATTEMPTS = 1000
C2_N_ATTEMPTS = 300
"""Attempts a C2 task spends looking for the N it drew before settling for N = 2."""
_TOL = 1e-2

# A binding: ("user", slot) | ("edge", src_tool, field_path) | ("free", src_tool, field_path)
Binding = tuple


@dataclass(frozen=True)
class Position:
    """One node of the DAG skeleton: a single tool, a 1-to-N group or a many-to-many block."""

    lane: str  # main | shared | slot1.. | join
    kind: str  # single | 1toN | m2m
    members: tuple[tuple[str, ...], ...]  # member paths (single tools are 1-tuples)
    group_id: str | None
    phrase: str
    out_type: str

    @property
    def tools(self) -> tuple[str, ...]:
        return tuple(sorted({t for m in self.members for t in m}))


@dataclass
class Task:
    task_id: str
    complexity: int
    primary_domain: str
    domains: list[str]
    query: str
    task_spec: dict[str, Any]
    tools_visible: list[str]
    positions: list[Position]
    slots: dict[str, Any]
    solutions: list[tuple[str, ...]]
    default_index: int
    bindings: list[dict[str, dict[str, Binding]]]
    expected: list[dict[str, dict[str, Any]]]  # per path: tool -> {"args", "output"}
    expected_action_args: dict[str, Any]
    victim: str | None = None  # C1: the fault-assigned node of s*
    phrases: list[str] = field(default_factory=list)

    @property
    def default_path(self) -> tuple[str, ...]:
        return self.solutions[self.default_index]

    @property
    def groups(self) -> list[Position]:
        return [p for p in self.positions if p.kind != "single"]

    @property
    def tool_set(self) -> frozenset[str]:
        return frozenset(t for p in self.positions for t in p.tools)

    def deps(self, path_index: int) -> dict[str, set[str]]:
        """Direct data-flow predecessors of each node on a path."""
        return {v: {b[1] for b in bs.values() if b[0] in ("edge", "free")}
                for v, bs in self.bindings[path_index].items()}

    def descendants(self, tool: str) -> set[str]:
        """Nodes that depend (transitively) on `tool` on any path."""
        out: set[str] = set()
        for i in range(len(self.solutions)):
            deps = self.deps(i)
            changed = True
            reach = {tool}
            while changed:
                changed = False
                for v, ds in deps.items():
                    if v not in reach and ds & reach:
                        reach.add(v)
                        changed = True
            out |= reach - {tool}
        return out

    def ancestors(self, tool: str, path_index: int) -> set[str]:
        """Nodes `tool` depends on (transitively) on one path."""
        deps = self.deps(path_index)
        out: set[str] = set()
        todo = list(deps.get(tool, ()))
        while todo:
            t = todo.pop()
            if t not in out:
                out.add(t)
                todo.extend(deps.get(t, ()))
        return out

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["positions"] = [asdict(p) for p in self.positions]
        return d


# ------------------------------------------------------------------------------------------------
# value matching (shared with the judge)

_NUM_RE = re.compile(r"-?\d+(?:\.\d+)?")


def numbers_close(a: float, b: float) -> bool:
    return abs(a - b) <= max(0.011, _TOL * max(abs(a), abs(b)))


def values_match(expected: Any, actual: Any) -> bool:
    """Equality up to case, whitespace and 1% numeric tolerance (numbers inside text too)."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return expected == actual
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return numbers_close(float(expected), float(actual))
    if isinstance(expected, (int, float)) and isinstance(actual, str):
        try:
            return numbers_close(float(expected), float(actual))
        except ValueError:
            return False
    if isinstance(expected, str) and isinstance(actual, str):
        e, a = " ".join(expected.lower().split()), " ".join(actual.lower().split())
        if e == a:
            return True
        if _NUM_RE.sub("#", e) != _NUM_RE.sub("#", a):
            return False
        en, an = _NUM_RE.findall(e), _NUM_RE.findall(a)
        return len(en) == len(an) and all(numbers_close(float(x), float(y)) for x, y in zip(en, an))
    return expected == actual


def text_contains(expected: Any, actual: Any) -> bool:
    """Free-text containment: the expected value appears in the text (numbers within 1%)."""
    if not isinstance(actual, str):
        return values_match(expected, actual)
    a = " ".join(actual.lower().split())
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        return any(numbers_close(float(expected), float(x)) for x in _NUM_RE.findall(a))
    e = " ".join(str(expected).lower().split())
    if e in a:
        return True
    en = _NUM_RE.findall(e)
    if _NUM_RE.sub("#", e) not in _NUM_RE.sub("#", a):
        return False
    an = [float(x) for x in _NUM_RE.findall(a)]
    return all(any(numbers_close(float(x), y) for y in an) for x in en)


# ------------------------------------------------------------------------------------------------
# generator


class _Attempt(Exception):
    """This draw cannot be completed; redraw."""


_POOLS: dict[tuple[int, str], list[Tool]] = {}


@dataclass
class _Ctx:
    corpus: Corpus
    world: World
    sim: Simulator
    domain: str
    rng: random.Random
    usage: Counter
    used: set[str] = field(default_factory=set)
    attempt: int = 0

    @property
    def pool(self) -> list[Tool]:
        """The tools a task of this domain may use (its own and the General utilities)."""
        key = (id(self.corpus), self.domain)
        if key not in _POOLS:
            _POOLS[key] = [t for t in self.corpus.tools.values() if t.domain in (self.domain, "General")]
        return _POOLS[key]

    def allowed(self, t: Tool) -> bool:
        return t.domain in (self.domain, "General") and t.name not in self.used

    def pick(self, cands: list[Any], key=lambda x: x) -> Any:
        if not cands:
            raise _Attempt("no candidate")
        cands = sorted(cands, key=lambda c: str(key(c)))
        weights = [1.0 / (1.0 + self.usage[str(key(c))]) for c in cands]
        return self.rng.choices(cands, weights=weights, k=1)[0]


def _bindable(t: Tool, available: set[str]) -> bool:
    for p in t.required:
        if p.free:
            continue
        if p.type not in available and TYPES[p.type].user is None:
            return False
    return True


def _consumes(t: Tool, prev_out: set[str], allow_free: bool) -> bool:
    if any((not p.free) and p.type in prev_out for p in t.required):
        return True
    return allow_free and any(p.free for p in t.required)


def _is_join(t: Tool) -> bool:
    return sum(1 for p in t.params if p.free) >= 3


def _family_group(ctx: _Ctx, t: Tool) -> bool:
    fam = ctx.corpus.family_of(t.name)
    return fam.is_group and all(m not in ctx.used for m in fam.members)


def _chain_candidates(ctx: _Ctx, category: str, prev: Tool | None, available: set[str],
                      need_group: bool = False, root_domain_only: bool = False) -> list[Tool]:
    # inner nodes are Processors or dependent lookups (Sources fed by an upstream entity)
    cats = (SOURCE, PROCESSOR) if category == PROCESSOR else (category,)
    out = []
    for t in ctx.pool:
        if t.category not in cats or not ctx.allowed(t) or _is_join(t):
            continue
        if root_domain_only and t.domain != ctx.domain:
            continue
        if need_group and not _family_group(ctx, t):
            continue
        if t.variant != 0 and need_group:
            continue  # a group is drawn through its first member
        if prev is None:
            if any(p.free for p in t.required) or not _bindable(t, set()):
                continue
            if any(TYPES[p.type].user is None for p in t.required):
                continue
        else:
            if not _consumes(t, set(prev.out_types), allow_free=(category == ACTION)):
                continue
            if t.category == SOURCE and t.domain != ctx.domain:
                continue
            if any(p.free for p in t.required) and category != ACTION:
                continue
            if not _bindable(t, available):
                continue
        out.append(t)
    return out


def _single(ctx: _Ctx, t: Tool, lane: str = "main") -> Position:
    ctx.used.add(t.name)
    return Position(lane, "single", ((t.name,),), None, t.intent, t.primary.type)


def _group_pos(ctx: _Ctx, t: Tool, lane: str = "main", size: int | None = None) -> Position:
    """A 1-to-N group of `size` members of t's family (default: 2 or 3, as many as it has)."""
    fam = ctx.corpus.family_of(t.name)
    n = min(len(fam.members), size or ctx.rng.choice((2, 3)))
    members = [fam.members[0]] + ctx.rng.sample(list(fam.members[1:]), n - 1)
    for m in members:
        ctx.used.add(m)
    return Position(lane, "1toN", tuple((m,) for m in sorted(members)), fam.stem, fam.intent,
                    t.primary.type)


def _chain(ctx: _Ctx, length: int, group_at: int | None, group_size: int | None = None) -> list[Position]:
    positions: list[Position] = []
    prev: Tool | None = None
    available: set[str] = set()
    for i in range(length):
        cat = SOURCE if i == 0 else ACTION if i == length - 1 else PROCESSOR
        cands = _chain_candidates(ctx, cat, prev, available, need_group=(i == group_at),
                                  root_domain_only=(i == 0))
        if i == group_at and group_size:
            cands = [t for t in cands if len(ctx.corpus.family_of(t.name).members) >= group_size]
        t = ctx.pick(cands, key=lambda x: x.name)
        positions.append(_group_pos(ctx, t, size=group_size) if i == group_at else _single(ctx, t))
        available |= set(t.out_types)
        prev = t
    return positions


def _block_members(ctx: _Ctx, g: M2MGroup, n_paths: tuple[int, ...]) -> tuple[tuple[str, ...], ...]:
    """A sub-block of a many-to-many group: layer A (1-3) x layer B (1-3) compatible pairs plus an
    optional 1-tool bypass, every tool avoidable and in >= 1 path, |paths| in n_paths."""
    twos = [p for p in g.paths if len(p) == 2 and not (set(p) & ctx.used)]
    ones = [p for p in g.paths if len(p) == 1 and p[0] not in ctx.used]
    layer_a = sorted({p[0] for p in twos})
    layer_b = sorted({p[1] for p in twos})
    for _ in range(40):
        if not layer_a:
            break
        a = set(ctx.rng.sample(layer_a, min(len(layer_a), ctx.rng.choice((1, 2, 2, 3)))))
        b = set(ctx.rng.sample(layer_b, min(len(layer_b), ctx.rng.choice((1, 2, 2, 3)))))
        paths = [p for p in twos if p[0] in a and p[1] in b]
        if ones and ctx.rng.random() < 0.5:
            paths.append(ctx.rng.choice(ones))
        tools = {t for p in paths for t in p}
        if len(paths) not in n_paths or not any(len(p) == 2 for p in paths):
            continue
        if tools != (a | b | {p[0] for p in paths if len(p) == 1}):
            continue
        if any(all(t in p for p in paths) for t in tools):
            continue
        return tuple(sorted(paths))
    raise _Attempt("no valid sub-block")


def _block_pos(ctx: _Ctx, g: M2MGroup, lane: str, n_paths: tuple[int, ...]) -> Position:
    members = _block_members(ctx, g, n_paths)
    for m in members:
        ctx.used.update(m)
    return Position(lane, "m2m", members, g.group_id, g.intent, g.t_out)


def _producers(ctx: _Ctx, t_out: str, category: str, consumes: set[str] | None) -> list[Tool]:
    out = []
    for t in ctx.pool:
        if t.category != category or not ctx.allowed(t) or _is_join(t) or t_out not in t.out_types:
            continue
        if any(p.free for p in t.required):
            continue
        if consumes is None:
            if any(TYPES[p.type].user is None for p in t.required):
                continue
        elif not _consumes(t, consumes, False) or not _bindable(t, consumes):
            continue
        out.append(t)
    return out


def _prefix(ctx: _Ctx, t_in: str, lane: str = "main") -> list[Position]:
    """1-2 nodes ending in a producer of t_in (root Source first)."""
    options: list[tuple[Tool, ...]] = [(s,) for s in _producers(ctx, t_in, SOURCE, None)]
    roots = [s for s in ctx.pool if s.category == SOURCE and ctx.allowed(s)
             and not any(p.free for p in s.required)
             and all(TYPES[p.type].user is not None for p in s.required)]
    for proc in _producers(ctx, t_in, PROCESSOR, set(TYPES)):
        options += [(s, proc) for s in roots if _consumes(proc, set(s.out_types), False)
                    and _bindable(proc, set(s.out_types))]
    choice = ctx.pick(options, key=lambda o: "+".join(x.name for x in o))
    return [_single(ctx, t, lane) for t in choice]


def _suffix(ctx: _Ctx, t_out: str) -> list[Position]:
    opts: list[tuple[Tool, ...]] = []
    for a in ctx.pool:
        if a.category == ACTION and ctx.allowed(a) and _consumes(a, {t_out}, True) \
                and _bindable(a, {t_out}):
            opts.append((a,))
    for p in ctx.pool:
        if p.category != PROCESSOR or not ctx.allowed(p) or _is_join(p) or any(x.free for x in p.required):
            continue
        if not (_consumes(p, {t_out}, False) and _bindable(p, {t_out})):
            continue
        for a in ctx.pool:
            if a.category == ACTION and ctx.allowed(a) and _consumes(a, set(p.out_types), True) \
                    and _bindable(a, set(p.out_types) | {t_out}):
                opts.append((p, a))
    if ctx.rng.random() < 0.5:
        short = [o for o in opts if len(o) == 1]
        opts = short or opts
    choice = ctx.pick(opts, key=lambda o: "+".join(x.name for x in o))
    return [_single(ctx, t) for t in choice]


def _skeleton(ctx: _Ctx, level: int) -> list[Position]:
    rng = ctx.rng
    if level == 1:
        return _chain(ctx, rng.choices((3, 4, 5), weights=(3, 4, 3))[0], None)
    if level == 2:
        # |S| = N in {2, 3} (spec §2.1): the task's N is drawn first and its group sought among
        # the families that large (the corpus has few 3-provider families, so a task whose domain
        # offers none falls back to N = 2 after C2_N_ATTEMPTS tries)
        length = rng.choices((3, 4, 5), weights=(3, 4, 3))[0]
        group_at = rng.randrange(length)
        want = rng.choice((2, 3)) if ctx.attempt < C2_N_ATTEMPTS else 2
        return _chain(ctx, length, group_at, want)
    groups = [g for g in ctx.corpus.m2m.values() if g.domain == ctx.domain]
    if level == 3:
        g = ctx.pick(groups, key=lambda g: g.group_id)
        prefix = _prefix(ctx, g.t_in)
        block = _block_pos(ctx, g, "main", (3, 4, 5, 6))
        return prefix + [block] + _suffix(ctx, g.t_out)
    return _c4(ctx, groups)


def _c4(ctx: _Ctx, groups: list[M2MGroup]) -> list[Position]:
    rng = ctx.rng
    k = rng.choice((2, 3))
    kinds = ["1toN", "m2m"] + [rng.choice(("1toN", "m2m")) for _ in range(k - 2)]
    rng.shuffle(kinds)
    # shared root Source(s): their outputs feed the slots
    roots = [s for s in ctx.pool if s.category == SOURCE and ctx.allowed(s)
             and s.domain == ctx.domain and not any(p.free for p in s.required)
             and all(TYPES[p.type].user is not None for p in s.required)]
    shared = [ctx.pick(roots, key=lambda t: t.name)]
    if rng.random() < 0.3:
        more = [s for s in roots if s.name != shared[0].name and set(s.out_types) - set(shared[0].out_types)]
        if more:
            shared.append(ctx.pick(more, key=lambda t: t.name))
    avail = {t for s in shared for t in s.out_types}
    positions = [_single(ctx, s, "shared") for s in shared]
    fed: set[str] = set()
    for i, kind in enumerate(kinds):
        lane = f"slot{i + 1}"
        if kind == "m2m":
            cands = [g for g in groups if g.t_in in avail]
            g = ctx.pick(cands, key=lambda g: g.group_id)
            positions.append(_block_pos(ctx, g, lane, (3,)))
            fed |= {s.name for s in shared if g.t_in in s.out_types}
        else:
            cands = [t for t in ctx.pool if t.category in (SOURCE, PROCESSOR)
                     and t.variant == 0 and ctx.allowed(t) and _family_group(ctx, t) and not _is_join(t)
                     and not any(p.free for p in t.required) and _consumes(t, avail, False)
                     and _bindable(t, avail)]
            t = ctx.pick(cands, key=lambda t: t.name)
            positions.append(_group_pos(ctx, t, lane))
            fed |= {s.name for s in shared if set(s.out_types) & t.in_types}
    if fed != {s.name for s in shared}:
        raise _Attempt("a shared source feeds no slot")
    joins = [t for t in ctx.pool if _is_join(t) and ctx.allowed(t)]
    join = ctx.pick(joins, key=lambda t: t.name)
    positions.append(_single(ctx, join, "join"))
    acts = [a for a in ctx.pool if a.category == ACTION and ctx.allowed(a)
            and any(p.free for p in a.required) and _bindable(a, set())]
    positions.append(_single(ctx, ctx.pick(acts, key=lambda t: t.name), "join"))
    return positions


# ------------------------------------------------------------------------------------------------
# paths, bindings, simulation


def _paths(positions: list[Position]) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Every member choice: (tools in topological order, lanes)."""
    out = []
    for choice in itertools.product(*[p.members for p in positions]):
        tools: list[str] = []
        lanes: list[str] = []
        for pos, member in zip(positions, choice):
            tools += list(member)
            lanes += [pos.lane] * len(member)
        out.append((tuple(tools), tuple(lanes)))
    return out


def _bind_path(corpus: Corpus, positions: list[Position], tools: tuple[str, ...],
               lanes: tuple[str, ...], slot_types: dict[str, str]) -> dict[str, dict[str, Binding]]:
    bindings: dict[str, dict[str, Binding]] = {}
    slot_ends = {}  # lane -> last tool of that slot on this path
    for t, lane in zip(tools, lanes):
        if lane.startswith("slot"):
            slot_ends[lane] = t
    for i, (name, lane) in enumerate(zip(tools, lanes)):
        tool = corpus.tools[name]
        if lane == "join" or lane == "main":
            anc = list(range(i))
        elif lane == "shared":
            anc = [j for j in range(i) if lanes[j] == "shared"]
        else:
            anc = [j for j in range(i) if lanes[j] in ("shared", lane)]
        prev = anc[-1] if anc else None
        b: dict[str, Binding] = {}
        free_sections = [p for p in tool.params if p.free]
        if len(free_sections) >= 3:  # a join: one section per parallel slot, in slot order
            ends = [slot_ends[k] for k in sorted(slot_ends)]
            req = [p for p in free_sections if p.required]
            if len(ends) < len(req) or len(ends) > len(free_sections):
                raise _Attempt("join arity")
            for p, end in zip(free_sections, ends):
                pos = next(ps for ps in positions if ps.lane == lanes[tools.index(end)])
                f = corpus.tools[end].field_of_type(pos.out_type)
                b[p.name] = ("free", end, f.path)
            bindings[name] = b
            continue
        for p in tool.params:
            if not p.required:
                continue
            if p.free:
                if prev is None:
                    raise _Attempt("free text without input")
                src = corpus.tools[tools[prev]]
                pos = next(ps for ps in positions if ps.lane == lanes[prev] and tools[prev] in ps.tools)
                f = src.field_of_type(pos.out_type) or src.primary
                b[p.name] = ("free", src.name, f.path)
                continue
            hit = None
            for j in reversed(anc):
                f = corpus.tools[tools[j]].field_of_type(p.type)
                if f is not None and f.how != "echo":
                    hit = ("edge", tools[j], f.path)
                    break
            if hit is None:
                if TYPES[p.type].user is None:
                    raise _Attempt(f"unbindable {name}.{p.name}")
                if slot_types.setdefault(p.name, p.type) != p.type:
                    raise _Attempt("slot name clash")
                hit = ("user", p.name)
            b[p.name] = hit
        if prev is not None and lane != "shared":
            # chain rule: every non-root node consumes an output of its predecessor(s)
            srcs = {x[1] for x in b.values() if x[0] in ("edge", "free")}
            if not srcs:
                raise _Attempt(f"{name} consumes nothing upstream")
        bindings[name] = b
    return bindings


def _resolve(b: dict[str, Binding], slots: dict[str, Any], outputs: dict[str, Any]) -> dict[str, Any]:
    args = {}
    for pname, x in b.items():
        if x[0] == "user":
            args[pname] = slots[x[1]]
        else:
            v = get_path(outputs[x[1]], x[2])
            args[pname] = render(v) if x[0] == "free" else v
    return args


def _simulate(sim: Simulator, tools: tuple[str, ...], bindings: dict[str, dict[str, Binding]],
              slots: dict[str, Any]) -> dict[str, dict[str, Any]]:
    state: dict[str, Any] = {}
    outputs: dict[str, Any] = {}
    exp: dict[str, dict[str, Any]] = {}
    for t in tools:
        args = _resolve(bindings[t], slots, outputs)
        r = sim.respond(t, args, state)
        if is_error(r):
            raise _Attempt(f"{t} fails on the clean simulator: {r['error']['message']}")
        outputs[t] = r
        exp[t] = {"args": args, "output": r}
    return exp


def _draw_slots(slot_types: dict[str, str], rng: random.Random) -> dict[str, Any]:
    values: dict[str, Any] = {}
    taken: dict[str, set] = {}
    for name in sorted(slot_types):
        t = TYPES[slot_types[name]]
        pool = [v for v in t.user if v not in taken.setdefault(t.name, set())] or list(t.user)
        v = rng.choice(pool)
        taken[t.name].add(v)
        values[name] = v
    return values


# ------------------------------------------------------------------------------------------------
# verbalisation and reverse validation (spec §3.2 steps 7-9)

_OPENERS = {
    "Financial": ("I'm planning to invest and want a clear picture before I act.",
                  "I'm reviewing my portfolio this morning and need some help.",
                  "My account settles in euros and I like to keep my records tidy."),
    "Travel": ("I'm organising a trip and want everything lined up.",
               "I travel for work next week and need a hand with the logistics.",
               "I'm comparing options for an upcoming journey."),
    "Office": ("I'm catching up on work before a busy week.",
               "I need to get some admin done for my team today.",
               "I'm preparing for a review with my manager."),
    "Shopping": ("I'm thinking about a purchase and want to do it right.",
                 "I'm doing some online shopping and need a hand.",
                 "I want to compare before I buy anything."),
    "IoT": ("I'm managing my smart home remotely.", "I want my home set up properly before I get back.",
            "I'm checking on the house while I'm away."),
    "General": ("I need help with a few everyday things.", "Could you help me sort something out quickly?",
                "I'm planning my day and need some information."),
}
_CLOSERS = ("Please let me know once everything is done.", "Tell me briefly how it went when you finish.",
            "A short confirmation at the end would be great.", "Thanks a lot for handling this for me.")
_CONNECT = (("First, {}.", "Then {}.", "After that, {}.", "Finally, {}."),
            ("Please {} first.", "Next, {}.", "Then {}.", "To finish, {}."),
            ("To start, {}.", "Once that's done, {}.", "Then {}.", "Lastly, {}."))


_LABELS = {"to": "send to", "mailbox": "account", "title": "document title", "query": "product",
           "person": "colleague", "setpoint": "target temperature (C)", "state": "lights",
           "target_language": "language code", "coin": "coin", "shares": "number of shares",
           "units": "number of units", "recipient": "recipient", "passenger": "passenger email",
           "guest": "guest email", "attendee": "attendee", "assignee": "assignee", "employee": "employee email",
           "customer": "customer email", "timezone": "time zone"}


def _label(slot: str) -> str:
    return _LABELS.get(slot, slot.replace("_", " "))


def _verbalise(task_phrases: list[str], positions: list[Position], slots: dict[str, Any],
               domain: str, rng: random.Random) -> str:
    opener = rng.choice(_OPENERS[domain])
    if domain == "Financial" and "company" in slots and any(p.out_type == "price_eur" for p in positions):
        # the paper's own example request (§3.3 step 3), with this task's company
        opener = f"I'm planning to invest in {slots['company']}—my account settles in euros."
    conn = rng.choice(_CONNECT)
    parallel = [p for p in positions if p.lane.startswith("slot")]
    sentences = []
    phrases = list(task_phrases)
    if parallel:
        n_shared = sum(1 for p in positions if p.lane == "shared")
        shared, slot_ph, tail = phrases[:n_shared], phrases[n_shared:n_shared + len(parallel)], \
            phrases[n_shared + len(parallel):]
        sentences.append(conn[0].format(" and ".join(shared)))
        sentences.append("Using that, " + "; ".join(slot_ph) + ".")
        sentences.append(conn[2].format(tail[0]))
        sentences += [conn[3].format(x) for x in tail[1:]]
    else:
        for i, ph in enumerate(phrases):
            idx = 0 if i == 0 else 3 if i == len(phrases) - 1 else min(i, 2)
            sentences.append(conn[idx].format(ph))
    details = "; ".join(f"{_label(k)}: {render(v)}" for k, v in sorted(slots.items()))
    sentences = [s[0].upper() + s[1:] for s in sentences]
    closer = rng.choice(_CLOSERS)
    return f"{opener} {' '.join(sentences)} Details - {details}. {closer}"


def phrase_inventory(corpus: Corpus) -> list[str]:
    inv = {f.intent for f in corpus.families.values()} | {g.intent for g in corpus.m2m.values()}
    return sorted(inv, key=lambda s: (-len(s), s))


def reverse_parse(query: str, inventory: list[str]) -> Counter:
    """Recover the capability phrases of a query (longest match first, non-overlapping)."""
    q = query.lower()
    found: Counter = Counter()
    for ph in inventory:
        n = q.count(ph.lower())
        if n:
            found[ph] += n
            q = q.replace(ph.lower(), " ")
    return found


# ------------------------------------------------------------------------------------------------


def _build_task(corpus: Corpus, world: World, sim: Simulator, level: int, index: int,
                dataset_seed: int, usage: Counter, seen: set, inventory: list[str]) -> Task:
    task_id = f"C{level}_task_{index:03d}"
    domain = DOMAINS[(index - 1 + _DOMAIN_OFFSET[level]) % len(DOMAINS)]
    for attempt in range(_MAX_ATTEMPTS):
        rng = random.Random(seeded_int(dataset_seed, "shape", task_id, attempt))
        ctx = _Ctx(corpus, world, sim, domain, rng, usage, attempt=attempt)
        try:
            positions = _skeleton(ctx, level)
            tool_set = frozenset(t for p in positions for t in p.tools)
            key = tuple(sorted(tool_set))
            if key in seen:
                raise _Attempt("duplicate tool multiset")
            if domain != "General" and not any(corpus.tools[t].domain == domain for t in tool_set):
                raise _Attempt("no domain tool")
            raw = _paths(positions)
            slot_types: dict[str, str] = {}
            binds = [_bind_path(corpus, positions, tools, lanes, slot_types) for tools, lanes in raw]
            slots = _draw_slots(slot_types, random.Random(seeded_int(dataset_seed, "slots", task_id, attempt)))
            exps = [_simulate(sim, tools, b, slots) for (tools, _), b in zip(raw, binds)]
            # prune strict supersets (spec §2.1), keep the rest in a stable order
            keep = [i for i, (t, _) in enumerate(raw)
                    if not any(set(raw[j][0]) < set(t) for j in range(len(raw)) if j != i)]
            sols = [raw[i][0] for i in keep]
            binds = [binds[i] for i in keep]
            exps = [exps[i] for i in keep]
            finals = [e[s[-1]]["args"] for s, e in zip(sols, exps)]
            for f in finals[1:]:
                if set(f) != set(finals[0]) or not all(values_match(finals[0][k], f[k]) for k in f):
                    raise _Attempt("alternative paths disagree on the final action")
            _check_shape(level, positions, sols)
            # s* is a shortest path; among equals, a seeded draw, never the alphabetically first (which made
            # s*'s member, the one a fault is bound to, the first of its C2 group by name in 100 of 100
            # tasks, against 47 by chance)
            shortest = min(len(p) for p in sols)
            tied = [i for i, p in enumerate(sols) if len(p) == shortest]
            default = random.Random(seeded_int(dataset_seed, "preferred-path", task_id)).choice(tied)
            victim = None
            if level == 1:
                s = sols[0]
                victim = s[random.Random(seeded_int(dataset_seed, "victim", task_id)).randrange(len(s) - 1)]
            phrases = [p.phrase for p in positions]
            if len(set(phrases)) != len(phrases):
                raise _Attempt("repeated capability phrase")
            query = ""
            for k in range(5):
                query = _verbalise(phrases, positions, slots, domain,
                                   random.Random(seeded_int(dataset_seed, "query", task_id, attempt, k)))
                if _query_ok(query, phrases, slots, corpus, inventory):
                    break
            else:
                raise _Attempt("reverse validation failed")
            for t in tool_set:
                usage[t] += 1
            seen.add(key)
            visible = sorted(tool_set)
            random.Random(seeded_int(dataset_seed, "visible", task_id)).shuffle(visible)
            first_slot = sorted(slots)[0] if slots else None
            spec = {"goal": positions[-1].phrase, "entity": slots.get(first_slot), **slots}
            return Task(
                task_id=task_id, complexity=level, primary_domain=domain,
                domains=sorted({corpus.tools[t].domain for t in tool_set}), query=query, task_spec=spec,
                tools_visible=visible, positions=positions, slots=slots, solutions=sols,
                default_index=default, bindings=binds, expected=exps,
                expected_action_args=finals[default], victim=victim, phrases=phrases)
        except _Attempt:
            continue
    raise RuntimeError(f"could not generate {task_id} in {_MAX_ATTEMPTS} attempts")


def _query_ok(query: str, phrases: list[str], slots: dict, corpus: Corpus, inventory: list[str]) -> bool:
    words = len(query.split())
    if not 25 <= words <= 90:
        return False
    if any(render(v) not in query for v in slots.values()):
        return False
    low = query.lower()
    if any(name in low for name in corpus.tools):
        return False
    return reverse_parse(query, inventory) == Counter(phrases)


def _check_shape(level: int, positions: list[Position], sols: list[tuple[str, ...]]) -> None:
    groups = [p for p in positions if p.kind != "single"]
    n = len(sols)
    if level == 1 and (groups or n != 1):
        raise _Attempt("C1 shape")
    if level == 2 and (len(groups) != 1 or groups[0].kind != "1toN" or n not in (2, 3)):
        raise _Attempt("C2 shape")
    if level == 3 and (len(groups) != 1 or groups[0].kind != "m2m" or not 3 <= n <= 6):
        raise _Attempt("C3 shape")
    if level == 4:
        kinds = {g.kind for g in groups}
        prod = 1
        for g in groups:
            prod *= len(g.members)
        if len(groups) < 2 or kinds != {"1toN", "m2m"} or n != prod:
            raise _Attempt("C4 shape")


class TaskSet:
    """The benchmark's tasks for one dataset seed. Levels are generated independently (each has its
    own usage weights and duplicate check), lazily, once per process; reads are thread-safe."""

    def __init__(self, dataset_seed: int) -> None:
        self.dataset_seed = dataset_seed
        self.corpus = build_corpus()
        self.world = World(dataset_seed)
        self.simulator = Simulator(self.corpus, self.world)
        self._inventory = phrase_inventory(self.corpus)
        self._levels: dict[int, list[Task]] = {}
        self._lock = threading.Lock()

    def level(self, c: int) -> list[Task]:
        if c not in LEVELS:
            raise KeyError(f"no complexity level C{c}; levels are C1-C4")
        with self._lock:
            if c not in self._levels:
                usage: Counter = Counter()
                seen: set = set()
                self._levels[c] = [
                    _build_task(self.corpus, self.world, self.simulator, c, i, self.dataset_seed, usage,
                                seen, self._inventory)
                    for i in range(1, TASKS_PER_LEVEL + 1)]
            return self._levels[c]

    def task(self, task_id: str) -> Task:
        m = re.fullmatch(r"C([1-4])_task_(\d{3})", task_id)
        if not m or not 1 <= int(m.group(2)) <= TASKS_PER_LEVEL:
            raise KeyError(f"unknown toolmaze task {task_id!r}; ids look like 'C1_task_089'")
        return self.level(int(m.group(1)))[int(m.group(2)) - 1]

    @property
    def tasks(self) -> dict[str, Task]:
        return {t.task_id: t for c in LEVELS for t in self.level(c)}


_CACHE: dict[int, TaskSet] = {}
_LOCK = threading.Lock()


def build_tasks(dataset_seed: int = 0) -> TaskSet:
    """The task set of a dataset seed (one per process; levels are built on first use)."""
    with _LOCK:
        if dataset_seed not in _CACHE:
            _CACHE[dataset_seed] = TaskSet(dataset_seed)
        return _CACHE[dataset_seed]


def jaccard_mean(tasks: list[Task]) -> float:
    """Mean pairwise Jaccard similarity of the tasks' tool sets (spec §7 diversity check)."""
    sets = [t.tool_set for t in tasks]
    total, n = 0.0, 0
    for a, b in itertools.combinations(sets, 2):
        total += len(a & b) / len(a | b)
        n += 1
    return total / n if n else 0.0


def canonical_tasks(ts: TaskSet, levels: tuple[int, ...] = LEVELS) -> str:
    return canonical([t.to_json() for c in levels for t in ts.level(c)])
