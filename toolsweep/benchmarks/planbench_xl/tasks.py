"""Tasks (spec §2): state graph over executable tools, inclusion-minimal tool sets, task selection,
gold answers and template-verbalised queries.

A task starts from typed clue values (D_0) and asks for one target datatype y whose shortest valid
tool path has 5-9 steps. Path sets are stored as tool-id bitmasks; blocking (blocking.py) counts
surviving paths as distinct tool sets.
"""

from __future__ import annotations

import functools
import itertools
import random
import threading
from dataclasses import dataclass
from typing import Any

from toolsweep.benchmarks.planbench_xl.world import DATATYPES, DT, N_CASES, WORLD_SEED, World, seed_of

LCAP = 12  # spec §0: path-enumeration cap (tools per minimal set)
N_TASKS = 327
LSTAR_MIN, LSTAR_MAX = 5, 9

_DT_BIT = {d.name: 1 << d.index for d in DATATYPES}


def dt_mask(names: Any) -> int:
    m = 0
    for n in names:
        m |= _DT_BIT[n]
    return m


class Task:
    """One query. The full minimal-set family M_i (up to LCAP tools per set) is computed on first
    use and cached: selection only needs L* and the shortest sets, so building all 327 tasks stays
    fast, and each task's path family is enumerated once per process when an episode needs it."""

    def __init__(self, *, id: str, inputs: tuple[str, ...], target: str, case: int,
                 input_values: tuple[str, ...], gold: str, query: str, lstar: int,
                 gt_path: tuple[int, ...], graph: "Graph", single_step: bool = False,
                 shortest: tuple[tuple[int, ...], ...] = ()) -> None:
        self.id, self.inputs, self.target, self.case = id, inputs, target, case
        self.input_values, self.gold, self.query, self.lstar = input_values, gold, query, lstar
        self.gt_path, self.single_step, self.shortest = gt_path, single_step, shortest
        self._graph = graph
        self._lock = threading.Lock()
        self._sets: tuple[tuple[int, ...], ...] | None = None

    @property
    def minimal_sets(self) -> tuple[tuple[int, ...], ...]:
        """M_i: every exactly-minimal tool set (sorted executable indices), shortest first."""
        if self._sets is None:
            with self._lock:
                if self._sets is None:
                    d0 = dt_mask(self.inputs)
                    sets = self._graph.minimal_sets(d0, _DT_BIT[self.target], self._graph.memo_for(d0))
                    if self.single_step and frozenset(self.gt_path) not in sets:
                        sets = [frozenset(self.gt_path)] + sets
                    self._sets = tuple(tuple(sorted(r)) for r in sets)
        return self._sets

    @property
    def lmax(self) -> int:
        return max(len(r) for r in self.minimal_sets)

    @functools.cached_property
    def d_gt(self) -> frozenset[str]:
        """D_gt = D_0 plus every output datatype of every minimal set (Eq. 23)."""
        ex = self._graph.world.executable
        out = set(self.inputs)
        for r in self.minimal_sets:
            out.update(ex[t].output for t in r)
        return frozenset(out)

    @property
    def out_gt(self) -> frozenset[str]:
        return self.d_gt - frozenset(self.inputs)

    def record(self, world: World) -> dict[str, Any]:
        """Fig. 19-style task record (internal only)."""
        return {
            "task_id": self.id, "input_datatypes": list(self.inputs), "num_inputs": len(self.inputs),
            "target_datatype": self.target, "steps": self.lstar,
            "one_available_path": [world.executable[i].name for i in self.gt_path],
            "case": self.case, "input_values": list(self.input_values), "gold": self.gold,
            "L_star": self.lstar, "L_max": self.lmax, "num_minimal_sets": len(self.minimal_sets),
            "D_gt": sorted(self.d_gt), "query": self.query,
        }


