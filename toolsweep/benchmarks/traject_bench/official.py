"""`paper_compat: exact`: TRAJECT-Bench's selection and argument metrics exactly as the authors'
scoring code computes them (`utils/metrics.py` and the evaluation scripts of
PengfeiHePower/TRAJECT-Bench), reimplemented from its documented behaviour.

What "exactly" means here, point by point (docs/traject_bench.md has the table of every place where
the project's `corrected` reading differs, with the authors' line and the episodes it changes):

- Names are compared as the files and the agent spell them: no whitespace collapsing (the release
  spells four tools with a double space in one file and a single one in another).
- EM: set equality of names (parallel), list equality (sequential). Inclusion: distinct gold names
  predicted / length of the gold list.
- Usage: one pair per distinct shared name, each side's first occurrence; a pair is 1 iff the
  required lists and the optional lists (blank values dropped, names stripped, values normalised,
  stably sorted by name) are equal with Python `==`. A placeholder is a literal string, never equal
  to a concrete gold value. A query's Usage is the mean of its pairs; a query with no pair is left
  out of the average.
- Native function calling: the authors' native scripts store a call's arguments under
  "parameters", which the Usage comparison never reads, so the prediction has no parameters: a pair
  is 1 only when the gold call has no non-blank parameter.
- Value normalisation in their order: `str().strip()`, `ast.literal_eval`, whitespace around commas
  and runs of spaces, country codes and English country names in comma-separated parts (a code in
  any case; "Deutschland", "Italia", "España" never match, as the authors' upper-casing of the part
  never equals those keys), dates at the start of the string, boolean words, numbers (`"nan"` becomes
  a float NaN, which equals nothing).
- Retrieval rate: distinct gold names among the retrieved tools' names / length of the gold list,
  only where the authors' scripts compute it (a retrieved pool, retrieved once from the query).
"""

from __future__ import annotations

import ast
import math
import re
from datetime import datetime
from functools import lru_cache
from typing import Any, Iterable

from toolsweep.benchmarks.traject_bench.data import GoldCall, Task
from toolsweep.benchmarks.traject_bench.replay import COUNTRY_CODES

# The authors' country table (codes and the three native-language keys): the same data the replay's
# normaliser reads.
_COUNTRIES = COUNTRY_CODES
_FULL_NAMES = {v.lower(): v for v in _COUNTRIES.values()}
_DATE_PREFIX = re.compile(r"\d{4}-\d{1,2}-\d{1,2}")


def _location(s: str) -> str:
    if "," not in s:
        return s
    out = []
    for part in (p.strip() for p in s.split(",")):
        if part.upper() in _COUNTRIES:  # "Deutschland".upper() is never a key: no native names
            out.append(_COUNTRIES[part.upper()])
        else:
            out.append(_FULL_NAMES.get(part.lower(), part))
    return ",".join(out)


def _date(s: str) -> str:
    if _DATE_PREFIX.match(s):
        try:
            return datetime.strptime(s, "%Y-%m-%d").strftime("%Y-%m-%d")
        except ValueError:
            pass
    return s


def _boolean(v: Any) -> Any:
    if isinstance(v, str):
        low = v.lower().strip()
        if low in ("true", "1", "yes", "on"):
            return True
        if low in ("false", "0", "no", "off"):
            return False
    return v


def _numeric(v: Any) -> Any:
    if isinstance(v, str):
        v = v.strip()
        if v.isdigit():
            try:
                return int(v)
            except ValueError:  # "²".isdigit(): the authors' int() raises; treat as text
                return v
        try:
            return float(v)
        except ValueError:
            return v
    return v


@lru_cache(maxsize=262144)
def _normalize_text(s: str) -> Any:
    try:
        val: Any = ast.literal_eval(s)
    except Exception:  # noqa: BLE001 - the authors' bare except: anything unparsable stays text
        val = s
    if isinstance(val, str):
        val = re.sub(r"\s+", " ", re.sub(r"\s*,\s*", ",", val)).strip()
        val = _date(_location(val))
    return _numeric(_boolean(val))


