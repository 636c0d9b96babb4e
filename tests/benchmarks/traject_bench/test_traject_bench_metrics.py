"""TRAJECT-Bench metric unit cases (spec §9, checks 12-19) on hand-built gold trajectories."""

from __future__ import annotations

import itertools
import math

import pytest

from toolsweep.benchmarks.traject_bench.data import Binding, GoldCall, Task
from toolsweep.benchmarks.traject_bench.metrics import PredCall, fact_recall, key_facts, score_episode
from toolsweep.benchmarks.traject_bench.replay import args_key, normalize_value

_ids = itertools.count()


def gold(name: str, req=(), opt=(), out: str = "{}", nxt: str = "") -> GoldCall:
    return GoldCall(name=name, description="", required=tuple(req), optional=tuple(opt), output=out, next_param=nxt)


def task(calls: list[GoldCall], split: str = "par-simple", answer: str = "", bindings=()) -> Task:
    i = next(_ids)
    return Task(
        task_id=f"Unit/{split}/{i}",
        domain="Unit",
        split=split,
        index=i,
        query="please help",
        calls=tuple(calls),
        final_answer=answer,
        bindings=tuple(bindings),
    )


def pred_of(c: GoldCall, **changes) -> PredCall:
    req = dict(c.required)
    opt = dict(c.optional)
    for k, v in changes.items():
        (req if k in req else opt)[k] = v
    return PredCall(name=c.name, required=list(req.items()), optional=list(opt.items()))


def usage(m: dict[str, float], strict: bool = False) -> float:
    num, den = ("usage_strict_num", "usage_strict_den") if strict else ("usage_num", "usage_den")
    return m[num] / m[den] if m[den] else math.nan


# A parallel task whose gold repeats a tool, and a sequential chain with data-flow bindings.
PAR = [
    gold("Hotels: search", [("city", "Rome, Italy")], [("stars", "4")], out='{"id": "H-77812", "price": 143.5}'),
    gold("Weather: forecast", [("location", "Rome")], [("days", 3)], out='{"temp_max": 29.4}'),
    gold("Weather: forecast", [("location", "Paris")], [("days", 3)], out='{"temp_max": 21.9}'),
    gold("Flights: airlines", [], [], out='["AZ", "AF"]'),
]
PAR_ANSWER = "Hotel H-77812 costs 143.5; Rome max 29.4, Paris max 21.9."
SEQ = [
    gold("Music: search", [("q", "Shape of You")], [], out='{"track_id": "tr-301161"}', nxt="track"),
    gold("Music: metadata", [("track", "tr-301161")], [], out='{"artist_id": "ar-5521"}', nxt="artist"),
    gold("Music: artist", [("artist", "ar-5521")], [("limit", 5)], out='{"followers": 118230}', nxt=""),
    gold("Music: search", [("q", "Perfect")], [], out='{"track_id": "tr-99812"}', nxt=""),
]
SEQ_BIND = [Binding(0, 1, "track"), Binding(1, 2, "artist")]
SEQ_ANSWER = "Track tr-301161 by artist ar-5521 with 118230 followers; also tr-99812."


@pytest.fixture
def par() -> Task:
    return task(PAR, "par-simple", PAR_ANSWER)


@pytest.fixture
def seq() -> Task:
    return task(SEQ, "seq", SEQ_ANSWER, SEQ_BIND)


def score(t: Task, pred: list[PredCall], answer: str | None = None, **kw) -> dict[str, float]:
    return score_episode(t, pred, t.final_answer if answer is None else answer, None, **kw)


# 12 -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["par", "seq"])
def test_oracle_scores_one_everywhere_including_repeated_tools(which, par, seq):
    t = par if which == "par" else seq
    m = score(t, [pred_of(c) for c in t.calls])
    assert m["em"] == m["inclusion"] == m["answer_facts"] == m["fact_recall"] == 1.0
    assert m["usage_num"] == m["usage_den"] == len(t.calls)  # every occurrence of a repeated tool paired
    assert m["usage_strict_num"] == m["usage_strict_den"] == len(t.calls)
    assert m["traj_satisfy_proxy"] == pytest.approx(10.0)
    if which == "seq":
        assert m["order_lcs"] == 1.0 and m["dep_sat"] == 1.0
    else:
        assert math.isnan(m["order_lcs"]) and math.isnan(m["dep_sat"])