class Graph:
    """Executable tools as (input mask, output bit) for fast closures."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.tin = [dt_mask(t.inputs) for t in world.executable]
        self.tout = [_DT_BIT[t.output] for t in world.executable]
        self._memos: dict[int, dict] = {}
        self._memo_lock = threading.Lock()
        self.consumers: dict[int, list[int]] = {}
        for i, m in enumerate(self.tin):
            for h in _bitlist(m):
                self.consumers.setdefault(h, []).append(i)
        self.producers: dict[int, list[int]] = {}
        for i, o in enumerate(self.tout):
            self.producers.setdefault(o, []).append(i)

    def memo_for(self, d0: int) -> dict:
        """The recursion memo of one D_0, shared by every task that starts from it (43 distinct
        D_0 among the 327 tasks). Entries are deterministic, so concurrent fills are harmless."""
        with self._memo_lock:
            return self._memos.setdefault(d0, {})

    def closure(self, d0: int, tools: Any = None) -> int:
        if tools is None:
            return self._full_closure(d0)
        idx = list(tools)
        s = d0
        changed = True
        while changed:
            changed = False
            for i in idx:
                if self.tin[i] & s == self.tin[i] and not self.tout[i] & s:
                    s |= self.tout[i]
                    changed = True
        return s

    def _full_closure(self, d0: int) -> int:
        """Closure over all executable tools, worklist style (each tool fires at most once)."""
        s = d0
        frontier = _bitlist(d0)
        fired = [False] * len(self.tin)
        while frontier:
            new = []
            for h in frontier:
                for t in self.consumers.get(h, ()):
                    if not fired[t] and self.tin[t] & s == self.tin[t]:
                        fired[t] = True
                        o = self.tout[t]
                        if not o & s:
                            s |= o
                            new.append(o)
            frontier = new
        return s

    def minimal_sets(self, d0: int, y: int, memo: dict | None = None, cap: int = LCAP
                     ) -> list[frozenset[int]]:
        """Spec §2.1: the cycle-safe memoised Algorithm 1, then the exact-minimality filter.

        Tool sets are int bitmasks. Datatypes outside closure(D_0) can never be derived, so they
        are cut at once and dropped from the ancestor key of the memo (which `memo` may share
        between targets of the same D_0: the recursion depends only on D_0)."""
        if memo is None:
            memo = {}
        reach = memo.get("reach")
        tin, producers = self.tin, self.producers
        if reach is None:
            reach = memo["reach"] = self.closure(d0)
            lb = self._lower_bounds(d0)
            memo["tlb"] = [1 + max((lb.get(h, 99) for h in _bitlist(m & ~d0)), default=0) for m in tin]
        tlb: list[int] = memo["tlb"]

        def solve(g: int, anc: int) -> list[int]:
            key = (g, anc, cap)
            hit = memo.get(key)
            if hit is not None:
                return hit
            found: list[int] = []
            blocked = anc | g
            # Each ancestor datatype still needs its own producer, so a derivation of g may use
            # at most LCAP - |anc| tools (a pure pruning of sets the LCAP cap would drop).
            room = cap - anc.bit_count()
            for t in producers.get(g, ()):
                m = tin[t]
                if m & blocked or m & reach != m or tlb[t] > room:
                    continue
                partials = [1 << t]
                need = m & ~d0
                while need and partials:
                    h = need & -need
                    need ^= h
                    subs = solve(h, (anc | g) & reach)
                    partials = [p | q for p in partials for q in subs if (p | q).bit_count() <= room]
                found.extend(partials)
            result = _antichain(found)
            memo[key] = result
            return result

        if not y & reach:
            return []
        out = [frozenset(_bits(r)) for r in solve(y, 0) if self.exactly_minimal(d0, y, _bits(r))]
        return sorted(out, key=lambda r: (len(r), sorted(r)))

    def exactly_minimal(self, d0: int, y: int, tools: list[int]) -> bool:
        """y in closure(D_0, R) and no tool can be dropped. With distinct outputs outside D_0
        (necessary), a tool is indispensable iff it is an ancestor of y's producer."""
        tin, tout = self.tin, self.tout
        seen = d0
        producer = {}
        for t in tools:
            o = tout[t]
            if o & seen:
                return False
            seen |= o
            producer[o] = t
        if not seen & y:
            return False
        # Every tool must be an ancestor of y's producer, and every ancestor's inputs must be
        # D_0 or produced inside R; acyclicity follows from a topological firing order.
        marked: set[int] = set()
        stack = [producer[y]]
        while stack:
            t = stack.pop()
            if t in marked:
                continue
            marked.add(t)
            need = tin[t] & ~d0
            while need:
                h = need & -need
                need ^= h
                p = producer.get(h)
                if p is None:
                    return False
                stack.append(p)
        if len(marked) != len(tools):
            return False
        state, pending = d0, list(tools)
        while pending:
            ready = [t for t in pending if tin[t] & state == tin[t]]
            if not ready:
                return False
            for t in ready:
                state |= tout[t]
            pending = [t for t in pending if t not in ready]
        return True

    def _lower_bounds(self, d0: int) -> dict[int, int]:
        """Fewest tools that can derive each datatype from D_0 (hypergraph Bellman-Ford)."""
        lb = {1 << i: 0 for i in range(len(DATATYPES)) if d0 >> i & 1}
        changed = True
        while changed:
            changed = False
            for t, m in enumerate(self.tin):
                ins = _bitlist(m & ~d0)
                if all(h in lb for h in ins):
                    v = 1 + max((lb[h] for h in ins), default=0)
                    if v < lb.get(self.tout[t], 99):
                        lb[self.tout[t]] = v
                        changed = True
        return lb

    def first_order(self, d0: int, r: frozenset[int]) -> list[int] | None:
        """The lexicographically first legal order of R (each step adds a new datatype)."""
        s, left, order = d0, set(r), []
        while left:
            ready = [t for t in sorted(left) if self.tin[t] & s == self.tin[t] and not self.tout[t] & s]
            if not ready:
                return None
            t = ready[0]
            order.append(t)
            s |= self.tout[t]
            left.discard(t)
        return order

    def legal_order_count(self, d0: int, r: frozenset[int]) -> int:
        """|Legal(R)| by DP over reachable states (spec §2.1)."""
        tools = sorted(r)

        @functools.lru_cache(maxsize=None)
        def count(used: int, s: int) -> int:
            if used == (1 << len(tools)) - 1:
                return 1
            total = 0
            for k, t in enumerate(tools):
                if not used >> k & 1 and self.tin[t] & s == self.tin[t] and not self.tout[t] & s:
                    total += count(used | 1 << k, s | self.tout[t])
            return total

        return count(0, d0)


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def _bitlist(mask: int) -> list[int]:
    """Single-bit masks of `mask`."""
    out = []
    while mask:
        low = mask & -mask
        out.append(low)
        mask ^= low
    return out


