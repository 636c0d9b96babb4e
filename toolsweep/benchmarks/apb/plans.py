"""Reference plans as DAGs (§2.3): nodes with typed argument specs, seeded linearization, the
reference trajectory, and renderings of the reference as the model-facing formats (a holistic
`tool_chain`, step-wise assistant actions). The efficiency setting's min-cost DP lives here too.

A node is a plain dict: `{"id", "tool", "args": {param: ArgSpec}, "deps", "required", "alt_tools",
"output", "goal", "nl", "cap"}`. ArgSpec kinds: `const` (value, match, goal_slot), `ref` (node,
field), `expr` (refs, fields, precomputed value), `keywords` (all, value), `one_of` (options,
value), `free` (value); any may carry `optional`.
"""

from __future__ import annotations

import json
import random
from typing import Any

from toolsweep.benchmarks.apb.tools import FINISH


def const(value: Any, *, goal_slot: bool = False, match: str = "ci", optional: bool = False) -> dict[str, Any]:
    return {"kind": "const", "value": value, "match": match, "goal_slot": goal_slot, "optional": optional}


def value_range(value: float, lo: float, hi: float) -> dict[str, Any]:
    """A numeric argument the query bounds instead of fixing: any value in [lo, hi] is right; the
    reference uses `value`."""
    return {"kind": "const", "value": value, "match": "range", "min": lo, "max": hi, "goal_slot": False,
            "optional": False}


def ref(node: str, field: str) -> dict[str, Any]:
    return {"kind": "ref", "node": node, "field": field, "optional": False}


def expr(refs: list[str], fields: list[str], value: Any) -> dict[str, Any]:
    return {"kind": "expr", "refs": list(refs), "fields": list(fields), "value": value, "optional": False}


def keywords(terms: list[str], value: str) -> dict[str, Any]:
    return {"kind": "keywords", "all": list(terms), "value": value, "optional": False}


def one_of(options: list[str], value: str) -> dict[str, Any]:
    return {"kind": "one_of", "options": list(options), "value": value, "optional": False}


def spec_sources(spec: dict[str, Any]) -> list[str]:
    if spec["kind"] == "ref":
        return [spec["node"]]
    if spec["kind"] == "expr":
        return list(spec["refs"])
    return []


