"""ToolMaze corpus (spec §1, §11 checks 1-4): counts, schemas, equivalence of alternatives,
determinism, stateful tools, natural errors."""

from __future__ import annotations

import json
from collections import Counter

import jsonschema
import pytest

from toolsweep.benchmarks.toolmaze.tools import (
    CATEGORIES,
    DOMAINS,
    PAPER_TOOL_NAMES,
    TYPES,
    Simulator,
    World,
    build_corpus,
    canonical,
    constraint_violations,
    get_path,
    is_error,
    schema_valid,
)


@pytest.fixture(scope="module")
def corpus():
    return build_corpus()


@pytest.fixture(scope="module")
def sim(corpus):
    return Simulator(corpus, World(0))


def test_counts_domains_categories_groups(corpus):
    assert len(corpus.tools) == 270
    assert {t.domain for t in corpus.tools.values()} == set(DOMAINS)
    assert {t.category for t in corpus.tools.values()} == set(CATEGORIES)
    per = Counter((t.domain, t.category) for t in corpus.tools.values())
    for d in DOMAINS:  # the proposed split: 18 Source / 15 Processor / 12 Action per domain
        assert (per[(d, "Source")], per[(d, "Processor")], per[(d, "Action")]) == (18, 15, 12)
    assert corpus.group_count() == 126
    assert len(corpus.groups_1ton) + len(corpus.m2m) == 126
    assert all(len(f.members) >= 2 for f in corpus.groups_1ton)
    for g in corpus.m2m.values():
        assert len(g.paths) >= 2 and any(len(p) == 2 for p in g.paths)
        assert not any(all(t in p for p in g.paths) for t in g.tools)  # every tool avoidable


def test_every_paper_tool_exists(corpus):
    missing = [n for n in PAPER_TOOL_NAMES if n not in corpus.tools]
    assert not missing


def test_schemas_are_valid_json_schema(corpus):
    for t in corpus.tools.values():
        s = t.openai_schema()
        assert s["type"] == "function" and s["function"]["name"] == t.name
        jsonschema.Draft7Validator.check_schema(s["function"]["parameters"])
        jsonschema.Draft7Validator.check_schema(t.output_schema())
        assert set(s["function"]["parameters"]["required"]) <= set(s["function"]["parameters"]["properties"])


def _sample_args(tool, slot_value):
    args = {}
    for p in tool.required:
        if p.free:
            args[p.name] = "hello"
        else:
            args[p.name] = slot_value(p.type)
    return args


def test_one_to_n_members_share_types_and_values(corpus, sim):
    samples = {"ticker": "NVDA", "crypto_symbol": "ETH", "airport_code": "HND", "product_id": "P-52203",
               "device_id": "hub-kitchen-03", "document_id": "DOC-7154", "text": "Storm warning for the coast",
               "price_usd": 120.5, "price_eur": 99.0, "price_gbp": 80.25, "distance_km": 950.0,
               "distance_mi": 600.0, "weight_kg": 3.2, "temperature_c": 21.5, "temperature_f": 70.7,
               "energy_kwh": 4.5, "datetime_iso": "2026-03-04T15:00:00Z", "time_slot": "2026-03-05T10:00",
               "flight_offer_id": None, "hotel_offer_id": None, "word_count": 120}

    def slot_value(t):
        if TYPES[t].user:
            return TYPES[t].user[0]
        return samples.get(t)

    checked = 0
    for fam in corpus.groups_1ton:
        tools = [corpus.tools[m] for m in fam.members]
        sig = [(tuple(p.type for p in t.required), tuple(sorted(o.type for o in t.bindable_outputs)))
               for t in tools]
        assert len(set(sig)) == 1, fam.stem
        args = _sample_args(tools[0], slot_value)
        if any(v is None for v in args.values()):
            continue
        outs = [sim.respond(t.name, {p.name: args[p.name] for p in t.required}, {}) for t in tools]
        if is_error(outs[0]):
            continue
        for t, o in zip(tools[1:], outs[1:]):
            assert not is_error(o), (t.name, o)
            for f0 in tools[0].bindable_outputs:
                f1 = t.field_of_type(f0.type)
                if f0.how in ("id",) or f0.how == "echo":
                    continue
                assert get_path(outs[0], f0.path) == get_path(o, f1.path), (fam.stem, t.name, f0.path)
        # alternatives differ in response layout, not in content
        assert len({json.dumps(sorted(o)) for o in outs}) == len(outs)
        checked += 1
    assert checked >= 60