def test_paper_compat_caps_inclusion_below_one_on_repeated_tools(par):
    m = score(par, [pred_of(c) for c in par.calls], paper_compat=True)
    assert m["em"] == 1.0  # set equality
    assert m["inclusion"] == pytest.approx(3 / 4)  # |set ∩ set| / |G| with one tool repeated
    assert m["usage_den"] == 3  # one pair per distinct shared name


def test_paper_compat_scores_as_the_authors_scripts_and_keeps_the_multiset_readings(par):
    # retrieval rate: distinct gold tools shown / gold LIST length (4 here, one tool repeated)
    shown = {"Hotels: search", "Weather: forecast", "Flights: airlines"}
    m = score_episode(par, [pred_of(c) for c in par.calls], par.final_answer, shown, paper_compat=True)
    assert m["retrieval_rate"] == pytest.approx(3 / 4) and m["retrieval_rate_distinct"] == 1.0
    assert m["em_multiset"] == m["inclusion_multiset"] == 1.0 and m["usage_multiset_num"] == 4
    # Usage: the share of equal pairs per query (a mean over queries, not pooled pairs)
    wrong_hotel = [pred_of(par.calls[0], city="Oslo")] + [pred_of(c) for c in par.calls[1:]]
    m = score(par, wrong_hotel, paper_compat=True)
    assert m["usage"] == pytest.approx(2 / 3)
    assert math.isnan(score(par, [PredCall(name="Other: tool")], paper_compat=True)["usage"])  # no shared tool
    plain = score_episode(par, [pred_of(c) for c in par.calls], par.final_answer, shown)
    assert plain["retrieval_rate"] == 1.0 and "usage" not in plain


def test_paper_compat_usage_is_a_mean_over_queries(par, seq):
    from toolsweep.evaluator.exploits import aggregate
    from toolsweep.evaluator.protocols import MetricSpec
    from toolsweep.evaluator.types import EpisodeResult, TerminationReason, WorkUnit

    one_wrong_of_three = score(par, [pred_of(par.calls[0], city="Oslo")] + [pred_of(c) for c in par.calls[1:]],
                               paper_compat=True)
    all_right = score(seq, [pred_of(c) for c in seq.calls], paper_compat=True)
    unit = WorkUnit(sweep="s", model="m", benchmark="traject_bench", setting="x", task_id="t", seed=0)
    results = [EpisodeResult(unit=unit, termination=TerminationReason.ANSWERED, metrics=m)
               for m in (one_wrong_of_three, all_right)]
    # per query 2/3 and 1 -> 5/6; pooled pairs would give (2 + 4) / (3 + 4) = 6/7
    assert aggregate([MetricSpec(name="usage")], results)["usage"] == pytest.approx(5 / 6)


def test_country_codes_match_in_any_case():
    assert args_key([("loc", "Paris, fr")]) == args_key([("loc", "Paris,France")])
    assert args_key([("loc", "Rome, ITALY")]) == args_key([("loc", "Rome, IT")])
    assert args_key([("loc", "Rome, it")]) == args_key([("loc", "Rome,Italy")])
    assert args_key([("loc", "Rome, Oslo")]) != args_key([("loc", "Rome,Italy")])


def test_key_facts_are_tool_grounded_values_of_the_gold_answer(par):
    facts = {v for _, v in key_facts(par)}
    # "H-77812" yields the id and its number; values absent from the outputs are not facts.
    assert facts == {"h-77812", "77812.00", "143.50", "29.40", "21.90"}
    assert fact_recall(par, "H-77812 at 143.50, highs 29.4 and 21.9") == 1.0
    assert fact_recall(par, "H-77812 at 143.50") == pytest.approx(3 / 5)
    assert fact_recall(par, "Hotel costs 143.5; Rome max 29.4, Paris max 21.9.") == pytest.approx(3 / 5)


# 13 -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["par", "seq"])
def test_empty_prediction(which, par, seq):
    t = par if which == "par" else seq
    m = score(t, [], answer="")
    assert m["em"] == m["inclusion"] == m["answer_facts"] == m["traj_satisfy_proxy"] == 0.0
    assert m["usage_num"] == m["usage_den"] == 0.0  # contributes no pairs, no division by zero


