"""Prompts already computed, kept so that a later prompt that starts the same way skips that part.

An agent's turn k+1 prompt is its turn k prompt, the reply and a tool's output; every episode of a
benchmark setting starts with the same system prompt and tool list (a ToolMaze C1 prompt is ~6,400
tokens, most of it tools). Without reuse the transformers backend re-reads the whole prompt every turn:
on a CPU core about a minute per SmolLM2 reply, so a five-turn episode cost five minutes of compute.
vLLM does the same reuse (automatic prefix caching); this is the in-process backend's version.

The store holds one entry per computed sequence, each with its token ids and an opaque cache object
(the model's key/value tensors for those tokens). It knows nothing of torch: the caller gives an
entry's size in bytes and copies what it takes. Eviction is least recently used within a byte budget;
an entry whose ids start another entry's ids is dropped when that longer one arrives (it serves every
prompt the shorter one would).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

MIN_PREFIX_TOKENS = 64
"""Shorter common prefixes are not worth a copy of the cache: every chat prompt shares its template's
first few tokens, and recomputing 64 tokens costs about what copying them does."""


def common_prefix(a: tuple[int, ...] | list[int], b: tuple[int, ...] | list[int]) -> int:
    """The number of leading tokens `a` and `b` share (a list and a tuple compare by their items)."""
    a, b = tuple(a), tuple(b)
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo] and a[:hi] != b[:hi]: bisect on slice equality (C speed)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


@dataclass
class Entry:
    ids: tuple[int, ...]
    cache: Any
    nbytes: int
    used: int = 0


@dataclass
class PrefixStore:
    budget_bytes: int
    min_prefix: int = MIN_PREFIX_TOKENS
    entries: list[Entry] = field(default_factory=list)
    _clock: Any = field(default_factory=itertools.count)

    @property
    def nbytes(self) -> int:
        return sum(e.nbytes for e in self.entries)

    def lookup(self, ids: list[int] | tuple[int, ...]) -> tuple[Entry | None, int]:
        """The entry sharing the longest prefix with `ids` and that prefix's length, or (None, 0) when no
        entry shares at least `min_prefix` tokens. At least one token of `ids` is always left to
        compute (a model needs an input to produce the next token's logits)."""
        best, best_n, ids = None, 0, tuple(ids)
        for entry in self.entries:
            n = min(common_prefix(entry.ids, ids), len(ids) - 1)
            if n > best_n:
                best, best_n = entry, n
        if best is None or best_n < self.min_prefix:
            return None, 0
        best.used = next(self._clock)
        return best, best_n

    def put(self, ids: list[int] | tuple[int, ...], cache: Any, nbytes: int) -> bool:
        """Keep `cache` for `ids`. Entries that are prefixes of `ids` go (the new one serves them);
        then the least recently used go until the store fits its budget. An entry larger than the
        whole budget, or shorter than `min_prefix`, is not kept (False)."""
        ids = tuple(ids)
        if nbytes > self.budget_bytes or len(ids) < self.min_prefix:
            return False
        if any(len(e.ids) >= len(ids) and e.ids[: len(ids)] == ids for e in self.entries):
            return False  # already served by a longer entry
        self.entries = [e for e in self.entries if not (len(e.ids) <= len(ids) and ids[: len(e.ids)] == e.ids)]
        self.entries.append(Entry(ids, cache, nbytes, next(self._clock)))
        while self.nbytes > self.budget_bytes:
            self.entries.remove(min(self.entries, key=lambda e: e.used))
        return True

    def clear(self) -> None:
        self.entries = []
