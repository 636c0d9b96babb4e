"""ToolMaze metrics (spec §6): the deterministic trajectory judge, TSR / PRR / RC per episode,
and the cross-setting composites (Avg, per-P macro-averages of Table 2, the trust gap) computed
from cell summaries.

The judge reads only the trajectory (the environment's call log), the task's ground truth (S,
expected values, bindings) and the fault profile; never the agent's free text beyond whether the
episode ended with a final answer.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from toolsweep.evaluator import verdicts
from toolsweep.benchmarks.toolmaze.perturbation import Engine, Profile
from toolsweep.benchmarks.toolmaze.tasks import Task, numbers_close, text_contains, values_match
from toolsweep.benchmarks.toolmaze.tools import ACTION, Corpus, get_path
from toolsweep.evaluator.protocols import MetricSpec

NAN = float("nan")


@dataclass
class CallRecord:
    """One tool call as the environment executed it."""

    step: int
    idx: int
    call_id: str
    tool: str
    raw_args: str
    args: dict[str, Any] | None
    response: Any
    perturbed: str | None = None  # explicit | implicit
    rule_id: str | None = None
    forwarded: bool = False
    malformed: str | None = None  # bad_json | unknown_tool

    @property
    def clean(self) -> bool:
        """Forwarded to the simulator and answered without a (natural) error."""
        return self.forwarded and not (isinstance(self.response, dict) and "error" in self.response)

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "idx": self.idx, "tool": self.tool, "args": self.args,
                "perturbed": self.perturbed, "rule_id": self.rule_id, "forwarded": self.forwarded,
                "malformed": self.malformed}


@dataclass
class Verdict:
    success: bool
    exposed: bool
    recovered: bool
    propagated: bool
    solvable: bool
    c: int
    c_star: int
    complete_paths: list[int] = field(default_factory=list)

    @property
    def c_rec(self) -> float:
        """C_rec = 1 - [c*/max(c, c*)] * I_succ  (spec eq. 3)."""
        return 1.0 - (self.c_star / max(self.c, self.c_star)) * float(self.success)

    def metrics(self, n_steps: int, n_calls: int, malformed: int, answered: bool) -> dict[str, float]:
        return {
            "tsr": float(self.success),
            "prr": float(self.recovered) if self.exposed else NAN,
            "rc": self.c_rec if self.exposed else 0.0,
            "exposed": float(self.exposed),
            "c_rec": self.c_rec if self.exposed else NAN,
            "c": float(self.c) if self.exposed else NAN,
            "c_star": float(self.c_star) if self.exposed else NAN,
            "propagated": float(self.propagated),
            "n_steps": float(n_steps),
            "n_tool_calls": float(n_calls),
            "malformed_calls": float(malformed),
            "answered": float(answered),
        }


# ------------------------------------------------------------------------------------------------


def _leaves(obj: Any) -> list[Any]:
    if isinstance(obj, dict):
        return [x for v in obj.values() for x in _leaves(v)]
    if isinstance(obj, list):
        return [x for v in obj for x in _leaves(v)]
    return [obj]


def _contains_value(args: Any, bad: Any) -> bool:
    for leaf in _leaves(args):
        if isinstance(bad, (int, float)) and not isinstance(bad, bool):
            if isinstance(leaf, (int, float)) and not isinstance(leaf, bool) and numbers_close(leaf, bad):
                return True
            if isinstance(leaf, str) and text_contains(bad, leaf):
                return True
        elif isinstance(bad, str) and isinstance(leaf, str) and len(bad) >= 2:
            if re.search(r"(?<!\w)" + re.escape(bad.lower()) + r"(?!\w)", leaf.lower()):
                return True
    return False


_BAD_CACHE: dict[tuple, tuple[Any, tuple]] = {}


def _filtered_corruptions(task: Task, profile: Profile, rule_id: str, tool: str) -> tuple:
    """The corrupted values of one perturbed response that never occur in clean data (cached)."""
    key = (task.task_id, profile.mode, rule_id, tool)
    hit = _BAD_CACHE.get(key)
    if hit is not None and hit[0] is profile:
        return hit[1]
    clean_vals = [v for e in task.expected for x in e.values() for v in _leaves(x["output"])]
    clean_vals += list(task.slots.values())
    rule = next(r for r in profile.rules if r.rule_id == rule_id)
    vals = tuple(v for v in rule.corrupted.get(tool, ())
                 if v not in (None, "") and not _contains_value(clean_vals, v))
    _BAD_CACHE[key] = (profile, vals)
    return vals


def corrupted_values(task: Task, profile: Profile, calls: list[CallRecord]) -> list[tuple[int, str, Any]]:
    """(call idx, rule_id, value) for every value that occurred only in an implicit perturbed response."""
    out = []
    for c in calls:
        if c.perturbed == "implicit":
            out += [(c.idx, c.rule_id, v) for v in _filtered_corruptions(task, profile, c.rule_id, c.tool)]
    return out


def propagations(calls: list[CallRecord], bad: list[tuple[int, str, Any]]) -> set[str]:
    """Rule ids whose corrupted values were passed on in a later call's arguments."""
    hit = set()
    for idx, rule_id, v in bad:
        for c in calls:
            if c.idx > idx and c.args is not None and _contains_value(c.args, v):
                hit.add(rule_id)
    return hit


