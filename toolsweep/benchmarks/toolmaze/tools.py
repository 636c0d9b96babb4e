"""The ToolMaze tool corpus: 270 deterministic simulated tools over 6 domains x 3 categories.

Spec §1. Tools are built from a hand-authored capability-family catalog (`_CATALOG`): each family
has a category, typed parameters, typed output fields and 1-3 provider variants (variants differ in
name and response layout, never in semantics). Families with >= 2 variants are the 1-to-N
alternative groups; the many-to-many sub-graph groups are the typed two-step routes
(t_in -> mid -> t_out, plus direct bypass tools) discovered over each domain's tools
(`m2m_groups`). Every parameter and output field carries a semantic type from `TYPES`; an edge
u.field -> v.param is legal iff the types are equal (free-text params take any value).

Composition (the paper's Tab. 4 is lost; spec §1.2 proposes a split, ours differs slightly): per
domain 18 Source / 15 Processor / 12 Action tools (45 x 6 = 270); 85 1-to-N groups (78 of size 2,
7 of size 3) and 41 many-to-many groups = 126. The many-to-many groups are found, not declared:
every 1-2-tool typed path between two types is run on sample inputs and paths with equal outputs
are clustered (`_discover_m2m`), then 126 - #1-to-N of them are kept round-robin over domains.

Backends are pure functions of (tool, args, per-episode state) over a seeded world of lookup
tables (`World`): keys are entities, not tools, so alternatives return the same values in their
own layouts. A few tools are stateful (calendar, smart-home devices, inventory and cart).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import cached_property
from typing import Any

DOMAINS = ("Financial", "Travel", "Office", "Shopping", "IoT", "General")
SOURCE, PROCESSOR, ACTION = "Source", "Processor", "Action"
CATEGORIES = (SOURCE, PROCESSOR, ACTION)
CLOCK = "2026-03-02T09:00:00Z"  # the fixed virtual clock of every backend
FREE = "*"  # type marker of free-text parameters (they accept any rendered value)
PAPER_TOOL_NAMES = (
    "get_weather", "search_news", "temperature_converter", "text_translator", "send_email",
    "book_flight", "query_availability", "schedule_meeting", "convert_datetime",
    "adjust_temperature", "set_light_state", "get_iot_device_status",
    "get_weatherapi_alert_card_native", "get_crypto_price", "get_quote_snapshot_native",
)


def seeded_int(*parts: Any) -> int:
    """sha256-derived integer; `Random(seeded_int(dataset_seed, purpose, key))` never reshuffles."""
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest(), 16)


def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# ------------------------------------------------------------------------------------------------
# World entity tables (the lookup tables' keys). Hand-written; values derive from seeded hashes.

COMPANIES = (("Apple", "AAPL"), ("Microsoft", "MSFT"), ("Alphabet", "GOOGL"), ("Amazon", "AMZN"),
             ("Nvidia", "NVDA"), ("Tesla", "TSLA"), ("Netflix", "NFLX"), ("Intel", "INTC"),
             ("Adobe", "ADBE"), ("Salesforce", "CRM"), ("Oracle", "ORCL"), ("Walmart", "WMT"),
             ("Nike", "NKE"), ("Visa", "V"), ("Pfizer", "PFE"), ("Boeing", "BA"))
CRYPTOS = (("Bitcoin", "BTC"), ("Ethereum", "ETH"), ("Solana", "SOL"), ("Cardano", "ADA"),
           ("Polkadot", "DOT"), ("Litecoin", "LTC"), ("Ripple", "XRP"), ("Dogecoin", "DOGE"))
CITIES = (("Paris", "CDG", "Europe/Paris"), ("London", "LHR", "Europe/London"),
          ("Tokyo", "HND", "Asia/Tokyo"), ("New York", "JFK", "America/New_York"),
          ("Berlin", "BER", "Europe/Berlin"), ("Madrid", "MAD", "Europe/Madrid"),
          ("Rome", "FCO", "Europe/Rome"), ("Sydney", "SYD", "Australia/Sydney"),
          ("Toronto", "YYZ", "America/Toronto"), ("Singapore", "SIN", "Asia/Singapore"),
          ("Dubai", "DXB", "Asia/Dubai"), ("Lima", "LIM", "America/Lima"),
          ("Chicago", "ORD", "America/Chicago"), ("Amsterdam", "AMS", "Europe/Amsterdam"),
          ("Seoul", "ICN", "Asia/Seoul"), ("Lisbon", "LIS", "Europe/Lisbon"))
TZ_OFFSETS = {"Europe/Paris": 1, "Europe/London": 0, "Asia/Tokyo": 9, "America/New_York": -5,
              "Europe/Berlin": 1, "Europe/Madrid": 1, "Europe/Rome": 1, "Australia/Sydney": 11,
              "America/Toronto": -5, "Asia/Singapore": 8, "Asia/Dubai": 4, "America/Lima": -5,
              "America/Chicago": -6, "Europe/Amsterdam": 1, "Asia/Seoul": 9, "Europe/Lisbon": 0}
PRODUCTS = (("wireless earbuds", "P-10231"), ("espresso machine", "P-20417"),
            ("standing desk", "P-30952"), ("trail running shoes", "P-41178"),
            ("mechanical keyboard", "P-52203"), ("air purifier", "P-63340"),
            ("robot vacuum", "P-74415"), ("camping tent", "P-85526"),
            ("electric kettle", "P-96637"), ("noise cancelling headphones", "P-17748"),
            ("smart watch", "P-28859"), ("yoga mat", "P-39960"))
ROOMS = (("living room", "hub-livingroom-01"), ("bedroom", "hub-bedroom-02"),
         ("kitchen", "hub-kitchen-03"), ("home office", "hub-office-04"),
         ("hallway", "hub-hallway-05"), ("nursery", "hub-nursery-06"),
         ("garage", "hub-garage-07"), ("guest room", "hub-guestroom-08"))
PEOPLE = (("Alex Morgan", "alex.morgan@example.com"), ("Priya Shah", "priya.shah@example.com"),
          ("Diego Alvarez", "diego.alvarez@example.com"), ("Mei Chen", "mei.chen@example.com"),
          ("Sam Okafor", "sam.okafor@example.com"), ("Lena Fischer", "lena.fischer@example.com"),
          ("Tom Becker", "tom.becker@example.com"), ("Nora Lindqvist", "nora.lindqvist@example.com"),
          ("Omar Haddad", "omar.haddad@example.com"), ("Julia Rossi", "julia.rossi@example.com"))
PERSON_TZ = ("Europe/London", "America/New_York", "Europe/Madrid", "Asia/Singapore",
             "America/Chicago", "Europe/Berlin", "Europe/Paris", "Europe/Amsterdam", "Asia/Dubai",
             "Europe/Rome")
DOCUMENTS = (("Q1 budget plan", "DOC-4821"), ("hiring roadmap", "DOC-5932"),
             ("security audit", "DOC-6043"), ("product launch brief", "DOC-7154"),
             ("vendor contract", "DOC-8265"), ("onboarding guide", "DOC-9376"),
             ("sales forecast", "DOC-1487"), ("board minutes", "DOC-2598"))
TOPICS = ("renewable energy", "semiconductors", "electric vehicles", "interest rates",
          "space exploration", "public transit", "artificial intelligence", "climate policy",
          "housing market", "cybersecurity")
LANGUAGES = (("es", "Spanish"), ("fr", "French"), ("de", "German"), ("it", "Italian"),
             ("pt", "Portuguese"), ("ja", "Japanese"))
DATES = tuple(f"2026-03-{d:02d}" for d in range(3, 28))
SLOT_HOURS = (9, 10, 11, 13, 14, 15, 16)

# ------------------------------------------------------------------------------------------------
# Semantic types


@dataclass(frozen=True)
class SemType:
    """A semantic type: JSON type, declared constraints, unit (for conversions), user values."""

    name: str
    json: str  # string | number | integer | array
    noun: str  # how queries and descriptions name a value of this type
    minimum: float | None = None
    maximum: float | None = None
    pattern: str | None = None
    enum: tuple[str, ...] | None = None
    fmt: str | None = None  # date-time | date | local-date-time | slot
    dim: str | None = None  # unit dimension (money, temp, ...)
    user: tuple[Any, ...] | None = None  # values a user may supply (None: never user-supplied)
    bindable: bool = True  # False for labels/timestamps/lists that never feed another tool

    def constraint_text(self) -> str:
        bits = []
        if self.minimum is not None and self.maximum is not None:
            bits.append(f"between {self.minimum:g} and {self.maximum:g}")
        elif self.minimum is not None:
            bits.append(f">= {self.minimum:g}")
        if self.enum:
            bits.append("one of " + "/".join(self.enum))
        if self.fmt in ("date-time",):
            bits.append("ISO-8601 UTC timestamp")
        if self.fmt == "local-date-time":
            bits.append("ISO-8601 local time with offset")
        if self.pattern and not self.enum:
            bits.append(f"matches {self.pattern}")
        return ", ".join(bits)


_ID = r"^[A-Z]{2,4}-[0-9a-f]{8}$"
_T = SemType
TYPES: dict[str, SemType] = {t.name: t for t in [
    _T("company_name", "string", "company", user=tuple(c for c, _ in COMPANIES)),
    _T("ticker", "string", "ticker symbol", pattern=r"^[A-Z]{1,5}$"),
    _T("crypto_name", "string", "cryptocurrency", user=tuple(c for c, _ in CRYPTOS)),
    _T("crypto_symbol", "string", "coin symbol", pattern=r"^[A-Z]{2,5}$"),
    _T("city", "string", "city", user=tuple(c for c, _, _ in CITIES)),
    _T("airport_code", "string", "airport code", pattern=r"^[A-Z]{3}$"),
    _T("timezone", "string", "time zone", enum=tuple(TZ_OFFSETS), user=tuple(TZ_OFFSETS)),
    _T("date", "string", "date", fmt="date", pattern=r"^\d{4}-\d{2}-\d{2}$", user=DATES),
    _T("email_address", "string", "email address", pattern=r"^[a-z.]+@[a-z]+\.[a-z]+$",
       user=tuple(e for _, e in PEOPLE)),
    _T("person_name", "string", "colleague", user=tuple(p for p, _ in PEOPLE)),
    _T("document_name", "string", "document", user=tuple(d for d, _ in DOCUMENTS)),
    _T("document_id", "string", "document id", pattern=r"^DOC-\d{4}$"),
    _T("topic", "string", "topic", user=TOPICS),
    _T("language_code", "string", "language", enum=tuple(c for c, _ in LANGUAGES),
       user=tuple(c for c, _ in LANGUAGES)),
    _T("product_name", "string", "product", user=tuple(p for p, _ in PRODUCTS)),
    _T("product_id", "string", "product id", pattern=r"^P-\d{5}$"),
    _T("quantity", "integer", "quantity", minimum=1, maximum=100, user=tuple(range(2, 13))),
    _T("room_name", "string", "room", user=tuple(r for r, _ in ROOMS)),
    _T("device_id", "string", "device id", pattern=r"^hub-[a-z]+-\d{2}$"),
    _T("light_state", "string", "light setting", enum=("on", "off"), user=("on", "off")),
    _T("setpoint_c", "number", "thermostat target in degrees Celsius", minimum=5, maximum=30,
       user=(18.5, 19.0, 19.5, 20.0, 20.5, 21.0, 21.5, 22.0, 22.5, 23.0)),
    _T("price_usd", "number", "price in US dollars", minimum=0.01, maximum=1e7, dim="money"),
    _T("price_eur", "number", "price in euros", minimum=0.01, maximum=1e7, dim="money"),
    _T("price_gbp", "number", "price in pounds sterling", minimum=0.01, maximum=1e7, dim="money"),
    _T("pct_change", "number", "percentage change", minimum=-100, maximum=100),
    _T("temperature_c", "number", "temperature in Celsius", minimum=-60, maximum=60, dim="temp"),
    _T("temperature_f", "number", "temperature in Fahrenheit", minimum=-76, maximum=140,
       dim="temp"),
    _T("humidity_pct", "number", "relative humidity", minimum=0, maximum=100),
    _T("distance_km", "number", "distance in kilometres", minimum=0, maximum=40000, dim="dist"),
    _T("distance_mi", "number", "distance in miles", minimum=0, maximum=25000, dim="dist"),
    _T("weight_kg", "number", "weight in kilograms", minimum=0, maximum=2000, dim="mass"),
    _T("weight_lb", "number", "weight in pounds", minimum=0, maximum=4400, dim="mass"),
    _T("energy_kwh", "number", "energy in kWh", minimum=0, maximum=1000, dim="energy"),
    _T("energy_wh", "number", "energy in Wh", minimum=0, maximum=1e6, dim="energy"),
    _T("wind_kph", "number", "wind speed in km/h", minimum=0, maximum=400, dim="speed"),
    _T("wind_mph", "number", "wind speed in mph", minimum=0, maximum=250, dim="speed"),
    _T("duration_min", "number", "duration in minutes", minimum=0, maximum=10000),
    _T("co2_kg", "number", "CO2 emissions in kg", minimum=0, maximum=100000),
    _T("stock_count", "integer", "units in stock", minimum=0, maximum=100000),
    _T("word_count", "integer", "word count", minimum=0, maximum=1000000),
    _T("message_count", "integer", "message count", minimum=0, maximum=100000),
    _T("aqi_index", "integer", "air quality index", minimum=0, maximum=500),
    _T("uv_index", "number", "UV index", minimum=0, maximum=15),
    _T("battery_pct", "integer", "battery level", minimum=0, maximum=100),
    _T("star_rating", "number", "star rating", minimum=1, maximum=5),
    _T("yield_pct", "number", "dividend yield", minimum=0, maximum=25),
    _T("datetime_iso", "string", "UTC timestamp", fmt="date-time"),
    _T("datetime_local", "string", "local time", fmt="local-date-time"),
    _T("time_slot", "string", "meeting slot", fmt="slot"),
    _T("text", "string", "text", pattern=r"^[^\ufffd]+$"),
    _T("rating", "string", "analyst rating", enum=("buy", "hold", "sell")),
    _T("alert_level", "string", "alert level", enum=("none", "advisory", "watch", "warning")),
    _T("weather_condition", "string", "weather condition",
       enum=("clear", "cloudy", "rain", "snow", "fog", "storm")),
    _T("sentiment", "string", "sentiment", enum=("positive", "neutral", "negative")),
    _T("risk_level", "string", "risk level", enum=("low", "medium", "high")),
    _T("priority", "string", "priority", enum=("low", "normal", "urgent")),
    _T("lock_state", "string", "lock state", enum=("locked", "unlocked")),
    _T("flight_offer_id", "string", "flight offer", pattern=r"^FL-[0-9a-f]{6}$"),
    _T("hotel_offer_id", "string", "hotel offer", pattern=r"^HO-[0-9a-f]{6}$"),
    _T("record_id", "string", "confirmation reference", pattern=_ID),
    _T("status", "string", "status", enum=("confirmed", "ok", "queued")),
    _T("label", "string", "label", bindable=False),
    _T("timestamp", "string", "timestamp", fmt="date-time", bindable=False),
    _T("slot_list", "array", "slot list", bindable=False),
    _T("rate", "number", "conversion rate", minimum=0, bindable=False),
]}

# Unit factors relative to each dimension's canonical unit (USD, Celsius, km, kg, kWh, km/h).
_FACTORS = {"price_usd": 1.0, "price_eur": 0.92, "price_gbp": 0.79, "distance_km": 1.0,
            "distance_mi": 0.621371, "weight_kg": 1.0, "weight_lb": 2.20462, "energy_kwh": 1.0,
            "energy_wh": 1000.0, "wind_kph": 1.0, "wind_mph": 0.621371}


def convert_units(value: float, src: str, dst: str) -> float:
    """Exact unit conversion between two types of one dimension, rounded to 2 dp."""
    if src == dst:
        return round(float(value), 2)
    if TYPES[src].dim == "temp":
        c = value if src == "temperature_c" else (value - 32) * 5 / 9
        return round(c if dst == "temperature_c" else c * 9 / 5 + 32, 2)
    return round(float(value) / _FACTORS[src] * _FACTORS[dst], 2)


# ------------------------------------------------------------------------------------------------
# Concepts: what the world's lookup tables hold, keyed by entity (never by tool).

_TEXT = {
    "company_news": ("{k} shares move after quarterly guidance update",
                     "{k} announces new buyback programme", "{k} expands data-centre investment",
                     "Analysts revisit {k} outlook after product event"),
    "travel_advisory": ("Normal precautions advised in {k}", "Expect strikes affecting transit in {k}",
                        "Heightened security at major sites in {k}"),
    "local_events": ("Jazz festival downtown in {k}", "Food market weekend in {k}",
                     "Marathon closes central roads in {k}", "Museum night opens late in {k}"),
    "doc_text": ("{k}: scope agreed, two risks open, next review in two weeks",
                 "{k}: budget on track, staffing gap in engineering",
                 "{k}: draft complete, awaiting legal sign-off"),
    "meeting_notes": ("Notes for {k}: roadmap reviewed, owners assigned",
                      "Notes for {k}: hiring freeze lifted, travel budget cut"),
    "task_list": ("Open tasks for {k}: finish report, review contract",
                  "Open tasks for {k}: prepare demo, update forecast"),
    "announcements": ("Office announcement for {k}: fire drill at 11:00",
                      "Office announcement for {k}: new cafeteria hours"),
    "project_status": ("{k} project is green, milestone two shipped",
                       "{k} project is amber, vendor delay on integration"),
    "reviews": ("Customers praise the {k} build quality but mention slow delivery",
                "Most buyers rate the {k} as great value for money"),
    "warranty": ("The {k} comes with a two-year limited warranty",
                 "The {k} has a one-year warranty with free repairs"),
    "return_policy": ("The {k} can be returned within 30 days", "Returns of the {k} accepted for 14 days"),
    "weather_alert": ("Wind advisory in effect for {k} until evening",
                      "No severe weather expected in {k} today", "Heavy rain watch issued for {k}"),
    "news": ("Breakthrough reported in {k} research", "Governments debate new rules on {k}",
             "Investors pour money into {k} start-ups"),
    "holidays": ("No public holiday in {k} on that date", "Regional holiday observed in {k}"),
    "definition": ("{k}: a field of study and industry activity", "{k}: a widely discussed topic"),
}
_ENUM_CONCEPT = {"analyst_rating": "rating", "advisory_level": "alert_level",
                 "alert_level": "alert_level", "weather_cond": "weather_condition",
                 "lock": "lock_state"}
# (canonical type, low, high, log-uniform)
_NUM = {
    "stock_price": ("price_usd", 20, 900, True), "crypto_price": ("price_usd", 0.1, 70000, True),
    "price_change": ("pct_change", -8, 8, False), "dividend_yield": ("yield_pct", 0, 6, False),
    "flight_fare": ("price_usd", 80, 1500, True), "hotel_rate": ("price_usd", 60, 450, True),
    "route_distance": ("distance_km", 300, 12000, True),
    "unread": ("message_count", 0, 80, False), "product_price": ("price_usd", 8, 1500, True),
    "stock_level": ("stock_count", 3, 250, False), "ship_weight": ("weight_kg", 0.2, 40, True),
    "seller_rating": ("star_rating", 2.5, 5, False), "price_trend": ("pct_change", -20, 15, False),
    "room_temp": ("temperature_c", 16, 27, False), "room_humidity": ("humidity_pct", 25, 70, False),
    "energy_today": ("energy_kwh", 0.5, 40, True), "air_quality": ("aqi_index", 10, 160, False),
    "battery": ("battery_pct", 5, 100, False), "weather_temp": ("temperature_c", -8, 34, False),
    "weather_humidity": ("humidity_pct", 20, 95, False), "city_aqi": ("aqi_index", 10, 180, False),
    "uv": ("uv_index", 0, 11, False), "wind": ("wind_kph", 2, 60, False),
}
_MAPS = {"ticker_of": (COMPANIES, 0, 1), "crypto_of": (CRYPTOS, 0, 1), "airport_of": (CITIES, 0, 1),
         "tz_of": (CITIES, 0, 2), "product_of": (PRODUCTS, 0, 1), "device_of": (ROOMS, 0, 1),
         "email_of": (PEOPLE, 0, 1), "doc_of": (DOCUMENTS, 0, 1)}
_TIMES = {"departure_time": 30, "doc_deadline": 400, "last_login": -60, "delivery_eta": 120,
          "motion": -20, "sunrise": 20}
_IDS = {"flight_offer": "FL", "hotel_offer": "HO"}


def _rev_lookup(table: tuple, col: int) -> dict[str, tuple]:
    return {row[col].lower(): row for row in table}


# Entity key validation: a value of an entity type must exist in the world, else a natural 404.
_ENTITY_VALUES: dict[str, set[str]] = {
    "company_name": {c.lower() for c, _ in COMPANIES}, "ticker": {t.lower() for _, t in COMPANIES},
    "crypto_name": {c.lower() for c, _ in CRYPTOS}, "crypto_symbol": {s.lower() for _, s in CRYPTOS},
    "city": {c[0].lower() for c in CITIES}, "airport_code": {c[1].lower() for c in CITIES},
    "product_name": {p.lower() for p, _ in PRODUCTS}, "product_id": {i.lower() for _, i in PRODUCTS},
    "room_name": {r.lower() for r, _ in ROOMS}, "device_id": {d.lower() for _, d in ROOMS},
    "person_name": {p.lower() for p, _ in PEOPLE}, "document_name": {d.lower() for d, _ in DOCUMENTS},
    "document_id": {i.lower() for _, i in DOCUMENTS}, "topic": set(TOPICS),
}


_CANON: dict[str, dict[str, str]] = {}
for _table, _cols in ((COMPANIES, ("company_name", "ticker")), (CRYPTOS, ("crypto_name", "crypto_symbol")),
                      (CITIES, ("city", "airport_code", "timezone")), (PRODUCTS, ("product_name", "product_id")),
                      (ROOMS, ("room_name", "device_id")), (PEOPLE, ("person_name", "email_address")),
                      (DOCUMENTS, ("document_name", "document_id"))):
    for _row in _table:
        for _col, _v in zip(_cols, _row):
            _CANON.setdefault(_col, {})[_v.lower()] = _v


def _canon_value(type_name: str, value: Any) -> Any:
    """Lookup-table key of a value: entities in their canonical spelling (case-insensitive input)."""
    if isinstance(value, str):
        return _CANON.get(type_name, {}).get(value.lower(), value.lower())
    return value


class World:
    """Seeded lookup tables. Values are drawn lazily but deterministically per (concept, key), so
    adding an entity never reshuffles the others; all reads are idempotent (thread-safe)."""

    def __init__(self, dataset_seed: int = 0) -> None:
        self.seed = dataset_seed
        self._cache: dict[tuple, Any] = {}
        self._maps = {k: (_rev_lookup(t, a), b) for k, (t, a, b) in _MAPS.items()}

    def _rng(self, *parts: Any) -> float:
        return (seeded_int(self.seed, *parts) % 10**12) / 10**12

    _MAX_CACHE = 200_000  # agents may ask for arbitrary valid dates: keep memory bounded

    def value(self, concept: str, key: tuple, out_type: str) -> Any:
        ck = (concept, key, out_type)
        hit = self._cache.get(ck)
        if hit is None:
            hit = self._compute(concept, key, out_type)
            if len(self._cache) < self._MAX_CACHE:
                self._cache[ck] = hit
        return hit

    def _compute(self, concept: str, key: tuple, out_type: str) -> Any:
        k0 = str(key[0]) if key else ""
        if concept in _MAPS:
            rows, col = self._maps[concept]
            return rows[k0.lower()][col]
        if concept in _NUM:
            canon, lo, hi, log = _NUM[concept]
            u = self._rng("num", concept, *key)
            v = math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo))) if log else lo + u * (hi - lo)
            if TYPES[canon].json == "integer":
                return int(round(v))
            v = round(v, 2)
            return convert_units(v, canon, out_type) if canon != out_type else v
        if concept in _ENUM_CONCEPT:
            vals = TYPES[_ENUM_CONCEPT[concept]].enum
            return vals[seeded_int(self.seed, "enum", concept, *key) % len(vals)]
        if concept in _TEXT:
            opts = _TEXT[concept]
            return opts[seeded_int(self.seed, "text", concept, *key) % len(opts)].format(k=k0)
        if concept in _TIMES:
            hours = _TIMES[concept] + seeded_int(self.seed, "time", concept, *key) % 48
            t = datetime(2026, 3, 2, 9, tzinfo=timezone.utc) + timedelta(hours=hours)
            return t.strftime("%Y-%m-%dT%H:%M:%SZ")
        if concept in _IDS:
            return f"{_IDS[concept]}-{hashlib.sha256(f'{self.seed}|{concept}|{key}'.encode()).hexdigest()[:6]}"
        if concept == "home_city":
            return CITIES[seeded_int(self.seed, "home", k0.lower()) % len(CITIES)][0]
        if concept == "doc_words":  # consistent with the document text (count_words agrees)
            return len(self.value("doc_text", key, "text").split())
        if concept == "tz_person":
            names = [p.lower() for p, _ in PEOPLE]
            return PERSON_TZ[names.index(k0.lower())]
        raise KeyError(f"unknown concept {concept!r}")

    # stateful baselines
    def device_state(self, device_id: str) -> dict[str, Any]:
        device_id = device_id.lower()
        return {"light": ("on", "off")[seeded_int(self.seed, "light", device_id) % 2],
                "setpoint": 19.0 + (seeded_int(self.seed, "setpoint", device_id) % 8) * 0.5}

    def base_slots(self, date: str) -> list[str]:
        skip = seeded_int(self.seed, "busy", date) % len(SLOT_HOURS)
        return [f"{date}T{h:02d}:00" for i, h in enumerate(SLOT_HOURS) if i != skip]


# ------------------------------------------------------------------------------------------------
# Tool records


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # a TYPES key, or FREE
    required: bool = True

    @property
    def free(self) -> bool:
        return self.type == FREE


@dataclass(frozen=True)
class OutField:
    """One response field. `how` says how the backend computes it:
    echo (arg = param), concept (arg = concept), convert (arg = param, factor), const (arg = value),
    id (arg = prefix), text (arg = function name), state (arg = state key)."""

    path: str  # dotted path inside the response
    type: str
    how: str
    arg: Any = None
    factor: float | None = None
    factor_param: str | None = None


@dataclass(frozen=True)
class Tool:
    name: str
    domain: str
    category: str
    family: str
    variant: int
    description: str
    intent: str
    params: tuple[Param, ...]
    outputs: tuple[OutField, ...]
    hook: str | None = None  # stateful backend behaviour

    @property
    def stateful(self) -> bool:
        return self.hook is not None

    @cached_property
    def param_map(self) -> dict[str, Param]:
        return {p.name: p for p in self.params}

    @cached_property
    def required(self) -> tuple[Param, ...]:
        return tuple(p for p in self.params if p.required)

    @cached_property
    def bindable_outputs(self) -> tuple[OutField, ...]:
        return tuple(o for o in self.outputs if o.type in TYPES and TYPES[o.type].bindable)

    @cached_property
    def primary(self) -> OutField:
        """The field that flows on when a free-text parameter consumes this tool."""
        for o in self.bindable_outputs:
            if o.how != "echo":
                return o
        return self.bindable_outputs[0] if self.bindable_outputs else self.outputs[0]

    @cached_property
    def in_types(self) -> frozenset[str]:
        return frozenset(p.type for p in self.required if not p.free)

    @cached_property
    def out_types(self) -> frozenset[str]:
        return frozenset(o.type for o in self.bindable_outputs if o.how != "echo")

    def field_of_type(self, t: str) -> OutField | None:
        for o in self.bindable_outputs:
            if o.type == t and o.how != "echo":
                return o
        for o in self.bindable_outputs:
            if o.type == t:
                return o
        return None

    def output_schema(self) -> dict[str, Any]:
        """JSON Schema of a clean response (keys and JSON types; constraints listed separately)."""
        root: dict[str, Any] = {"type": "object", "properties": {}, "required": []}
        for o in self.outputs:
            node = root
            parts = o.path.split(".")
            for part in parts[:-1]:
                if part not in node["properties"]:
                    node["properties"][part] = {"type": "object", "properties": {}, "required": []}
                    node["required"].append(part)
                node = node["properties"][part]
            js = TYPES[o.type].json
            node["properties"][parts[-1]] = {"type": js} if js != "array" else {
                "type": "array", "items": {"type": "string"}}
            node["required"].append(parts[-1])
        return root

    def openai_schema(self) -> dict[str, Any]:
        """The agent-visible OpenAI tool schema (a fresh copy of the cached one)."""
        return json.loads(self._schema_json)

    @cached_property
    def _schema_json(self) -> str:
        return json.dumps(self._build_schema())

    def _build_schema(self) -> dict[str, Any]:
        props: dict[str, Any] = {}
        for p in self.params:
            if p.free:
                props[p.name] = {"type": "string", "description": "Free text."}
                continue
            t = TYPES[p.type]
            spec: dict[str, Any] = {"type": t.json, "description": t.noun.capitalize()
                                    + (f" ({t.constraint_text()})" if t.constraint_text() else "")}
            if t.enum:
                spec["enum"] = list(t.enum)
            props[p.name] = spec
        returns = "; ".join(
            f"{o.path}: {TYPES[o.type].noun}"
            + (f" ({TYPES[o.type].constraint_text()})" if TYPES[o.type].constraint_text() else "")
            + (f", echoes '{o.arg}'" if o.how == "echo" else "")
            for o in self.outputs)
        return {"type": "function", "function": {
            "name": self.name,
            "description": f"{self.description} Returns JSON with {returns}.",
            "parameters": {"type": "object", "properties": props,
                           "required": [p.name for p in self.required]},
        }}


# ------------------------------------------------------------------------------------------------
# The catalog. One line per capability family:
#   (domain, category, "name|variant|...", "param:type, ...", "field:type<how>; ...", intent, description, hook)
# Output how-codes: =param echo | @concept lookup | <param[*factor|*param] convert | !const |
# #PFX id | ~fn text function | $key state.

_S, _P, _A = SOURCE, PROCESSOR, ACTION
_REC = "ref:record_id#{}; status:status!confirmed"
_CATALOG: list[tuple] = [
    # ---------------- Financial
    ("Financial", _S, "lookup_ticker|search_symbol", "company:company_name",
     "ticker:ticker@ticker_of; company:company_name=company", "look up the stock ticker",
     "Resolve a company name to its exchange ticker."),
    ("Financial", _S, "get_quote_snapshot_native|fetch_stock_quote|get_equity_price", "symbol:ticker",
     "symbol:ticker=symbol; price:price_usd@stock_price; currency:label!USD; as_of:timestamp!now",
     "check the current share price in dollars", "Real-time equity quote in USD."),
    ("Financial", _S, "get_quote_london_gbp", "symbol:ticker",
     "symbol:ticker=symbol; price:price_gbp@stock_price; currency:label!GBP",
     "check the London-listed share price", "Equity quote in GBP from the London feed."),
    ("Financial", _S, "get_quote_multi_currency", "symbol:ticker",
     "symbol:ticker=symbol; usd:price_usd@stock_price; gbp:price_gbp@stock_price",
     "get the quote in several currencies", "Equity quote in USD and GBP."),
    ("Financial", _S, "get_quote_eur_direct", "symbol:ticker",
     "symbol:ticker=symbol; price:price_eur@stock_price; currency:label!EUR",
     "check the share price quoted in euros", "Equity quote in EUR."),
    ("Financial", _S, "resolve_crypto_symbol|find_coin_id", "coin:crypto_name",
     "symbol:crypto_symbol@crypto_of; coin:crypto_name=coin", "find the coin symbol",
     "Resolve a cryptocurrency name to its symbol."),
    ("Financial", _S, "get_crypto_price|fetch_coin_price_usd", "symbol:crypto_symbol",
     "symbol:crypto_symbol=symbol; price:price_usd@crypto_price; as_of:timestamp!now",
     "check the coin price in dollars", "Spot crypto price in USD."),
    ("Financial", _S, "get_crypto_price_eur", "symbol:crypto_symbol",
     "symbol:crypto_symbol=symbol; price:price_eur@crypto_price",
     "check the coin price in euros", "Spot crypto price in EUR."),
    ("Financial", _S, "get_coin_quote_multi", "symbol:crypto_symbol",
     "symbol:crypto_symbol=symbol; usd:price_usd@crypto_price; gbp:price_gbp@crypto_price",
     "get the coin quote in several currencies", "Spot crypto price in USD and GBP."),
    ("Financial", _S, "get_company_news|fetch_market_headlines", "symbol:ticker",
     "symbol:ticker=symbol; headline:text@company_news", "pull the latest company headline",
     "Latest news headline for a listed company."),
    ("Financial", _S, "get_analyst_rating|fetch_consensus_rating", "symbol:ticker",
     "symbol:ticker=symbol; rating:rating@analyst_rating", "get the analyst consensus",
     "Consensus analyst rating."),
    ("Financial", _P, "currency_usd_to_eur|convert_usd_eur_fx", "amount:price_usd",
     "amount_eur:price_eur<amount; rate:rate!0.92", "convert the dollar amount to euros",
     "Convert a USD amount to EUR at the reference rate."),
    ("Financial", _P, "convert_usd_to_gbp", "amount:price_usd", "amount_gbp:price_gbp<amount; rate:rate!0.79",
     "convert the dollar amount to pounds", "Convert USD to GBP."),
    ("Financial", _P, "convert_gbp_to_eur", "amount:price_gbp", "amount_eur:price_eur<amount",
     "convert the pound amount to euros", "Convert GBP to EUR."),
    ("Financial", _P, "convert_eur_to_usd", "amount:price_eur", "amount_usd:price_usd<amount",
     "convert the euro amount back to dollars", "Convert EUR to USD."),
    ("Financial", _P, "format_quote_summary|render_price_card", "price:price_eur",
     "summary:text~fmt_price_eur", "write a short euro price summary", "Format a EUR price as text."),
    ("Financial", _P, "format_usd_report|render_usd_note", "price:price_usd", "summary:text~fmt_price_usd",
     "write a short dollar price note", "Format a USD price as text."),
    ("Financial", _P, "compute_position_value|calc_holding_value", "price:price_usd, shares:quantity",
     "value:price_usd<price*shares", "work out what the position is worth",
     "Value of a position: price x number of shares."),
    ("Financial", _P, "apply_broker_fee", "amount:price_usd", "total:price_usd<amount*1.005",
     "add the broker fee", "Add the 0.5% broker fee to an amount."),
    ("Financial", _P, "summarize_headlines|digest_headlines", "text:text", "summary:text~summarize",
     "condense the headline", "Summarise market headlines."),
    ("Financial", _P, "build_portfolio_report", "section_a:*, section_b:*, section_c:*?",
     "report:text~join", "put everything into a portfolio report", "Assemble a portfolio report."),
    ("Financial", _A, "place_trade|submit_market_order", "symbol:ticker, shares:quantity",
     _REC.format("ORD"), "buy the shares", "Place a market buy order."),
    ("Financial", _A, "set_price_alert|create_price_watch", "symbol:ticker, threshold:price_usd",
     _REC.format("ALR"), "set a price alert at that level", "Create a price alert."),
    ("Financial", _A, "transfer_funds|send_payment", "amount:price_eur, recipient:email_address",
     _REC.format("TRF"), "transfer that euro amount", "Transfer funds in EUR."),
    ("Financial", _A, "record_expense", "amount:price_eur, note:*?", _REC.format("EXP"),
     "record it as an expense", "Record an expense in EUR."),
    ("Financial", _A, "add_to_watchlist", "symbol:ticker", _REC.format("WL"),
     "add the stock to my watchlist", "Add a ticker to the watchlist."),
    ("Financial", _A, "log_investment_note|write_journal_entry", "content:*", _REC.format("NOTE"),
     "log it in my investment journal", "Save an investment note."),
    ("Financial", _A, "buy_crypto", "symbol:crypto_symbol, units:quantity", _REC.format("ORD"),
     "buy the coins", "Buy cryptocurrency units."),
    ("Financial", _A, "create_invoice", "amount:price_usd, recipient:email_address", _REC.format("INV"),
     "invoice that dollar amount", "Create an invoice in USD."),
    # ---------------- Travel
    ("Travel", _S, "get_airport_code|lookup_iata_code", "city:city",
     "airport:airport_code@airport_of; city:city=city", "find the destination airport",
     "Main airport code for a city."),
    ("Travel", _S, "search_flights|find_flight_offers|query_air_fares", "destination:airport_code, date:date",
     "offer_id:flight_offer_id@flight_offer; fare:price_usd@flight_fare; destination:airport_code=destination",
     "search for a flight", "Search flights from the home airport; fares in USD."),
    ("Travel", _S, "search_flights_eur", "destination:airport_code, date:date",
     "offer_id:flight_offer_id@flight_offer; fare:price_eur@flight_fare; destination:airport_code=destination",
     "search flights priced in euros", "Search flights; fares in EUR."),
    ("Travel", _S, "search_flights_gbp", "destination:airport_code, date:date",
     "offer_id:flight_offer_id@flight_offer; fare:price_gbp@flight_fare",
     "search flights priced in pounds", "Search flights; fares in GBP."),
    ("Travel", _S, "search_hotels|find_hotel_deals", "city:city, date:date",
     "hotel_id:hotel_offer_id@hotel_offer; rate:price_usd@hotel_rate; city:city=city",
     "find a hotel", "Search hotels; nightly rate in USD."),
    ("Travel", _S, "get_hotel_rate_gbp", "city:city, date:date",
     "rate:price_gbp@hotel_rate; city:city=city", "check the hotel rate in pounds", "Hotel rate in GBP."),
    ("Travel", _S, "get_travel_advisory|fetch_travel_warnings", "city:city",
     "advisory:text@travel_advisory; level:alert_level@advisory_level; city:city=city",
     "check the travel advisory", "Official travel advisory."),
    ("Travel", _S, "get_route_distance|compute_great_circle_distance", "destination:airport_code",
     "distance:distance_km@route_distance; destination:airport_code=destination",
     "find out how far the trip is", "Great-circle distance from the home airport in km."),
    ("Travel", _S, "get_route_distance_miles", "destination:airport_code",
     "distance:distance_mi@route_distance", "get the trip distance in miles", "Route distance in miles."),
    ("Travel", _S, "get_destination_timezone|lookup_city_timezone", "city:city", "timezone:timezone@tz_of; city:city=city",
     "find the destination time zone", "Time zone of a city."),
    ("Travel", _S, "get_departure_time", "offer_id:flight_offer_id",
     "departure:datetime_iso@departure_time; offer_id:flight_offer_id=offer_id",
     "get the departure time", "Scheduled departure (UTC) of a flight offer."),
    ("Travel", _P, "convert_fare_to_eur|fare_currency_converter", "amount:price_usd",
     "amount_eur:price_eur<amount", "convert the fare to euros", "Convert a USD fare to EUR."),
    ("Travel", _P, "convert_fare_gbp_to_eur", "amount:price_gbp", "amount_eur:price_eur<amount",
     "convert the sterling fare to euros", "Convert a GBP fare to EUR."),
    ("Travel", _P, "convert_fare_usd_to_gbp", "amount:price_usd", "amount_gbp:price_gbp<amount",
     "convert the fare to pounds", "Convert a USD fare to GBP."),
    ("Travel", _P, "km_to_miles|distance_unit_converter", "distance:distance_km",
     "miles:distance_mi<distance", "express the distance in miles", "Convert km to miles."),
    ("Travel", _P, "miles_to_km", "distance:distance_mi", "km:distance_km<distance",
     "express the distance in kilometres", "Convert miles to km."),
    ("Travel", _P, "estimate_flight_duration|flight_time_estimator", "distance:distance_km", "minutes:duration_min<distance*0.075",
     "estimate the flight time", "Flight time estimate from distance."),
    ("Travel", _P, "format_itinerary_line|render_trip_summary", "fare:price_eur",
     "line:text~fmt_price_eur", "write the fare into an itinerary line", "Format a EUR fare as text."),
    ("Travel", _P, "format_distance_note", "distance:distance_mi", "note:text~fmt_miles",
     "write a distance note", "Format a distance in miles."),
    ("Travel", _P, "compare_trip_budget", "fare:price_eur", "verdict:text~fmt_budget",
     "compare it with the trip budget", "Compare a EUR fare with the 600 EUR budget."),
    ("Travel", _P, "assemble_itinerary", "section_a:*, section_b:*, section_c:*?", "itinerary:text~join",
     "assemble everything into an itinerary", "Assemble an itinerary."),
    ("Travel", _P, "convert_departure_local", "when:datetime_iso, timezone:timezone",
     "local:datetime_local~local_time", "convert the departure to local time",
     "Convert a UTC time to a time zone."),
    ("Travel", _A, "book_flight|reserve_flight_seat|purchase_airfare",
     "offer_id:flight_offer_id, passenger:email_address", _REC.format("BK"),
     "book the flight", "Book a flight offer."),
    ("Travel", _A, "book_hotel|reserve_room", "hotel_id:hotel_offer_id, guest:email_address",
     _REC.format("HT"), "book the hotel", "Book a hotel offer."),
    ("Travel", _A, "add_trip_to_calendar", "when:datetime_local", _REC.format("EV"),
     "put the trip in my calendar", "Add a trip to the calendar."),
    ("Travel", _A, "share_itinerary|send_trip_details", "recipient:email_address, details:*",
     _REC.format("SH"), "share the trip details", "Share trip details by email."),
    ("Travel", _A, "save_travel_note|add_trip_journal_entry", "content:*", _REC.format("NOTE"),
     "save it as a travel note", "Save a travel note."),
    ("Travel", _A, "request_travel_reimbursement", "amount:price_eur, employee:email_address",
     _REC.format("CLM"), "file a reimbursement claim", "Request reimbursement in EUR."),
    ("Travel", _A, "set_fare_alert", "destination:airport_code, max_fare:price_usd", _REC.format("ALR"),
     "set a fare alert", "Alert when the fare drops below a level."),
    # ---------------- Office
    ("Office", _S, "lookup_contact|search_directory", "person:person_name",
     "email:email_address@email_of; name:person_name=person", "look up the colleague's email",
     "Directory lookup."),
    ("Office", _S, "query_availability|check_calendar_free_slots", "date:date",
     "next_slot:time_slot$next_slot; free_slots:slot_list$slots; date:date=date",
     "find a free meeting slot", "Free calendar slots on a date.", "availability"),
    ("Office", _S, "get_document_id|search_documents", "title:document_name",
     "document_id:document_id@doc_of; title:document_name=title", "locate the document",
     "Find a document by title."),
    ("Office", _S, "get_document_text|fetch_document_content", "document_id:document_id",
     "text:text@doc_text; document_id:document_id=document_id", "read the document",
     "Document body text."),
    ("Office", _S, "get_document_word_count", "document_id:document_id",
     "words:word_count@doc_words; document_id:document_id=document_id", "check the document length",
     "Word count of a document."),
    ("Office", _S, "get_meeting_notes|fetch_meeting_minutes", "date:date", "notes:text@meeting_notes; date:date=date",
     "pull the meeting notes", "Meeting notes of a date."),
    ("Office", _S, "get_deadline|fetch_due_date", "document_id:document_id",
     "due:datetime_iso@doc_deadline; document_id:document_id=document_id", "check the deadline",
     "Deadline (UTC) attached to a document."),
    ("Office", _S, "get_team_member_timezone", "person:person_name",
     "timezone:timezone@tz_person; name:person_name=person", "find the colleague's time zone",
     "A colleague's time zone."),
    ("Office", _S, "get_unread_count", "mailbox:email_address",
     "unread:message_count@unread; mailbox:email_address=mailbox", "count the unread messages",
     "Unread message count."),
    ("Office", _S, "get_task_list", "person:person_name", "tasks:text@task_list; name:person_name=person",
     "get the colleague's open tasks", "Open tasks of a colleague."),
    ("Office", _S, "get_project_status|fetch_project_health", "document_id:document_id",
     "status_text:text@project_status; document_id:document_id=document_id", "check the project status",
     "Project status attached to a document."),
    ("Office", _P, "convert_datetime|timezone_shift", "when:datetime_iso, timezone:timezone",
     "local:datetime_local~local_time; timezone:timezone=timezone", "convert the time to local time",
     "Convert a UTC timestamp to a time zone."),
    ("Office", _P, "estimate_reading_time", "words:word_count", "minutes:duration_min<words*0.004",
     "estimate the reading time", "Reading time from a word count."),
    ("Office", _P, "summarize_document|generate_tldr", "text:text", "summary:text~summarize",
     "summarise the document", "Summarise a document."),
    ("Office", _P, "extract_action_items|list_follow_ups", "text:text", "items:text~extract",
     "extract the action items", "Extract action items."),
    ("Office", _P, "format_meeting_invite", "slot:time_slot", "invite:text~fmt_slot; start:time_slot~slot_start",
     "draft the invite text", "Draft a meeting invite for a slot (returns the text and the slot start)."),
    ("Office", _P, "format_deadline_notice", "due:datetime_local", "notice:text~fmt_deadline",
     "draft a deadline notice", "Format a deadline notice."),
    ("Office", _P, "compile_status_report", "section_a:*, section_b:*, section_c:*?",
     "report:text~join", "compile a status report", "Compile a status report."),
    ("Office", _P, "draft_reply|compose_response", "text:text", "reply:text~reply",
     "draft a reply", "Draft a reply to a text."),
    ("Office", _P, "count_words", "text:text", "words:word_count~count", "count the words",
     "Count the words of a text."),
    ("Office", _P, "proofread_text", "text:text", "corrected:text~proofread", "proofread it",
     "Proofread a text."),
    ("Office", _P, "convert_to_utc", "local:datetime_local", "utc:datetime_iso~to_utc",
     "convert it back to UTC", "Convert a local time to UTC."),
    ("Office", _A, "schedule_meeting|book_calendar_slot", "slot:time_slot, attendee:email_address",
     "meeting_id:record_id#MTG; status:status!confirmed; slot:time_slot=slot",
     "schedule the meeting", "Book a meeting in a free slot.", "schedule"),
    ("Office", _A, "send_calendar_invite", "slot:time_slot, attendee:email_address", _REC.format("INVT"),
     "send a calendar invite", "Send a calendar invite for a slot."),
    ("Office", _A, "share_document|grant_document_access", "document_id:document_id, recipient:email_address",
     _REC.format("SHR"), "share the document", "Share a document."),
    ("Office", _A, "create_task|add_todo_item", "title:*, assignee:email_address", _REC.format("TSK"),
     "create a task for it", "Create a task."),
    ("Office", _A, "post_team_update", "message:*", _REC.format("POST"),
     "post it to the team channel", "Post a team update."),
    ("Office", _A, "archive_document", "document_id:document_id", _REC.format("ARC"),
     "archive the document", "Archive a document."),
    ("Office", _A, "set_reminder", "when:datetime_local", _REC.format("REM"),
     "set a reminder at that time", "Set a reminder."),
    ("Office", _A, "submit_timesheet", "minutes:duration_min", _REC.format("TS"),
     "log the time on my timesheet", "Submit a timesheet entry."),
    ("Office", _A, "file_report", "content:*", _REC.format("RPT"),
     "file it as a report", "File a report."),
    # ---------------- Shopping
    ("Shopping", _S, "search_products|find_product_listing", "query:product_name",
     "product_id:product_id@product_of; query:product_name=query", "find the product listing",
     "Search the catalogue."),
    ("Shopping", _S, "get_product_price|fetch_listing_price|lookup_retail_price", "product_id:product_id",
     "product_id:product_id=product_id; price:price_usd@product_price; currency:label!USD",
     "check the price in dollars", "Listing price in USD."),
    ("Shopping", _S, "get_product_price_eur", "product_id:product_id",
     "product_id:product_id=product_id; price:price_eur@product_price", "check the price in euros",
     "Listing price in EUR."),
    ("Shopping", _S, "get_product_price_multi", "product_id:product_id",
     "product_id:product_id=product_id; usd:price_usd@product_price; gbp:price_gbp@product_price",
     "get the price in several currencies", "Listing price in USD and GBP."),
    ("Shopping", _S, "get_uk_store_price", "product_id:product_id",
     "product_id:product_id=product_id; price:price_gbp@product_price", "check the UK store price",
     "UK store price in GBP."),
    ("Shopping", _S, "check_stock|get_inventory_level", "product_id:product_id",
     "product_id:product_id=product_id; stock:stock_count$stock", "check how many are in stock",
     "Units in stock.", "stock"),
    ("Shopping", _S, "get_product_reviews|fetch_review_digest", "product_id:product_id",
     "product_id:product_id=product_id; digest:text@reviews", "read the reviews", "Review digest."),
    ("Shopping", _S, "get_shipping_weight|fetch_parcel_weight", "product_id:product_id",
     "product_id:product_id=product_id; weight:weight_kg@ship_weight", "check the shipping weight",
     "Shipping weight in kg."),
    ("Shopping", _S, "get_delivery_estimate|track_delivery_eta", "product_id:product_id",
     "product_id:product_id=product_id; eta:datetime_iso@delivery_eta", "check the delivery estimate",
     "Estimated delivery (UTC)."),
    ("Shopping", _S, "get_price_history", "product_id:product_id",
     "product_id:product_id=product_id; change_pct:pct_change@price_trend", "look at the price trend",
     "30-day price change in percent."),
    ("Shopping", _S, "get_shipping_weight_lb", "product_id:product_id",
     "product_id:product_id=product_id; weight:weight_lb@ship_weight", "look up the parcel weight in pounds",
     "Shipping weight in lb."),
    ("Shopping", _P, "convert_price_to_eur|checkout_currency_converter", "amount:price_usd",
     "amount_eur:price_eur<amount", "show the price in euros", "Convert USD to EUR."),
    ("Shopping", _P, "convert_gbp_price_to_eur", "amount:price_gbp", "amount_eur:price_eur<amount",
     "convert the sterling price to euros", "Convert GBP to EUR."),
    ("Shopping", _P, "convert_price_usd_to_gbp", "amount:price_usd", "amount_gbp:price_gbp<amount",
     "show the price in pounds", "Convert USD to GBP."),
    ("Shopping", _P, "apply_discount|calculate_sale_price", "price:price_usd", "sale_price:price_usd<price*0.85",
     "apply the 15% discount", "Apply the 15% member discount."),
    ("Shopping", _P, "calculate_order_total", "price:price_usd, quantity:quantity",
     "total:price_usd<price*quantity", "work out the order total", "Price x quantity."),
    ("Shopping", _P, "kg_to_lb|weight_unit_converter", "weight:weight_kg", "pounds:weight_lb<weight",
     "convert the weight to pounds", "Convert kg to lb."),
    ("Shopping", _P, "lb_to_kg", "weight:weight_lb", "kg:weight_kg<weight",
     "convert the weight back to kilograms", "Convert lb to kg."),
    ("Shopping", _P, "estimate_shipping_cost", "weight:weight_kg", "cost:price_usd<weight*4.5",
     "estimate the shipping cost", "Shipping cost from weight."),
    ("Shopping", _P, "format_price_comparison", "price:price_eur", "text:text~fmt_price_eur",
     "write a price comparison line", "Format a EUR price."),
    ("Shopping", _P, "summarize_reviews|condense_reviews", "text:text", "summary:text~summarize",
     "summarise the reviews", "Summarise reviews."),
    ("Shopping", _P, "compile_shopping_brief", "section_a:*, section_b:*, section_c:*?",
     "brief:text~join", "compile a shopping brief", "Compile a shopping brief."),
    ("Shopping", _A, "place_order|submit_purchase|checkout_cart_item", "product_id:product_id, quantity:quantity",
     _REC.format("ORD"), "order it", "Place an order (decrements stock).", "order"),
    ("Shopping", _A, "add_to_cart|save_to_basket", "product_id:product_id, quantity:quantity",
     "cart_id:record_id#CART; status:status!ok; items:stock_count$cart_items", "add it to my cart",
     "Add to the cart.", "cart"),
    ("Shopping", _A, "create_price_drop_alert", "product_id:product_id, target:price_usd",
     _REC.format("ALR"), "alert me if the price drops", "Price-drop alert."),
    ("Shopping", _A, "add_to_wishlist|save_for_later", "product_id:product_id", _REC.format("WSH"),
     "put it on my wishlist", "Add to wishlist."),
    ("Shopping", _A, "request_refund", "amount:price_eur, customer:email_address", _REC.format("RFD"),
     "request a refund of that amount", "Request a refund in EUR."),
    ("Shopping", _A, "send_gift_card|issue_store_credit", "amount:price_eur, recipient:email_address",
     _REC.format("GFT"), "send a gift card of that value", "Send a gift card in EUR."),
    ("Shopping", _A, "schedule_delivery", "product_id:product_id, date:date", _REC.format("DLV"),
     "schedule the delivery", "Schedule a delivery date."),
    # ---------------- IoT
    ("IoT", _S, "find_device|lookup_device_id", "room:room_name",
     "device_id:device_id@device_of; room:room_name=room", "find the room's hub", "Smart-home hub of a room."),
    ("IoT", _S, "get_iot_device_status|read_device_state", "device_id:device_id",
     "device_id:device_id=device_id; light:light_state$light; setpoint:setpoint_c$setpoint; "
     "temperature:temperature_c@room_temp", "check the device status", "Current state of a hub.",
     "device_status"),
    ("IoT", _S, "get_room_temperature|read_thermostat_sensor|poll_climate_sensor", "device_id:device_id",
     "device_id:device_id=device_id; temperature:temperature_c@room_temp",
     "read the room temperature in Celsius", "Room temperature in Celsius."),
    ("IoT", _S, "get_room_temperature_f", "device_id:device_id",
     "device_id:device_id=device_id; temperature:temperature_f@room_temp",
     "read the room temperature in Fahrenheit", "Room temperature in Fahrenheit."),
    ("IoT", _S, "get_sensor_multi_reading", "device_id:device_id",
     "device_id:device_id=device_id; celsius:temperature_c@room_temp; fahrenheit:temperature_f@room_temp",
     "read the sensor in both units", "Temperature in both units."),
    ("IoT", _S, "get_humidity|read_humidity_sensor", "device_id:device_id",
     "device_id:device_id=device_id; humidity:humidity_pct@room_humidity", "read the humidity",
     "Relative humidity."),
    ("IoT", _S, "get_energy_usage|read_power_meter", "device_id:device_id",
     "device_id:device_id=device_id; energy:energy_kwh@energy_today", "check today's energy use in kWh",
     "Energy used today in kWh."),
    ("IoT", _S, "get_energy_usage_wh", "device_id:device_id",
     "device_id:device_id=device_id; energy:energy_wh@energy_today", "check today's energy use in Wh",
     "Energy used today in Wh."),
    ("IoT", _S, "get_air_quality|read_air_sensor", "device_id:device_id",
     "device_id:device_id=device_id; aqi:aqi_index@air_quality", "check the indoor air quality",
     "Indoor air-quality index."),
    ("IoT", _S, "get_battery_level", "device_id:device_id",
     "device_id:device_id=device_id; battery:battery_pct@battery", "check the battery", "Battery level."),
    ("IoT", _S, "get_door_lock_status", "device_id:device_id",
     "device_id:device_id=device_id; lock:lock_state@lock", "check the door lock", "Door lock state."),
    ("IoT", _P, "temperature_converter|convert_celsius_fahrenheit", "celsius:temperature_c",
     "fahrenheit:temperature_f<celsius", "convert the reading to Fahrenheit", "Celsius to Fahrenheit."),
    ("IoT", _P, "fahrenheit_to_celsius", "fahrenheit:temperature_f", "celsius:temperature_c<fahrenheit",
     "convert the reading to Celsius", "Fahrenheit to Celsius."),
    ("IoT", _P, "wh_to_kwh", "energy:energy_wh", "kwh:energy_kwh<energy", "express the energy in kWh",
     "Wh to kWh."),
    ("IoT", _P, "kwh_to_wh", "energy:energy_kwh", "wh:energy_wh<energy", "express the energy in Wh",
     "kWh to Wh."),
    ("IoT", _P, "estimate_energy_cost|compute_electricity_cost", "energy:energy_kwh",
     "cost:price_usd<energy*0.15", "estimate the electricity cost", "Cost at 0.15 USD/kWh."),
    ("IoT", _P, "format_climate_report|render_sensor_summary", "fahrenheit:temperature_f",
     "report:text~fmt_temp_f", "write a climate report", "Format a Fahrenheit reading."),
    ("IoT", _P, "format_celsius_reading", "celsius:temperature_c", "text:text~fmt_temp_c",
     "write the reading as a sentence", "Format a Celsius reading."),
    ("IoT", _P, "compute_target_setpoint", "celsius:temperature_c", "setpoint:setpoint_c~setpoint",
     "work out a comfortable setpoint", "Comfort setpoint from the room temperature."),
    ("IoT", _P, "compile_home_report", "section_a:*, section_b:*, section_c:*?", "report:text~join",
     "compile a home report", "Compile a home report."),
    ("IoT", _P, "format_energy_note", "cost:price_usd", "note:text~fmt_price_usd",
     "write an energy cost note", "Format an energy cost."),
    ("IoT", _P, "classify_air_quality|rate_air_quality", "aqi:aqi_index", "verdict:text~fmt_aqi",
     "classify the air quality", "Air-quality verdict."),
    ("IoT", _A, "set_light_state|toggle_smart_light", "device_id:device_id, state:light_state",
     "status:status!ok; device_id:device_id=device_id; light:light_state=state",
     "switch the lights", "Turn a room's lights on or off.", "set_light"),
    ("IoT", _A, "adjust_temperature|set_thermostat_target", "device_id:device_id, setpoint:setpoint_c",
     "status:status!ok; device_id:device_id=device_id; setpoint:setpoint_c=setpoint",
     "set the thermostat", "Set the thermostat target.", "set_temp"),
    ("IoT", _A, "lock_door|engage_smart_lock", "device_id:device_id", _REC.format("LCK"), "lock the door", "Lock a door."),
    ("IoT", _A, "send_home_alert", "message:*", _REC.format("HAL"), "send me a home alert",
     "Push a home alert."),
    ("IoT", _A, "schedule_device_routine", "device_id:device_id, date:date", _REC.format("RTN"),
     "schedule a routine for that day", "Schedule a device routine."),
    ("IoT", _A, "log_sensor_reading", "content:*", _REC.format("LOG"), "log the reading",
     "Log a sensor reading."),
    ("IoT", _A, "set_humidifier_level", "device_id:device_id, humidity:humidity_pct", _REC.format("HUM"),
     "set the humidifier", "Set the humidifier target."),
    ("IoT", _A, "create_maintenance_ticket|open_service_request", "device_id:device_id, issue:*",
     _REC.format("TKT"), "open a maintenance ticket", "Open a maintenance ticket."),
    # ---------------- General
    ("General", _S, "get_weather|fetch_current_conditions|get_weather_now", "city:city",
     "city:city=city; temperature:temperature_c@weather_temp; humidity:humidity_pct@weather_humidity; "
     "condition:weather_condition@weather_cond", "check the weather in Celsius", "Current weather (Celsius)."),
    ("General", _S, "get_weather_fahrenheit", "city:city",
     "city:city=city; temperature:temperature_f@weather_temp", "check the weather in Fahrenheit",
     "Current weather (Fahrenheit)."),
    ("General", _S, "get_weather_multi_unit", "city:city",
     "city:city=city; celsius:temperature_c@weather_temp; fahrenheit:temperature_f@weather_temp",
     "get the temperature in both units", "Temperature in both units."),
    ("General", _S, "get_weatherapi_alert_card_native|get_severe_weather_alerts", "city:city",
     "city:city=city; alert:text@weather_alert; level:alert_level@alert_level",
     "check for weather alerts", "Severe-weather alert card."),
    ("General", _S, "search_news|fetch_top_stories", "topic:topic",
     "topic:topic=topic; headline:text@news", "find the top news story", "Top news story on a topic."),
    ("General", _S, "get_current_time|get_world_clock", "timezone:timezone",
     "now:datetime_iso!now; timezone:timezone=timezone", "get the current time", "Current UTC time."),
    ("General", _S, "get_city_timezone", "city:city", "timezone:timezone@tz_of; city:city=city",
     "find the city's time zone", "Time zone of a city."),
    ("General", _S, "get_sunrise_time", "city:city, date:date", "sunrise:datetime_iso@sunrise; city:city=city",
     "get the sunrise time", "Sunrise (UTC)."),
    ("General", _S, "get_air_pollution_index", "city:city", "aqi:aqi_index@city_aqi; city:city=city",
     "check the city's air pollution", "Outdoor air-quality index."),
    ("General", _S, "get_user_location|locate_user", "mailbox:email_address",
     "city:city@home_city; mailbox:email_address=mailbox", "find out which city they are in",
     "Home city of an account holder."),
    ("General", _S, "get_wind_speed|fetch_wind_report", "city:city", "wind:wind_kph@wind; city:city=city",
     "check the wind speed", "Wind speed in km/h."),
    ("General", _P, "text_translator|translate_text", "text:text, target_language:language_code",
     "translated_text:text~translate; target_language:language_code=target_language",
     "translate it", "Translate a text."),
    ("General", _P, "summarize_text|condense_text", "text:text", "summary:text~summarize",
     "shorten it", "Summarise a text."),
    ("General", _P, "convert_temperature_units", "celsius:temperature_c", "fahrenheit:temperature_f<celsius",
     "switch the temperature to Fahrenheit", "Celsius to Fahrenheit."),
    ("General", _P, "celsius_from_fahrenheit", "fahrenheit:temperature_f", "celsius:temperature_c<fahrenheit",
     "switch the temperature to Celsius", "Fahrenheit to Celsius."),
    ("General", _P, "convert_timestamp|localize_datetime", "when:datetime_iso, timezone:timezone",
     "local:datetime_local~local_time", "localise the timestamp", "Convert UTC to a time zone."),
    ("General", _P, "format_weather_summary|render_forecast_text", "celsius:temperature_c",
     "summary:text~fmt_temp_c", "describe the temperature", "Format a Celsius temperature."),
    ("General", _P, "format_fahrenheit_report", "fahrenheit:temperature_f", "summary:text~fmt_temp_f",
     "describe the Fahrenheit reading", "Format a Fahrenheit temperature."),
    ("General", _P, "compose_digest", "section_a:*, section_b:*, section_c:*?", "digest:text~join",
     "combine it all into a digest", "Compose a digest."),
    ("General", _P, "extract_keywords", "text:text", "keywords:text~extract", "pick out the keywords",
     "Extract keywords."),
    ("General", _P, "convert_kph_to_mph", "wind:wind_kph", "mph:wind_mph<wind",
     "convert the wind speed to mph", "km/h to mph."),
    ("General", _P, "format_wind_report", "mph:wind_mph", "report:text~fmt_wind",
     "describe the wind", "Format a wind speed."),
    ("General", _A, "send_email|send_mail_message", "to:email_address, body:*", _REC.format("MSG"),
     "email it", "Send an email."),
    ("General", _A, "create_note|save_note", "content:*", _REC.format("NOTE"), "save it in my notes",
     "Create a note."),
    ("General", _A, "post_to_slack|send_chat_message", "message:*", _REC.format("CHT"),
     "post it in the chat", "Post a chat message."),
    ("General", _A, "send_sms|send_text_message", "message:*", _REC.format("SMS"), "text it to my phone", "Send an SMS."),
    ("General", _A, "create_calendar_reminder", "when:datetime_local", _REC.format("REM"),
     "add a calendar reminder", "Create a reminder."),
    ("General", _A, "print_document", "content:*", _REC.format("PRN"), "print it", "Print a text."),
    ("General", _A, "save_to_drive", "content:*", _REC.format("DRV"), "save it to my drive",
     "Save a text to the drive."),
    ("General", _A, "publish_blog_post", "content:*", _REC.format("BLG"), "publish it on my blog",
     "Publish a blog post."),
]

_LAYOUTS = ("", "data.", "result.")  # provider variants nest the same fields differently


def _parse_params(spec: str) -> tuple[Param, ...]:
    out = []
    for item in [s.strip() for s in spec.split(",") if s.strip()]:
        name, typ = item.split(":")
        optional = typ.endswith("?")
        out.append(Param(name, typ.rstrip("?"), required=not optional))
    return tuple(out)


def _parse_outputs(spec: str, prefix: str) -> tuple[OutField, ...]:
    out = []
    for item in [s.strip() for s in spec.split(";") if s.strip()]:
        m = re.match(r"^([\w.]+):(\w+)([=@<!#~$])(.*)$", item)
        if not m:
            raise ValueError(f"bad output spec {item!r}")
        path, typ, code, arg = m.groups()
        how = {"=": "echo", "@": "concept", "<": "convert", "!": "const", "#": "id", "~": "text",
               "$": "state"}[code]
        factor = factor_param = None
        if how == "convert" and "*" in arg:
            arg, mult = arg.split("*")
            try:
                factor = float(mult)
            except ValueError:
                factor_param = mult
        if how == "const" and typ in ("rate",):
            arg = float(arg)
        out.append(OutField(prefix + path, typ, how, arg, factor, factor_param))
    return tuple(out)


@dataclass(frozen=True)
class Family:
    stem: str
    domain: str
    category: str
    intent: str
    members: tuple[str, ...]

    @property
    def is_group(self) -> bool:
        return len(self.members) >= 2


@dataclass(frozen=True)
class M2MGroup:
    """A many-to-many sub-graph group: value-equivalent 1-2-tool paths from t_in to t_out
    (e.g. get_quote_snapshot_native -> currency_usd_to_eur == get_quote_eur_direct)."""

    group_id: str
    domain: str
    t_in: str
    t_out: str
    paths: tuple[tuple[str, ...], ...]
    intent: str

    @property
    def tools(self) -> tuple[str, ...]:
        return tuple(sorted({t for p in self.paths for t in p}))


@dataclass
class Corpus:
    tools: dict[str, Tool]
    families: dict[str, Family]
    m2m: dict[str, M2MGroup] = field(default_factory=dict)

    @property
    def groups_1ton(self) -> list[Family]:
        return [f for f in self.families.values() if f.is_group]

    def group_count(self) -> int:
        return len(self.groups_1ton) + len(self.m2m)

    def family_of(self, tool: str) -> Family:
        return self.families[self.tools[tool].family]

    def fingerprint(self) -> str:
        blob = canonical([[t.name, t.domain, t.category, t.family, [p.__dict__ for p in t.params],
                           [o.__dict__ for o in t.outputs]] for t in self.tools.values()]
                         + [[g.group_id, g.paths] for g in self.m2m.values()])
        return hashlib.sha256(blob.encode()).hexdigest()


def _user_bindable(t: Tool, available: set[str]) -> bool:
    return all(p.free or p.type in available or TYPES[p.type].user is not None for p in t.required)


_SAMPLE_IN: dict[str, tuple[Any, ...]] = {
    "ticker": ("AAPL", "NVDA", "WMT"), "crypto_symbol": ("BTC", "SOL", "DOGE"),
    "airport_code": ("CDG", "HND", "LIM"), "product_id": ("P-10231", "P-52203", "P-96637"),
    "device_id": ("hub-livingroom-01", "hub-garage-07", "hub-office-04"),
    "document_id": ("DOC-4821", "DOC-7154", "DOC-2598"), "flight_offer_id": None,
    "email_address": ("alex.morgan@example.com", "mei.chen@example.com", "omar.haddad@example.com"),
    "timezone": ("Asia/Tokyo", "Europe/Paris", "America/Lima"), "city": ("Paris", "Tokyo", "Lima"),
}


def _sample_inputs(t_in: str, world: World) -> tuple[Any, ...] | None:
    if t_in in _SAMPLE_IN:
        return _SAMPLE_IN[t_in]
    t = TYPES[t_in]
    if t.json in ("number", "integer") and t.minimum is not None:
        lo, hi = max(t.minimum, 1), min(t.maximum, 500)
        vals = (lo + (hi - lo) * 0.13, lo + (hi - lo) * 0.52, lo + (hi - lo) * 0.91)
        return tuple(int(v) if t.json == "integer" else round(v, 2) for v in vals)
    if t.fmt == "date-time":
        return ("2026-03-04T15:00:00Z", "2026-03-09T07:30:00Z", "2026-03-20T22:00:00Z")
    if t.fmt == "local-date-time":
        return ("2026-03-04T15:00:00+01:00", "2026-03-09T07:30:00-05:00", "2026-03-20T22:00:00+09:00")
    if t_in == "text":
        return ("Quarterly revenue grew strongly across regions", "Storm warning issued for the coast",
                "Please review the attached contract today")
    if t.fmt == "slot":
        return ("2026-03-05T10:00", "2026-03-12T14:00", "2026-03-19T16:00")
    return None


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= max(0.011, 1e-2 * max(abs(a), abs(b)))
    return a == b


def _discover_m2m(tools: dict[str, Tool], world: World) -> dict[str, M2MGroup]:
    """Spec §3.1 step 2 made deterministic: per domain, enumerate every 1-2-tool typed path from a
    produced type t_in to a type t_out, evaluate it on sample inputs with the clean simulator, and
    cluster paths with equal outputs. A cluster with >= 2 paths, >= 1 of them two tools long and
    every tool avoidable, is a many-to-many group."""
    sim = Simulator(Corpus(tools, {}), world)
    groups: dict[str, M2MGroup] = {}
    user_args = {"quantity": 3, "timezone": "Europe/Paris", "language_code": "fr", "date": "2026-03-05"}

    def run(tool: Tool, bound: dict[str, Any], t_in: str, value: Any) -> dict | None:
        args = {}
        for p in tool.required:
            if p.free:
                return None
            if p.type == t_in:
                args[p.name] = value
            elif p.type in bound:
                args[p.name] = bound[p.type]
            elif p.type in user_args:
                args[p.name] = user_args[p.type]
            else:
                return None
        r = sim.respond(tool.name, args, {})
        return None if is_error(r) else r

    for domain in DOMAINS:
        pool = [t for t in tools.values() if t.domain in (domain, "General")
                and t.category in (SOURCE, PROCESSOR) and not any(p.free for p in t.required)]
        produced = {ty for t in pool for ty in t.out_types}
        t_ins = sorted({ty for t in pool for ty in t.in_types if ty in produced})
        found = []
        for t_in in t_ins:
            samples = _sample_inputs(t_in, world)
            if not samples:
                continue
            paths: dict[tuple[str, str], list[tuple[tuple[str, ...], tuple]]] = {}
            for a in [t for t in pool if t_in in t.in_types]:
                outs_a = [run(a, {}, t_in, v) for v in samples]
                if any(o is None for o in outs_a):
                    continue
                for f in a.bindable_outputs:
                    if f.how == "echo" or f.type == t_in:
                        continue
                    sig = tuple(get_path(o, f.path) for o in outs_a)
                    paths.setdefault((f.type, "1"), []).append(((a.name,), sig))
                    for b in [t for t in pool if f.type in t.in_types and t_in not in t.in_types
                              and t.name != a.name]:
                        outs_b = []
                        for o in outs_a:
                            bound = {fo.type: get_path(o, fo.path) for fo in a.bindable_outputs}
                            outs_b.append(run(b, {f.type: get_path(o, f.path), **{
                                k: v for k, v in bound.items() if k != f.type}}, f.type, get_path(o, f.path)))
                        if any(o is None for o in outs_b):
                            continue
                        for g in b.bindable_outputs:
                            if g.how == "echo" or g.type in (t_in, f.type):
                                continue
                            sig2 = tuple(get_path(o, g.path) for o in outs_b)
                            paths.setdefault((g.type, "2"), []).append(((a.name, b.name), sig2))
            for t_out in sorted({k[0] for k in paths}):
                members = paths.get((t_out, "1"), []) + paths.get((t_out, "2"), [])
                clusters: list[list[tuple[tuple[str, ...], tuple]]] = []
                for path, sig in members:
                    for cl in clusters:
                        if all(_same_value(x, y) for x, y in zip(cl[0][1], sig)):
                            if path not in [p for p, _ in cl]:
                                cl.append((path, sig))
                            break
                    else:
                        clusters.append([(path, sig)])
                for cl in clusters:
                    ps = sorted({p for p, _ in cl}, key=lambda p: (len(p), p))
                    # drop 2-tool paths that contain a 1-tool member (strict supersets)
                    singles = {p[0] for p in ps if len(p) == 1}
                    ps = [p for p in ps if len(p) == 1 or not (set(p) & singles)]
                    if len(ps) < 2 or all(len(p) == 1 for p in ps):
                        continue
                    if domain != "General" and all(tools[t].domain == "General" for p in ps for t in p):
                        continue
                    tset = {t for p in ps for t in p}
                    if any(all(t in p for p in ps) for t in tset):
                        continue  # some tool is unavoidable
                    found.append((t_in, t_out, tuple(ps)))
        seen = set()
        for t_in, t_out, ps in sorted(found, key=lambda x: (-len(x[2]), x[0], x[1], x[2])):
            if ps in seen:
                continue
            seen.add(ps)
            head = ps[0][-1]
            gid = f"{domain.lower()}:{t_in}->{t_out}:{len(seen)}"
            groups[gid] = M2MGroup(gid, domain, t_in, t_out, ps, tools[head].intent)
    return groups


TOTAL_GROUPS = 126  # [PAPER App. B] alternative groups in the corpus


def _select_m2m(found: dict[str, M2MGroup], n: int) -> dict[str, M2MGroup]:
    """Keep `n` groups, round-robin over domains (richest first) so that every domain keeps its
    best sub-graph groups."""
    if n > len(found) or n < 0:
        raise ValueError(f"corpus has {len(found)} many-to-many groups, {n} requested")
    by_domain = {d: [g for g in found.values() if g.domain == d] for d in DOMAINS}
    chosen: list[M2MGroup] = []
    rank = 0
    while len(chosen) < n:
        for d in DOMAINS:
            if rank < len(by_domain[d]) and len(chosen) < n:
                chosen.append(by_domain[d][rank])
        rank += 1
    return {g.group_id: g for g in sorted(chosen, key=lambda g: g.group_id)}


_CORPUS: Corpus | None = None
_LOCK = threading.Lock()


def build_corpus() -> Corpus:
    """The 270-tool corpus (built once per process; immutable afterwards)."""
    global _CORPUS
    with _LOCK:
        if _CORPUS is not None:
            return _CORPUS
        tools: dict[str, Tool] = {}
        families: dict[str, Family] = {}
        for row in _CATALOG:
            domain, cat, names, pspec, ospec, intent, desc = row[:7]
            hook = row[7] if len(row) > 7 else None
            members = tuple(names.split("|"))
            stem = members[0]
            params = _parse_params(pspec)
            for k, name in enumerate(members):
                if name in tools:
                    raise ValueError(f"duplicate tool name {name}")
                outputs = _parse_outputs(ospec, _LAYOUTS[k])
                tools[name] = Tool(name, domain, cat, stem, k, desc, intent, params, outputs, hook)
            families[stem] = Family(stem, domain, cat, intent, members)
        corpus = Corpus(tools, families)
        corpus.m2m = _select_m2m(_discover_m2m(tools, World(0)), TOTAL_GROUPS - len(corpus.groups_1ton))
        _CORPUS = corpus
        return corpus


# ------------------------------------------------------------------------------------------------
# Backends


def error(status: int | None, code: str, message: str) -> dict[str, Any]:
    return {"error": {"status": status, "code": code, "message": message}}


def is_error(response: Any) -> bool:
    return isinstance(response, dict) and "error" in response


def get_path(obj: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return None
        obj = obj[part]
    return obj


def set_path(obj: dict, path: str, value: Any) -> None:
    parts = path.split(".")
    for part in parts[:-1]:
        obj = obj.setdefault(part, {})
    obj[parts[-1]] = value


def render(value: Any) -> str:
    """How a value is written into free text (numbers with 2 decimals)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def _json_ok(value: Any, js: str) -> bool:
    if js == "string":
        return isinstance(value, str)
    if js == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if js == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if js == "array":
        return isinstance(value, list)
    return True


