"""BM25 tool retrieval (pure Python), the offline stand-in for the paper's dense retrievers.

The paper retrieves top-20 tools with bge-large / all-MiniLM / ToolBench-IR; their weights are not
available offline, so retrieval settings use Okapi BM25 (the `rank-bm25` package's BM25Okapi
formula: k1=1.5, b=0.75, negative IDFs floored at epsilon x mean IDF) over tool name + description
(spec §3.1). Scores depend only on (query, pool, k): retrieval rate is model-independent.
"""

from __future__ import annotations

import heapq
import math
import re
import threading
from collections import Counter
from typing import Callable, Sequence

_TOKEN = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


class BM25:
    def __init__(self, docs: Sequence[str], k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25):
        self.k1, self.b = k1, b
        toks = [tokenize(d) for d in docs]
        self.n = len(toks)
        self.doc_len = [len(t) for t in toks]
        self.avgdl = (sum(self.doc_len) / self.n) if self.n else 0.0
        df: Counter[str] = Counter()
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for i, t in enumerate(toks):
            for term, tf in Counter(t).items():
                df[term] += 1
                self.postings.setdefault(term, []).append((i, tf))
        idf = {t: math.log(self.n - f + 0.5) - math.log(f + 0.5) for t, f in df.items()}
        mean_idf = (sum(idf.values()) / len(idf)) if idf else 0.0
        floor = epsilon * mean_idf
        self.idf = {t: (v if v >= 0 else floor) for t, v in idf.items()}
        # A document's score is a sum over query terms of a per-(term, doc) weight: precompute it.
        self.weights: dict[str, list[tuple[int, float]]] = {}
        for term, post in self.postings.items():
            w = self.idf[term]
            self.weights[term] = [
                (i, w * tf * (k1 + 1) / (tf + k1 * (1 - b + b * self.doc_len[i] / self.avgdl)))
                for i, tf in post
            ]

    def scores(self, query: str) -> list[float]:
        s = [0.0] * self.n
        for term in tokenize(query):
            for i, w in self.weights.get(term, ()):
                s[i] += w
        return s

    def top_k(self, query: str, k: int) -> list[int]:
        """Indices of the k best documents; ties keep pool order (deterministic)."""
        s = self.scores(query)
        hit = [i for i in range(self.n) if s[i] != 0.0]
        best = heapq.nsmallest(k, hit, key=lambda i: (-s[i], i))
        if len(best) < k:  # documents sharing no term with the query, in pool order
            chosen = set(best)
            best += [i for i in range(self.n) if i not in chosen][: k - len(best)]
        return best


class ToolRetriever:
    """One BM25 index per (domain, tool pool), built on first use and shared by all episodes of a
    process. A tool is indexed as the task's own domain describes it (`describe(name, domain)`), so a
    task's retrieval never depends on which other domains are loaded."""

    def __init__(self, describe: Callable[[str, str | None], str]) -> None:
        self._describe = describe
        self._indexes: dict[tuple[str | None, tuple[str, ...]], BM25] = {}
        self._results: dict[tuple[str | None, tuple[str, ...], str, int], list[str]] = {}
        self._lock = threading.Lock()

    def _index(self, pool: tuple[str, ...], domain: str | None) -> BM25:
        key = (domain, pool)
        idx = self._indexes.get(key)
        if idx is None:
            with self._lock:
                idx = self._indexes.get(key)
                if idx is None:
                    idx = BM25([f"{n} {self._describe(n, domain)}" for n in pool])
                    self._indexes[key] = idx
        return idx

    def retrieve(self, query: str, pool: tuple[str, ...], k: int, domain: str | None = None) -> list[str]:
        """Top-k tool names of `pool` for `query`, as a task of `domain` sees the tools (results
        cached: every model sees the same)."""
        key = (domain, pool, query, k)
        got = self._results.get(key)
        if got is None:
            got = [pool[i] for i in self._index(pool, domain).top_k(query, k)]
            if len(self._results) < 100_000:
                self._results[key] = got
        return list(got)