def satisfied_nodes(task: Task, path_index: int, calls: list[CallRecord],
                    upto: int | None = None) -> dict[str, list[int]]:
    """Nodes of path s satisfied by clean calls (in dependency order), with the satisfying calls."""
    sol = task.solutions[path_index]
    binds = task.bindings[path_index]
    exp = task.expected[path_index]
    sat: dict[str, list[int]] = {}
    outputs: dict[int, Any] = {}
    for c in calls:
        if upto is not None and c.idx >= upto:
            break
        if c.tool not in sol or not c.clean or c.args is None:
            continue
        ok = True
        for pname, b in binds[c.tool].items():
            if pname not in c.args:
                ok = False
                break
            arg = c.args[pname]
            if b[0] == "user":
                ok = values_match(task.slots[b[1]], arg)
            else:
                src, path = b[1], b[2]
                if src not in sat:
                    ok = False
                else:
                    cands = [get_path(exp[src]["output"], path)] + [get_path(outputs[k], path) for k in sat[src]]
                    match = text_contains if b[0] == "free" else values_match
                    ok = any(x is not None and match(x, arg) for x in cands)
            if not ok:
                break
        if ok:
            sat.setdefault(c.tool, []).append(c.idx)
            outputs[c.idx] = c.response
    return sat


@dataclass(frozen=True)
class JudgeOptions:
    """Switches for the judge's [PROPOSED] readings (spec §6.2, A7)."""

    accept_abort_when_solvable: bool = False  # A7: a graceful halt also counts on C2-C4 permanent faults
    require_failure_ack: bool = True  # §3.5 "wisely aborting": the final text says the task cannot be done


def acknowledges_failure(text: str | None) -> bool:
    """The final answer says the task could not be completed (§3.5 "wisely aborting unsolvable tasks"),
    read by sentence structure (`verdicts.acknowledges_failure`): "I was not able to finish" counts;
    "Done. It was not impossible after all." and "failed once, but the retry worked" do not."""
    return verdicts.acknowledges_failure(text)


def met_then(fault: CallRecord, call: CallRecord) -> bool:
    """A call answers a fault only if the agent had seen the fault when it made the call: it was
    issued in a later agent step. Calls of the same step (parallel calls) were decided before the
    fault came back, and earlier calls merely happened around it (paper §3.5: PRR is "the conditional
    probability of resolving an encountered perturbation")."""
    return call.step > fault.step


def repeats_a_success(calls: list[CallRecord]) -> bool:
    """The agent called a tool again with the same arguments after that very call had come back clean.
    Tools here are deterministic lookups, so such a repeat answers nothing that happened: it is blind
    repetition, and its second call under a transient fault looks like a retry without being one."""
    answered: set[tuple[str, str]] = set()
    for c in calls:
        if c.args is None:
            continue
        key = (c.tool, json.dumps(c.args, sort_keys=True, default=str))
        if key in answered:
            return True
        if c.clean:
            answered.add(key)
    return False


def retried(calls: list[CallRecord], fault: CallRecord, satisfying: set[int]) -> bool:
    """Recovery strategy (1), "retrying for transient faults" (§3.5): after meeting the fault (a later
    agent step than the error, so the agent had received it), a clean call of the same tool that does
    the node's job (valid arguments, in dependency order). A trajectory that also repeats calls that
    had succeeded retries whatever comes back: no retry of it is credited (the abstract: PRR must
    "separate systematic replanning from blind trial-and-error"; §3.5: "resolving an encountered
    perturbation")."""
    if repeats_a_success(calls):
        return False
    return any(c.tool == fault.tool and c.idx in satisfying and met_then(fault, c) for c in calls)


