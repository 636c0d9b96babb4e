"""Role-leak probe: can a learner read a tool's hidden role from what a model sees?

A generated world hides roles (which tool works, which one is a decoy, which case cannot be solved).
If anything visible carries the role, a policy without a language model can score by reading it.
The probe trains a logistic regression on every visible field of the items of half the families
(names, descriptions, parameters, values, list position, and relations inside a list: identical or
contained descriptions, length ranks, shortest description first) and tests it on the other half.
A world is clean when the held-out balanced accuracy sits within `CHANCE_MARGIN` of the same
classifier trained on shuffled labels.

Pure Python plus scikit-learn (imported inside the functions: it is a `dev` extra).
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

CHANCE_MARGIN = 0.05
SHUFFLES = 5  # label permutations averaged into the chance figure
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class ProbeItem:
    """One thing a model sees inside a list (a tool, a case): its visible text fields, its parameters
    as (name, description) pairs, its hidden role label and the family it belongs to (the split unit)."""

    fields: dict[str, str | tuple[str, ...]]  # a tuple: separate texts of one field (a tool list's tools)
    label: bool
    family: str
    params: tuple[tuple[str, str], ...] = ()
    scored: bool = True  # False: shapes its list's relations but is neither trained nor tested on


@dataclass
class ProbeResult:
    name: str
    balanced_accuracy: float
    shuffled_balanced_accuracy: float
    n_train: int
    n_test: int
    positives: int
    top_features: list[tuple[str, float]] = field(default_factory=list)

    @property
    def at_chance(self) -> bool:
        return abs(self.balanced_accuracy - self.shuffled_balanced_accuracy) <= CHANCE_MARGIN

    @property
    def readable(self) -> bool:
        """The role is read: above the shuffled figure by more than the margin. Below chance is no leak a
        learner can use (trained on half the families, it generalises the wrong way to the other half:
        a world that shows one base's material in another base's case does that)."""
        return self.balanced_accuracy - self.shuffled_balanced_accuracy > CHANCE_MARGIN

    def row(self) -> str:
        verdict = "LEAKS" if self.readable else "at chance" if self.at_chance else "below chance"
        return (f"| {self.name} | {self.balanced_accuracy:.3f} | {self.shuffled_balanced_accuracy:.3f} | "
                f"{self.n_test} ({self.positives} positive) | {verdict} |")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _bucket(x: float, edges: Sequence[float]) -> int:
    return sum(x > e for e in edges)


def item_features(items: Sequence[ProbeItem]) -> list[dict[str, float]]:
    """Features of every item of one list: its own fields and its relations to the others."""
    n = len(items)
    descs = [it.fields.get("description", "") for it in items]
    names = [it.fields.get("name", "") for it in items]
    lengths = [len(d) for d in descs]
    order = sorted(range(n), key=lambda i: (lengths[i], i))
    rank = {i: r for r, i in enumerate(order)}
    name_rank = {i: r for r, i in enumerate(sorted(range(n), key=lambda i: (len(names[i]), i)))}
    out: list[dict[str, float]] = []
    for i, it in enumerate(items):
        f: dict[str, float] = {}
        for key, value in it.fields.items():
            parts = (value,) if isinstance(value, str) else value
            text = " ".join(parts)
            toks = _words(text)
            for t in toks:
                f[f"{key}:w:{t}"] = 1.0
            for part in map(_words, parts):  # no word pair across two texts: they are not read together
                for a, b in zip(part, part[1:]):
                    f[f"{key}:b:{a}_{b}"] = 1.0
            if toks:
                f[f"{key}:first:{toks[0]}"] = 1.0
                f[f"{key}:first2:{'_'.join(toks[:2])}"] = 1.0
                f[f"{key}:last:{toks[-1]}"] = 1.0
            f[f"{key}:len_bucket:{_bucket(len(text), (20, 40, 80, 120, 160, 220, 300))}"] = 1.0
            f[f"{key}:n_words_bucket:{_bucket(len(toks), (2, 4, 8, 16, 24, 32, 48))}"] = 1.0
        f[f"n_params:{len(it.params)}"] = 1.0
        for p, d in it.params:
            for t in _words(p):
                f[f"param:w:{t}"] = 1.0
            for t in _words(d):
                f[f"param_desc:w:{t}"] = 1.0
        # position inside the list
        f[f"pos:{min(i, 9)}"] = 1.0
        f["pos_frac"] = i / max(1, n - 1)
        f[f"pos_third:{3 * i // max(1, n)}"] = 1.0
        f["is_first"] = float(i == 0)
        f["is_last"] = float(i == n - 1)
        # relations inside the list
        d = descs[i]
        f["desc_identical_to_other"] = float(any(descs[j] == d for j in range(n) if j != i))
        f["desc_contained_in_other"] = float(any(d and d in descs[j] and descs[j] != d for j in range(n) if j != i))
        f["desc_contains_other"] = float(any(descs[j] and descs[j] in d and descs[j] != d
                                             for j in range(n) if j != i))
        f["desc_prefix_of_other"] = float(any(descs[j].startswith(d[:40]) for j in range(n) if j != i and d))
        f["name_prefix_of_other"] = float(any(names[j].lower().startswith(names[i].lower() + "_")
                                              for j in range(n) if j != i and names[i]))
        f["name_extends_other"] = float(any(names[i].lower().startswith(names[j].lower() + "_")
                                            for j in range(n) if j != i and names[j]))
        f["desc_len_rank_frac"] = rank[i] / max(1, n - 1)
        f["shortest_desc"] = float(rank[i] == 0)
        f["longest_desc"] = float(rank[i] == n - 1)
        f[f"desc_len_rank:{min(rank[i], 9)}"] = 1.0
        f["name_len_rank_frac"] = name_rank[i] / max(1, n - 1)
        f["shortest_name"] = float(name_rank[i] == 0)
        shared = sum(1 for j in range(n) if j != i and descs[j][:30] == d[:30])
        f[f"shares_desc_opening:{min(shared, 3)}"] = 1.0
        out.append(f)
    return out


def family_half(family: str, salt: str = "") -> bool:
    """A stable, seeded half of the families (sha256, never `hash()`)."""
    return hashlib.sha256(f"{salt}|{family}".encode()).digest()[0] % 2 == 0


def _balanced_accuracy(y: list[bool], pred: Iterable[bool]) -> float:
    pred = list(pred)
    pos = [p for t, p in zip(y, pred) if t]
    neg = [p for t, p in zip(y, pred) if not t]
    if not pos or not neg:
        raise ValueError("the test half needs both roles; give the probe more families")
    return (sum(pos) / len(pos) + sum(not p for p in neg) / len(neg)) / 2


def _permutations(labels: list[bool], seed: int, n: int) -> Iterator[list[bool]]:
    """`n` seeded permutations of the training labels: the chance figure is their mean, since one
    permutation's balanced accuracy alone wanders a few points either side of 0.5."""
    for k in range(n):
        shuffled = list(labels)
        random.Random(seed + k).shuffle(shuffled)
        yield shuffled


