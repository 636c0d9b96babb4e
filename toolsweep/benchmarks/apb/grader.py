"""The deterministic grader (`grader_version=apb-rule-5`, spec §6): output parsing, holistic
alignment by max-weight matching, step-wise checks, the E1–E6 flags, the 0–1 plan grade, the
5-way Tool-Broken classifier, the unsolvable refusal judge and plan cost.

Everything works on a *view* of a case: `{"nodes", "order", "goal", "tools" (visible), "constraints",
"secrets"}`. Nothing here raises on model output: any text is graded.
"""

from __future__ import annotations

import collections
import functools
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from toolsweep.evaluator import verdicts
from toolsweep.benchmarks.apb import plans
from toolsweep.benchmarks.apb.tools import FINISH, VAGUE

GRADER_VERSION = "apb-rule-5"
FLAGS = ("E1", "E2", "E3", "E4", "E5", "E6")
EPS = 1e-3

# ----------------------------------------------------------------------------- parsing (§5)

_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*$", re.M)
_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)


_MAX_RETRY_DEPTH = 32  # how many levels into a span that fails to decode we look for an inner value


def _bracket_spans(text: str) -> tuple[list[tuple[int, int]], dict[int, list[tuple[int, int]]]]:
    """Closed bracket spans in one linear pass: the outermost ones (whose parent is absent or never
    closes) in order, and each span's direct children. Quotes count only inside brackets, so prose
    apostrophes and quotes outside JSON do not matter."""
    stack: list[int] = []
    spans: list[tuple[int, int, int | None]] = []
    in_str = esc = False
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = bool(stack)
        elif ch in "{[":
            stack.append(i)
        elif ch in "}]":
            want = "{" if ch == "}" else "["
            while stack and text[stack[-1]] != want:
                stack.pop()  # an opener closed by the wrong bracket never closes
            if stack:
                start = stack.pop()
                spans.append((start, i + 1, stack[-1] if stack else None))
    closed = {start for start, _, _ in spans}
    children: dict[int, list[tuple[int, int]]] = {}
    roots = []
    for start, end, parent in sorted(spans):
        if parent is not None and parent in closed:
            children.setdefault(parent, []).append((start, end))
        else:
            roots.append((start, end))
    return roots, children


def extract_json(text: str | None) -> tuple[Any, bool, bool]:
    """Strip ``` fences and take the first balanced JSON value. Returns (value, ok, extra_text).

    Linear in the reply and never recursive on it: only closed bracket spans are decoded, outermost
    first; a span that does not decode is searched for an inner value at most `_MAX_RETRY_DEPTH`
    levels down, and a value nested too deeply for the decoder is not a value.
    """
    value, ok, prose = extract_with_prose(text)
    return value, ok, bool(prose.strip())


def extract_with_prose(text: str | None) -> tuple[Any, bool, str]:
    """`extract_json`, returning the prose around the value instead of a flag: what the reply says
    outside its JSON (the whole cleaned reply when there is no value)."""
    if not text:
        return None, False, ""
    cleaned = _cleaned(text)
    span = _first_value_span(cleaned)
    if span is None:
        return None, False, cleaned
    start, end = span
    value = json.JSONDecoder().raw_decode(cleaned[start:end])[0]  # a fresh value: the caller may change it
    return value, True, cleaned[:start] + "\n" + cleaned[end:]


@functools.lru_cache(maxsize=32)
def _cleaned(text: str) -> str:
    """A reply without fences and reasoning models' <think> blocks (not the answer). Kept for the last few
    replies, like the value's span: the regular expressions visit every character of a reply that can hold
    tens of thousands, once per grader that reads it."""
    return _FENCE.sub("", _THINK.sub("", text))


@functools.lru_cache(maxsize=32)
def _first_value_span(cleaned: str) -> tuple[int, int] | None:
    """Where the first JSON value of a cleaned reply lies, or None. Kept for the last few replies: one
    reply is read by several graders (the step, the final grade, the refusal reading), and finding the
    value is a pass in Python over every bracket of a reply that can hold tens of thousands."""
    decoder = json.JSONDecoder()
    roots, children = _bracket_spans(cleaned)
    queue = collections.deque((span, 0) for span in roots)
    while queue:
        (start, end), depth = queue.popleft()
        try:
            _, stop = decoder.raw_decode(cleaned[start:end])
        except (ValueError, RecursionError):
            if depth < _MAX_RETRY_DEPTH:
                queue.extendleft((c, depth + 1) for c in reversed(children.get(start, [])))
            continue
        return start, start + stop
    return None


def _norm(s: Any) -> str:
    if not isinstance(s, str):
        s = json.dumps(s, ensure_ascii=False) if isinstance(s, (list, dict)) else str(s)
    return " ".join(s.casefold().split())


_NUM = re.compile(r"^[\s$€£]*(-?\d+(?:\.\d+)?)\s*(%?)\s*$")


def _as_number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        m = _NUM.match(v.replace(",", ""))
        if m:
            x = float(m.group(1))
            return x / 100 if m.group(2) else x
    return None


