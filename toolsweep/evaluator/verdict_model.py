"""A small linear classifier beside the sentence reader of `verdicts.py`, for each text verdict (APB
refusal, ToolMaze failure acknowledgement, success claim).

The reader's rules are exact where a phrasing was foreseen and blind where it was not; the classifier
(logistic regression over hashed word n-grams and in-word character n-grams) has read every labelled
sentence in tests/verdicts/ and generalises by overlap. Each alone misreads more held-out text than the
two together: the verdict is the rule's unless the classifier is confident the other way
(`blend`). Pure numpy at run time; the weights (`verdict_weights.py`) are generated from the tuning
corpora by `bench/train_verdicts.py` and checked against them in tests/verdicts/.
"""

from __future__ import annotations

import base64
import functools
import re
import zlib

import numpy as np

BUCKETS = 1 << 16
# The classifier's weight in the blend: the score is W * p + (1 - W) * rule, read as positive above one half,
# so the classifier overrides the rule only when p > .714 (rule says no) or p < .286 (rule says yes).
# Chosen on the first held-out round, with the classifier trained on the tuning part only.
W = 0.7
_TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)?|\d+|[?!:;{}\"\[\]]")


def features(text: str) -> np.ndarray:
    """Bucket indices of the text's word 1-3-grams and in-word character 3-5-grams (each once)."""
    t = (text or "").lower().replace("’", "'")
    words = _TOKEN.findall(t)
    buckets: set[int] = set()
    for w in set(words):
        buckets.update(_word_buckets(w))
    buckets.update(_bucket(f"b:{a} {b}") for a, b in zip(words, words[1:]))
    buckets.update(_bucket(f"t:{a} {b} {c}") for a, b, c in zip(words, words[1:], words[2:]))
    return np.array(sorted(buckets), dtype=np.int64)


def _bucket(gram: str) -> int:
    return zlib.crc32(gram.encode()) % BUCKETS


@functools.lru_cache(maxsize=16384)
def _word_buckets(word: str) -> tuple[int, ...]:
    """The buckets of one word and of its character 3-5-grams (words recur; their grams are kept)."""
    padded = f" {word} "
    grams = {f"w:{word}"} | {f"c:{padded[i:i + n]}" for n in (3, 4, 5) for i in range(len(padded) - n + 1)}
    return tuple(_bucket(g) for g in grams)


def encode(weights: np.ndarray, bias: float) -> str:
    """Weights as text for a generated module: float16, zlib, base64."""
    raw = np.asarray(weights, dtype="<f2").tobytes()
    return f"{float(bias)!r}:" + base64.b64encode(zlib.compress(raw, 9)).decode()


def decode(blob: str) -> tuple[np.ndarray, float]:
    bias, data = blob.split(":", 1)
    w = np.frombuffer(zlib.decompress(base64.b64decode(data)), dtype="<f2").astype(np.float64)
    return w, float(bias)


@functools.lru_cache(maxsize=None)
def _model(name: str) -> tuple[np.ndarray, float]:
    from toolsweep.evaluator import verdict_weights

    try:
        return decode(verdict_weights.WEIGHTS[name])
    except KeyError:
        raise KeyError(f"no classifier weights for verdict {name!r}: regenerate them with "
                       f"`python bench/train_verdicts.py`") from None


def probability(name: str, text: str | None, model: tuple[np.ndarray, float] | None = None) -> float:
    """The classifier's probability that `text` is a positive example of verdict `name` (under the
    shipped weights, or `model`'s)."""
    if model is None:
        return _shipped_probability(name, text or "")
    return _probability(model, text or "")


@functools.lru_cache(maxsize=1024)
def _shipped_probability(name: str, text: str) -> float:
    """`probability` under the shipped weights, kept per text: a sweep reads the same texts many times."""
    return _probability(_model(name), text)


def _probability(model: tuple[np.ndarray, float], text: str) -> float:
    idx = features(text)
    w, b = model
    z = b + (w[idx].sum() / np.sqrt(max(len(idx), 1)))
    return float(1.0 / (1.0 + np.exp(-z)))


def blend(name: str, rule: bool, text: str | None) -> bool:
    """The rule's verdict unless the classifier is confident the other way."""
    if not (text or "").strip():
        return rule
    return W * probability(name, text) + (1.0 - W) * float(rule) > 0.5