def test_same_call_same_bytes_and_world_reproducible(corpus):
    a, b = Simulator(corpus, World(0)), Simulator(corpus, World(0))
    other = Simulator(corpus, World(7))
    calls = [("get_quote_snapshot_native", {"symbol": "AAPL"}), ("get_weather", {"city": "Paris"}),
             ("search_flights", {"destination": "HND", "date": "2026-03-05"}),
             ("book_flight", {"offer_id": "FL-abcdef", "passenger": "mei.chen@example.com"})]
    differs = 0
    for name, args in calls:
        ra, rb = a.respond(name, args, {}), b.respond(name, args, {})
        assert canonical(ra) == canonical(rb)
        assert canonical(ra) == canonical(a.respond(name, args, {}))
        differs += canonical(ra) != canonical(other.respond(name, args, {}))
    assert differs >= 2  # the dataset seed does change the world's values


def test_clean_responses_violate_no_constraint(corpus, sim):
    r = sim.respond("get_weather", {"city": "Lima"}, {})
    assert schema_valid(corpus.tools["get_weather"], r)
    assert constraint_violations(corpus.tools["get_weather"], {"city": "Lima"}, r) == []
    r = sim.respond("currency_usd_to_eur", {"amount": 100.0}, {})
    assert r["amount_eur"] == 92.0
    assert constraint_violations(corpus.tools["currency_usd_to_eur"], {"amount": 100.0}, r) == []
    bad = dict(r, amount_eur=920.0)
    assert constraint_violations(corpus.tools["currency_usd_to_eur"], {"amount": 100.0}, bad)


def test_stateful_calendar_devices_inventory(sim):
    state: dict = {}
    free = sim.respond("query_availability", {"date": "2026-03-10"}, state)
    slot = free["next_slot"]
    assert slot in free["free_slots"]
    booked = sim.respond("schedule_meeting", {"slot": slot, "attendee": "mei.chen@example.com"}, state)
    assert booked["status"] == "confirmed"
    again = sim.respond("query_availability", {"date": "2026-03-10"}, state)
    assert slot not in again["free_slots"] and again["next_slot"] != slot
    assert is_error(sim.respond("schedule_meeting", {"slot": slot, "attendee": "mei.chen@example.com"}, state))
    fresh = sim.respond("query_availability", {"date": "2026-03-10"}, {})  # a new trajectory
    assert slot in fresh["free_slots"]

    state = {}
    before = sim.respond("get_iot_device_status", {"device_id": "hub-kitchen-03"}, state)
    target = "off" if before["light"] == "on" else "on"
    sim.respond("set_light_state", {"device_id": "hub-kitchen-03", "state": target}, state)
    sim.respond("adjust_temperature", {"device_id": "hub-kitchen-03", "setpoint": 22.5}, state)
    after = sim.respond("get_iot_device_status", {"device_id": "hub-kitchen-03"}, state)
    assert after["light"] == target and after["setpoint"] == 22.5

    state = {}
    stock = sim.respond("check_stock", {"product_id": "P-20417"}, state)["stock"]
    sim.respond("place_order", {"product_id": "P-20417", "quantity": 2}, state)
    assert sim.respond("check_stock", {"product_id": "P-20417"}, state)["stock"] == stock - 2
    cart = sim.respond("add_to_cart", {"product_id": "P-20417", "quantity": 3}, state)
    assert cart["items"] == 3


def test_natural_errors_for_bad_arguments(sim):
    assert sim.respond("get_quote_snapshot_native", {"symbol": "ZZZZ"}, {})["error"]["status"] == 404
    assert sim.respond("get_quote_snapshot_native", {"symbol": 5}, {})["error"]["status"] == 400
    assert sim.respond("get_quote_snapshot_native", {}, {})["error"]["code"] == "MISSING_PARAMETER"
    assert sim.respond("get_quote_snapshot_native", {"symbol": "AAPL", "x": 1}, {})["error"]["status"] == 400
    assert sim.respond("no_such_tool", {}, {})["error"]["status"] == 404
    assert sim.respond("convert_datetime", {"when": "2026-13-40", "timezone": "Asia/Tokyo"}, {})["error"]
