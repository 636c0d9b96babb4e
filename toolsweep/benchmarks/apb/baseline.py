"""APB's no-LLM baseline (`Benchmark.baseline_policy`): the strongest scripted policy here that reads only
what a model reads (the query, the files manifest, the tool list, the trajectory so far) and never the
reference. Its per-cell scores are the floor a model's APB score is read against.

- Holistic-style answers (holistic, extraneous, efficiency, the solvable twins): the query is cut into
  clauses ("First, ...", "Then, ..."), each clause calls the tool whose name and description share the
  most words with it, literal arguments are bound from the clause (an enum option it names, "label:
  value", a year, a quoted title, a percentage, the entity after "of"), and data inputs name the previous
  step (`$Tool.field`).
- Step-wise: the same plan, from the step after the trajectory's last call, with observed values where
  the trajectory has them.
- Tool-Broken: the tool with the broken tool's parameter count whose description is closest to the broken
  tool's, called with the failed call's arguments in parameter order (what the paper's Replace is).
- Unsolvable prompt (P4u): a REJECT when the visible case gives a reason (no file though the query needs
  one; a private reference; a named service that is not offered, or offline; a requirement the query
  says cannot be met otherwise), else the plan.
"""

from __future__ import annotations

import json
import re
from typing import Any

from toolsweep.benchmarks.apb.tools import FINISH

NAME = "heuristic"
DESCRIPTION = ("no-LLM baseline (the benchmark's floor): clause-to-tool word overlap with arguments bound "
               "from the query, the nearest-description tool for a broken one, REJECT on visible cues")

_CONNECTIVE = re.compile(r"^(?:first|then|next|after that|also|finally|and)\s*,?\s*", re.I)
_WORD = re.compile(r"[a-z]+")
_STOP = frozenset("a an the of for to and or in on by with from at as is are be it its this that each every "
                  "all my me i need help task using does returns json object value values".split())
_FILE_NAME = re.compile(r"\b[\w-]+\.(?:png|jpe?g|gif|mp4|mov|webp)\b", re.I)
_VISUAL = re.compile(r"\b(?:image|photo|picture|screenshot|video|frame|frames|scan|clip)\b|\.(?:png|jpe?g|gif|mp4|mov|webp)\b", re.I)
_PRIVATE = re.compile(r"\b(?:we discussed|i mentioned|handbook|eligible for|our (?:call|meeting)|as agreed)\b", re.I)
_BLOCKED = re.compile(r"\b(?:offline|outage|cannot be completed without|not accepted|strictly prohibited|"
                      r"is not permitted|are prohibited)\b", re.I)
_COUNT_LIKE = re.compile(r"rate|digit|decimal|place|threshold|min|max|horizon|limit|count|number of|days|months|"
                         r"people|size|percent|quantity|amount", re.I)
_CAMEL = re.compile(r"\b[A-Z][a-z]+(?:[A-Z][a-z0-9]+)+\b")


def _words(text: str) -> set[str]:
    out = set()
    for w in _WORD.findall(re.sub(r"([a-z])([A-Z])", r"\1 \2", text).replace("_", " ").lower()):
        if w not in _STOP and len(w) > 2:
            out.add(w[:-1] if w.endswith("s") else w)
    return out


def _clauses(query: str) -> list[str]:
    body = query.split("\nFiles:")[0]
    parts = [p.strip() for p in re.split(r"(?<=[.!?])\s+", body) if p.strip()]
    return [_CONNECTIVE.sub("", p).rstrip(".") for p in parts[1:] if _CONNECTIVE.match(p)] or parts


def _returns(tool: dict[str, Any]) -> str:
    m = re.search(r"Returns [^']*'([A-Za-z_]+)'", tool.get("description", ""))
    return m.group(1) if m else "result"


def _pick_tool(clause: str, tools: list[dict[str, Any]]) -> dict[str, Any] | None:
    cw = _words(clause)
    best, score = None, 0.0
    for t in tools:
        desc = t.get("description", "").split("Parameters:")[0]
        tw = _words(t["name"]) | _words(desc)
        s = len(cw & tw) + 0.5 * len(cw & _words(t["name"]))
        if s > score:
            best, score = t, s
    return best


def _literal(param: str, pdesc: str, ptype: str, clause: str) -> Any:
    """A value for a literal parameter from the clause, or None."""
    options = re.search(r"one of ([\w ,/-]+)", pdesc) or re.search(r"^\s*([\w-]+(?: or [\w-]+)+)\s*$", pdesc)
    if options:
        for opt in [o.strip() for o in re.split(r",| or ", options.group(1))]:
            if opt and re.search(rf"\b{re.escape(opt)}\b", clause, re.I):
                return opt
    labelled = re.search(rf"\b{re.escape(param)}\s*:\s*([\w.%/-]+)", clause, re.I)
    if labelled:
        return labelled.group(1)
    if re.search(r"year|period|date", param + " " + pdesc, re.I):
        year = re.search(r"\b(19|20)\d{2}\b", clause)
        if year:
            return year.group(0)
    pct = re.search(r"(\d+(?:\.\d+)?)\s*%", clause)
    if pct and re.search(r"rate|percent|discount|tax|tip", param + " " + pdesc, re.I):
        return f"{pct.group(1)}%"
    if ptype in ("number", "integer"):
        if not _COUNT_LIKE.search(param + " " + pdesc):
            return None  # a data input: it comes from an earlier step
        num = re.search(r"\b(\d+(?:\.\d+)?)\b", re.sub(r"\b(19|20)\d{2}\b", "", clause))
        return float(num.group(1)) if num else None
    quoted = re.search(r"'([^']+)'", clause)
    if quoted and re.search(r"title|text|name|query|label", param + " " + pdesc, re.I):
        return quoted.group(1)
    entity = re.search(r"\b(?:of|about)\s+(.+?)(?:\s+for\s+(?:19|20)\d{2}|\s+\(|\s+by\s|\s+applying\s|$)", clause)
    if entity and ptype == "string" and not re.search(r"data|values|findings", pdesc):
        return entity.group(1).strip()
    return None


