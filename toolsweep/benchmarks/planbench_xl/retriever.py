"""Typed tool retrieval (spec §3.3): phrase -> datatype by a hashing encoder, exact interface match,
noisy fill up to the cap of 30, and in-place blocker replacement (spec §4.1).

The retriever resolves each phrase to its top-1 datatype with a lightweight sparse encoder (word
tokens, token bigrams, character trigrams), then returns the executable tools whose typed interface
equals the request, padded with their noisy variants. It never reveals the resolved datatypes.
"""

from __future__ import annotations

import functools
import hashlib
import math
import random
import re
from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from toolsweep.benchmarks.planbench_xl.world import Tool, World

RETURN_CAP = 30
_NON_ALNUM = re.compile(r"[^a-z0-9]+")

Vector = dict[int, float]


def normalize_phrase(text: str) -> str:
    return _NON_ALNUM.sub(" ", str(text).lower()).strip()


@functools.lru_cache(maxsize=1 << 16)
def _feature_hash(feature: str) -> int:
    return int(hashlib.md5(feature.encode()).hexdigest(), 16) % (1 << 20)


@functools.lru_cache(maxsize=1 << 14)
def phrase_vector(text: str) -> Vector:
    """L2-normalised hashed counts of `w:` tokens, `b:` bigrams and `c:` trigrams."""
    s = normalize_phrase(text)
    toks = s.split()
    feats = [f"w:{t}" for t in toks] + [f"b:{a}_{b}" for a, b in zip(toks, toks[1:])]
    padded = f" {s} "
    feats += [f"c:{padded[i:i + 3]}" for i in range(len(padded) - 2)]
    counts = Counter(_feature_hash(f) for f in feats)
    norm = math.sqrt(sum(v * v for v in counts.values())) or 1.0
    return {k: v / norm for k, v in counts.items()}


def cosine(a: Vector, b: Vector) -> float:
    if len(a) > len(b):
        a, b = b, a
    return sum(v * b.get(k, 0.0) for k, v in a.items())