def official_value(v: Any) -> Any:
    """A parameter value as the authors' `normalize_value` leaves it (compared with `==`)."""
    if v is None:
        return None
    out = _normalize_text(str(v).strip())
    if isinstance(out, float) and out != out:
        return float("nan")  # a fresh NaN each time, as theirs: `==` never short-cuts on identity
    return out


def _is_empty(v: Any) -> bool:
    return v is None or (isinstance(v, str) and v.strip() == "")


def official_params(params: Iterable[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Blank values dropped, names stripped, values normalised, stably sorted by name."""
    out = [(str(k).strip(), official_value(v)) for k, v in params if not _is_empty(v)]
    return sorted(out, key=lambda x: x[0])


def _gold_lists(g: GoldCall) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    got = getattr(g, "_official_lists", None)
    if got is None:
        got = (official_params(g.required), official_params(g.optional))
        object.__setattr__(g, "_official_lists", got)  # a pure cache on the frozen gold call
    return got


def official_pair_equal(pred: Any, gold: GoldCall) -> bool:
    """The authors' pair score. A native call (no required/optional split) has no parameter lists
    for them: its arguments sit under "parameters", which the comparison never reads."""
    gr, go = _gold_lists(gold)
    if not pred.split_known:
        return not gr and not go
    return official_params(pred.required) == gr and official_params(pred.optional) == go


def first_occurrence_pairs(pred_names: list[str], gold_names: list[str]) -> list[tuple[int, int]]:
    """(gold index, pred index): one pair per distinct shared name, each side's first occurrence."""
    first_p: dict[str, int] = {}
    for j, n in enumerate(pred_names):
        first_p.setdefault(n, j)
    seen: set[str] = set()
    pairs = []
    for i, n in enumerate(gold_names):
        if n in first_p and n not in seen:
            seen.add(n)
            pairs.append((i, first_p[n]))
    return pairs


def score_exact(task: Task, pred: list[Any], retrieved_raw: set[str] | None) -> dict[str, float]:
    """EM, Inclusion, Usage (this query's mean; NaN without a pair) and retrieval rate as the
    authors' scripts compute them, with the pair counts behind Usage."""
    gold_names = [c.raw_name or c.name for c in task.calls]
    pred_names = [p.raw_name for p in pred]
    if task.sequential:
        em = float(pred_names == gold_names)
    else:
        em = float(set(pred_names) == set(gold_names))
    inclusion = len(set(gold_names) & set(pred_names)) / max(1, len(gold_names))
    pairs = first_occurrence_pairs(pred_names, gold_names)
    equal = sum(official_pair_equal(pred[j], task.calls[i]) for i, j in pairs)
    rr = math.nan
    if retrieved_raw is not None:
        rr = len(set(gold_names) & retrieved_raw) / max(1, len(gold_names))
    return {
        "em": em,
        "inclusion": inclusion,
        "usage": equal / len(pairs) if pairs else math.nan,
        "usage_num": float(equal),
        "usage_den": float(len(pairs)),
        "retrieval_rate": rr,
        "_pairs": pairs,  # type: ignore[dict-item]  # consumed by score_episode (dep_sat)
    }


def official_record(pred: Any) -> dict[str, Any]:
    """A predicted call as the authors' scripts store it in "pred tool list" (the differential
    check feeds these to their functions): the agent's spelling of the name, the parameter lists of
    the text protocols, or a native call's arguments under "parameters"."""
    if not pred.split_known:
        merged = {str(k): v for k, v in (*pred.required, *pred.optional)}
        return {"tool name": pred.raw_name, "parameters": merged}
    return {
        "tool name": pred.raw_name,
        "required_parameters": [{"name": k, "value": v} for k, v in pred.required],
        "optional_parameters": [{"name": k, "value": v} for k, v in pred.optional],
    }
