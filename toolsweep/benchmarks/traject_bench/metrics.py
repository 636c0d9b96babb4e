"""TRAJECT-Bench's trajectory metrics (spec §4), computed from an episode's record and the gold task.

Scoring modes (`paper_compat`, see `paper_mode`):
- "off": EM over multisets for parallel tasks (ordered lists for sequential ones), Inclusion
  |mult(P) ∩ mult(G)| / |G|, Usage pooled over multiset-safe pairs (Σ scores / Σ pairs).
- "exact": EM, Inclusion, Usage and retrieval rate as the authors' code computes them (official.py).
- "corrected": the authors' metric shapes (set EM/Inclusion, first-occurrence pairs, Usage a mean
  over queries, retrieval rate over the gold list's length) with this project's readings: names
  whitespace-collapsed, a placeholder naming the source tool accepted, native calls' arguments
  compared, native-language country names aliased (docs/traject_bench.md has the table).
Both paper modes keep the multiset readings as `*_multiset` and `retrieval_rate_distinct`.

A pair scores 1 iff the normalised required and optional parameter lists are equal. `usage` accepts
a placeholder naming the tool the gold binds that parameter from (except in "exact"); `usage_strict`
does not. order_lcs, dep_sat: order and data-flow diagnostics for sequential tasks.

Traj-Satisfy proxy (0-10): a gold-informed stand-in for the paper's LLM judge. Acc is the LLM
judge's alone (`acc_llm`, judge.py): no deterministic check can tell an answer from a prose
restatement of the tool outputs (an answer that restates every output value is a correct answer
whenever the gold answer does the same). `answer_facts` is the deterministic diagnostic that stands
beside it and must not be read as Acc: the answer recalls >= 80% of the gold answer's tool facts,
>= 50% of its own numbers and ids (the query's left out) are the gold answer's, and it is not pasted
tool output.
"""

from __future__ import annotations

import functools
import math
import re
import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable

from toolsweep.benchmarks.traject_bench.data import Task, canon_name
from toolsweep.benchmarks.traject_bench.official import score_exact
from toolsweep.benchmarks.traject_bench.replay import (
    is_blank,
    names_tool,
    placeholder_target,
    value_key,
)

NAN = float("nan")
ACC_THRESHOLD = 0.8


@dataclass
class PredCall:
    """One predicted call. `split_known` is False for native function calls, whose arguments carry
    no required/optional split: their Usage compares the merged parameter set (`paper_compat:
    exact` scores them as the authors' scripts do, see official.py). `raw_name` keeps the name as
    the agent spelled it; `name` is its whitespace-collapsed identity."""

    name: str
    required: list[tuple[str, Any]] = field(default_factory=list)
    optional: list[tuple[str, Any]] = field(default_factory=list)
    split_known: bool = True
    raw_name: str = ""

    def __post_init__(self) -> None:
        if not self.raw_name:
            self.raw_name = str(self.name)
        self.name = canon_name(self.name)


def _clean(params: Iterable[tuple[str, Any]]) -> list[tuple[str, Any]]:
    return [(str(k), v) for k, v in params if not is_blank(v)]


Norm = tuple[tuple[str, Any, Any], ...]  # sorted (name, normalised key, raw value), blanks dropped


def _norm_list(params: Iterable[tuple[str, Any]]) -> Norm:
    items = [(str(k).strip(), value_key(v), v) for k, v in params if not is_blank(v)]
    if len({k for k, _, _ in items}) == len(items):
        items.sort(key=_name)  # names unique: their order decides
    else:
        items.sort(key=lambda x: (x[0], repr(x[1])))
    return tuple(items)


def _name(item: tuple[str, Any, Any]) -> str:
    return item[0]


def _forms(call: Any) -> tuple[Norm, Norm, Norm]:
    """(required, optional, merged) normalised parameter lists, computed once per call object."""
    got = getattr(call, "_norm_forms", None)
    if got is None:
        req, opt = _norm_list(call.required), _norm_list(call.optional)
        # Merged (for calls without a required/optional split): a repeated name keeps its last
        # value, as in the request the recording came from.
        last = {str(k): v for k, v in (*call.required, *call.optional)}
        got = (req, opt, _norm_list(last.items()))
        object.__setattr__(call, "_norm_forms", got)  # also on frozen gold calls: a pure cache
    return got


