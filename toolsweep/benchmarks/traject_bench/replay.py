"""Tool execution by replay of the outputs recorded in the release, and the value normalisation the
metrics share with it.

The paper's tools are live RapidAPI endpoints; offline, a call is answered with the output that was
recorded for the same tool and the same (normalised) arguments. Arguments that normalise equal (the
metric's `normalize_value`, spec §4.2) get byte-identical outputs, so replay and Usage agree on what
"the same call" means. A call no recording matches gets a fixed, clearly worded observation.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import re
from collections import defaultdict
from datetime import datetime
from functools import lru_cache
from typing import Any, Iterable

from toolsweep.benchmarks.traject_bench.data import Dataset, GoldCall, Task, canon_name

# --------------------------------------------------------------------------------------------------
# normalize_value: spec §4.2, in its order (literal_eval, whitespace, location, date, boolean, numeric).

COUNTRY_CODES = {
    "FR": "France", "US": "United States", "USA": "United States", "UK": "United Kingdom",
    "GB": "United Kingdom", "DE": "Germany", "Deutschland": "Germany", "IT": "Italy",
    "Italia": "Italy", "ES": "Spain", "España": "Spain", "JP": "Japan", "CN": "China",
    "AU": "Australia", "CA": "Canada", "IN": "India", "BR": "Brazil", "MX": "Mexico",
    "RU": "Russia", "KR": "South Korea", "NL": "Netherlands", "SE": "Sweden", "NO": "Norway",
    "DK": "Denmark", "FI": "Finland", "CH": "Switzerland", "AT": "Austria", "BE": "Belgium",
    "PT": "Portugal", "GR": "Greece", "TR": "Turkey", "PL": "Poland", "CZ": "Czech Republic",
    "HU": "Hungary", "RO": "Romania", "BG": "Bulgaria", "HR": "Croatia", "SI": "Slovenia",
    "SK": "Slovakia", "LT": "Lithuania", "LV": "Latvia", "EE": "Estonia",
}  # fmt: skip
# Codes in any case ("fr", "Fr"), and full names in any case ("FRANCE") to their canonical spelling.
_COUNTRY_ANY_CASE = {**{k.upper(): v for k, v in COUNTRY_CODES.items() if k.isascii() and len(k) <= 3},
                     **{v.casefold(): v for v in COUNTRY_CODES.values()},
                     **{k.casefold(): v for k, v in COUNTRY_CODES.items() if len(k) > 3}}

_DATE = re.compile(r"^\d{4}-\d{1,2}-\d{1,2}$")
_DIGITS = re.compile(r"^[+-]?\d+$")
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def _country(part: str) -> str:
    """A comma part that is a country code or name, case-insensitively, as its canonical full name
    (the authors' `normalize_location`: "fr" and "France" and "FRANCE" are one country)."""
    key = part.strip()
    if len(key) <= 3:
        return _COUNTRY_ANY_CASE.get(key.upper(), part)
    return _COUNTRY_ANY_CASE.get(key.casefold(), part)


def _norm_str(s: str) -> Any:
    s = re.sub(r"\s*,\s*", ",", s)
    s = re.sub(r"\s+", " ", s).strip()
    if "," in s:
        s = ",".join(_country(part) for part in s.split(","))
    if _DATE.match(s):
        try:
            s = datetime.strptime(s, "%Y-%m-%d").strftime("%Y-%m-%d")
        except ValueError:
            pass
    low = s.lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    if _DIGITS.match(s):
        return int(s)
    try:
        f = float(s)
    except ValueError:
        return s
    # "nan"/"inf" parse as floats but are words here; keeping them strings keeps x == x.
    return f if math.isfinite(f) else s


_LITERAL_START = frozenset("0123456789+-.'\"[{(")


@lru_cache(maxsize=262144)
def _normalize_text(s: str) -> Any:
    s = s.strip()
    val: Any = s
    # literal_eval compiles its input (slow); only text that can be a Python literal goes there.
    if s and (s[0] in _LITERAL_START or s in ("True", "False", "None")):
        try:
            val = ast.literal_eval(s)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            val = s
    if isinstance(val, str):
        return _norm_str(val)
    return val


def normalize_value(v: Any) -> Any:
    """The metric's value normalisation (spec §4.2). Comparison after it is exact and case-sensitive;
    lists and dicts compare structurally; True == 1 as in Python (kept for fidelity)."""
    if isinstance(v, bool) or isinstance(v, int):
        return v  # str() then literal_eval gives the value back
    if isinstance(v, float) and math.isfinite(v):
        return v
    return _normalize_text(v if isinstance(v, str) else str(v))


def is_blank(v: Any) -> bool:
    return v is None or (isinstance(v, str) and not v.strip())


def _key_value(v: Any) -> Any:
    """A hashable form in which metric-equal normalised values are identical (True == 1, 100.0 == 100)."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, (int, float, str)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return ("__list__", tuple(_key_value(x) for x in v))
    if isinstance(v, dict):
        return ("__dict__", tuple(sorted(((str(k), _key_value(x)) for k, x in v.items()), key=repr)))
    return ("__repr__", repr(v))


@lru_cache(maxsize=262144)
def _text_key(s: str) -> Any:
    return _key_value(_normalize_text(s))


def value_key(v: Any) -> Any:
    """Hashable key of a raw value after `normalize_value`."""
    if isinstance(v, str):
        return _text_key(v)
    return _key_value(normalize_value(v))


def args_key(args: Iterable[tuple[str, Any]]) -> tuple:
    """Canonical key of a call's arguments: blanks dropped, values normalised, names sorted.

    A name given twice keeps its last value, as the request the recording came from did (the
    authors execute `tool_input={name: value}`); a few gold calls list a name twice."""
    merged = {str(k): v for k, v in args}
    return tuple(sorted(((k, value_key(v)) for k, v in merged.items() if not is_blank(v)), key=_first))


def _first(item: tuple[str, Any]) -> str:
    return item[0]


# --------------------------------------------------------------------------------------------------
# Placeholders: '<results from tool X>' (the Direct prompt asks for it), '{{x from the previous step}}'.

_PLACEHOLDERS = (
    re.compile(r"^\s*<\s*(?:the\s+)?(?:results?|outputs?)\s+(?:from|of)\s+(?:the\s+)?(?:tool\s+)?(?P<x>[^<>]+?)\s*>\s*$", re.I),
    re.compile(r"^\s*\{\{\s*(?P<x>[^{}]+?)\s*\}\}\s*$"),
    re.compile(r"^\s*<(?P<x>[^<>]*\btool\b[^<>]*)>\s*$", re.I),
)  # fmt: skip


def placeholder_target(value: Any) -> str | None:
    """The text naming the source of a placeholder value, or None when the value is concrete."""
    if not isinstance(value, str):
        return None
    for pat in _PLACEHOLDERS:
        m = pat.match(value)
        if m:
            return m.group("x").strip()
    return None


def names_tool(text: str, tool_name: str) -> bool:
    """Does placeholder text `text` name `tool_name` (full name, or its API part)?"""
    t = canon_name(text).lower().strip("'\" ")
    n = canon_name(tool_name).lower()
    if not t:
        return False
    api = n.partition(": ")[2]
    return t == n or n in t or (bool(api) and (t == api or t.endswith(": " + api)))


# --------------------------------------------------------------------------------------------------
# Aliases for native function calling: names must match ^[a-zA-Z0-9_-]{1,64}$ (spec §3.4).


def tool_alias(name: str) -> str:
    slug = re.sub(r"[^a-zA-Z0-9_-]+", "_", canon_name(name)).strip("_")[:48] or "tool"
    return f"{slug}_{hashlib.sha1(canon_name(name).encode()).hexdigest()[:8]}"


class AliasMap:
    """Reversible name <-> alias map over a tool pool."""

    def __init__(self, names: Iterable[str]) -> None:
        self.to_alias: dict[str, str] = {}
        self.to_name: dict[str, str] = {}
        for n in names:
            a = tool_alias(n)
            self.to_alias[n] = a
            self.to_name[a] = n

    def name(self, alias: str) -> str | None:
        return self.to_name.get(alias)


# --------------------------------------------------------------------------------------------------

NO_RECORD = "no recorded response for these arguments"


def no_record_output(name: str) -> str:
    return json.dumps(
        {
            "error": NO_RECORD,
            "tool": name,
            "detail": "tools are replayed from the benchmark's recorded calls; "
            "this tool was never recorded with these argument values",
        },
        ensure_ascii=False,
    )


def not_found_output(name: str) -> str:
    return json.dumps({"error": f"Tool '{name}' not found"}, ensure_ascii=False)


class Replayer:
    """Answers calls from the recordings: the episode's own task first (in occurrence order, so a
    repeated call gets its own recorded output), then any task in the release (first recording)."""

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset
        index: dict[tuple[str, tuple], str] = {}
        for split in dataset.splits():
            for task in dataset.tasks[split]:
                for c in task.calls:
                    index.setdefault((c.name, args_key((*c.required, *c.optional))), c.output)
        self.index = index
        self._task_indexes: dict[str, tuple[Task, dict[tuple[str, tuple], list[str]]]] = {}

    def task_index(self, task: Task) -> dict[tuple[str, tuple], list[str]]:
        """The task's own recordings by call key (built once per task, then shared read-only)."""
        got = self._task_indexes.get(task.task_id)
        if got is None or got[0] is not task:
            out: dict[tuple[str, tuple], list[str]] = defaultdict(list)
            for c in task.calls:
                out[(c.name, args_key((*c.required, *c.optional)))].append(c.output)
            got = (task, dict(out))
            self._task_indexes[task.task_id] = got
        return got[1]

    def execute(
        self,
        name: str,
        args: Iterable[tuple[str, Any]],
        local: dict[tuple[str, tuple], list[str]] | None = None,
        used: dict[tuple[str, tuple], int] | None = None,
    ) -> tuple[str, str]:
        """(output text, status) with status in {"recorded", "no_record", "not_found"}."""
        name = canon_name(name)
        if name not in self.dataset.catalog:
            return not_found_output(name), "not_found"
        key = (name, args_key(args))
        if local is not None and key in local:
            outs = local[key]
            k = used.get(key, 0) if used is not None else 0
            if used is not None:
                used[key] = k + 1
            return outs[min(k, len(outs) - 1)], "recorded"
        out = self.index.get(key)
        if out is not None:
            return out, "recorded"
        return no_record_output(name), "no_record"


def gold_args(call: GoldCall) -> list[tuple[str, Any]]:
    return [*call.required, *call.optional]
