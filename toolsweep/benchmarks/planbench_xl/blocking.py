"""Retrieval-time blocking (spec §4): the settings table and the path-preserving choice of T_blk.

For each task a hidden set of executable tools is blocked; retrieval replaces each blocked tool in
place by its blocker alternatives. T_blk is chosen so that a target number of ground-truth tool sets
survives (n_i(C) = |{R in M_i : R ∩ C = ∅}|, spec §4.2), by the smallest intervention, with ties
broken by a per-task seed: identical for every model in a (setting, seed).

The search is the paper's (App. B.9.3): C = ∅ first, then combinations up to K_blk, the feasible
ones closest to n*, one drawn uniformly with the task seed; among them the smallest intervention
by default, or the paper's literal pool of every size (`pool="paper"`). A task with a single
minimal set keeps C = ∅ under n* = 1: the paper's own rule resolves it unblocked (Eq. 51 and "all
task instances are resolved"), 21 of 327 tasks in this world.

When no combination of at most K_blk tools is feasible (keep_shortest / keep_longest, whose every
survivor must have length L* / L^max, and rare one-path tasks), the paper reports that it never
happened in its world; here it does, because K_blk = 6 is our choice [S]. Rather than leave such a
task unblocked, the blocker keeps one designated path of the wanted length (drawn with the task
seed) and blocks a greedy hitting set of every other minimal set outside it. Minimal sets form an
antichain, so every other set has a tool outside the kept one and this always succeeds with one
survivor: every task is blocked as its setting says.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from toolsweep.benchmarks.planbench_xl.tasks import Task
from toolsweep.benchmarks.planbench_xl.world import World, seed_of

BLOCKER_ALGORITHM = 1  # bump when the choice of T_blk changes: the on-disk cache keys on it
K_BLK = 6  # spec §0 [S]: largest blocked combination searched
POOL_CAP = 2_000_000  # spec §0 [S]: combinations examined per level at most


@dataclass(frozen=True)
class SettingSpec:
    """One row of the spec §4.2 setting table."""

    name: str
    objective: str  # none | ratio | one_path | keep_shortest | keep_longest
    btypes: tuple[str, ...] = ("exp", "imp", "sem")
    rho: float | None = None
    enf: int = 0  # enforced-exploration budget B_enf (spec §5)
    single_step: bool = False

    def params(self) -> dict:
        return {"objective": self.objective, "blocker_types": list(self.btypes), "block_ratio": self.rho,
                "enforced_exploration": self.enf, "single_step": self.single_step}


def _settings() -> dict[str, SettingSpec]:
    out = [SettingSpec("default", "none")]
    out += [SettingSpec(f"ratio_{r}", "ratio", rho=r) for r in (0.2, 0.4, 0.6, 0.8)]
    out.append(SettingSpec("one_path_mixed", "one_path"))
    out += [SettingSpec(f"one_path_{n}", "one_path", btypes=(b,))
            for n, b in (("explicit", "exp"), ("implicit", "imp"), ("misleading", "sem"))]
    out += [SettingSpec("keep_shortest", "keep_shortest"), SettingSpec("keep_longest", "keep_longest")]
    out += [SettingSpec(f"one_path_mixed_enf{k}", "one_path", enf=k) for k in range(1, 6)]
    out.append(SettingSpec("single_step", "none", single_step=True))
    return {s.name: s for s in out}


SETTINGS = _settings()


@dataclass(frozen=True)
class BlockChoice:
    blocked: frozenset[str]  # executable tool ids
    survivors: int  # n_i(T_blk)
    resolved: bool
    method: str = "search"  # search | kept_path (the greedy construction beyond K_blk) | none


def task_seed(seed: int, task_id: str) -> int:
    """sigma_i = sigma_0 + hash(i) with the stable hash of spec §0."""
    return seed + seed_of(task_id) % (1 << 32)


class Blocker:
    """Computes and caches T_blk per (task, objective, seed); safe for concurrent episodes."""

    def __init__(self, world: World, pool_cap: int = POOL_CAP, k_blk: int = K_BLK,
                 pool: str = "smallest", cache_file: Path | None = None) -> None:
        """`cache_file`: a JSON file of earlier choices for this exact world, task set and search
        (see `cache_path`), shared by every process on the machine."""
        if pool not in ("smallest", "paper"):
            raise ValueError(f"blocker pool must be 'smallest' or 'paper', not {pool!r}")
        self.world = world
        self.pool_cap = pool_cap
        self.k_blk = k_blk
        self.pool = pool
        self.cache_file = cache_file
        self._cache: dict[tuple[str, str, float | None, int], BlockChoice] = {}
        self._disk: dict[str, list] | None = None
        self._unsaved = 0.0  # search seconds whose results are not on disk yet
        self._lock = threading.Lock()

    def choose(self, task: Task, spec: SettingSpec, seed: int) -> BlockChoice:
        if spec.objective == "none":
            return BlockChoice(frozenset(), len(task.minimal_sets), True, "none")
        key = (task.id, spec.objective, spec.rho, seed)
        with self._lock:
            hit = self._cache.get(key) or self._from_disk(key)
        if hit is None:
            t0 = time.monotonic()
            hit = self._select(task, spec, seed)
            spent = time.monotonic() - t0
            with self._lock:
                self._cache[key] = hit
                self._to_disk(key, hit, spent)
        return hit

    # -- the on-disk cache ---------------------------------------------------------------------
    # Why: the choice is a pure function of (world, task set, search options, task, setting, seed),
    # and the search beyond K_blk is slow (keep_longest 75-160 s per process under load, one-path
    # 2-11 s). Every worker process used to repeat it; now the first process on a machine pays once.

    @staticmethod
    def _disk_key(key: tuple[str, str, float | None, int]) -> str:
        return "|".join(map(str, key))

    def _load_disk(self) -> dict[str, list]:
        if self._disk is None:
            self._disk = {}
            if self.cache_file is not None and self.cache_file.is_file():
                try:
                    self._disk = json.loads(self.cache_file.read_text())
                except (OSError, ValueError):
                    self._disk = {}  # a damaged cache is recomputed, never trusted
        return self._disk

    def _from_disk(self, key: tuple[str, str, float | None, int]) -> BlockChoice | None:
        if self.cache_file is None:
            return None
        row = self._load_disk().get(self._disk_key(key))
        if row is None:
            return None
        hit = BlockChoice(frozenset(row[0]), int(row[1]), bool(row[2]), str(row[3]))
        self._cache[key] = hit
        return hit

    def _to_disk(self, key: tuple[str, str, float | None, int], hit: BlockChoice, spent: float) -> None:
        """Record a choice; the file is rewritten once a slow search or 2 s of quick ones are unsaved
        (rewriting it after every quick choice cost more than the searches), and by `flush()`."""
        if self.cache_file is None:
            return
        self._load_disk()[self._disk_key(key)] = [sorted(hit.blocked), hit.survivors, hit.resolved, hit.method]
        self._unsaved += spent
        if self._unsaved >= 2.0 or spent >= 0.5:
            self._write_disk()

    def flush(self) -> None:
        """Write every choice not yet on disk (a no-op without a cache file)."""
        with self._lock:
            if self.cache_file is not None and self._unsaved:
                self._write_disk()

    def _write_disk(self) -> None:
        self._unsaved = 0.0
        disk = self._load_disk()
        try:  # merge what other processes wrote meanwhile, then replace the file atomically
            if self.cache_file.is_file():
                disk.update({k: v for k, v in json.loads(self.cache_file.read_text()).items() if k not in disk})
        except (OSError, ValueError):
            pass
        try:
            self.cache_file.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.cache_file.parent, suffix=".tmp")
            with os.fdopen(fd, "w") as f:
                json.dump(disk, f, separators=(",", ":"))
            os.replace(tmp, self.cache_file)
        except OSError:
            pass  # a read-only cache directory only costs speed

    def _select(self, task: Task, spec: SettingSpec, seed: int) -> BlockChoice:
        sets = task.minimal_sets
        m = len(sets)
        pool = sorted({t for r in sets for t in r})
        hit = [sum(1 << k for k, r in enumerate(sets) if t in r) for t in pool]
        full = (1 << m) - 1
        must = 0
        if spec.objective == "ratio":
            target, n_min, delta = (1 - (spec.rho or 0.0)) * m, 1, math.inf
        else:
            target, n_min, delta = 1.0, 1, 1
            if spec.objective in ("keep_shortest", "keep_longest"):
                want = task.lstar if spec.objective == "keep_shortest" else task.lmax
                must = sum(1 << k for k, r in enumerate(sets) if len(r) != want)
        feasible_n = [n for n in range(n_min, m + 1) if abs(n - target) <= delta]
        # No combination smaller than the least hitting set of the sets that must go can qualify,
        # so those levels are skipped unexamined (the result is the same, see `_min_hitting`).
        smallest = _min_hitting([_tools_mask(hit, k) for k in range(m) if must >> k & 1], self.k_blk)
        # Minimise (d, |C|): try each achievable distance d in increasing order, and for each the
        # sizes 0..K_blk; the first non-empty level is the candidate pool (spec §4.2).
        for d in sorted({abs(n - target) for n in feasible_n}):
            ns = [n for n in feasible_n if abs(abs(n - target) - d) < 1e-9]
            lo, hi = min(ns), max(ns)
            cands: list[tuple[int, ...]] = []
            for size in range(smallest, min(self.k_blk, len(pool)) + 1):
                cands += self._level(hit, full, m, size, lo, hi, must, set(ns))
                if cands and self.pool == "smallest":
                    break
            if cands:
                pick = random.Random(task_seed(seed, task.id)).choice(cands)
                blocked = frozenset(self.world.executable[pool[j]].id for j in pick)
                mask = 0
                for j in pick:
                    mask |= hit[j]
                return BlockChoice(blocked, m - mask.bit_count(), True)
        if spec.objective == "ratio":
            return BlockChoice(frozenset(), m, False, "none")
        want = None
        if spec.objective in ("keep_shortest", "keep_longest"):
            want = task.lstar if spec.objective == "keep_shortest" else task.lmax
        return self._keep_one_path(task, want, seed)

    def _keep_one_path(self, task: Task, want: int | None, seed: int) -> BlockChoice:
        """One designated survivor of the wanted length, every other minimal set hit (module doc)."""
        sets = task.minimal_sets
        keep = [r for r in sets if want is None or len(r) == want]
        kept = set(random.Random(task_seed(seed, task.id)).choice(keep))
        others = [set(r) - kept for r in sets if set(r) != kept]
        chosen: list[int] = []
        while others:
            counts: dict[int, int] = {}
            for r in others:
                for t in r:
                    counts[t] = counts.get(t, 0) + 1
            best = min(counts, key=lambda t: (-counts[t], t))
            chosen.append(best)
            others = [r for r in others if best not in r]
        blocked = frozenset(self.world.executable[t].id for t in chosen)
        return BlockChoice(blocked, 1, True, "kept_path")

    def _level(self, hit: list[int], full: int, m: int, size: int, lo: int, hi: int, must: int,
               ns: set[int]) -> list[tuple[int, ...]]:
        """All size-`size` combinations (lexicographic order) with n in `ns` and `must` all hit.

        Exact pruning keeps generation order: n only falls as tools are added, and sets that no
        later tool hits can no longer be hit."""
        p = len(hit)
        suffix = [0] * (p + 1)
        for j in range(p - 1, -1, -1):
            suffix[j] = suffix[j + 1] | hit[j]
        out: list[tuple[int, ...]] = []
        budget = [self.pool_cap]

        def dfs(start: int, left: int, mask: int, chosen: tuple[int, ...]) -> None:
            if left == 0:
                n = m - mask.bit_count()
                if n in ns and must & mask == must:
                    out.append(chosen)
                return
            for j in range(start, p - left + 1):
                if budget[0] <= 0:
                    return
                new = mask | hit[j]
                n_now = m - new.bit_count()
                if n_now < lo:
                    continue
                rest = suffix[j + 1] if left > 1 else 0
                if n_now - (full & ~new & rest).bit_count() > hi:
                    continue
                if must & ~new & ~rest:
                    continue
                if left == 1:
                    budget[0] -= 1
                dfs(j + 1, left - 1, new, chosen + (j,))

        dfs(0, size, 0, ())
        return out


def _tools_mask(hit: list[int], k: int) -> int:
    """Bitmask over the pool of the tools that minimal set k contains (`hit[j]` has bit k set)."""
    return sum(1 << j for j, h in enumerate(hit) if h >> k & 1)


def _min_hitting(sets: list[int], limit: int) -> int:
    """Size of the smallest tool set that meets every set in `sets` (tool bitmasks), or limit + 1
    when it exceeds `limit`.

    Why: keep_shortest / keep_longest must block every minimal set of the wrong length. Many tasks
    need far more than K_blk tools for that (up to 19), and enumerating every combination of up to
    K_blk tools before the kept-path construction took over cost 75-160 s per process for
    keep_longest. Branching on the unmet set with the fewest tools (one of them must be chosen)
    with iterative deepening answers in milliseconds, and the levels it rules out hold no
    candidate, so the choice is unchanged."""

    def coverable(left: list[int], k: int) -> bool:
        if not left:
            return True
        if k == 0:
            return False
        used = count = 0  # pairwise-disjoint sets need one tool each
        for r in left:
            if not r & used:
                used |= r
                count += 1
        if count > k:
            return False
        branch = min(left, key=int.bit_count)
        b = branch
        while b:
            low = b & -b
            b ^= low
            if coverable([r for r in left if not r & low], k - 1):
                return True
        return False

    ordered = sorted(set(sets), key=lambda r: (r.bit_count(), r))
    for k in range(limit + 1):
        if coverable(ordered, k):
            return k
    return limit + 1


def cache_path(namespace: dict) -> Path:
    """The cache file for one world, task set and blocker search: under $TOOLSWEEP_CACHE or
    ~/.cache/toolsweep (never inside the repository), named by a hash of `namespace`."""
    root = Path(os.environ.get("TOOLSWEEP_CACHE") or Path.home() / ".cache" / "toolsweep")
    blob = json.dumps({**namespace, "algorithm": BLOCKER_ALGORITHM}, sort_keys=True).encode()
    return root / "planbench_xl" / f"blockers-{hashlib.sha256(blob).hexdigest()[:20]}.json"
