"""Adversary search (DESIGN §6b): the strongest scripted policy without a language model that a cell's
surface allows, found by search rather than written by hand.

A benchmark describes a space of policies as named primitives, each with a few options (which tool,
call order, repetition, argument binding, final text, ...); a policy is one option per primitive. The
search scores policies on a cell through a callable the benchmark supplies and keeps, per metric, the
best one found: that is the cell's searched floor. It is cheap by construction: the baseline and every
policy one option away from it first (small combinations), then seeded random policies, then greedy
steps from each metric's best, all under one budget of policies. Pure Python: no Ray, no benchmark
import; the benchmark plays the episodes.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

Spec = tuple[tuple[str, str], ...]
"""A policy: one (primitive, option) pair per primitive, in the space's order (hashable, printable)."""
POLICY_PREFIX = "search:"  # a searched policy's name begins so


@dataclass(frozen=True)
class SearchSpace:
    """Primitives and their options; the first option of each is the baseline's."""

    primitives: tuple[tuple[str, tuple[str, ...]], ...]

    @classmethod
    def of(cls, primitives: Mapping[str, Sequence[str]]) -> SearchSpace:
        if not primitives or any(not opts for opts in primitives.values()):
            raise ValueError("a search space needs at least one primitive, each with at least one option")
        return cls(tuple((name, tuple(opts)) for name, opts in primitives.items()))

    @property
    def size(self) -> int:
        return math.prod(len(opts) for _, opts in self.primitives)

    @property
    def baseline(self) -> Spec:
        return tuple((name, opts[0]) for name, opts in self.primitives)

    def neighbours(self, spec: Spec) -> list[Spec]:
        """Every policy that differs from `spec` in exactly one primitive."""
        out = []
        for i, (name, opts) in enumerate(self.primitives):
            for opt in opts:
                if opt != spec[i][1]:
                    out.append(spec[:i] + ((name, opt),) + spec[i + 1:])
        return out

    def all(self) -> list[Spec]:
        names = [n for n, _ in self.primitives]
        return [tuple(zip(names, combo)) for combo in itertools.product(*(o for _, o in self.primitives))]

    def random(self, rng: random.Random) -> Spec:
        return tuple((name, opts[rng.randrange(len(opts))]) for name, opts in self.primitives)

    def name(self, spec: Spec) -> str:
        """A policy's name, as the policy list and the floor call it: `search:` and its options."""
        return POLICY_PREFIX + ",".join(f"{k}={v}" for k, v in spec)

    def spec(self, options: Mapping[str, str]) -> Spec:
        """A policy from its options (a primitive left out takes the baseline's), in the space's order."""
        chosen = {**dict(self.baseline), **options}
        return tuple((name, chosen[name]) for name, _ in self.primitives)

    def parse(self, name: str, benchmark: str) -> dict[str, str]:
        """The options of a `search:` policy name; a primitive it leaves out takes the baseline's option,
        and an unknown primitive or option is refused with the space's options."""
        options = dict(self.baseline)
        allowed = dict(self.primitives)
        for part in filter(None, name[len(POLICY_PREFIX):].split(",")):
            key, sep, value = part.partition("=")
            if not sep or key not in allowed or value not in allowed[key]:
                known = ", ".join(f"{k}: {'|'.join(v)}" for k, v in self.primitives)
                raise KeyError(f"{name!r}: '{part}' is no option of {benchmark}'s search space ({known})")
            options[key] = value
        return options


@dataclass
class SearchResult:
    """Every policy tried with its scores, and per metric the best one (the cell's searched floor)."""

    scores: dict[Spec, dict[str, float]] = field(default_factory=dict)
    best: dict[str, tuple[Spec, float]] = field(default_factory=dict)

    def record(self, spec: Spec, score: Mapping[str, float], higher_is_better: Mapping[str, bool]) -> None:
        self.scores[spec] = dict(score)
        for metric, up in higher_is_better.items():
            v = score.get(metric, math.nan)
            if not math.isfinite(v):
                continue
            old = self.best.get(metric)
            if old is None or (v > old[1] if up else v < old[1]):
                self.best[metric] = (spec, v)


def search(space: SearchSpace, score: Callable[[Spec], Mapping[str, float]],
           higher_is_better: Mapping[str, bool], budget: int = 40, seed: int = 0) -> SearchResult:
    """Search `space` for each metric's strongest policy with at most `budget` calls of `score`.

    A space no larger than the budget is enumerated whole. Otherwise: the baseline and its neighbours
    (small combinations), seeded random policies for half of what is left, then greedy steps (all
    neighbours of each metric's current best) until the budget is spent or no step improves."""
    if budget < 1:
        raise ValueError("the search budget must be at least one policy")
    result = SearchResult()
    rng = random.Random(seed)

    def run(spec: Spec) -> bool:
        if spec in result.scores or len(result.scores) >= budget:
            return False
        result.record(spec, score(spec), higher_is_better)
        return True

    if space.size <= budget:
        for spec in space.all():
            run(spec)
        return result
    for spec in [space.baseline, *space.neighbours(space.baseline)]:
        run(spec)
    n_random = (budget - len(result.scores)) // 2
    tries = 0
    while n_random > 0 and tries < 20 * budget:
        tries += 1
        if run(space.random(rng)):
            n_random -= 1
    improved = True
    while improved and len(result.scores) < budget:
        improved = False
        for metric in sorted(result.best):
            before = result.best[metric][1]
            for spec in space.neighbours(result.best[metric][0]):
                run(spec)
            if result.best[metric][1] != before:
                improved = True
    return result


def halves(task_ids: Sequence[str], label: str, seed: int = 0) -> tuple[list[str], list[str]]:
    """A seeded split of a cell's tasks into a tuning half, which the search picks its policies on, and a
    held-out half, on which the picked policy's score is reported. A policy picked as the best of many on
    the tasks it is scored on reads high by the luck of the pick (on 8 tasks a cell, ToolMaze's C3-P3
    floor once read 1.000 for a policy that played .067 on the whole cell)."""
    ids = list(task_ids)
    random.Random(f"search-halves/{label}/{seed}").shuffle(ids)
    half = len(ids) // 2
    return sorted(ids[:half]), sorted(ids[half:])


def wilson_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float, int]:
    """(mean, low, high, n) of per-episode scores of 0 or 1 (NaN ones left out: the metric is undefined
    there), with the Wilson score interval, which holds near 0 and 1 where the normal one does not."""
    from scipy.stats import binomtest

    xs = [v for v in values if math.isfinite(v)]
    if not xs:
        return math.nan, math.nan, math.nan, 0
    if any(v not in (0.0, 1.0) for v in xs):
        raise ValueError("a Wilson interval is for scores of 0 or 1")
    ci = binomtest(round(sum(xs)), len(xs)).proportion_ci(confidence_level=confidence, method="wilson")
    return sum(xs) / len(xs), float(ci.low), float(ci.high), len(xs)