class Retriever:
    """Built once per world; all methods are read-only and safe from many threads."""

    def __init__(self, world: World, seed: int = 42, *, type_neighbours: int = 0,
                 list_order: str = "executables_first") -> None:
        """`type_neighbours` and `list_order` make a harder variant than the paper's (see the
        PlanBenchXL options): 0 and "executables_first" are the paper's retriever."""
        from toolsweep.benchmarks.planbench_xl.world import DATATYPES, NOISY_CATEGORIES, seed_of

        if list_order not in ("executables_first", "shuffled"):
            raise ValueError(f"list_order must be 'executables_first' or 'shuffled', not {list_order!r}")
        self.world, self.seed, self._seed_of = world, seed, seed_of
        self.type_neighbours, self.list_order = type_neighbours, list_order
        # Each datatype's nearest other datatypes by the encoder (canonical phrases), nearest first.
        canon = {d.name: phrase_vector(d.name.replace("_", " ")) for d in DATATYPES}
        self.neighbours = {
            d.name: sorted((o.name for o in DATATYPES if o.name != d.name),
                           key=lambda o: (-cosine(canon[d.name], canon[o]), o))[:type_neighbours]
            for d in DATATYPES
        }
        self._alias_vecs = [
            (d.name, [phrase_vector(a) for a in (*d.aliases, d.name.replace("_", " "))]) for d in DATATYPES
        ]
        rank = {t.id: seed_of(seed, "rank", t.id) for t in world.executable}
        ordered = sorted(world.executable, key=lambda t: rank[t.id])
        self.by_inputs: dict[frozenset[str], list[Tool]] = {}
        self.by_output: dict[str, list[Tool]] = {}
        self.by_io: dict[tuple[frozenset[str], str], list[Tool]] = {}
        for t in ordered:
            self.by_inputs.setdefault(t.input_set, []).append(t)
            self.by_output.setdefault(t.output, []).append(t)
            self.by_io.setdefault((t.input_set, t.output), []).append(t)
        # Per-tool order of its noisy variants (round-robin fill) and of its blocker group.
        self.noise_order: dict[str, list[Tool]] = {}
        for t in world.executable:
            cats = random.Random(seed_of(seed, "noise-order", t.id)).sample(NOISY_CATEGORIES, 5)
            by_cat = {n.kind.split(":")[1]: n for n in world.noisy_of[t.id]}
            self.noise_order[t.id] = [by_cat[c] for c in cats]
        self.blocker_order = {
            t.id: random.Random(seed_of(seed, "blk-order", t.id)).sample(["exp", "imp", "sem"], 3)
            for t in world.executable
        }

    @functools.lru_cache(maxsize=1 << 14)
    def resolve(self, phrase: str) -> str:
        """Top-1 datatype for a phrase (max cosine over aliases; ties to the lower index)."""
        vec = phrase_vector(phrase)
        best, best_score = self._alias_vecs[0][0], -1.0
        for name, vecs in self._alias_vecs:
            score = max(cosine(vec, v) for v in vecs)
            if score > best_score + 1e-12:
                best, best_score = name, score
        return best

    def matches(self, mode: str, inputs: list[str], outputs: list[str]) -> list[Tool]:
        """Executable tools whose typed interface equals the request (no subset matching). With
        `type_neighbours` = n, a phrase also stands for its n nearest datatypes, so a request returns
        the tools of related interfaces too (in rank order, at most K_max = 14)."""
        exact = self._matches(mode, inputs, outputs)
        if not self.type_neighbours:
            return exact
        out = list(exact)
        for variant in self._neighbour_requests(mode, inputs, outputs):
            out += [t for t in self._typed(mode, *variant) if t not in out]
        rank = {t.id: self._seed_of(self.seed, "rank", t.id) for t in out}
        return sorted(out, key=lambda t: rank[t.id])[:14]

    def _neighbour_requests(self, mode: str, inputs: list[str], outputs: list[str]):
        d_in = sorted({self.resolve(p) for p in inputs})
        d_out = sorted({self.resolve(p) for p in outputs})
        if mode in ("by_inputs", "by_io_info"):
            for i, d in enumerate(d_in):
                for n in self.neighbours[d]:
                    yield frozenset([*d_in[:i], n, *d_in[i + 1:]]), frozenset(d_out)
        if mode in ("by_outputs", "by_io_info"):
            for d in d_out:
                for n in self.neighbours[d]:
                    yield frozenset(d_in), frozenset([n])

    def _typed(self, mode: str, d_in: frozenset[str], d_out: frozenset[str]) -> list[Tool]:
        if mode == "by_inputs":
            return list(self.by_inputs.get(d_in, [])) if d_in else []
        if len(d_out) != 1:
            return []
        (out,) = d_out
        if mode == "by_outputs":
            return list(self.by_output.get(out, []))
        return list(self.by_io.get((d_in, out), [])) if d_in else []

    def _matches(self, mode: str, inputs: list[str], outputs: list[str]) -> list[Tool]:
        d_in = frozenset(self.resolve(p) for p in inputs)
        d_out = frozenset(self.resolve(p) for p in outputs)
        if mode == "by_inputs":
            return list(self.by_inputs.get(d_in, [])) if d_in else []
        if len(d_out) != 1:
            return []
        (out,) = d_out
        if mode == "by_outputs":
            return list(self.by_output.get(out, []))
        if mode == "by_io_info":
            return list(self.by_io.get((d_in, out), [])) if d_in else []
        raise ValueError(f"unknown retrieval mode {mode!r}")

    def alternatives(self, tool_id: str, btypes: tuple[str, ...], n: int = 3) -> list[Tool]:
        """The n alternatives that replace a blocked tool (App. B.9.2, Eq. 49). Mixed settings take
        one of each type (the per-tool order of types is seeded, so position reveals nothing); a
        single-type setting keeps the count and changes only the behaviour (§5, Takeaway 5: "keep the
        block tools and block ratio fixed, and vary only the behavior of the replacement tools"), so
        it injects n alternatives of that one type."""
        if len(btypes) == 1:
            group = self.world.alternatives_of[tool_id][btypes[0]][:n]
            order = random.Random(self._seed_of(self.seed, "alt-order", tool_id, btypes[0])).sample(
                range(len(group)), len(group))
            return [group[i] for i in order]
        firsts = self.world.blockers_of[tool_id]
        return [firsts[b] for b in self.blocker_order[tool_id] if b in btypes][:n]

    def result_list(self, matched: list[Tool], blocked: frozenset[str], btypes: tuple[str, ...],
                    n_alternatives: int = 3) -> tuple[list[Tool], list[str]]:
        """The returned list: matches (blocked ones replaced in place), then noisy fill up to 30.

        Executable matches come before any distractor, as App. B.6 prescribes ("returns these tools
        before adding any distractors"); in block settings the alternatives take the blocked
        tool's place among them, so position does not tell a working tool from a blocker."""
        out: list[Tool] = []
        replaced: list[str] = []
        for t in matched:
            if t.id in blocked:
                replaced.append(t.id)
                out.extend(self.alternatives(t.id, btypes, n_alternatives))
            else:
                out.append(t)
        for j in range(5):
            for t in matched:
                if len(out) >= RETURN_CAP:
                    return self._ordered(out), replaced
                out.append(self.noise_order[t.id][j])
        return self._ordered(out[:RETURN_CAP]), replaced

    def _ordered(self, listed: list[Tool]) -> list[Tool]:
        """The paper's order, or (list_order="shuffled") the same tools in an order seeded by the list
        itself: identical for every model, and position no longer tells executables from noise."""
        if self.list_order == "executables_first":
            return listed
        out = list(listed)
        random.Random(self._seed_of(self.seed, "list-order", *(t.id for t in out))).shuffle(out)
        return out
