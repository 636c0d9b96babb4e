"""The adversary search (evaluator/adversary.py) against score functions with a known best policy."""

from __future__ import annotations

import pytest

from toolsweep.evaluator.adversary import SearchSpace, search


def _space(n_primitives: int, n_options: int) -> SearchSpace:
    return SearchSpace.of({f"p{i}": tuple(f"o{j}" for j in range(n_options)) for i in range(n_primitives)})


def _additive(target: dict[str, str]):
    """Score = number of primitives set to the target option; one lower-is-better twin."""
    calls = []

    def score(spec):
        calls.append(spec)
        hits = sum(1 for k, v in spec if target.get(k) == v)
        return {"hits": float(hits), "misses": float(len(spec) - hits)}
    return score, calls


def test_a_small_space_is_enumerated_whole_and_its_best_found():
    space = _space(2, 3)
    score, calls = _additive({"p0": "o2", "p1": "o1"})
    result = search(space, score, {"hits": True, "misses": False}, budget=20)
    assert len(calls) == space.size == 9 and len(set(calls)) == 9
    assert result.best["hits"] == ((("p0", "o2"), ("p1", "o1")), 2.0)
    assert result.best["misses"][1] == 0.0


def test_a_large_space_is_searched_within_budget_and_greedy_steps_reach_the_optimum():
    space = _space(6, 4)  # 4,096 policies
    target = {f"p{i}": "o3" for i in range(6)}
    score, calls = _additive(target)
    result = search(space, score, {"hits": True}, budget=200, seed=1)
    assert len(calls) <= 200 and len(set(calls)) == len(calls)  # never a policy twice
    assert result.best["hits"][1] == 6.0  # additive: greedy steps from the best climb to the top


def test_the_baseline_and_its_neighbours_come_first():
    space = _space(3, 3)
    score, calls = _additive({})
    search(space, score, {"hits": True}, budget=8)
    assert calls[0] == space.baseline
    assert set(calls[1:7]) == set(space.neighbours(space.baseline))


def test_lower_is_better_metrics_keep_the_smallest():
    space = _space(2, 2)
    result = search(space, lambda s: {"cost": float(sum(v == "o1" for _, v in s))}, {"cost": False}, budget=4)
    assert result.best["cost"] == ((("p0", "o0"), ("p1", "o0")), 0.0)


def test_undefined_scores_never_become_the_best():
    space = _space(1, 3)
    result = search(space, lambda s: {"prr": float("nan") if s[0][1] == "o0" else 0.5}, {"prr": True}, budget=3)
    assert result.best["prr"][1] == 0.5


def test_a_zero_budget_or_empty_space_is_refused():
    with pytest.raises(ValueError):
        search(_space(1, 2), lambda s: {}, {"x": True}, budget=0)
    with pytest.raises(ValueError):
        SearchSpace.of({"p": ()})


def test_a_policy_name_round_trips_and_an_unknown_option_is_refused_with_the_space():
    space = SearchSpace.of({"order": ("list", "reverse"), "repeat": ("once", "twice")})
    spec = (("order", "reverse"), ("repeat", "twice"))
    assert space.name(spec) == "search:order=reverse,repeat=twice"
    assert space.parse(space.name(spec), "X") == {"order": "reverse", "repeat": "twice"}
    assert space.parse("search:repeat=twice", "X") == {"order": "list", "repeat": "twice"}  # the rest: baseline
    for bad in ("search:order=sideways", "search:colour=red", "search:order"):
        with pytest.raises(KeyError, match="no option of X's search space .*order: list|reverse"):
            space.parse(bad, "X")


def test_a_policy_from_some_options_takes_the_baselines_for_the_rest_in_the_spaces_order():
    space = SearchSpace.of({"order": ("list", "name"), "repeat": ("once", "twice"), "final": ("ok", "no")})
    assert space.spec({"final": "no", "order": "name"}) == (("order", "name"), ("repeat", "once"), ("final", "no"))
    assert space.spec({}) == space.baseline
