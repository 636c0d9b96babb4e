"""Unit ids held compactly: a sha256 id as its raw 32-byte digest in numpy arrays, not a 64-character
Python string (113 bytes, plus a set slot). A million-unit sweep's ids, what its run directory has
recorded, and the writer's once-only guard then cost tens of megabytes, and membership of many ids
at once is one vectorised `np.searchsorted`."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Set
from typing import Any

import numpy as np

DIGEST = np.dtype("S32")
"""A unit id as its raw sha256 digest: 32 bytes, where the hex string is a 113-byte Python object.
Sorting digests sorts like their lowercase hex ids."""

_HEX_VALUE = np.full(256, 255, dtype=np.uint8)
_HEX_VALUE[np.frombuffer(b"0123456789abcdef", dtype=np.uint8)] = np.arange(16, dtype=np.uint8)


def digests_from_hex_bytes(raw: np.ndarray) -> np.ndarray:
    """Digests of hex ids given as an (n, 64) uint8 array of their ASCII (lowercase only: the id is
    `hexdigest()`, and an uppercase id would not come back as itself)."""
    nibbles = _HEX_VALUE[raw]
    if nibbles.size and nibbles.max() == 255:
        raise ValueError("a unit id is not a lowercase sha256 hex digest")
    pairs = (nibbles[:, 0::2] << 4) | nibbles[:, 1::2]
    return np.ascontiguousarray(pairs).view(DIGEST).reshape(-1)


def digests_from_hex(unit_ids: Iterable[str]) -> np.ndarray:
    """Digests of hex unit ids, in the given order."""
    ids = list(unit_ids)
    if any(len(i) != 64 for i in ids):
        raise ValueError("a unit id is not a sha256 hex digest (64 characters)")
    raw = np.frombuffer("".join(ids).encode("ascii"), dtype=np.uint8).reshape(-1, 64)
    return digests_from_hex_bytes(raw)


def hex_of(digests: np.ndarray, i: int) -> str:
    """The hex id of digest i (read through the buffer: numpy drops a digest's trailing zero bytes
    when it hands out one element)."""
    if i < 0:
        i += len(digests)
    return digests[i : i + 1].tobytes().hex()


def _digest_of(unit_id: object) -> np.ndarray | None:
    """A hex id as a one-element digest array, or None if it is not one (ids are lowercase hex, so
    an uppercase string is no id, as it would not be in a set of the strings)."""
    if not isinstance(unit_id, str) or len(unit_id) != 64 or unit_id != unit_id.lower():
        return None
    try:
        return np.frombuffer(bytes.fromhex(unit_id), dtype=DIGEST)
    except ValueError:
        return None


def _sorted_contains(sorted_digests: np.ndarray, digests: np.ndarray) -> np.ndarray:
    """Which of `digests` are in `sorted_digests` (sorted, unique), as a bool array."""
    if not len(sorted_digests) or not len(digests):
        return np.zeros(len(digests), dtype=bool)
    at = np.searchsorted(sorted_digests, digests)
    found = at < len(sorted_digests)
    found[found] = sorted_digests[at[found]] == digests[found]
    return found


class UnitIds(Set[str]):
    """An immutable set of unit ids held as sorted sha256 digests (32 bytes an id, no Python object
    per id): a million-unit sweep's ids in 32 MB instead of ~140 MB of strings in a set.

    It reads like a frozenset of hex ids (`in`, `len`, `<=`, `==`, iteration in id order); the
    bulk operations (`contains`, `<=` between two of them) are vectorised with `np.searchsorted`."""

    __slots__ = ("digests",)

    def __init__(self, digests: np.ndarray | None = None, *, sorted_unique: bool = False) -> None:
        d = np.zeros(0, dtype=DIGEST) if digests is None else np.asarray(digests, dtype=DIGEST)
        self.digests: np.ndarray = d if sorted_unique else np.unique(d)

    @classmethod
    def sorted_in_place(cls, digests: np.ndarray) -> UnitIds:
        """`digests` sorted where they lie (no second copy of a big array), duplicates dropped."""
        digests.sort()
        if len(digests) > 1:
            repeated = digests[1:] == digests[:-1]
            if repeated.any():
                digests = digests[np.concatenate(([True], ~repeated))]
        return cls(digests, sorted_unique=True)

    @classmethod
    def from_hex(cls, unit_ids: Iterable[str]) -> UnitIds:
        return cls(digests_from_hex(unit_ids))

    @classmethod
    def of(cls, unit_ids: Iterable[str]) -> UnitIds:
        """`unit_ids` as a UnitIds (itself when it already is one)."""
        return unit_ids if isinstance(unit_ids, UnitIds) else cls.from_hex(unit_ids)

    @classmethod
    def _from_iterable(cls, it: Iterable[str]) -> UnitIds:  # what Set's `&`, `|`, `-` build
        return cls.from_hex(it)

    def contains(self, digests: np.ndarray) -> np.ndarray:
        """Which of `digests` are in this set (a bool array aligned with them)."""
        return _sorted_contains(self.digests, digests)

    def __contains__(self, unit_id: object) -> bool:
        key = _digest_of(unit_id)
        return key is not None and bool(self.contains(key)[0])

    def __len__(self) -> int:
        return len(self.digests)

    def __iter__(self) -> Iterator[str]:
        raw = self.digests.tobytes()
        return (raw[k : k + 32].hex() for k in range(0, len(raw), 32))

    def __le__(self, other: Any) -> bool:
        if isinstance(other, UnitIds):
            return bool(other.contains(self.digests).all())
        return super().__le__(other)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, UnitIds):
            return np.array_equal(self.digests, other.digests)
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]  # like a set: compared by content

    def union(self, other: UnitIds) -> UnitIds:
        return UnitIds(np.union1d(self.digests, other.digests), sorted_unique=True)

    def __repr__(self) -> str:
        return f"UnitIds({len(self)} ids)"


class GrowingUnitIds:
    """Unit ids seen so far, as the set grows: sorted runs of digests (each filled once, then never
    moved) plus a small sorted tail that becomes a run at `run_size` ids. Adding is cheap, no id is
    ever a Python string, and the set never reallocates one big array (freed big arrays leave the
    allocator's heap fragmented, which RSS shows). `contains` and `add` take digest arrays."""

    def __init__(self, start: UnitIds | None = None, run_size: int = 1 << 17) -> None:
        self._runs: list[np.ndarray] = [start.digests] if start is not None and len(start) else []
        self._tail = np.zeros(0, dtype=DIGEST)
        self.run_size = run_size

    def __len__(self) -> int:
        return sum(map(len, self._runs)) + len(self._tail)

    def contains(self, digests: np.ndarray) -> np.ndarray:
        found = _sorted_contains(self._tail, digests)
        for run in self._runs:
            found |= _sorted_contains(run, digests)
        return found

    def __contains__(self, unit_id: object) -> bool:
        key = _digest_of(unit_id)
        return key is not None and bool(self.contains(key)[0])

    def add(self, digests: np.ndarray) -> None:
        """Add ids that are not in the set yet (the caller checked with `contains`)."""
        new = np.unique(np.asarray(digests, dtype=DIGEST))
        self._tail = np.insert(self._tail, np.searchsorted(self._tail, new), new)
        if len(self._tail) >= self.run_size:
            self._runs.append(self._tail)
            self._tail = np.zeros(0, dtype=DIGEST)

    def frozen(self) -> UnitIds:
        """Every id so far, as one `UnitIds` (a copy: later adds do not change it)."""
        return UnitIds.sorted_in_place(np.concatenate([*self._runs, self._tail]))