def _arguments(tool: dict[str, Any], clause: str, previous: dict[str, Any] | None) -> dict[str, Any]:
    props = tool.get("parameters", {}).get("properties", {})
    descs = dict(re.findall(r"'([A-Za-z_]+)' \([^)]*\) - ([^;.]+)", tool.get("description", "")))
    args: dict[str, Any] = {}
    for p, schema in props.items():
        pdesc = descs.get(p, schema.get("description", ""))
        ptype = schema.get("type", "string")
        value = None if ptype == "array" else _literal(p, pdesc, ptype, clause)
        if value is None and previous is not None:
            value = f"${previous['name']}.{_returns(previous)}"
        args[p] = value if value is not None else clause
    return args


def plan_calls(query: str, tools: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(tool, arguments) per clause of the query, in the query's order."""
    usable = [t for t in tools if t["name"] != FINISH]
    out: list[tuple[dict[str, Any], dict[str, Any]]] = []
    previous = None
    for clause in _clauses(query):
        tool = _pick_tool(clause, usable)
        if tool is None:
            continue
        out.append((tool, _arguments(tool, clause, previous)))
        previous = tool
    return out


def holistic_answer(query: str, tools: list[dict[str, Any]]) -> str:
    chain = [{"name": t["name"], "parameter_description": a, "reason": "matches the query's clause"}
             for t, a in plan_calls(query, tools)]
    return json.dumps({"plan": "Follow the query's steps in order with the matching tools.", "tool_chain": chain})


def rejects(query: str, files: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str | None:
    """Why the visible case cannot be solved, or None."""
    body = query.split("\nFiles:")[0]
    named = set(_FILE_NAME.findall(body)) - {f["name"] for f in files}
    if named or (not files and _VISUAL.search(body)):
        return "the image/video the query refers to is missing"
    if _PRIVATE.search(body):
        return "the query refers to information that was not provided"
    names = {t["name"] for t in tools}
    if any(n not in names for n in _CAMEL.findall(body)) and _BLOCKED.search(body):
        return "a required tool/service is not available"
    if _BLOCKED.search(body):
        return "the query requires a capability the available tools cannot provide"
    return None


def broken_answer(prefix: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str | None:
    """The recovery after a tool error: the nearest-description tool with the failed call's arguments."""
    if len(prefix) < 2 or prefix[-1].get("role") != "tool" or "error" not in str(prefix[-1].get("content", "")).lower():
        return None
    return nearest_equivalent_call(prefix, tools)


def nearest_equivalent_call(prefix: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str | None:
    """The last call made again on the other listed tool whose description is nearest, with the last
    call's arguments (what a recovery does, whatever the call returned)."""
    if len(prefix) < 2 or not prefix[-2].get("tool_calls"):
        return None
    failed = prefix[-2]["tool_calls"][0]["function"]
    by_name = {t["name"]: t for t in tools}
    broken = by_name.get(failed["name"])
    if broken is None:
        return None
    bprops = list(broken.get("parameters", {}).get("properties", {}))
    bwords = _words(re.sub(r"'[^']+'", "", broken.get("description", "")))
    best, score = None, -1.0
    for t in tools:
        props = list(t.get("parameters", {}).get("properties", {}))
        if t["name"] in (broken["name"], FINISH) or len(props) != len(bprops):
            continue
        tw = _words(re.sub(r"'[^']+'", "", t.get("description", "")))
        s = len(bwords & tw) / max(1, len(bwords | tw))
        if s > score:
            best, score = t, s
    if best is None:
        return None
    props = list(best["parameters"]["properties"])
    args = {props[i]: failed["arguments"][p] for i, p in enumerate(bprops) if p in failed["arguments"]}
    return json.dumps({"role": "assistant", "thought": f"{broken['name']} is broken; {best['name']} does the same job.",
                       "tool_calls": [{"type": "function", "function": {"name": best["name"], "arguments": args}}]})


def stepwise_answer(query: str, tools: list[dict[str, Any]], prefix: list[dict[str, Any]], k: int) -> str:
    """The next k steps of the query's clause plan after the calls the trajectory already made."""
    calls = plan_calls(query, tools)
    made = sum(1 for m in prefix if m.get("role") == "assistant" and m.get("tool_calls"))
    observed: dict[str, Any] = {}
    for m in prefix:
        if m.get("role") == "tool":
            try:
                content = json.loads(m.get("content", ""))
            except (TypeError, ValueError):
                continue
            if isinstance(content, dict):
                observed.update({f"${m['name']}.{f}": v for f, v in content.items()})
    steps = []
    for tool, args in calls[made:made + k]:
        bound = {p: observed.get(v, v) if isinstance(v, str) else v for p, v in args.items()}
        steps.append({"role": "assistant", "thought": "The next step of the query.",
                      "tool_calls": [{"type": "function", "function": {"name": tool["name"], "arguments": bound}}]})
    while len(steps) < k:
        steps.append({"role": "assistant", "thought": "Done.", "tool_calls": [
            {"type": "function", "function": {"name": FINISH, "arguments": {"mode": "give_answer"}}}]})
    return json.dumps(steps[0] if k == 1 else steps)