def rerouted(task: Task, rule, assigned: str | None, fault: CallRecord,
             sats: list[dict[str, list[int]]], by_idx: dict[int, CallRecord]) -> bool:
    """Recovery strategy (2), "utilizing an alternative path" (§3.5): after meeting the fault, the
    faulted node's job is done by an alternative member of its group (a member path without the
    faulted tool, every tool of it satisfied with valid arguments by calls made after the fault), at
    any later point: a detour first is charged by RC, not by PRR. A member tool may count from before
    the fault only where s* needs it before the faulted tool (the shared first layer of a many-to-many
    block whose second-layer tool failed): that step was done on the way to the fault, not around it."""
    before_ok = task.ancestors(assigned, task.default_index) if assigned in task.default_path else set()
    for i, s in enumerate(task.solutions):
        for member in _group_paths(task, rule):
            if assigned in member or not set(member) <= set(s):
                continue
            after = {t for t in member if any(met_then(fault, by_idx[k]) for k in sats[i].get(t, ()))}
            earlier = {t for t in member if t not in after and t in before_ok and sats[i].get(t)}
            if after and after | earlier == set(member):
                return True
    return False


def judge(task: Task, profile: Profile, engine: Engine, calls: list[CallRecord], answered: bool,
          corpus: Corpus, final_text: str | None = None, options: JudgeOptions | None = None,
          acknowledged: bool | None = None) -> Verdict:
    """The deterministic judge of spec §6.2, with the paper's stricter readings (docs/toolmaze.md):
    a fault is recovered when it was met and then handled (`retried`, `rerouted`, or a wise abort
    that says so), success needs a complete valid path, no propagation and no wrong side effect.
    `acknowledged`: whether the final text says the task could not be done, as an LLM judge read it;
    None reads it by rule (`acknowledges_failure`)."""
    options = options or JudgeOptions()
    perturbed = [c for c in calls if c.perturbed]
    exposed = bool(perturbed)
    first = perturbed[0].idx if exposed else None
    bad = corrupted_values(task, profile, calls)
    prop_rules = propagations(calls, bad)
    propagated = bool(prop_rules)
    sats = [satisfied_nodes(task, i, calls) for i in range(len(task.solutions))]
    complete = [i for i, s in enumerate(task.solutions) if all(t in sats[i] for t in s)]
    # no wrong side effects: every executed Action call (DAG or distractor) must satisfy a node
    correct_action_calls = {k for s in sats for idxs in s.values() for k in idxs}
    executed_actions = [c for c in calls if c.clean and corpus.tools[c.tool].category == ACTION]
    # and none twice: the same Action with the same arguments books, sends or orders twice
    actions_ok = (all(c.idx in correct_action_calls for c in executed_actions)
                  and not repeats_a_success(executed_actions))
    faulty = engine.faulty_tools()
    solvable = any(not (set(s) & faulty) for s in task.solutions)

    downstream: set[str] = set()
    for victim in faulty:
        downstream |= task.descendants(victim)
    after = [c for c in calls if first is not None and c.idx > first]
    said = acknowledges_failure(final_text) if acknowledged is None else acknowledged
    ack_ok = said if options.require_failure_ack else True
    # a graceful stop: (a) final answer, (b) nothing downstream of the failed tool called after the
    # fault, (c) no propagation, (d) every step that does not depend on the failure done, [(e) said so]
    upstream = [t for t in task.default_path if t not in faulty and t not in downstream]
    graceful = (exposed and answered and not any(c.tool in downstream for c in after) and not propagated
                and all(t in sats[task.default_index] for t in upstream) and actions_ok and ack_ok)
    aborted_ok = bool(faulty) and options.accept_abort_when_solvable and graceful
    if not solvable:
        success = graceful
    else:
        success = (bool(complete) and not propagated and actions_ok) or aborted_ok

    recovered = False
    if exposed:
        recovered = True
        rules = {r.rule_id: r for r in profile.rules}
        satisfying = {k for s in sats for idxs in s.values() for k in idxs}
        by_idx = {c.idx: c for c in calls}
        for rule_id in sorted({c.rule_id for c in perturbed}):
            fault = min((c for c in perturbed if c.rule_id == rule_id), key=lambda c: c.idx)
            assigned = engine.assigned[rule_id]
            if rule_id in prop_rules:
                ok = False
            elif not profile.permanent:
                ok = (retried(calls, fault, satisfying)
                      or rerouted(task, rules[rule_id], assigned, fault, sats, by_idx))
            elif solvable:
                ok = rerouted(task, rules[rule_id], assigned, fault, sats, by_idx) or aborted_ok
            else:
                # a wise abort: the agent reached the fault on the task's own path (every step the faulty
                # tool depends on done first), then stopped without calling anything downstream, and no
                # Action of its ran but its path's own (the task's Action called ahead of its inputs, or
                # a stray one: once the harm is done, stopping is not wise)
                after_k = [c for c in calls if c.idx > fault.idx]
                reached = all(t in sats[task.default_index] and min(sats[task.default_index][t]) < fault.idx
                              for t in task.ancestors(assigned, task.default_index))
                ok = (answered and reached and not any(c.tool in downstream for c in after_k) and actions_ok
                      and ack_ok)
            recovered = recovered and ok

    c = c_star = 0
    if exposed:
        c = sum(1 for x in calls if x.idx >= first)
        c_star = optimal_cost(task, profile, engine, calls, first, solvable, sats)
    return Verdict(success, exposed, recovered, propagated, solvable, c, c_star, complete)


