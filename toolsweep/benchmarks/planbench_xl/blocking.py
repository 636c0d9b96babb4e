"""Retrieval-time blocking (spec §4): the settings table and the path-preserving choice of T_blk.

For each task a hidden set of executable tools is blocked; retrieval replaces each blocked tool in
place by its blocker alternatives. T_blk is chosen so that a target number of ground-truth tool sets
survives (n_i(C) = |{R in M_i : R ∩ C = ∅}|, spec §4.2), by the smallest intervention, with ties
broken by a per-task seed: identical for every model in a (setting, seed).

keep_shortest / keep_longest [S]: every surviving set must have length L* (resp. L^max). When no
combination of at most K_blk tools leaves 1-2 such survivors, the length constraint is kept and more
survivors are accepted (smallest intervention first); when even that fails the task is unresolved
and T_blk = ∅ (34/327 tasks for keep_longest in the default world, whose L^max is capped at 12).
"""

from __future__ import annotations

import math
import random
import threading
from dataclasses import dataclass

from toolsweep.benchmarks.planbench_xl.tasks import Task
from toolsweep.benchmarks.planbench_xl.world import World, seed_of

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


def task_seed(seed: int, task_id: str) -> int:
    """sigma_i = sigma_0 + hash(i) with the stable hash of spec §0."""
    return seed + seed_of(task_id) % (1 << 32)


class Blocker:
    """Computes and caches T_blk per (task, objective, seed); safe for concurrent episodes."""

    def __init__(self, world: World, pool_cap: int = POOL_CAP, k_blk: int = K_BLK) -> None:
        self.world = world
        self.pool_cap = pool_cap
        self.k_blk = k_blk
        self._cache: dict[tuple[str, str, float | None, int], BlockChoice] = {}
        self._lock = threading.Lock()

    def choose(self, task: Task, spec: SettingSpec, seed: int) -> BlockChoice:
        if spec.objective == "none":
            return BlockChoice(frozenset(), len(task.minimal_sets), True)
        key = (task.id, spec.objective, spec.rho, seed)
        with self._lock:
            hit = self._cache.get(key)
        if hit is None:
            hit = self._select(task, spec, seed)
            with self._lock:
                self._cache[key] = hit
        return hit

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
        # Minimise (d, |C|): try each achievable distance d in increasing order, and for each the
        # sizes 0..K_blk; the first non-empty level is the candidate pool (spec §4.2).
        for d in sorted({abs(n - target) for n in feasible_n}):
            ns = [n for n in feasible_n if abs(abs(n - target) - d) < 1e-9]
            lo, hi = min(ns), max(ns)
            for size in range(0, min(self.k_blk, len(pool)) + 1):
                cands = self._level(hit, full, m, size, lo, hi, must, set(ns))
                if cands:
                    pick = random.Random(task_seed(seed, task.id)).choice(cands)
                    blocked = frozenset(self.world.executable[pool[j]].id for j in pick)
                    mask = 0
                    for j in pick:
                        mask |= hit[j]
                    return BlockChoice(blocked, m - mask.bit_count(), True)
        if must:
            # keep_shortest/keep_longest when no <= K_blk combination leaves 1-2 paths: keep the
            # length constraint (every survivor has the wanted length) and accept more survivors,
            # by the smallest intervention and then the smallest |n - n*| [S, see module doc].
            all_n = set(range(1, m + 1))
            for size in range(0, min(self.k_blk, len(pool)) + 1):
                cands = self._level(hit, full, m, size, 1, m, must, all_n)
                if cands:
                    def n_of(c: tuple[int, ...]) -> int:
                        mask = 0
                        for j in c:
                            mask |= hit[j]
                        return m - mask.bit_count()
                    best = min(abs(n_of(c) - target) for c in cands)
                    cands = [c for c in cands if abs(n_of(c) - target) == best]
                    pick = random.Random(task_seed(seed, task.id)).choice(cands)
                    return BlockChoice(frozenset(self.world.executable[pool[j]].id for j in pick),
                                       n_of(pick), True)
        return BlockChoice(frozenset(), m, False)

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