# 14 -------------------------------------------------------------------------------------------------
def test_permuting_a_parallel_prediction_changes_no_metric(par):
    base = score(par, [pred_of(c) for c in par.calls])
    for perm in itertools.permutations(range(len(par.calls))):
        m = score(par, [pred_of(par.calls[i]) for i in perm])
        assert {k: v for k, v in m.items() if not math.isnan(v)} == {
            k: v for k, v in base.items() if not math.isnan(v)
        }


def test_reordering_a_sequential_prediction_keeps_inclusion_and_usage_but_breaks_em(seq):
    order = [2, 0, 1, 3]
    m = score(seq, [pred_of(seq.calls[i]) for i in order])
    assert m["em"] == 0.0
    assert m["inclusion"] == 1.0 and usage(m) == 1.0
    assert m["order_lcs"] < 1.0
    assert m["dep_sat"] < 1.0


# 15 -------------------------------------------------------------------------------------------------
def test_swapping_two_dependent_sequential_calls(seq):
    m = score(seq, [pred_of(seq.calls[i]) for i in (1, 0, 2, 3)])
    assert m["em"] == 0.0
    assert m["inclusion"] == 1.0
    assert usage(m) == 1.0
    assert m["dep_sat"] == pytest.approx(0.5)  # binding 0->1 broken, 1->2 intact
    assert m["order_lcs"] == pytest.approx(3 / 4)


# 16 -------------------------------------------------------------------------------------------------
def test_redundant_call_breaks_em_only(par):
    base = score(par, [pred_of(c) for c in par.calls])
    m = score(par, [pred_of(c) for c in par.calls] + [PredCall(name="Flights: airports")])
    assert m["em"] == 0.0
    assert m["inclusion"] == base["inclusion"] == 1.0
    assert usage(m) == usage(base)
    assert m["traj_satisfy_proxy"] < 10.0  # relevance R < 1


def test_sibling_replacement_costs_inclusion_and_leaves_usage(par):
    pred = [pred_of(c) for c in par.calls]
    pred[0] = PredCall(name="Airbnb: search", required=[("city", "Rome, Italy")], optional=[("stars", "4")])
    m = score(par, pred)
    n = len(par.calls)
    assert m["em"] == 0.0
    assert m["inclusion"] == pytest.approx((n - 1) / n)
    assert m["usage_den"] == n - 1 and m["usage_num"] == n - 1


# 17 -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["par", "seq"])
def test_one_wrong_argument_drops_usage_by_exactly_one_pair(which, par, seq):
    t = par if which == "par" else seq
    pred = [pred_of(c) for c in t.calls]
    pred[0] = pred_of(t.calls[0], **{t.calls[0].required[0][0]: "somewhere else"})
    m = score(t, pred)
    assert m["em"] == 1.0 and m["inclusion"] == 1.0
    assert m["usage_den"] == len(t.calls)
    assert m["usage_num"] == len(t.calls) - 1


def test_pooled_usage_is_a_ratio_of_sums_not_a_mean_of_ratios(par, seq):
    partial = [pred_of(par.calls[0]), pred_of(par.calls[1], location="Milan")]  # 1 of 2 pairs right
    ms = [score(par, partial), score(seq, [pred_of(c) for c in seq.calls])]  # 4 of 4
    pooled = sum(m["usage_num"] for m in ms) / sum(m["usage_den"] for m in ms)
    assert pooled == pytest.approx(5 / 6)
    assert pooled != pytest.approx((1 / 2 + 1) / 2)


# 18 -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "a,b",
    [
        ("Rome, Italy", "Rome,Italy"),
        ("Rome, Italy", "Rome, IT"),
        ("2025-8-19", "2025-08-19"),
        ("true", "yes"),
        ("true", True),
        ("100", 100),
        ("100", "100.0"),
        (" London ", "London"),
    ],
)
def test_normalisation_equivalences(a, b):
    assert normalize_value(a) == normalize_value(b)
    assert args_key([("x", a)]) == args_key([("x", b)])


def test_normalisation_keeps_case_and_distinct_values_apart():
    assert normalize_value("london") != normalize_value("London")
    assert args_key([("x", "2025-08-19")]) != args_key([("x", "2025-08-20")])
    assert normalize_value("[1, 2]") == [1, 2]