def _placeholder_ok(raw: Any, source: str | None) -> bool:
    if source is None:
        return False
    target = placeholder_target(raw)
    return target is not None and names_tool(target, source)


def value_equal(pred: Any, gold: Any, source: str | None = None) -> bool:
    """Normalised equality; with `source`, a placeholder naming that tool also counts as equal."""
    if _placeholder_ok(pred, source):
        return True
    return value_key(pred) == value_key(gold)


def _lists_equal(p: Norm, g: Norm, bound: dict[str, str] | None) -> bool:
    if len(p) != len(g):
        return False
    for (pk, pv, praw), (gk, gv, _) in zip(p, g):
        if pk != gk:
            return False
        if pv != gv and not (bound and _placeholder_ok(praw, bound.get(pk))):
            return False
    return True


def params_equal(pred: PredCall, gold: Any, bound: dict[str, str] | None = None) -> bool:
    """Spec §4.2 pair score: required and optional lists compared separately (merged for calls
    with no split). `bound` maps a gold parameter to the tool its value comes from."""
    pr, po, pm = _forms(pred)
    gr, go, gm = _forms(gold)
    if pred.split_known:
        return _lists_equal(pr, gr, bound) and _lists_equal(po, go, bound)
    return _lists_equal(pm, gm, bound)


def param_overlap(pred: PredCall, gold: Any, bound: dict[str, str] | None = None) -> float:
    """Share of parameter names (gold ∪ pred) whose values agree (Traj-Satisfy's Q)."""
    p = {k: (v, raw) for k, v, raw in _forms(pred)[2]}
    g = {k: v for k, v, _ in _forms(gold)[2]}
    names = set(p) | set(g)
    if not names:
        return 1.0
    ok = 0
    for k in names:
        if k in p and k in g and (p[k][0] == g[k] or _placeholder_ok(p[k][1], (bound or {}).get(k))):
            ok += 1
    return ok / len(names)


def bound_params(task: Task) -> dict[int, dict[str, str]]:
    """gold index -> {param: source tool name} from the task's gold bindings."""
    out: dict[int, dict[str, str]] = defaultdict(dict)
    for b in task.bindings:
        out[b.dst][b.param] = task.calls[b.src].name
    return dict(out)


def pair_calls(
    pred: list[PredCall], task: Task, *, lenient: bool, paper_compat: bool = False
) -> list[tuple[int, int]]:
    """(gold index, pred index) pairs of same-named calls.

    Multiset-safe (spec §4.2): per name, first greedily pair calls whose parameters are equal, then
    the remaining occurrences in order; min(count_G, count_P) pairs per name. `paper_compat`: one pair
    per distinct shared name, first occurrence each.
    """
    gold = task.calls
    g_by: dict[str, list[int]] = defaultdict(list)
    p_by: dict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(gold):
        g_by[c.name].append(i)
    for j, c in enumerate(pred):
        p_by[c.name].append(j)
    bound = bound_params(task) if lenient else {}
    pairs: list[tuple[int, int]] = []
    for name, gis in g_by.items():
        pjs = p_by.get(name)
        if not pjs:
            continue
        if paper_compat:
            pairs.append((gis[0], pjs[0]))
            continue
        free_p = list(pjs)
        free_g = []
        for gi in gis:
            hit = next((pj for pj in free_p if params_equal(pred[pj], gold[gi], bound.get(gi))), None)
            if hit is None:
                free_g.append(gi)
            else:
                pairs.append((gi, hit))
                free_p.remove(hit)
        pairs.extend(zip(free_g, free_p))
    return sorted(pairs)


def _lcs(a: list[str], b: list[str]) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


# --------------------------------------------------------------------------------------------------
# answer_facts: recall of the gold answer's tool-grounded facts in the final answer (not Acc).

_NUM = re.compile(r"(?<![\w.])[-+]?\d[\d,]*(?:\.\d+)?")
_TOKEN = re.compile(r"[\w:-]{4,}")
_WORD = re.compile(r"[a-z][a-z'-]{4,}")
_STOP = frozenset(
    "about above after again against because before being below between could during each "
    "found further having here information itself other should their there these those through "
    "under until which while would results returned provided following however tool tools "
    "query unfortunately available request data error".split()
)
MAX_FACTS = 20