def _antichain(sets: list[int]) -> list[int]:
    """Drop every set that strictly contains another (sets as bitmasks)."""
    uniq = sorted(set(sets), key=int.bit_count)
    kept: list[int] = []
    for s in uniq:
        for k in kept:
            if k & s == k:
                break
        else:
            kept.append(s)
    return kept


# --------------------------------------------------------------------------------------------
# Query verbalisation (spec §2.4)
# --------------------------------------------------------------------------------------------

_S1_PAYMENT = [
    "Finance is reconciling a commerce-side transaction and one linked payment field is still missing.",
    "The accounting team is closing out a retail payment trail and needs one linked field from the same case.",
    "A payments analyst is tracing the downstream charge record for a retail purchase.",
]
_S1_OTHER = {
    "c": "A storefront support agent is reviewing a customer's purchase and needs one linked field from the same case.",
    "a": "A returns specialist is working an after-sales ticket and needs one linked field from the same case.",
    "f": "A logistics coordinator is auditing a delivery exception and needs one linked record from the same case.",
}
_S3_PAYMENT = [
    "They want the processor-side value that corresponds to the same case.",
    "The missing payment detail is blocking the audit trail for this purchase.",
    "They need the finance-side answer before the reconciliation ticket can be closed.",
]
_S3_OTHER = "They need the confirmed value before the ticket can be closed."
_S4 = [
    "Can you identify and return the corresponding {t}?",
    "What {t} is recorded for that case right now?",
    "Please trace the linked records and return the {t}.",
    "What is the exact {t} associated with that purchase?",
]


def verbalize(task_id: str, inputs: tuple[str, ...], values: tuple[str, ...], target: str) -> str:
    rng = random.Random(seed_of(WORLD_SEED, "q", task_id))
    flow = DT[target].flow
    s1 = rng.choice(_S1_PAYMENT) if flow == "p" else _S1_OTHER[flow]
    a = [DT[d].phrase for d in inputs]
    if len(inputs) == 1:
        opts = ["The only concrete reference left in the ticket is the {a} '{v}'."]
        if DT[inputs[0]].flow in ("c", "f"):
            opts.insert(0, "The only commerce-side clue still visible in the case notes is the {a} '{v}'.")
        s2 = rng.choice(opts).format(a=a[0], v=values[0])
    elif len(inputs) == 2:
        s2 = f"The team can confirm the {a[0]} '{values[0]}', and the same case also points to the {a[1]} '{values[1]}'."
    else:
        s2 = (f"The team can confirm the {a[0]} '{values[0]}', the {a[1]} '{values[1]}', and the {a[2]} "
              f"'{values[2]}' for the same case.")
    s3 = rng.choice(_S3_PAYMENT) if flow == "p" else _S3_OTHER
    s4 = rng.choice(_S4).format(t=DT[target].phrase)
    return f"{s1} {s2} {s3} {s4}"