def node_map(nodes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {n["id"]: n for n in nodes}


def linearize(nodes: list[dict[str, Any]], rng: random.Random) -> list[str]:
    """A seeded topological order that tends to continue the chain it is on (so dependency chains
    sit on consecutive positions, which the efficiency composites need)."""
    deps = {n["id"]: set(n["deps"]) for n in nodes}
    order: list[str] = []
    done: set[str] = set()
    ids = [n["id"] for n in nodes]
    while len(order) < len(ids):
        ready = [i for i in ids if i not in done and deps[i] <= done]
        if order:
            children = [i for i in ready if order[-1] in deps[i]]
            if children and rng.random() < 0.75:
                ready = children
        pick = ready[rng.randrange(len(ready))]
        order.append(pick)
        done.add(pick)
    return order


def is_topological(nodes: list[dict[str, Any]], order: list[str]) -> bool:
    pos = {nid: i for i, nid in enumerate(order)}
    if len(pos) != len(nodes):
        return False
    return all(pos[d] < pos[n["id"]] for n in nodes for d in n["deps"])


def is_acyclic(nodes: list[dict[str, Any]]) -> bool:
    deps = {n["id"]: list(n["deps"]) for n in nodes}
    state: dict[str, int] = {}

    def visit(u: str) -> bool:
        if state.get(u) == 1:
            return False
        if state.get(u) == 2:
            return True
        state[u] = 1
        ok = all(visit(v) for v in deps.get(u, []))
        state[u] = 2
        return ok

    return all(visit(n["id"]) for n in nodes)


def resolve_value(spec: dict[str, Any], nodes: dict[str, dict[str, Any]]) -> Any:
    """The concrete value a correct call passes for this spec, once its sources were observed."""
    kind = spec["kind"]
    if kind == "ref":
        return nodes[spec["node"]]["output"][spec["field"]]
    if kind in ("const", "expr", "keywords", "one_of", "free"):
        return spec["value"]
    raise ValueError(f"unknown ArgSpec kind {kind!r}")


def resolve_args(node: dict[str, Any], nodes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {p: resolve_value(s, nodes) for p, s in node["args"].items()}


def reference_trajectory(case_nodes: list[dict[str, Any]], order: list[str]) -> list[dict[str, Any]]:
    """The simulated successful trajectory: one tool call per assistant turn, then Finish (Fig. 7)."""
    nodes = node_map(case_nodes)
    msgs: list[dict[str, Any]] = []
    for nid in order:
        n = nodes[nid]
        msgs.append(assistant_call(f"I will {n['nl']}.", n["tool"], resolve_args(n, nodes)))
        msgs.append({"role": "tool", "name": n["tool"], "content": json.dumps(n["output"], ensure_ascii=False)})
    msgs.append(assistant_call("All sub-tasks are complete; I can give the final answer.", FINISH, {"mode": "give_answer"}))
    return msgs


def assistant_call(thought: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "thought": thought,
            "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}]}


# ----------------------------------------------------------------------------- holistic rendering

def _dollar_reads_right(src_ids: list[str], positions: dict[str, int], names: dict[str, str],
                       nodes: dict[str, dict[str, Any]], current: int) -> bool:
    """Whether `$Tool.field` names exactly these sources from call `current`: a reader takes it as the
    most recent call of that tool (several sources: every earlier call of it), so a tool called again
    in between (parallel chains interleaved) makes it name another step."""
    by_tool: dict[str, set[int]] = {}
    for s in src_ids:
        by_tool.setdefault(names.get(s, nodes[s]["tool"]), set()).add(positions[s])
    for tool, wanted in by_tool.items():
        earlier = {p for n, p in positions.items() if names.get(n) == tool and p < current}
        if len(wanted) == 1:
            if not earlier or max(earlier) != next(iter(wanted)):
                return False
        elif earlier != wanted:
            return False
    return True


def describe_ref(src_ids: list[str], fields: list[str], nodes: dict[str, dict[str, Any]],
                 positions: dict[str, int], names: dict[str, str], style: str, current: int | None = None) -> str:
    """Describe where a dynamic value comes from: `$Tool.field` or "the output of step i". The dollar
    form falls back to step numbers where it would name another call (see `_dollar_reads_right`)."""
    if style == "dollar" and (current is None or _dollar_reads_right(src_ids, positions, names, nodes, current)):
        parts = []
        for s, f in zip(src_ids, fields):
            part = f"${names.get(s, nodes[s]['tool'])}.{f}"
            if part not in parts:
                parts.append(part)
        return ", ".join(parts)
    steps = sorted({positions[s] + 1 for s in src_ids})
    if len(steps) == 1:
        return f"the output of step {steps[0]}"
    return "the outputs of " + ", ".join(f"step {i}" for i in steps)


def holistic_chain(
    case_nodes: list[dict[str, Any]],
    order: list[str],
    *,
    style: str = "dollar",
    calls: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The reference tool_chain (P4 format) in `order`, with refs as `$Tool.field` or "step i".

    `calls` optionally replaces node-by-node calls with efficiency calls: a list of
    `{"name", "covers": [node ids], "param_map": {param: [node, param]}}`.
    """
    nodes = node_map(case_nodes)
    if calls is None:
        calls = [{"name": nodes[nid]["tool"], "covers": [nid], "param_map": None} for nid in order]
    positions: dict[str, int] = {}
    names: dict[str, str] = {}
    for i, c in enumerate(calls):
        for nid in c["covers"]:
            positions[nid] = i
            names[nid] = c["name"]
    chain = []
    for i, c in enumerate(calls):
        covered = set(c["covers"])
        if c["param_map"] is None:
            pmap = {p: [c["covers"][0], p] for p in nodes[c["covers"][0]]["args"]}
        else:
            pmap = c["param_map"]
        desc: dict[str, Any] = {}
        for p, (nid, q) in pmap.items():
            spec = nodes[nid]["args"][q]
            srcs = spec_sources(spec)
            if srcs:
                if all(s in covered for s in srcs):
                    continue
                fields = [spec["field"]] if spec["kind"] == "ref" else spec["fields"]
                desc[p] = describe_ref(srcs, fields, nodes, positions, names, style, current=i)
            else:
                desc[p] = spec["value"]
        reason = "; ".join(nodes[n]["nl"] for n in c["covers"])
        chain.append({"name": c["name"], "parameter_description": desc, "reason": f"To {reason}."})
    return chain


def plan_text(case_nodes: list[dict[str, Any]], order: list[str]) -> str:
    """First-person strategy text with no tool results (G5 rules)."""
    nodes = node_map(case_nodes)
    steps = [nodes[n]["nl"] for n in order]
    if len(steps) == 1:
        return f"I will {steps[0]}."
    return "I will first " + steps[0] + "".join(f", then {x}" for x in steps[1:-1]) + f", and finally {steps[-1]}."


# ----------------------------------------------------------------------------- step-wise rendering

def stepwise_action(node: dict[str, Any], nodes: dict[str, dict[str, Any]], observed: set[str]) -> dict[str, Any]:
    """The reference next action for `node`: concrete values for observed sources, placeholders
    (`$Tool.field`) for sources predicted earlier in the same output but not yet observed."""
    args: dict[str, Any] = {}
    for p, spec in node["args"].items():
        srcs = spec_sources(spec)
        if srcs and not all(s in observed for s in srcs):
            fields = [spec["field"]] if spec["kind"] == "ref" else spec["fields"]
            args[p] = ", ".join(f"${nodes[s]['tool']}.{f}" for s, f in zip(srcs, fields))
        else:
            args[p] = resolve_value(spec, nodes)
    return assistant_call(f"Next I will {node['nl']}.", node["tool"], args)


def finish_action() -> dict[str, Any]:
    return assistant_call("Every sub-task is done, so I finish with the answer.", FINISH, {"mode": "give_answer"})


# ----------------------------------------------------------------------------- efficiency DP

def min_cost_cover(order: list[str], node_cost: dict[str, int], composites: list[dict[str, Any]]) -> tuple[int, list[dict[str, Any]]]:
    """best[i] = min(best[i-1] + c(n_i), best[i-m] + c(composite covering n_{i-m+1..i})) (§4.6).

    Returns the optimal cost and the calls: `{"name", "covers"}` items in order."""
    n = len(order)
    pos = {nid: i for i, nid in enumerate(order)}
    spans: dict[int, list[tuple[int, dict[str, Any]]]] = {}
    for comp in composites:
        idx = sorted(pos[c] for c in comp["covers"])
        if idx != list(range(idx[0], idx[0] + len(idx))):
            continue
        spans.setdefault(idx[-1] + 1, []).append((len(idx), comp))
    best = [0] + [10**9] * n
    back: list[tuple[int, dict[str, Any] | None]] = [(0, None)] * (n + 1)
    for i in range(1, n + 1):
        best[i] = best[i - 1] + node_cost[order[i - 1]]
        back[i] = (1, None)
        for m, comp in spans.get(i, []):
            c = best[i - m] + comp["cost"]
            if c < best[i]:
                best[i] = c
                back[i] = (m, comp)
    calls: list[dict[str, Any]] = []
    i = n
    while i > 0:
        m, comp = back[i]
        if comp is None:
            calls.append({"name": None, "covers": [order[i - 1]]})
        else:
            calls.append({"name": comp["name"], "covers": list(order[i - m:i])})
        i -= m
    calls.reverse()
    return best[n], calls