def _number_tokens(text: str) -> list[tuple[str, str]]:
    """(raw token without thousands separators, canonical 2-decimal form) of the numbers in text."""
    return list(_number_tokens_of(text))


# An answer is read by several metrics (fact precision and recall each read its numbers and ids), and
# an answer that pastes every output is long: each reading is kept for the last few texts.
@functools.lru_cache(maxsize=64)
def _number_tokens_of(text: str) -> tuple[tuple[str, str], ...]:
    out = []
    for tok in _NUM.findall(text):
        t = tok.replace(",", "")
        digits = sum(map(str.isdigit, t))
        if digits < 3 and "." not in t:  # list numbering and small counts are not facts
            continue
        try:
            out.append((t, f"{round(float(t), 2):.2f}"))
        except ValueError:
            continue
    return tuple(out)


def _numbers(text: str) -> list[str]:
    return [canon for _, canon in _number_tokens(text)]


def _ids(text: str) -> list[str]:
    """Identifier-like tokens: mixed letters and digits (ids, codes, URLs' slugs)."""
    return list(_ids_of(text))


@functools.lru_cache(maxsize=64)
def _ids_of(text: str) -> tuple[str, ...]:
    return tuple(tok for tok in _TOKEN.findall(text.lower())
                 if any(map(str.isdigit, tok)) and any(map(str.isalpha, tok)))


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