def _group_paths(task: Task, rule) -> list[tuple[str, ...]]:
    for g in task.groups:
        if set(g.tools) == set(rule.members):
            return list(g.members)
    return [(t,) for t in rule.members]


def optimal_cost(task: Task, profile: Profile, engine: Engine, calls: list[CallRecord], first: int,
                 solvable: bool, sats: list[dict[str, list[int]]] | None = None) -> int:
    """c*: tool calls an optimal oracle needs from the first perturbed call (included), starting from
    the trajectory's state at that moment (spec §6.2)."""
    if not solvable:
        return 1
    first_call = next(c for c in calls if c.idx == first)
    activated_tool = first_call.tool
    best = math.inf
    rules = list(profile.rules)
    # under a permanent fault no path through a failing tool completes: the activated one, and the
    # tools other rules were bound to when the task was made
    blocked = {activated_tool} | {r.victim for r in rules if r.victim is not None}
    for i, s in enumerate(task.solutions):
        if profile.permanent and set(s) & blocked:
            continue
        if sats is not None:  # satisfaction before `first` = satisfying calls with a smaller index
            sat = {t: [k for k in ks if k < first] for t, ks in sats[i].items()}
            sat = {t: ks for t, ks in sat.items() if ks}
        else:
            sat = satisfied_nodes(task, i, calls, upto=first)
        cost = 1 + sum(1 for t in s if t not in sat)
        # every other group on s costs one call more: which of its members holds the fault is not
        # visible, so no agent without foreknowledge can plan around it
        cost += sum(1 for r in rules if r.rule_id != first_call.rule_id and set(s) & set(r.members))
        best = min(best, cost)
    return int(best) if best < math.inf else 1


# ------------------------------------------------------------------------------------------------
# MetricSpecs and composites


def metric_specs(perturbed: bool | None) -> list[MetricSpec]:
    tsr = MetricSpec(name="tsr", kind="mean", scale=100.0,
                     description="Task Success Rate: share of trajectories the judge marks successful.")
    prr = MetricSpec(name="prr", kind="mean", scale=100.0,
                     description="Perturbation Recovery Rate: recovered share of the exposed trajectories "
                                 "(unexposed ones are NaN, i.e. left out).")
    rc = MetricSpec(name="rc", kind="mean", scale=100.0, higher_is_better=False,
                    description="Recovery Cost: mean of I_pert * C_rec over all trajectories.")
    exposure = MetricSpec(name="exposed", kind="mean", scale=100.0,
                          description="Share of trajectories that met the injected perturbation.")
    if perturbed is False:
        return [tsr]
    return [tsr, prr, rc, exposure]


def _mean(xs: list[float]) -> float:
    xs = [x for x in xs if x is not None and not math.isnan(x)]
    return sum(xs) / len(xs) if xs else NAN


def composite_avg(tsr_cells: list[float], prr_cells: list[float], rc_cells: list[float]) -> float:
    """Avg = (mean TSR over 20 cells + mean PRR over 16 + 1 - mean RC over 16) / 3 (paper §4.2).
    NaN PRR cells (no exposed trajectory) are left out of the PRR mean."""
    return (_mean(tsr_cells) + _mean(prr_cells) + 1.0 - _mean(rc_cells)) / 3.0


def trust_gap(prr_by_p: dict[str, float]) -> dict[str, float]:
    """Explicit-implicit PRR gap (paper §4.3): transient P1-P3, permanent P2-P4, overall mean."""
    transient = prr_by_p.get("P1", NAN) - prr_by_p.get("P3", NAN)
    permanent = prr_by_p.get("P2", NAN) - prr_by_p.get("P4", NAN)
    return {"transient": transient, "permanent": permanent, "overall": (transient + permanent) / 2}


def scaling_slopes(params: list[float], tsr_np: list[float], prr: list[float]) -> dict[str, float]:
    """Paper Fig. 5: OLS slopes of TSR(NP) and PRR (percentage points) against log10(total
    parameters), and their ratio (the paper: 17.85 / 4.88 = 3.66x)."""
    if len(params) < 3 or not (len(params) == len(tsr_np) == len(prr)):
        raise ValueError("need >= 3 models with parameter counts, TSR(NP) and PRR")
    xs = [math.log10(p) for p in params]

    def slope(ys: list[float]) -> float:
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        den = sum((x - mx) ** 2 for x in xs)
        return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den

    s_tsr, s_prr = slope(tsr_np), slope(prr)
    return {"tsr_slope": s_tsr, "prr_slope": s_prr, "ratio": s_tsr / s_prr}