def _local_time(when: str, tz: str) -> str:
    t = datetime.strptime(when, "%Y-%m-%dT%H:%M:%SZ") + timedelta(hours=TZ_OFFSETS[tz])
    off = TZ_OFFSETS[tz]
    return t.strftime("%Y-%m-%dT%H:%M:%S") + f"{'+' if off >= 0 else '-'}{abs(off):02d}:00"


def _to_utc(local: str) -> str:
    t = datetime.fromisoformat(local).astimezone(timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


_LANG_NAMES = dict(LANGUAGES)


def _text_fn(fn: str, args: dict[str, Any], tool: Tool) -> Any:
    text = str(args.get("text", ""))
    if fn == "translate":
        return f"[{args['target_language']}] {text}"
    if fn == "summarize":
        words = text.split()
        return "Summary: " + " ".join(words[:8]) + ("..." if len(words) > 8 else "")
    if fn == "extract":
        words = [w.strip(",.:;") for w in text.split() if len(w.strip(",.:;")) > 5]
        return "Key points: " + ", ".join(words[:4])
    if fn == "reply":
        return f"Thanks for the update. Re: {text}"
    if fn == "proofread":
        return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")
    if fn == "count":
        return len(text.split())
    if fn == "sentiment":
        return ("positive", "neutral", "negative")[seeded_int("sent", text) % 3]
    if fn == "priority":
        return ("low", "normal", "urgent")[seeded_int("prio", text) % 3]
    if fn == "risk":
        c = abs(float(args["change"]))
        return "low" if c < 2 else "medium" if c < 5 else "high"
    if fn == "setpoint":
        return round(min(24.0, max(18.0, 42.0 - float(args["celsius"]))), 1)
    if fn == "local_time":
        return _local_time(args["when"], args["timezone"])
    if fn == "slot_start":
        return args["slot"]
    if fn == "to_utc":
        return _to_utc(args["local"])
    if fn == "join":
        parts = [args[p.name] for p in tool.params if p.name in args and args[p.name] not in (None, "")]
        return "Report: " + " | ".join(str(p) for p in parts)
    value = next(iter(args.values()))
    fmts = {"fmt_price_eur": "Current price: {} EUR", "fmt_price_usd": "Amount: {} USD",
            "fmt_miles": "Distance: {} miles", "fmt_slot": "Meeting invite for {}",
            "fmt_deadline": "Deadline: {}", "fmt_stock": "{} units in stock",
            "fmt_weight": "Shipping weight: {} lb", "fmt_temp_f": "Temperature: {} F",
            "fmt_temp_c": "Temperature: {} C", "fmt_aqi": "Air quality index {}",
            "fmt_humidity": "Humidity at {} percent", "fmt_wind": "Wind at {} mph"}
    if fn == "fmt_budget":
        v = float(value)
        return f"Fare {v:.2f} EUR is {'within' if v <= 600 else 'over'} the 600 EUR budget"
    if fn in fmts:
        return fmts[fn].format(render(value))
    raise KeyError(f"unknown text function {fn}")


def _valid_datetime(v: str, fmt: str) -> bool:
    try:
        if fmt == "date-time":
            if not re.match(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$", v):
                return False
            datetime.strptime(v, "%Y-%m-%dT%H:%M:%SZ")
        elif fmt == "local-date-time":
            if not re.match(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[+-]\d{2}:\d{2}$", v):
                return False
            datetime.fromisoformat(v)
        elif fmt == "date":
            datetime.strptime(v, "%Y-%m-%d")
        elif fmt == "slot":
            if not re.match(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}$", v):
                return False
            datetime.strptime(v, "%Y-%m-%dT%H:%M")
        return True
    except ValueError:
        return False


def validate_args(tool: Tool, args: Any) -> dict[str, Any] | None:
    """A natural API error for invalid arguments, or None when they are valid."""
    if not isinstance(args, dict):
        return error(400, "INVALID_REQUEST", "Request body must be a JSON object.")
    for name in args:
        if name not in tool.param_map:
            return error(400, "INVALID_PARAMETER", f"Unknown parameter '{name}'.")
    for p in tool.params:
        if p.name not in args:
            if p.required:
                return error(400, "MISSING_PARAMETER", f"Missing required parameter '{p.name}'.")
            continue
        v = args[p.name]
        if p.free:
            if not isinstance(v, str):
                return error(400, "INVALID_PARAMETER", f"Invalid parameter '{p.name}': expected a string.")
            continue
        t = TYPES[p.type]
        if not _json_ok(v, t.json):
            return error(400, "INVALID_PARAMETER", f"Invalid parameter '{p.name}': expected {t.json}.")
        if t.enum and v not in t.enum:
            return error(400, "INVALID_PARAMETER", f"Invalid parameter '{p.name}': must be one of {list(t.enum)}.")
        if t.minimum is not None and isinstance(v, (int, float)) and not (t.minimum <= v <= t.maximum):
            return error(400, "INVALID_PARAMETER", f"Invalid parameter '{p.name}': out of range.")
        if t.fmt and not _valid_datetime(v, t.fmt):
            return error(400, "INVALID_PARAMETER", f"Invalid parameter '{p.name}': bad {t.fmt} value.")
        if p.type in _ENTITY_VALUES and str(v).lower() not in _ENTITY_VALUES[p.type]:
            return error(404, "NOT_FOUND", f"No {t.noun} found for '{v}'.")
    return None


class Simulator:
    """respond(tool, args, state) -> JSON. Deterministic: the same call in the same state gives a
    byte-identical response. `state` is the per-episode dict (fresh per trajectory)."""

    def __init__(self, corpus: Corpus, world: World) -> None:
        self.corpus = corpus
        self.world = world

    def respond(self, tool_name: str, args: Any, state: dict[str, Any]) -> dict[str, Any]:
        tool = self.corpus.tools.get(tool_name)
        if tool is None:
            return error(404, "UNKNOWN_TOOL", f"Unknown tool '{tool_name}'.")
        err = validate_args(tool, args)
        if err:
            return err
        key = tuple(_canon_value(p.type, args[p.name]) for p in tool.params if not p.free and p.name in args)
        hook_err = self._pre_hook(tool, args, state)
        if hook_err:
            return hook_err
        out: dict[str, Any] = {}
        for o in tool.outputs:
            set_path(out, o.path, self._field(tool, o, args, key, state))
        self._post_hook(tool, args, state)
        return out

    def _field(self, tool: Tool, o: OutField, args: dict, key: tuple, state: dict) -> Any:
        if o.how == "echo":
            return args[o.arg]
        if o.how == "concept":
            return self.world.value(o.arg, key, o.type)
        if o.how == "convert":
            src = tool.param_map[o.arg].type
            v = float(args[o.arg])
            if o.factor is not None:
                return round(v * o.factor, 2)
            if o.factor_param is not None:
                return round(v * float(args[o.factor_param]), 2)
            return convert_units(v, src, o.type)
        if o.how == "const":
            return CLOCK if o.arg == "now" else o.arg
        if o.how == "id":
            ident = canonical(sorted([tool.param_map[k].type, render(v)] for k, v in args.items()))
            digest = hashlib.sha256(f"{self.world.seed}|{tool.family}|{ident}".encode()).hexdigest()
            return f"{o.arg}-{digest[:8]}"
        if o.how == "text":
            return _text_fn(o.arg, args, tool)
        if o.how == "state":
            return self._state_field(tool, o.arg, args, state)
        raise ValueError(o.how)

    # --- stateful tools
    def _free_slots(self, date: str, state: dict) -> list[str]:
        booked = state.setdefault("booked", set())
        return [s for s in self.world.base_slots(date) if s not in booked]

    def _device(self, device_id: str, state: dict) -> dict:
        device_id = _canon_value("device_id", device_id)
        devices = state.setdefault("devices", {})
        if device_id not in devices:
            devices[device_id] = self.world.device_state(device_id)
        return devices[device_id]

    def _stock(self, pid: str, state: dict) -> int:
        pid = _canon_value("product_id", pid)
        stock = state.setdefault("stock", {})
        if pid not in stock:
            stock[pid] = self.world.value("stock_level", (pid,), "stock_count")
        return stock[pid]

    def _state_field(self, tool: Tool, key: str, args: dict, state: dict) -> Any:
        if key == "slots":
            return self._free_slots(args["date"], state)
        if key == "next_slot":
            free = self._free_slots(args["date"], state)
            return free[0] if free else ""
        if key == "light":
            return self._device(args["device_id"], state)["light"]
        if key == "setpoint":
            return self._device(args["device_id"], state)["setpoint"]
        if key == "stock":
            return self._stock(args["product_id"], state)
        if key == "cart_items":
            return sum(q for _, q in state.get("cart", [])) + int(args["quantity"])
        raise KeyError(key)

    def _pre_hook(self, tool: Tool, args: dict, state: dict) -> dict | None:
        if tool.hook == "availability" and not self._free_slots(args["date"], state):
            return error(404, "NO_AVAILABILITY", "No free slots on that date.")
        if tool.hook == "schedule":
            slot = args["slot"]
            if slot not in self._free_slots(slot[:10], state):
                return error(409, "SLOT_UNAVAILABLE", f"Slot {slot} is not available.")
        if tool.hook == "order" and int(args["quantity"]) > self._stock(args["product_id"], state):
            return error(409, "INSUFFICIENT_STOCK", "Not enough units in stock.")
        return None

    def _post_hook(self, tool: Tool, args: dict, state: dict) -> None:
        if tool.hook == "schedule":
            state.setdefault("booked", set()).add(args["slot"])
        elif tool.hook == "set_light":
            self._device(args["device_id"], state)["light"] = args["state"]
        elif tool.hook == "set_temp":
            self._device(args["device_id"], state)["setpoint"] = float(args["setpoint"])
        elif tool.hook == "order":
            state["stock"][_canon_value("product_id", args["product_id"])] -= int(args["quantity"])
        elif tool.hook == "cart":
            state.setdefault("cart", []).append((args["product_id"], int(args["quantity"])))


# ------------------------------------------------------------------------------------------------
# Declared output constraints and the rule-based sanity checker (spec §1.2, §4.3 check)

_INVARIANTS_TOL = 0.011


def schema_valid(tool: Tool, response: Any) -> bool:
    """Same keys and JSON types as a clean response."""
    if not isinstance(response, dict) or is_error(response):
        return False
    for o in tool.outputs:
        v = get_path(response, o.path)
        if v is None or not _json_ok(v, TYPES[o.type].json):
            return False
    return True


def constraint_violations(tool: Tool, args: dict[str, Any], response: dict[str, Any]) -> list[str]:
    """Declared constraints a response violates (ranges, enums, patterns, formats, echoes and the
    cross-field invariants of converters). A clean response violates none."""
    out: list[str] = []
    for o in tool.outputs:
        v = get_path(response, o.path)
        t = TYPES[o.type]
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if t.minimum is not None and v < t.minimum:
                out.append(f"{o.path} below minimum {t.minimum}")
            if t.maximum is not None and v > t.maximum:
                out.append(f"{o.path} above maximum {t.maximum}")
        if isinstance(v, str):
            if t.enum and v not in t.enum:
                out.append(f"{o.path} not in {t.enum}")
            if t.pattern and not re.match(t.pattern, v):
                out.append(f"{o.path} does not match {t.pattern}")
            if t.fmt and not _valid_datetime(v, t.fmt):
                out.append(f"{o.path} is not a valid {t.fmt}")
            if o.type == "timestamp" and v != CLOCK:
                out.append(f"{o.path} is not current")
        if o.how == "echo" and isinstance(v, str) and str(args.get(o.arg, "")).lower() != v.lower():
            out.append(f"{o.path} does not echo the requested {o.arg}")
        if o.how == "convert" and isinstance(v, (int, float)) and o.arg in args:
            src = float(args[o.arg])
            if o.factor is not None:
                want = src * o.factor
            elif o.factor_param is not None:
                want = src * float(args.get(o.factor_param, 1))
            else:
                want = convert_units(src, tool.param_map[o.arg].type, o.type)
            if abs(v - want) > max(_INVARIANTS_TOL, 1e-3 * abs(want)):
                out.append(f"{o.path} inconsistent with {o.arg}")
        if o.how == "const" and v != (CLOCK if o.arg == "now" else o.arg) and o.type != "timestamp":
            out.append(f"{o.path} unexpected value")
    return out