def _num_eq(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


def const_ok(pred: Any, spec: dict[str, Any]) -> bool:
    """Normalized comparison: casefold/whitespace, numbers within rel 1e-6 ("10%" == 0.10), `contains`."""
    v = spec["value"]
    if spec.get("match") == "range":
        x = _as_number(pred)
        return x is not None and spec["min"] - 1e-9 <= x <= spec["max"] + 1e-9
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        x = _as_number(pred)
        return x is not None and _num_eq(x, float(v))
    a, b = _norm(pred), _norm(v)
    if spec.get("match") == "contains" and len(a) >= 3 and len(b) >= 3:
        return b in a or a in b
    return a == b


def observed_mismatch_flag(value: Any, context: str) -> str:
    """A step-wise value that is not the observed one: E4 when it is a literal (two characters or more)
    taken from elsewhere in the trajectory (J2's E4: "ignores available data"), else E6 (J2's E6:
    "uses results not yet available" / fabricated). One character occurs anywhere, so it proves nothing."""
    lit = _norm(value)
    return "E4" if len(lit) >= 2 and lit in context else "E6"


def is_vague(pred: Any, param: str) -> bool:
    s = _norm(pred)
    return s in VAGUE or s == param.casefold()


def contains_observed(pred: Any, observed: Any) -> bool:
    """A step-wise value for an observed source must contain the observed value (every list element)."""
    if isinstance(observed, list):
        return all(contains_observed(pred, o) for o in observed)
    if isinstance(pred, list):
        return any(contains_observed(p, observed) for p in pred)
    x, y = _as_number(pred), _as_number(observed)
    if x is not None and y is not None:
        return _num_eq(x, y)
    return _norm(observed) in _norm(pred)


_PLACEHOLDER = re.compile(r"\$|\{|result|output|from step|previous", re.I)
_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_STEPS = re.compile(r"\bsteps?\s*#?\s*(\d+(?:\s*(?:,|and|&|to|-)\s*\d+)*)", re.I)
_HASH = re.compile(r"#\s*(\d+)")
_GENERIC = re.compile(r"previous|prior|earlier|above|preceding|result of|output of|returned", re.I)
_REFUSE_WORDS = re.compile(r"REJECT|unable|cannot|can['’]t|give_up|give up|not possible", re.I)
_STATUS_REFUSALS = ("REJECT", "CLARIFY", "NEED_INFO")


# Keys whose values are not the answer's own words: names, statuses, and the arguments a tool is given (a
# message argument "I cannot attend" is the task's content, not the agent declining).
_NOT_WORDS = frozenset({"name", "tool", "tool_name", "type", "role", "status", "id", "arguments",
                        "parameter_description", "parameters", "args", "input"})


def said_in_fields(obj: Any) -> list[str]:
    """Every string an answer's JSON holds in its own words, at any depth: `plan`, `reason`, `thought`, a
    step's `description` or any other field, but no tool name, status or argument value. A refusal is a
    refusal wherever it stands: "I cannot do this" in `plan` beside a full chain still says so."""
    out: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            if value.strip():
                out.append(value)
        elif isinstance(value, dict):
            for key, inner in value.items():
                if str(key).lower() not in _NOT_WORDS:
                    walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    walk(obj)
    return out


def text_refuses(text: str) -> bool:
    """§6.4's raw-text rule for a reply that holds no JSON, read as the paper's judges read it (J8: "Explicit
    refusal or clarification request"): a stated inability or refusal of the task, or a request for
    the missing input, read by sentence structure (`verdicts.refuses`), with no tool_chain-like content."""
    return "tool_chain" not in text and verdicts.refuses(text)


def states_refusal(prose: str) -> bool:
    """Whether prose around a JSON answer states a refusal of the task (J5 Category 4: "directly stated
    that it cannot perform the task"; J8: an explicit refusal), whatever JSON follows. Narrower than
    `text_refuses`: around a plan a question is not a refusal, and commentary on a sub-step ("I cannot
    read the image myself, so I use OCR") is not one either (`verdicts.states_inability`)."""
    return verdicts.states_inability(prose)


@functools.lru_cache(maxsize=65536)
def _tokens(text: str, chain_names: frozenset[str]) -> tuple[frozenset[str], frozenset[int], frozenset[str], bool]:
    """How a dynamic value names its sources: `$Tool`, step numbers, plain tool names, generic phrases."""
    return (frozenset(_DOLLAR.findall(text)), frozenset(step_mentions(text)),
            frozenset(n for n in chain_names if len(n) >= 3 and n in text), bool(_GENERIC.search(text)))


def step_mentions(text: str) -> set[int]:
    out: set[int] = set()
    for m in _STEPS.finditer(text):
        out.update(int(x) for x in re.findall(r"\d+", m.group(1)))
    out.update(int(x) for x in _HASH.findall(text))
    return out


# ----------------------------------------------------------------------------- results

@dataclass
class PlanResult:
    """One graded answer. `flags` holds E1..E6; `u` counts offending items (§6.2)."""

    flags: set[str] = field(default_factory=set)
    grade: float = 0.0
    coverage: float = 0.0
    u: int = 0
    parsed: bool = True
    refused: bool = False
    false_refusal: bool = False
    ext_use: int = 0
    cost: float = 0.0
    extra_text: bool = False
    notes: list[str] = field(default_factory=list)
    trivial_only_e5: bool = False
    no_action: bool = False

    @property
    def correct(self) -> bool:
        return self.parsed and not self.flags and not self.refused

    def add(self, flag: str, note: str) -> None:
        self.flags.add(flag)
        self.u += 1
        self.notes.append(f"{flag}: {note}")

    def metrics(self) -> dict[str, float]:
        out = {"correct": float(self.correct), "grade": self.grade, "coverage": self.coverage}
        for f in FLAGS:
            out[f] = float(f in self.flags)
        return out


def misses_goal(goal_satisfied: bool, c: float) -> bool:
    """§6.2's E1 from coverage: the plan neither reaches the goal node nor covers half of the required
    nodes (J4's E1_GOAL_UNDERSTANDING: "Fundamentally misunderstands the user query's core intent").
    Exactly half covered is not E1."""
    return not goal_satisfied and c < 0.5


def holistic_grade(flags: set[str], c: float, u: int, goal_satisfied: bool) -> float:
    """§6.3 holistic rubric as a total function of (flags, coverage, offending items), from J4's scale
    (Fig. 35): 0.8 "Almost perfect ... a minor, non-critical error. Core logic is 90% correct" (one
    offending item, no E1/E6, c >= 0.9, the goal reached); 0.6 "Captures the main logical flow but
    misses or flaws one key component" (no E1, c >= 0.7); 0.4 "Identifies some correct steps but the
    overall sequence is wrong" (no E1, c >= 0.4); 0.2 "might get one simple step right" (c > 0); 0.0
    "Zero logical merit". Each bound is inclusive as written; the tests pin every one of them."""
    if not flags:
        return 1.0
    if "E1" not in flags and "E6" not in flags and u == 1 and c >= 0.9 and goal_satisfied:
        return 0.8
    if "E1" not in flags and c >= 0.7:
        return 0.6
    if "E1" not in flags and c >= 0.4:
        return 0.4
    if c > 0:
        return 0.2
    return 0.0


def stepwise_grade(flags: set[str], trivial_only: bool, no_action: bool = False) -> float:
    """§6.3 step-wise rubric (Fig. 33) as a total function."""
    if no_action:
        return 0.0
    if not flags:
        return 1.0
    if flags == {"E5"} and trivial_only:
        return 0.8
    if flags in ({"E4"}, {"E5"}):
        return 0.6
    if flags in ({"E4", "E5"}, {"E2"}):
        return 0.4
    major = flags & {"E1", "E3", "E6"}
    if len(major) >= 2:
        return 0.0
    return 0.2


# ----------------------------------------------------------------------------- the grader

class PlanGrader:
    """Grades answers against one case view."""

    def __init__(self, view: dict[str, Any]) -> None:
        self.view = view
        self.nodes: list[dict[str, Any]] = view["nodes"]
        self.nmap = plans.node_map(self.nodes)
        self.order: list[str] = view["order"]
        self.rank = {nid: i for i, nid in enumerate(self.order)}
        self.goal: str = view["goal"]
        self.tools = {t["name"]: t for t in view["tools"]}
        self.constraints: list[dict[str, Any]] = view.get("constraints", [])
        self.secrets = list(view.get("secrets", {}).values())
        self.constrained = {(c["spec"]["node"], c["spec"]["param"]) for c in self.constraints
                            if c["type"] in ("param_equals", "param_range")}
        self.forbidden = {t for c in self.constraints if c["type"] == "forbid_tool" for t in c["spec"]["tools"]}
        self.forbidden_caps = {c["spec"]["cap"] for c in self.constraints if c["type"] == "forbid_capability"}
        self.order_rules = [(c["spec"]["before"], c["spec"]["after"], c["text"]) for c in self.constraints
                            if c["type"] == "order"]
        self.max_calls = {c["spec"]["tool"]: (c["spec"]["n"], c["text"]) for c in self.constraints
                          if c["type"] == "max_calls"}
        self.children = {n["id"]: [m["id"] for m in self.nodes if n["id"] in m["deps"]] for n in self.nodes}
        # which visible tool names can stand for which node
        self.names_for: dict[str, set[str]] = {}
        for n in self.nodes:
            names = {n["tool"], *n["alt_tools"]}
            for t in view["tools"]:
                covers = t["hidden"].get("covers")
                if covers and n["id"] in covers:
                    names.add(t["name"])
            self.names_for[n["id"]] = {x for x in names if x in self.tools}

    # -- helpers
    def kind(self, name: str) -> str:
        t = self.tools.get(name)
        if t is None:
            return "unknown"
        h = t["hidden"]
        if h["kind"] == "trap" and h.get("trap") == "off_target":
            return "off_target"
        return h["kind"]

    def is_secret_literal(self, pred: Any) -> bool:
        if isinstance(pred, (dict, list)) or pred is None:
            return False
        x = _as_number(pred)
        for s in self.secrets:
            if isinstance(s, list):
                continue
            y = _as_number(s)
            if x is not None and y is not None and _num_eq(x, y):
                return True
            if isinstance(s, str) and len(s) >= 3 and _norm(s) == _norm(pred):
                return True
        return False

    def cost(self, names: list[str]) -> float:
        return float(sum((self.tools[n]["hidden"].get("cost") or 0) for n in names if n in self.tools))

    # ------------------------------------------------------------------------- holistic

    @staticmethod
    def parse_chain(obj: Any) -> tuple[list[tuple[str, dict[str, Any]]] | None, list[str]]:
        """(calls, problems) from a P4 object; accepts parameter_description/arguments/parameters/inline."""
        problems = []
        if not isinstance(obj, dict):
            return None, ["answer is not a JSON object"]
        if "plan" not in obj:
            problems.append("missing 'plan'")
        chain = obj.get("tool_chain")
        if not isinstance(chain, list):
            return None, problems + ["missing 'tool_chain'"]
        calls = []
        for step in chain:
            if not isinstance(step, dict):
                problems.append("a tool_chain entry is not an object")
                continue
            name = step.get("name") or step.get("tool") or step.get("tool_name")
            if not isinstance(name, str):
                problems.append("a tool_chain entry has no name")
                continue
            args = None
            for key in ("parameter_description", "arguments", "parameters", "args"):
                if isinstance(step.get(key), dict):
                    args = step[key]
                    break
                if isinstance(step.get(key), str):
                    try:
                        parsed = json.loads(step[key])
                        if isinstance(parsed, dict):
                            args = parsed
                            break
                    except ValueError:
                        pass
            if args is None:
                args = {k: v for k, v in step.items() if k not in ("name", "tool", "tool_name", "reason", "step", "thought", "id")}
            calls.append((name, args))
        return calls, problems

    def _ref_issue(self, value: Any, srcs: list[str], pos: int, calls: list[tuple[str, dict[str, Any]]],
                   aligned: dict[str, int] | None, slot_call: dict[int, set[str]] | None) -> str | None:
        """None if a holistic dynamic value names its sources properly, else the flag it earns."""
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        chain_names = frozenset(n for n, _ in calls)
        dollars, steps, plain, generic = _tokens(text, chain_names)
        unresolved = []
        later = False
        for s in srcs:
            names = self.names_for[s]
            hit = bool(names & dollars & chain_names) or bool(names & plain)
            for i in steps:
                if 1 <= i <= len(calls):
                    if aligned is None:
                        hit = hit or calls[i - 1][0] in names
                    else:
                        hit = hit or (slot_call is not None and s in slot_call.get(i - 1, set()))
            if not hit and generic:
                if aligned is None or (s in aligned and aligned[s] < pos):
                    hit = True
            if not hit:
                unresolved.append(s)
            elif aligned is not None and s in aligned and aligned[s] >= pos and not (
                    slot_call is not None and s in slot_call.get(pos, set())):
                later = True
        if not unresolved:
            return "E4" if later else None
        if any(d not in chain_names for d in dollars):
            return "E6"
        other_named = (dollars | plain) & chain_names or any(1 <= i <= len(calls) for i in steps)
        if other_named:
            return "E4"
        if self.is_secret_literal(value):
            return "E6"
        return "E5"

    def _arg_issues(self, args: dict[str, Any], node: dict[str, Any], param_map: dict[str, list[str]] | None,
                    pos: int, calls: list[tuple[str, dict[str, Any]]], aligned: dict[str, int] | None,
                    slot_call: dict[int, set[str]] | None, covered_here: set[str]) -> list[tuple[str, str]]:
        issues = []
        lower = {k.casefold(): v for k, v in args.items()} if isinstance(args, dict) else {}
        if param_map is None:
            wanted = {p: p for p in node["args"]}
        else:  # composite or substitute: its own parameter names map onto (node, param)
            wanted = {q: p for p, (nid, q) in param_map.items() if nid == node["id"]}
        for q, spec in node["args"].items():
            if param_map is not None and q not in wanted:
                continue  # an internal input of a composite
            p = wanted[q]
            srcs = plans.spec_sources(spec)
            if srcs and all(s in covered_here for s in srcs):
                continue
            if p in args:
                val = args[p]
            elif p.casefold() in lower:
                val = lower[p.casefold()]
            else:
                if not spec.get("optional"):
                    issues.append(("E5", f"{node['tool']}: missing argument '{p}'"))
                continue
            kind = spec["kind"]
            if kind == "const":
                if not const_ok(val, spec):
                    if spec.get("goal_slot"):
                        issues.append(("E1", f"{node['tool']}: '{p}' targets a different entity"))
                    elif (node["id"], q) in self.constrained:
                        issues.append(("E3", f"{node['tool']}: '{p}' violates a stated constraint"))
                    else:
                        issues.append(("E5", f"{node['tool']}: wrong value for '{p}'"))
            elif kind == "keywords":
                if not all(t.casefold() in _norm(val) for t in spec["all"]):
                    issues.append(("E5", f"{node['tool']}: '{p}' misses required terms"))
            elif kind == "one_of":
                if _norm(val) not in {_norm(o) for o in spec["options"]}:
                    issues.append(("E5", f"{node['tool']}: '{p}' is out of its enum"))
            elif kind == "free":
                if is_vague(val, p):
                    issues.append(("E5", f"{node['tool']}: '{p}' is vague"))
            else:
                flag = self._ref_issue(val, srcs, pos, calls, aligned, slot_call)
                if flag:
                    issues.append((flag, f"{node['tool']}: '{p}' does not take its input from the right step"))
        return issues

    def _slot_ctx(self, slots, slot_of):
        aligned = {nid: slots[si][0] for nid, si in slot_of.items()}
        slot_call: dict[int, set[str]] = {}
        for nid, pos in aligned.items():
            slot_call.setdefault(pos, set()).add(nid)
        return aligned, slot_call

    def _pair_issues(self, slots, calls, si, n, aligned, slot_call):
        pos, name, args, cov = slots[si]
        pmap = self.tools[name]["hidden"].get("param_map") if cov is not None else None
        if cov is None:
            covered_here: set[str] = set()
        elif slot_call is None:
            covered_here = set(self.tools[name]["hidden"].get("covers") or [])
        else:
            covered_here = slot_call.get(pos, set())
        return self._arg_issues(args, n, pmap, pos, calls, aligned, slot_call, covered_here), covered_here

    def _chronological(self, slots, calls) -> dict[str, int]:
        """Walk the chain in order; each call performs a node it can do, preferring ready ones whose
        arguments check out against what was aligned so far."""
        slot_of: dict[str, int] = {}
        for si, (pos, name, args, cov) in enumerate(slots):
            cands = [n for n in self.nodes if n["id"] not in slot_of and name in self.names_for[n["id"]]
                     and (cov is None or cov == n["id"])]
            if not cands:
                continue
            aligned, slot_call = self._slot_ctx(slots, slot_of)
            if cov is not None:
                slot_call.setdefault(pos, set()).update(self.tools[name]["hidden"].get("covers") or [])

            def key(n):
                ready = all(d in aligned and (aligned[d] < pos or d in slot_call.get(pos, set())) for d in n["deps"])
                iss, _ = self._pair_issues(slots, calls, si, n, aligned, slot_call)
                # `$Tool.field` reads as the most recent call of that tool: prefer the freshest inputs
                recency = max((aligned[d] for d in n["deps"] if d in aligned), default=-1)
                return (0 if ready else 1, len(iss), -recency, self.rank[n["id"]])

            slot_of[min(cands, key=key)["id"]] = si
        return slot_of

    def _resolved(self, slots, calls) -> dict[str, int]:
        """The literal reading: each reference names the calls it says (`$Tool.field`: the most recent
        call of Tool before this one, or every earlier call of it for a list input; "step i": call i),
        and a call performs the node whose inputs are exactly those calls and whose arguments check
        out. Fan-out plans that repeat identical chains per entity have one meaning under it."""
        chain_names = frozenset(n for n, _ in calls)
        slot_of: dict[str, int] = {}
        for si, (pos, name, args, cov) in enumerate(slots):
            if cov is not None or not isinstance(args, dict):
                continue
            lower = {str(k).casefold(): v for k, v in args.items()}
            aligned, slot_call = self._slot_ctx(slots, slot_of)

            def named(value: Any, many: bool) -> set[int]:
                dollars, steps, _, _ = _tokens(str(value), chain_names)
                out = {s - 1 for s in steps if 1 <= s <= pos}
                for d in dollars:
                    earlier = [i for i, (n, _) in enumerate(calls[:pos]) if n == d]
                    out.update(earlier if many else earlier[-1:])
                return out

            def fits(n: dict[str, Any]) -> bool:
                for q, spec in n["args"].items():
                    srcs = plans.spec_sources(spec)
                    if not srcs:
                        continue
                    if any(s not in aligned for s in srcs) or q.casefold() not in lower:
                        return False
                    if named(lower[q.casefold()], len(srcs) > 1) != {aligned[s] for s in srcs}:
                        return False
                return not self._pair_issues(slots, calls, si, n, aligned, slot_call)[0]

            good = [n for n in self.nodes if n["id"] not in slot_of and name in self.names_for[n["id"]] and fits(n)]
            if good:
                slot_of[min(good, key=lambda n: self.rank[n["id"]])["id"]] = si
        return slot_of

    def _matching(self, slots, calls, prev: dict[str, int]) -> dict[str, int]:
        """Max-weight bipartite matching (§6.2), argument checks taken against a previous reading."""
        aligned, slot_call = self._slot_ctx(slots, prev)
        ncalls = max(1, len(calls))
        pairs: dict[tuple[int, int], float] = {}
        for si, (pos, name, args, cov) in enumerate(slots):
            for ni, n in enumerate(self.nodes):
                if (cov is not None and cov != n["id"]) or name not in self.names_for[n["id"]]:
                    continue
                iss, _ = self._pair_issues(slots, calls, si, n, aligned, slot_call)
                tie = abs(pos / ncalls - self.rank[n["id"]] / max(1, len(self.nodes)))
                w = (2.0 if not iss else 1.0) - EPS * tie
                w -= 0.25 * sum(1 for d in n["deps"] if d in aligned and aligned[d] > pos)
                w -= 0.25 * sum(1 for c in self.children[n["id"]] if c in aligned and aligned[c] < pos)
                pairs[(si, ni)] = w
        return {self.nodes[ni]["id"]: si for si, ni in _max_weight_matching(len(slots), len(self.nodes), pairs)}

    def _score(self, slots, calls, slot_of):
        """(issues, satisfied nodes, aligned positions, order violations) of one reading."""
        aligned, slot_call = self._slot_ctx(slots, slot_of)
        issues_all: list[tuple[str, str]] = []
        satisfied = set()
        order_bad = 0
        for n in self.nodes:
            nid = n["id"]
            if nid not in slot_of:
                continue
            pos = aligned[nid]
            issues, covered_here = self._pair_issues(slots, calls, slot_of[nid], n, aligned, slot_call)
            needs = self.tools[slots[slot_of[nid]][1]]["hidden"].get("requires")
            if needs and not any(name == needs for name, _ in calls[:pos]):
                issues = issues + [("E2", f"'{needs}' must run before '{slots[slot_of[nid]][1]}'")]
            issues_all.extend(issues)
            order_ok = True
            for d in n["deps"]:
                if d in aligned and (aligned[d] > pos or (aligned[d] == pos and d not in covered_here)):
                    order_ok = False
                    order_bad += 1
                    issues_all.append(("E4", f"'{n['tool']}' comes before the step it depends on"))
            if not issues and order_ok:
                satisfied.add(nid)
        unaligned = sum(1 for n in self.nodes if n["required"] and n["id"] not in slot_of)
        return issues_all, satisfied, aligned, unaligned

    def holistic(self, text: str | None) -> PlanResult:
        """§6.2 holistic grading of a P4 answer."""
        res = PlanResult()
        obj, ok, prose = extract_with_prose(text)
        res.extra_text = bool(prose.strip())
        if self.refusal(obj, ok, text or "", prose):
            res.parsed = ok
            res.refused = res.false_refusal = True
            res.add("E2", "refused a solvable query")
            res.grade = 0.0
            return res
        if not ok:
            res.parsed = False
            res.add("E3", "unparsable output")
            res.grade = 0.0
            return res
        calls, problems = self.parse_chain(obj)
        for pr in problems:
            res.add("E3", pr)
        calls = calls or []
        if not [c for c in calls if c[0] != FINISH]:
            res.add("E3", "no tool call in a well-formed tool_chain entry")
            res.grade = 0.0
            return res
        # classify calls
        slots: list[tuple[int, str, dict[str, Any], str | None]] = []  # (pos, name, args, covered node or None)
        names_called = []
        for pos, (name, args) in enumerate(calls):
            if name == FINISH:
                continue
            kind = self.kind(name)
            if kind == "unknown":
                res.add("E6", f"tool '{name}' is not in the tool list")
                continue
            names_called.append(name)
            if kind == "distractor":
                res.ext_use += 1
                res.add("E5", f"used the extraneous tool '{name}'")
                continue
            if kind == "off_target":
                res.add("E5", f"'{name}' cannot provide what the step needs")
                continue
            covers = self.tools[name]["hidden"].get("covers")
            if covers:
                for nid in covers:
                    slots.append((pos, name, args, nid))
            else:
                slots.append((pos, name, args, None))
        res.cost = self.cost(names_called)
        nodes = self.nodes
        # Several readings of which call performs which node: the chronological one (each call takes the
        # earliest-ready node it can do) and max-weight matchings refined against it. Fan-out plans that
        # repeat a tool per entity with `$Tool.field` refs are ambiguous; the reading with the fewest
        # offending items is the plan's meaning.
        readings = [self._chronological(slots, calls)]
        prev = readings[0]
        first = self._score(slots, calls, prev)
        for _ in range(0 if not first[0] and not first[3] else 4):  # a clean reading cannot be improved
            nxt = self._matching(slots, calls, prev)
            if nxt in readings:
                break
            readings.append(nxt)
            prev = nxt
        if first[0] or first[3]:
            # the literal reading counts only when it makes the whole plan clean: it rescues a correct
            # plan whose references the other readings misassign, never hides a missing step
            literal = self._resolved(slots, calls)
            required = {n["id"] for n in nodes if n["required"]}
            if literal not in readings and required <= set(literal):
                scored = self._score(slots, calls, literal)
                if not scored[0] and not scored[3]:
                    readings.append(literal)
        best = None
        for slot_of in readings:
            scored = self._score(slots, calls, slot_of)
            key = (len(scored[0]) + scored[3], len({f for f, _ in scored[0]}), -len(scored[1]))
            if best is None or key < best[0]:
                best = (key, slot_of, scored)
        assert best is not None
        slot_of = best[1]
        issues_all, satisfied, aligned, _ = best[2]
        for flag, note in issues_all:
            res.add(flag, note)
        for n in nodes:
            if n["id"] not in aligned and n["required"]:
                res.add("E2", f"no step performs: {n['nl']}")
        self._unmatched_calls(res, slots, slot_of, aligned)
        required = [n["id"] for n in nodes if n["required"]]
        res.coverage = len(satisfied & set(required)) / max(1, len(required))
        goal_sat = self.goal in satisfied
        if misses_goal(goal_sat, res.coverage):
            res.add("E1", "the plan does not reach the goal")
        # constraints
        for c in self.constraints:
            if c["type"] == "forbid_tool" and any(n in c["spec"]["tools"] for n, _ in calls):
                res.add("E3", c["text"])
            elif c["type"] == "forbid_capability" and any(
                    c["spec"]["cap"] in self.tools.get(n, {"hidden": {"capabilities": []}})["hidden"]["capabilities"]
                    for n, _ in calls):
                res.add("E3", c["text"])
            elif c["type"] == "final_node":
                target = c["spec"]["node"]
                inv = [i for i, (n, _) in enumerate(calls) if n != FINISH and n in self.tools]
                if target in aligned and inv and aligned[target] != inv[-1]:
                    res.add("E3", c["text"])
            elif c["type"] == "order":
                a, b = c["spec"]["before"], c["spec"]["after"]
                if a in aligned and b in aligned and aligned[a] >= aligned[b]:
                    res.add("E3", c["text"])
            elif c["type"] == "max_calls":
                if sum(1 for n, _ in calls if n == c["spec"]["tool"]) > c["spec"]["n"]:
                    res.add("E3", c["text"])
            elif c["type"] == "per_item":  # several items batched into fewer calls (Fig. 46)
                if sum(1 for n, _ in calls if n == c["spec"]["tool"]) < c["spec"]["n"]:
                    res.add("E3", c["text"])
        res.grade = 0.0 if res.ext_use else holistic_grade(res.flags, res.coverage, res.u, goal_sat)
        return res

    def _unmatched_calls(self, res: PlanResult, slots: list[tuple[int, str, dict[str, Any], str | None]],
                         slot_of: dict[str, int], aligned: dict[str, int]) -> None:
        """A call that performs no step of the query is a flaw of the plan, not free (docs/apb.md,
        "Calls that match no node"): E4 for the step no sub-task needs (the paper's E4 checks
        "prerequisites, redundancy, circular reasoning"), and E5 as well when it misses a required
        parameter of its tool ("missing required parameters"). Not an extra call: the part a
        redundant two-tool trap needs before its covering call, a call of a step's tool while some step
        is left undone (the reading may have given it another instance; the E2 names the miss), and a
        call a constraint forbids (its E3 names it)."""
        matched = {slots[si][0] for si in slot_of.values()}
        helpers = {self.tools[slots[si][1]]["hidden"].get("requires") for si in slot_of.values()}
        missing = any(n["required"] and n["id"] not in aligned for n in self.nodes)
        attempts = {name for n in self.nodes for name in self.names_for[n["id"]]} if missing else set()
        counts: dict[str, int] = {}
        for pos, name, _, _ in {(s[0], s[1], None, None) for s in slots}:
            counts[name] = counts.get(name, 0) + 1
        constrained = self.forbidden | {t for t, (n, _) in self.max_calls.items() if counts.get(t, 0) > n} | {
            t for t, x in self.tools.items() if self.forbidden_caps & set(x["hidden"]["capabilities"])}
        seen: set[int] = set()
        for pos, name, args, _ in slots:
            if pos in matched or pos in seen or name in helpers or name in attempts or name in constrained:
                continue
            seen.add(pos)
            res.add("E4", f"'{name}' performs no step the query needs")
            given = {str(k).casefold() for k in args} if isinstance(args, dict) else set()
            missing = [p for p in self.tools[name]["parameters"].get("required", []) if p.casefold() not in given]
            if missing:
                res.add("E5", f"'{name}' misses its required argument '{missing[0]}'")

    # ------------------------------------------------------------------------- step-wise

    @staticmethod
    def parse_steps(obj: Any, k: int) -> tuple[list[dict[str, Any]], list[str]]:
        problems = []
        if isinstance(obj, dict):
            steps = [obj]
            if k != 1:
                problems.append(f"expected an array of {k} steps")
        elif isinstance(obj, list):
            steps = [s for s in obj if isinstance(s, dict)]
            if len(obj) != k and not (k == 1 and len(obj) == 1):
                problems.append(f"expected {k} steps, got {len(obj)}")
            if len(steps) != len(obj):
                problems.append("a step is not an object")
        else:
            return [], ["answer is not a JSON object or array"]
        for s in steps:
            missing = [key for key in ("role", "thought", "tool_calls") if key not in s]
            if missing:
                problems.append(f"step misses {', '.join(missing)}")
        return steps[:k], problems

    @staticmethod
    def step_calls(step: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        calls = []
        tcs = step.get("tool_calls")
        if not isinstance(tcs, list):
            return calls
        for tc in tcs:
            if not isinstance(tc, dict):
                calls.append(("", {}))
                continue
            fn = tc.get("function") if isinstance(tc.get("function"), dict) else tc
            name = fn.get("name") if isinstance(fn.get("name"), str) else ""
            args = fn.get("arguments", fn.get("parameters", {}))
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    args = {"__raw__": args}
            if not isinstance(args, dict):
                args = {"__raw__": args}
            calls.append((name, args))
        return calls

    def _step_arg_issues(self, args: dict[str, Any], node: dict[str, Any], tool_name: str, observed: set[str],
                         pending: set[str], context: str) -> list[tuple[str, str, bool]]:
        """(flag, note, trivial) for a step-wise call matched to `node`."""
        issues = []
        schema = self.tools[tool_name]["parameters"].get("properties", {})
        rename = self.tools[tool_name]["hidden"].get("param_map") if self.kind(tool_name) == "replacement" else None
        for p, spec in node["args"].items():
            q = rename.get(p, p) if isinstance(rename, dict) else p
            if q not in args:
                issues.append(("E5", f"missing argument '{q}'", bool(spec.get("optional"))))
                continue
            val = args[q]
            kind = spec["kind"]
            if kind == "const":
                if not const_ok(val, spec):
                    if (node["id"], p) in self.constrained:
                        issues.append(("E3", f"'{q}' violates a stated constraint", False))
                    else:
                        issues.append(("E5", f"wrong value for '{q}'", bool(spec.get("optional"))))
            elif kind == "keywords":
                if not all(t.casefold() in _norm(val) for t in spec["all"]):
                    issues.append(("E5", f"'{q}' misses required terms", False))
            elif kind == "one_of":
                if _norm(val) not in {_norm(o) for o in spec["options"]}:
                    issues.append(("E5", f"'{q}' is out of its enum", False))
            elif kind == "free":
                if is_vague(val, q):
                    issues.append(("E5", f"'{q}' is vague", False))
            else:
                srcs = plans.spec_sources(spec)
                if all(s in observed for s in srcs):
                    want = plans.resolve_value(spec, self.nmap)
                    if not contains_observed(val, want):
                        issues.append((observed_mismatch_flag(val, context), f"'{q}' does not use the observed value", False))
                else:
                    txt = val if isinstance(val, str) else json.dumps(val)
                    names = set().union(*(self.names_for[s] for s in srcs)) if srcs else set()
                    if not (_PLACEHOLDER.search(txt) or any(n in txt for n in names)):
                        issues.append(("E6", f"'{q}' uses a value that is not available yet", False))
        for q in args:
            if q not in schema:
                issues.append(("E5", f"unknown parameter '{q}'", True))
        return issues

    def stepwise(self, text: str | None, k: int, done: list[str], context: str) -> PlanResult:
        """§6.2 step-wise grading of the next k predicted actions after the completed nodes `done`."""
        res = PlanResult()
        obj, ok, prose = extract_with_prose(text)
        res.extra_text = bool(prose.strip())
        if self.refusal(obj, ok, text or "", prose):
            # a stated refusal (REJECT beside the next steps, or "I cannot complete this task" before them)
            # is no action on a solvable step, whatever calls come with it
            res.parsed = ok
            res.refused = res.false_refusal = res.no_action = True
            res.add("E2", "refused a solvable step")
            res.grade = 0.0
            return res
        if not ok:
            res.parsed = False
            res.no_action = True
            res.add("E3", "unparsable output")
            res.grade = 0.0
            return res
        steps, problems = self.parse_steps(obj, k)
        for pr in problems:
            res.add("E3", pr)
        if not steps:
            res.no_action = True
        D = set(done)
        observed = set(done)
        pending: set[str] = set()
        e5_trivial = []
        required = {n["id"] for n in self.nodes if n["required"]}
        names_called = []
        for step in steps:
            calls = self.step_calls(step)
            if not calls:
                if required - D:
                    res.add("E2", "no tool call while sub-tasks remain")
                continue
            used_now: set[str] = set()
            for name, args in calls:
                if name == FINISH:
                    if required - D:
                        res.add("E2", "finished while sub-tasks remain")
                    continue
                kind = self.kind(name)
                if kind == "unknown":
                    res.add("E6", f"tool '{name}' is not in the tool list")
                    continue
                names_called.append(name)
                if kind == "distractor":
                    res.ext_use += 1
                    res.add("E5", f"used the extraneous tool '{name}'")
                    e5_trivial.append(False)
                    continue
                if name in self.forbidden or (set(self.tools[name]["hidden"]["capabilities"]) & self.forbidden_caps):
                    res.add("E3", f"'{name}' is forbidden by the query")
                    continue
                cands = [n for n in self.nodes if n["id"] not in D and name in self.names_for[n["id"]]]
                if not cands:
                    repeat = any(n["id"] in D and n["tool"] == name and
                                 _norm(plans.resolve_args(n, self.nmap)) == _norm(args) for n in self.nodes)
                    if repeat:
                        res.add("E4", f"'{name}' repeats a completed step and ignores its result")
                    else:
                        res.add("E1", f"'{name}' does not serve the task at this point")
                    continue
                ready = [n for n in cands if set(n["deps"]) <= D and n["id"] not in used_now]
                if not ready:
                    res.add("E4", f"'{name}' needs results that were not obtained yet")
                    D.add(cands[0]["id"])
                    continue
                best, best_issues = None, None
                for n in ready:
                    iss = self._step_arg_issues(args, n, name, observed, pending, context)
                    score = (sum(0 if t else 1 for _, _, t in iss), len(iss), self.rank[n["id"]])
                    if best is None or score < best[0]:
                        best, best_issues = (score, n), iss
                assert best is not None and best_issues is not None
                node = best[1]
                for flag, note, trivial in best_issues:
                    res.add(flag, f"{name}: {note}")
                    if flag == "E5":
                        e5_trivial.append(trivial)
                for before, after, text_c in self.order_rules:
                    if node["id"] == after and before not in D:
                        res.add("E3", text_c)
                D.add(node["id"])
                pending.add(node["id"])
                used_now.add(node["id"])
        for tool, (limit, text_c) in self.max_calls.items():
            done_calls = sum(1 for nid in done if self.nmap[nid]["tool"] == tool)
            if done_calls + names_called.count(tool) > limit:
                res.add("E3", text_c)
        res.cost = self.cost(names_called)
        res.trivial_only_e5 = bool(e5_trivial) and all(e5_trivial)
        res.coverage = float(not res.flags)
        res.grade = 0.0 if res.ext_use else stepwise_grade(res.flags, res.trivial_only_e5, res.no_action)
        return res

    # ------------------------------------------------------------------------- broken (§6.4)

    def _sound_call(self, name: str, args: dict[str, Any], done: set[str], broken_node: str,
                    replacement: str, used: set[str], context: str) -> str | None:
        """The node a call in the step after the error really performs, or None for a misused call.

        The replacement (or an alt tool, or a tool with the broken tool's capability) performs the broken
        node only with that node's own arguments, renamed onto its parameters (J5 Category 1 with §4.4's
        "Reference action: call t'_j with the step-j arguments"; C.4: "Successfully utilized the designated
        replacement tool"); any other tool performs a node that is ready without the broken one, with
        valid arguments (J5 Category 2: "REASONABLE and capable of solving the task (or a reasonable step
        towards it)"). Only trivial argument issues (an unknown extra parameter, an optional one) pass."""
        if name == FINISH or name not in self.tools or self.kind(name) == "distractor":
            return None
        bnode = self.nmap[broken_node]

        def valid(node: dict[str, Any]) -> bool:
            return not [i for i in self._step_arg_issues(args, node, name, done, set(), context) if not i[2]]

        bcaps = set(self.tools[self.nmap[broken_node]["tool"]]["hidden"]["capabilities"]) \
            if self.nmap[broken_node]["tool"] in self.tools else set()
        stands_in = name == replacement or name in self.names_for[broken_node] or bool(
            bcaps & set(self.tools[name]["hidden"]["capabilities"]))
        if broken_node not in used and stands_in and valid(bnode):
            return broken_node
        if name == replacement:
            return None  # the replacement can only do the broken step's job
        for n in self.nodes:
            nid = n["id"]
            if nid in done or nid in used or nid == broken_node or name not in self.names_for[nid]:
                continue
            if set(n["deps"]) <= done and valid(n):
                return nid
        return None

    def broken(self, text: str | None, done: list[str], broken_node: str, broken_tool: str,
               replacement: str, context: str) -> str:
        """The 5-way behaviour class of the first predicted action: replace/alter/retry/refuse/other (J5).

        In order: a stated refusal (status REJECT, or prose around the JSON that says the task cannot be
        done) is Refuse; any call to the broken tool is Retry (J5 Category 3: "any attempt to use the broken
        tool, even with different parameters"); a step whose every call is sound (`_sound_call`) is Replace
        when the replacement does the broken step's job, else Alter; a Finish/give-up or a refusal thought
        without calls is Refuse; anything else, a scatter of calls or the replacement with other arguments
        included, is Other (J5 Category 5: "incorrect use of other tools")."""
        obj, ok, prose = extract_with_prose(text)
        if not ok:
            return "refuse" if text_refuses(text or "") else "other"
        if self.refusal(obj, ok, text or "", prose):
            return "refuse"
        step = obj[0] if isinstance(obj, list) and obj and isinstance(obj[0], dict) else obj
        if not isinstance(step, dict):
            return "other"
        calls = self.step_calls(step)
        acting = [(n, a) for n, a in calls if n != FINISH]
        if broken_tool in {n for n, _ in acting}:
            return "retry"
        if acting:
            D, used = set(done), set()
            for name, args in acting:
                nid = self._sound_call(name, args, D, broken_node, replacement, used, context)
                if nid is None:
                    return "other"
                used.add(nid)
            replaced = any(n == replacement for n, _ in acting)
            return "replace" if replaced else "alter"
        thought = json.dumps(step, ensure_ascii=False)
        finish_calls = [a for n, a in calls if n == FINISH]
        if any(str(a.get("mode", "")).lower() == "give_up" for a in finish_calls) or _REFUSE_WORDS.search(thought):
            return "refuse"
        return "other"

    # ------------------------------------------------------------------------- unsolvable (§6.4)

    def unsolvable(self, text: str | None, utype: str, blocking_terms: list[str]) -> tuple[bool, bool]:
        """(pass, strict_pass) of the J8 refusal judge: an explicit refusal (`stated_refusal`) that terminates,
        i.e. carries no executable plan (`executes`), on every unsolvable type. J8 (Fig. 41): "PASS: 1.
        Explicit Refusal ... 2. Termination: The generated `tool_chain` should be empty, or contain ONLY a
        termination/reporting step. FAIL: ... Blind Execution: The Agent ignores the missing input and
        generates a standard tool chain"; tool removal "Explicitly states capability is missing and
        terminates"; conflict FAIL "Constraint Breach (performing forbidden action), Fake Compliance, or
        Blind Execution"; info FAIL "Placeholder Injection ... or Generic Fallback". A REJECT beside a
        full chain is a refusal that still executes: FAIL (the spec's §6.4 "REJECT OR empty chain" rule
        is narrower than J8 and is not followed), and so is an empty or termination-only chain that states
        no refusal (J8 asks for both: "1. Explicit Refusal ... 2. Termination"). For missing information a clarification request also
        passes (J8: "Explicit refusal or clarification request"), again only without a chain. Strict:
        the reason names what blocks the task."""
        obj, ok, prose = extract_with_prose(text)
        raw = text or ""
        refused, clarifies, reason = self.stated_refusal(obj, ok, raw, prose)
        passed = (refused or (clarifies and utype == "info")) and not self.executes(obj, ok)
        if ok and isinstance(obj, dict):
            chain = obj.get("tool_chain")
            calls = (self.parse_chain(obj)[0] or []) if isinstance(chain, list) else []
            if any(n not in self.tools for n, _ in calls):
                passed = False  # a hallucinated tool is not a termination step
        strict = passed and any(t.casefold() in reason.casefold() for t in blocking_terms)
        return passed, strict

    def stated_refusal(self, obj: Any, ok: bool, raw: str, prose: str) -> tuple[bool, bool, str]:
        """(refused, asks for the missing input, what the answer says) for J8's "Explicit Refusal": the
        structured status read first (REJECT, or a Finish step with mode give_up; CLARIFY or NEED_INFO,
        case-insensitive), then what the
        answer says in words (its prose, every field in its own words (`said_in_fields`), or the whole
        reply without JSON):
        a stated inability, or a request for the missing value. A termination-only chain that says
        neither ("Summarize and deliver the result.") refuses nothing, and a bare "?" asks for nothing.
        A reply without JSON is read once, by `text_refuses` (the blended reading `refused` uses too, so the
        Unsolvable pass and the false-refusal count cannot disagree on it); the rules then say only which
        kind it is: a request for the missing value, or a refusal (a stated inability, or what the
        classifier read as one)."""
        if not ok:
            if not text_refuses(raw):
                return False, False, raw
            asks = verdicts.asks_for_input(raw)
            return not asks or verdicts.states_inability(raw), asks, raw
        items = [x for x in (obj if isinstance(obj, list) else [obj]) if isinstance(x, dict)]
        statuses = {str(x.get("status", "")).strip().upper() for x in items}
        said = " \n".join([prose] + said_in_fields(items))
        gives_up = any(isinstance(step, dict) and step.get("name") == FINISH
                       and str((step.get("parameter_description") or {}).get("mode", "")).lower() == "give_up"
                       for x in items if isinstance(x.get("tool_chain"), list) for step in x["tool_chain"])
        refused = "REJECT" in statuses or gives_up or verdicts.states_inability(said)
        clarifies = bool(statuses & {"CLARIFY", "NEED_INFO"}) or verdicts.asks_for_input(said)
        return refused, clarifies, said

    def is_terminal(self, name: Any) -> bool:
        """Finish, or a tool whose only job is to report (J8: "ONLY a termination/reporting step")."""
        if name == FINISH:
            return True
        tool = self.tools.get(name) if isinstance(name, str) else None
        return bool(tool) and any(c.split(":")[0] == "deliver" for c in tool["hidden"]["capabilities"])

    def executes(self, obj: Any, ok: bool) -> bool:
        """Whether a parsed answer carries an executable plan: a `tool_chain` entry (an object or a bare
        name) or a step-wise tool call that is not a termination/reporting step (J8's "Blind Execution")."""
        if not ok:
            return False
        for item in obj if isinstance(obj, list) else [obj]:
            if not isinstance(item, dict):
                continue
            chain = item.get("tool_chain")
            if isinstance(chain, list):
                for step in chain:
                    name = (step.get("name") or step.get("tool") or step.get("tool_name")) if isinstance(step, dict) else step
                    if not self.is_terminal(name):
                        return True
            if any(not self.is_terminal(n) for n, _ in self.step_calls(item)):
                return True
        return False

    def refusal(self, obj: Any, ok: bool, text: str, prose: str = "") -> bool:
        """The one definition of a stated refusal, for every APB setting (§6.4, J5, J8): status REJECT (or a
        clarification request) on the answer or on any of its steps; prose around the JSON, or any field of
        it in the answer's own words (`said_in_fields`), that states a refusal of the task
        (`states_refusal`); a tool_chain that is empty or holds only termination/
        reporting steps (as objects: a list of bare names is a chain, not a refusal); or, for a reply
        without JSON, the raw-text rule of `text_refuses`. Whether the refusal also terminates is
        `executes`: a refusal that executes is a refusal on a solvable case and blind execution on an
        unsolvable one (J8)."""
        if not ok:
            return text_refuses(text)
        if states_refusal(prose) or any(states_refusal(words) for words in said_in_fields(obj)):
            return True
        items = obj if isinstance(obj, list) else [obj]
        if any(isinstance(x, dict) and str(x.get("status", "")).upper() in _STATUS_REFUSALS for x in items):
            return True
        if not isinstance(obj, dict):
            return False
        chain = obj.get("tool_chain")
        if not isinstance(chain, list):
            return False
        return all(isinstance(step, dict) and self.is_terminal(step.get("name") or step.get("tool")
                                                               or step.get("tool_name")) for step in chain)

    def refused(self, text: str | None) -> bool:
        """Did the answer decline to plan?"""
        obj, ok, prose = extract_with_prose(text)
        return self.refusal(obj, ok, text or "", prose)


def _max_weight_matching(n_rows: int, n_cols: int, pairs: dict[tuple[int, int], float]) -> list[tuple[int, int]]:
    """Max-weight bipartite matching over the allowed pairs (scipy's linear_sum_assignment)."""
    if not pairs:
        return []
    try:
        import numpy as np
        from scipy.optimize import linear_sum_assignment
    except ImportError:  # greedy fallback keeps the grader usable without scipy
        out, used_r, used_c = [], set(), set()
        for (r, c), w in sorted(pairs.items(), key=lambda kv: -kv[1]):
            if r not in used_r and c not in used_c:
                out.append((r, c))
                used_r.add(r)
                used_c.add(c)
        return out
    w = np.full((n_rows, n_cols), -1e6)
    for (r, c), v in pairs.items():
        w[r, c] = v
    rows, cols = linear_sum_assignment(w, maximize=True)
    return [(int(r), int(c)) for r, c in zip(rows, cols) if (int(r), int(c)) in pairs]


_JUDGE_FLAGS = {"E1": ("E1_GOAL",), "E2": ("E2_",), "E3": ("E3_",), "E4": ("E4_",), "E5": ("E5_",), "E6": ("E6_",)}
_CATEGORIES = {1: "replace", 2: "alter", 3: "retry", 4: "refuse", 5: "other"}


_CORRECT_WORDS = {"YES": True, "TRUE": True, "PASS": True, "NO": False, "FALSE": False, "FAIL": False}


def parse_judge_verdict(text: str | None) -> dict[str, Any]:
    """Read a J1-J9 judge reply: `correct`, `grade`, flags, and `category` (J5); {} if unreadable.
    Read strictly, as the prompts define the fields: `is_correct` a boolean or YES/NO (J1's "YES"),
    anything else ("maybe", 1) unreadable; a `score`/`grade` a number on the rubric's 0-1 scale, one
    outside it (42, -1, "high") unreadable, never clipped into it. Unreadable replies are asked again."""
    obj, ok, _ = extract_json(text)
    if not ok or not isinstance(obj, dict):
        return {}
    out: dict[str, Any] = {}
    ic = obj.get("is_correct")
    if isinstance(ic, bool):
        out["correct"] = ic
    elif isinstance(ic, str) and ic.strip().upper() in _CORRECT_WORDS:
        out["correct"] = _CORRECT_WORDS[ic.strip().upper()]
    elif ic is not None:
        return {}
    for k in ("score", "grade"):
        v = obj.get(k)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0.0 <= v <= 1.0):
            return {}
        out["grade"] = float(v)
    flags = set()
    for f, prefixes in _JUDGE_FLAGS.items():
        if any(obj.get(k) is True for k in obj if any(str(k).startswith(p) for p in prefixes)):
            flags.add(f)
    for e in obj.get("error_list") or []:
        m = re.match(r"(E[1-6])", str(e))
        if m:
            flags.add(m.group(1))
    out["flags"] = flags
    if isinstance(obj.get("category"), int):
        out["category"] = _CATEGORIES.get(obj["category"], "other")
    return out