def test_usage_ignores_param_order_blank_optionals_and_key_spelling(par):
    c = par.calls[0]
    reordered = PredCall(
        name=c.name,
        required=[("city", "Rome,IT")],
        optional=[("extra_blank", ""), ("stars", 4), ("none", None)],
    )
    m = score(par, [reordered, *[pred_of(x) for x in par.calls[1:]]])
    assert usage(m) == 1.0
    from toolsweep.benchmarks.traject_bench.environment import parse_call

    alt = parse_call({"tool name": c.name, "required parameters": [{"name": "city", "value": "Rome, Italy"}],
                      "optional parameters": [{"name": "stars", "value": "4"}]})
    assert alt is not None and alt.required == [("city", "Rome, Italy")]


# 19 -------------------------------------------------------------------------------------------------
def test_placeholder_naming_the_bound_source_counts_for_usage_not_usage_strict(seq):
    pred = [pred_of(c) for c in seq.calls]
    pred[1] = pred_of(seq.calls[1], track="<results from tool Music: search>")
    m = score(seq, pred)
    assert usage(m) == 1.0
    assert m["usage_strict_num"] == len(seq.calls) - 1
    assert m["dep_sat"] == 1.0


def test_placeholder_naming_the_wrong_tool_counts_for_neither(seq):
    pred = [pred_of(c) for c in seq.calls]
    pred[1] = pred_of(seq.calls[1], track="<results from tool Music: artist>")
    m = score(seq, pred)
    assert m["usage_num"] == m["usage_strict_num"] == len(seq.calls) - 1
    assert m["dep_sat"] == pytest.approx(0.5)


def test_native_calls_compare_the_merged_parameter_set(par):
    c = par.calls[0]
    merged = PredCall(name=c.name, required=[("city", "Rome, Italy"), ("stars", "4")], split_known=False)
    split_wrong = PredCall(name=c.name, required=[("city", "Rome, Italy"), ("stars", "4")])
    rest = [pred_of(x) for x in par.calls[1:]]
    assert usage(score(par, [merged, *rest])) == 1.0
    assert usage(score(par, [split_wrong, *rest])) == pytest.approx(3 / 4)  # text method: lists differ


def test_pasted_tool_outputs_are_not_an_answer(par):
    # Before, Acc was fact recall alone: raw outputs contain every fact and scored Acc = 1.
    calls = [pred_of(c) for c in par.calls]
    pasted = "\n".join(c.output for c in par.calls)
    assert score(par, calls, pasted)["fact_recall"] == 1.0 and score(par, calls, pasted)["answer_facts"] == 0.0
    prose = "The hotel H-77812 is 143.5 per night; Rome will reach 29.4 and Paris 21.9."
    assert score(par, calls, prose)["answer_facts"] == 1.0
    dump = prose + " Also " + ", ".join(str(1000 + 7 * i) for i in range(40))  # every value the tools gave
    assert score(par, calls, dump)["fact_precision"] < 0.2 and score(par, calls, dump)["answer_facts"] == 0.0


def test_a_prose_echo_of_every_output_is_not_an_answer():
    # The gold answer uses one value of each output; the echo restates all of them as sentences (no
    # JSON markers). Before, precision counted the query's values as known and 20% sufficed: it passed.
    outs = ['{"id": "H-77812", "price": 143.5, "rooms": 212, "floors": 9, "phone": "555-0190"}',
            '{"temp_max": 29.4, "temp_min": 18.2, "humidity": 71, "wind": 12.5}']
    t = task([gold("Hotels: search", [("city", "Rome")], out=outs[0]), gold("Weather: now", [("loc", "Rome")], out=outs[1])],
             answer="Hotel H-77812 costs 143.5; Rome will reach 29.4.")
    calls = [pred_of(c) for c in t.calls]
    echo = ("The id is H-77812. The price is 143.5. The rooms is 212. The floors is 9. The phone is 555-0190. "
            "The temp max is 29.4. The temp min is 18.2. The humidity is 71. The wind is 12.5.")
    m = score(t, calls, echo)
    assert m["fact_recall"] == 1.0 and m["answer_facts"] == 0.0 and m["fact_precision"] < 0.5
    # restating the query's own numbers does not buy precision: they count neither way
    t2 = task(list(t.calls), answer=t.final_answer)
    object.__setattr__(t2, "query", "Budget 450.75 per night, arriving 2025-10-10, reference 88231")
    padded = echo + " You asked about 450.75, 2025-10-10 and 88231."
    assert score(t2, calls, padded)["fact_precision"] == score(t2, calls, echo)["fact_precision"] < 0.5
    assert score(t, calls, "Hotel H-77812 is 143.5 a night and Rome tops out at 29.4.")["answer_facts"] == 1.0