def probe(name: str, lists: Iterable[Sequence[ProbeItem]], *, salt: str = "", seed: int = 0,
          max_items: int | None = None) -> ProbeResult:
    """Train on the items of half the families (features read in their whole list), test on the rest.

    The shuffled-label figure trains the same classifier on training labels permuted within the
    training half (the mean over `SHUFFLES` permutations), so it is what the features give when they
    carry no role."""
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression

    rows: list[tuple[dict[str, float], bool, bool]] = []
    for items in lists:
        for it, f in zip(items, item_features(items)):
            if it.scored:
                rows.append((f, it.label, family_half(it.family, salt)))
    if max_items is not None and len(rows) > max_items:
        rows = random.Random(seed).sample(rows, max_items)
    train = [(f, y) for f, y, half in rows if half]
    test = [(f, y) for f, y, half in rows if not half]
    vec = DictVectorizer()
    x_train = vec.fit_transform([f for f, _ in train])
    x_test = vec.transform([f for f, _ in test])
    y_train = [y for _, y in train]
    y_test = [y for _, y in test]

    def fit(labels: list[bool]) -> Any:
        model = LogisticRegression(C=1.0, class_weight="balanced", max_iter=2000)
        return model.fit(x_train, labels)

    model = fit(y_train)
    bacc = _balanced_accuracy(y_test, model.predict(x_test))
    bacc_shuffled = float(np.mean([_balanced_accuracy(y_test, fit(labels).predict(x_test))
                                   for labels in _permutations(y_train, seed, SHUFFLES)]))
    names = vec.get_feature_names_out()
    coef = model.coef_[0]
    top = sorted(zip(names, coef), key=lambda kv: -abs(kv[1]))[:8]
    return ProbeResult(name, bacc, bacc_shuffled, len(train), len(test), sum(y_test),
                       [(str(k), float(v)) for k, v in top])