def _ordered_unique(xs: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for x in xs:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


_DIGIT_RUN = re.compile(r"\d+(?:\.\d+)?")
_ANY_TOKEN = re.compile(r"[\w:-]+")


def _number_forms(raw: str, canon: str) -> set[str]:
    raw = raw.lstrip("+-")
    c = canon.lstrip("-")
    return {raw, c, c.rstrip("0").rstrip("."), repr(abs(float(c)))}


_facts_cache: dict[str, tuple[tuple[str, str], ...]] = {}
_facts_lock = threading.Lock()


def key_facts(task: Task) -> tuple[tuple[str, str], ...]:
    """(kind, value) facts of the gold answer that come from the tools: numbers and identifiers
    that appear in the gold outputs and not in the query; failing those, such content words;
    failing those, the answer's first content words.

    Candidates are taken from the (short) answer and looked up in the (long) outputs, so the cost
    does not grow with the size of the recorded outputs' vocabulary."""
    got = _facts_cache.get(task.task_id)
    if got is not None:
        return got
    ans, q = task.final_answer, task.query
    outs = "\n".join(c.output for c in task.calls)
    # Token sets of the (long) outputs are built once, with C-speed regexes; candidates come from
    # the (short) answer.
    out_nums = set(_DIGIT_RUN.findall(outs.replace(",", "")))
    out_toks = set(_ANY_TOKEN.findall(outs.lower()))
    q_nums = set(_DIGIT_RUN.findall(q.replace(",", "")))
    q_toks = set(_ANY_TOKEN.findall(q.lower()))
    facts: list[tuple[str, str]] = []
    seen: set[str] = set()
    for raw, canon in _number_tokens(ans):
        forms = _number_forms(raw, canon)
        if canon not in seen and forms & out_nums and not forms & q_nums:
            seen.add(canon)
            facts.append(("num", canon))
    for tok in _ordered_unique(_ids(ans)):
        if tok in out_toks and tok not in q_toks:
            facts.append(("id", tok))
    if not facts:
        facts = [("word", w) for w in _ordered_unique(_words(ans)) if w not in q_toks and w in out_toks][:10]
    if not facts:
        facts = [("word", w) for w in _ordered_unique(_words(ans))][:10]
    result = tuple(facts[:MAX_FACTS])
    with _facts_lock:
        _facts_cache[task.task_id] = result
    return result


_STRUCTURE = re.compile(r"\"\s*:|\{\s*\"|'\s*:\s")  # "key": / {" / 'key': markers of raw JSON or dicts
MIN_FACT_PRECISION = 0.5


def is_raw_output(task: Task, answer: str) -> bool:
    """Tool output pasted as the answer: several key/value markers, well beyond the gold answer's own.
    (98.6% of the release's pasted outputs have 3 or more; 1.4% of its gold answers do.)"""
    n = len(_STRUCTURE.findall(answer))
    return n >= 3 and n > 2 * len(_STRUCTURE.findall(task.final_answer)) + 2


def fact_precision(task: Task, answer: str) -> float:
    """Share of the answer's numbers and identifiers that the gold answer uses. Values the query
    itself contains are left out of both counts: restating the query neither helps nor hurts. An
    answer that restates every value the tools returned is mostly values the gold answer leaves out."""
    q = set(_numbers(task.query)) | set(_ids(task.query))
    tokens = [t for t in _numbers(answer) + _ids(answer) if t not in q]
    if not tokens:
        return 1.0
    known = set(_numbers(task.final_answer)) | set(_ids(task.final_answer))
    return sum(1 for t in tokens if t in known) / len(tokens)


def fact_recall(task: Task, answer: str) -> float:
    if answer == task.final_answer:
        return 1.0  # the facts are drawn from the gold answer itself (saves extracting them)
    facts = key_facts(task)
    if not facts:  # a gold answer with no content: both empty is a match
        return 1.0 if not answer.strip() else 0.0
    # Only the kinds the facts have are read from the answer: an answer that pastes every output is long,
    # and its words are read only for a gold answer whose facts are words.
    readers = {"num": _numbers, "id": _ids, "word": _words}
    have = {kind: set(readers[kind](answer)) for kind in {kind for kind, _ in facts}}
    return sum(1 for kind, v in facts if v in have[kind]) / len(facts)


# --------------------------------------------------------------------------------------------------


PAPER_MODES = ("off", "exact", "corrected")


def paper_mode(paper_compat: bool | str) -> str:
    """The scoring mode of a `paper_compat` option: "off" (this benchmark's multiset readings),
    "exact" (the authors' code, official.py; `true` means this) or "corrected" (the authors' metric
    shapes with the corrected readings of docs/traject_bench.md)."""
    if paper_compat is True:
        return "exact"
    if paper_compat is False or paper_compat is None:
        return "off"
    if paper_compat not in PAPER_MODES:
        raise ValueError(f"traject_bench: paper_compat must be one of {PAPER_MODES} (or true = 'exact', "
                         f"false = 'off'), not {paper_compat!r}")
    return paper_compat


def score_episode(
    task: Task,
    pred: list[PredCall],
    final_answer: str,
    retrieved: set[str] | None,
    *,
    paper_compat: bool | str = False,
    retrieved_raw: set[str] | None = None,
) -> dict[str, float]:
    """Every per-episode number of spec §4 (Usage as numerator/denominator pairs).

    `retrieved` (whitespace-collapsed names) / `retrieved_raw` (as the tool files spell them): the
    tools retrieved for the query, None where the paper defines no retrieval rate."""
    mode = paper_mode(paper_compat)
    gold_names = [c.name for c in task.calls]
    pred_names = [c.name for c in pred]
    g_mult, p_mult = Counter(gold_names), Counter(pred_names)
    n_gold = len(gold_names)
    if retrieved is not None and retrieved_raw is None:
        retrieved_raw = retrieved
    exact = score_exact(task, pred, retrieved_raw if retrieved is not None else None) if mode == "exact" else None

    if exact is not None:
        em, inclusion = exact["em"], exact["inclusion"]
    elif task.sequential:
        em = float(pred_names == gold_names)
    elif mode == "corrected":
        em = float(set(pred_names) == set(gold_names))
    else:
        em = float(p_mult == g_mult)
    if exact is None:
        if mode == "corrected":
            inclusion = len(set(pred_names) & set(gold_names)) / max(1, n_gold)
        else:
            inclusion = sum((p_mult & g_mult).values()) / max(1, n_gold)

    bound = bound_params(task)
    multiset_pairs = pair_calls(pred, task, lenient=True)
    if exact is not None:
        pairs = exact["_pairs"]
        usage_num = int(exact["usage_num"])
        strict_pairs, strict_num = pairs, usage_num  # the authors' comparison is literal already
    else:
        pairs = multiset_pairs if mode == "off" else pair_calls(pred, task, lenient=True, paper_compat=True)
        usage_num = sum(params_equal(pred[pj], task.calls[gi], bound.get(gi)) for gi, pj in pairs)
        if bound and any(
            placeholder_target(raw) is not None for c in pred for form in _forms(c)[:2] for _, _, raw in form
        ):
            strict_pairs = pair_calls(pred, task, lenient=False, paper_compat=mode == "corrected")
            strict_num = sum(params_equal(pred[pj], task.calls[gi]) for gi, pj in strict_pairs)
        else:  # without placeholders the two scorings coincide
            strict_pairs, strict_num = pairs, usage_num

    if task.sequential:
        order_lcs = _lcs(pred_names, gold_names) / max(1, n_gold)
        # dep_sat (a diagnostic of this benchmark) pairs calls as the mode's Usage does: "exact" with
        # the authors' first-occurrence pairs (an oracle that repeats a tool misses bindings), the
        # other modes with multiset pairs.
        dep_sat = _dep_sat(task, pred, pairs if exact is not None else multiset_pairs)
    else:
        order_lcs = dep_sat = NAN

    gold_set = set(gold_names)
    r = (sum(1 for n in pred_names if n in gold_set) / len(pred_names)) if pred_names else 0.0
    q = (
        sum(param_overlap(pred[pj], task.calls[gi], bound.get(gi)) for gi, pj in multiset_pairs)
        / len(multiset_pairs)
        if multiset_pairs
        else 0.0
    )
    c = sum((p_mult & g_mult).values()) / max(1, n_gold)
    proxy = 3 * r + 4 * q + 3 * c

    answer = final_answer or ""
    recall = fact_recall(task, answer)
    precision = 1.0 if answer == task.final_answer else fact_precision(task, answer)
    answered = recall >= ACC_THRESHOLD and precision >= MIN_FACT_PRECISION and not is_raw_output(task, answer)
    if retrieved is None or not gold_set:
        rr = NAN
    elif exact is not None:
        rr = exact["retrieval_rate"]
    elif mode == "corrected":  # the authors' formula: distinct gold tools retrieved / gold list length
        rr = len(gold_set & retrieved) / n_gold
    else:
        rr = len(gold_set & retrieved) / len(gold_set)
    out = {
        "em": em,
        "inclusion": inclusion,
        "usage_num": float(usage_num),
        "usage_den": float(len(pairs)),
        "usage_strict_num": float(strict_num),
        "usage_strict_den": float(len(strict_pairs)),
        "order_lcs": order_lcs,
        "dep_sat": dep_sat,
        "traj_satisfy_proxy": proxy,
        "fact_recall": recall,
        "fact_precision": precision,
        "answer_facts": float(answered),
        "retrieval_rate": rr,
        "n_pred_calls": float(len(pred)),
        "n_gold_calls": float(n_gold),
    }
    if mode != "off":
        # The authors' Usage is a mean over queries of each query's share of equal pairs; a query
        # with no shared tool is left out (their scripts skip an empty list).
        out["usage"] = usage_num / len(pairs) if pairs else NAN
        # this benchmark's multiset readings, under their own names
        ms = score_episode(task, pred, final_answer, retrieved, paper_compat="off")
        out.update({"em_multiset": ms["em"], "inclusion_multiset": ms["inclusion"],
                    "usage_multiset_num": ms["usage_num"], "usage_multiset_den": ms["usage_den"]})
        out["retrieval_rate_distinct"] = ms["retrieval_rate"]
    return out


def _dep_sat(task: Task, pred: list[PredCall], pairs: list[tuple[int, int]]) -> float:
    """Share of gold bindings (src -> dst, param) whose paired calls run in order with the gold value
    (or a placeholder naming the source tool) in the bound parameter."""
    if not task.bindings:
        return NAN
    at = dict(pairs)
    ok = 0
    for b in task.bindings:
        pi, pj = at.get(b.src), at.get(b.dst)
        if pi is None or pj is None or not pi < pj:
            continue
        gold_v = task.calls[b.dst].args().get(b.param)
        pv = dict(_clean(pred[pj].required + pred[pj].optional)).get(b.param)
        if pv is not None and value_equal(pv, gold_v, task.calls[b.src].name):
            ok += 1
    return ok / len(task.bindings)


def is_nan(x: float) -> bool:
    return isinstance(x, float) and math.isnan(x)