# --------------------------------------------------------------------------------------------
# Enumeration and selection (spec §2.2-2.3)
# --------------------------------------------------------------------------------------------


def _make_task(world: World, g: Graph, tid: str, inputs: tuple[str, ...], target: str,
               shortest: list[frozenset[int]], single: bool = False, n_cases: int = N_CASES,
               gt_path: list[int] | None = None) -> Task:
    d0 = dt_mask(inputs)
    case = 1 + seed_of(WORLD_SEED, "case", tid) % n_cases
    rec = world.records[case - 1]
    values = tuple(rec[d] for d in inputs)
    lstar = min(len(r) for r in shortest)
    if gt_path is None:
        orders = [g.first_order(d0, r) for r in shortest if len(r) == lstar]
        gt_path = min(o for o in orders if o is not None)
    return Task(
        id=tid, inputs=inputs, target=target, case=case, input_values=values, gold=rec[target],
        query=verbalize(tid, inputs, values, target), lstar=lstar, gt_path=tuple(gt_path), graph=g,
        single_step=single, shortest=tuple(tuple(sorted(r)) for r in shortest if len(r) == lstar),
    )


def enumerate_candidates(world: World, g: Graph) -> list[tuple[tuple[str, ...], str, list[frozenset[int]]]]:
    """Every (D_0, y) with 5 <= L* <= 9 whose inputs are all necessary (spec §2.2)."""
    clue = sorted({d for t in world.executable for d in t.inputs}, key=lambda n: DT[n].index)
    closures: dict[frozenset[str], int] = {}

    def cl(names: tuple[str, ...]) -> int:
        key = frozenset(names)
        if key not in closures:
            closures[key] = g.closure(dt_mask(names))
        return closures[key]

    out = []
    for size in (1, 2, 3):
        for d0 in itertools.combinations(clue, size):
            full = cl(d0) & ~dt_mask(d0)
            if not full:
                continue
            sub_union = 0
            for k in range(1, size):
                for sub in itertools.combinations(d0, k):
                    sub_union |= cl(sub)
            ys = full & ~sub_union
            memo: dict = {}
            while ys:
                ybit = ys & -ys
                ys ^= ybit
                # L* by iterative deepening: a search capped at k tools finds exactly the
                # minimal sets of size <= k, so the first non-empty cap is L*. Most targets
                # stop below 5.
                for cap in range(1, LSTAR_MAX + 1):
                    sets = g.minimal_sets(dt_mask(d0), ybit, memo, cap=cap)
                    if sets:
                        break
                if sets and LSTAR_MIN <= cap <= LSTAR_MAX:
                    y = DATATYPES[ybit.bit_length() - 1].name
                    out.append((d0, y, sets))
    return out


@dataclass
class TaskSet:
    tasks: list[Task]
    single_step: list[Task]
    graph: Graph
    n_candidates: int

    def __post_init__(self) -> None:
        self.by_id = {t.id: t for t in self.tasks + self.single_step}


@functools.lru_cache(maxsize=4)
def build_tasks(world: World, n_tasks: int = N_TASKS, n_cases: int = N_CASES) -> TaskSet:
    """The 327 main tasks and the 185 single-step tasks (cached per process)."""
    g = Graph(world)
    cands = enumerate_candidates(world, g)
    keyf = lambda c: (len(c[0]), sorted(c[0]), c[1])  # noqa: E731
    singles = sorted((c for c in cands if len(c[0]) == 1), key=keyf)
    multi = sorted((c for c in cands if len(c[0]) > 1), key=keyf)
    need = max(0, n_tasks - len(singles))
    chosen = singles + random.Random(WORLD_SEED).sample(multi, min(need, len(multi)))
    chosen = sorted(chosen, key=keyf)[:n_tasks]
    tasks = [
        _make_task(world, g, f"retail_task_{i + 1:04d}", d0, y, sets, n_cases=n_cases)
        for i, (d0, y, sets) in enumerate(chosen)
    ]
    single = []
    for t in world.executable:
        single.append(_make_task(world, g, f"single_step_{t.id}", t.inputs, t.output, [frozenset([t.num])],
                                 single=True, n_cases=n_cases, gt_path=[t.num]))
    return TaskSet(tasks=tasks, single_step=single, graph=g, n_candidates=len(cands))
