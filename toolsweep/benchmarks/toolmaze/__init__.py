"""ToolMaze (Zhu et al., "When Tools Fail"): DAG tool tasks under the C1-C4 x P0-P4 matrix.

Spec: ../shared/specs/toolmaze.md. Files: tools.py (corpus and simulators), tasks.py (generator),
perturbation.py (fault engine), environment.py (function-calling episode), metrics.py (judge,
TSR/PRR/RC, composites), policies.py (scripted agents), prompts.py (std / hint prompts).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import threading
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolsweep.benchmarks.toolmaze.bounds import CEILINGS, FLOORS, SEARCHED, sample_proof, settings_of
from toolsweep.benchmarks.toolmaze.environment import ToolMazeEnv
from toolsweep.benchmarks.toolmaze.metrics import JudgeOptions, composite_avg, metric_specs, trust_gap
from toolsweep.benchmarks.toolmaze.perturbation import Profile, build_profile
from toolsweep.benchmarks.toolmaze.policies import EXPLOITS, POLICIES, make_policy
from toolsweep.benchmarks.toolmaze.tasks import LEVELS, TaskSet, build_tasks, canonical_tasks
from toolsweep.benchmarks.toolmaze.tools import seeded_int
from toolsweep.evaluator.protocols import Benchmark, Environment, ExploitPolicy, MetricSpec, Policy, ReportTable
from toolsweep.evaluator.completeness import PARTIAL_MARK, PARTIAL_NOTE, is_partial

MODES = ("P0", "P1", "P2", "P3", "P4")
PERTURBED = ("P1", "P2", "P3", "P4")


def distractors(ts: TaskSet, task, n: int, view: str = "task") -> list[str]:
    """Tools of the task's primary domain that are not in its DAG: all of them in the 'domain' view,
    else `n` of them (seeded per task)."""
    if view == "domain":
        own = task.tool_set
        return sorted(t.name for t in ts.corpus.tools.values()
                      if t.domain == task.primary_domain and t.name not in own)
    if n <= 0:
        return []
    pool = sorted(t.name for t in ts.corpus.tools.values()
                  if t.domain == task.primary_domain and t.name not in task.tool_set)
    rng = random.Random(seeded_int(ts.dataset_seed, "distractors", task.task_id))
    return rng.sample(pool, min(n, len(pool)))


def _perturbed_cells() -> list[str]:
    return [f"C{c}-{p}" for c in LEVELS for p in PERTURBED]


def setting_names() -> list[str]:
    """The 36 cells: C{1..4}-P0-std, C{1..4}-P{1..4}-std, C{1..4}-P{1..4}-hint (spec §2.3)."""
    names = []
    for c in LEVELS:
        names.append(f"C{c}-P0-std")
        names += [f"C{c}-{p}-std" for p in PERTURBED]
        names += [f"C{c}-{p}-hint" for p in PERTURBED]
    return names


def parse_setting(setting: str) -> tuple[int, str, str]:
    try:
        c, p, prompt = setting.split("-")
        level = int(c[1:])
        if c[0] != "C" or level not in LEVELS or p not in MODES or prompt not in ("std", "hint"):
            raise ValueError
        if p == "P0" and prompt == "hint":
            raise ValueError
    except ValueError:
        raise ValueError(f"unknown toolmaze setting {setting!r}; settings look like 'C2-P3-hint' "
                         "(C1-C4, P0-P4, std|hint; the hint prompt is not used with P0)") from None
    return level, p, prompt


class ToolMaze(Benchmark):
    name: ClassVar[str] = "toolmaze"
    version: ClassVar[str] = "1.4.0"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid")
        dataset_seed: int = Field(0, description="Seed of corpus values, tasks and fault profiles; "
                                  "independent of the run seed (spec §9).")
        max_steps: int = Field(25, gt=0, description="Agent steps per episode (paper §4.1: 25).")
        c4_fault_slots: Literal["all", "one"] = Field(
            "all", description="C4: every parallel slot carries a fault rule ('all', spec A6) or one "
                               "seeded slot does ('one').")
        fault_binding: Literal["task", "first_call"] = Field(
            "task", description="Which tool takes a fault. 'task': the tool of s* the profile names when the "
            "task is made (paper §3.4, 'which tool on the preferred path s* should fail'), so call order "
            "cannot move it. 'first_call': the paper's literal activation rule, the group member called "
            "first takes it (a look-alike called first and never read is then recorded as a reroute; "
            "docs/toolmaze.md).")
        tool_view: Literal["domain", "task"] = Field(
            "domain", description="Tools the agent is shown. 'domain': the task's DAG tools and every other "
            "tool of its primary domain, so alternatives must be found among look-alikes (the paper's "
            "'dynamic path discovery', §3.2; see docs/toolmaze.md). 'task': only the DAG's tools and their "
            "alternatives, plus n_distractors (the spec's A12 reading).")
        n_distractors: int = Field(0, ge=0, le=20, description="With tool_view 'task': extra same-domain "
                                   "tools shown to the agent that are not in the task's DAG (spec §3.2 step 10).")
        accept_abort_when_solvable: bool = Field(
            False, description="Judge: also count a graceful halt as success on C2-C4 permanent faults "
                               "(the reading of the paper's Fig. 14, spec A7); default follows §3.5.")
        require_failure_ack: bool = Field(
            True, description="Judge: a graceful stop (C1 under P2/P4) must also say in its final text "
                              "that the task could not be completed: the paper's 'wisely aborting "
                              "unsolvable tasks' (§3.5) and 'detects the irrecoverable failure and stops "
                              "gracefully' (Fig. 8). Off: any final answer after stopping counts (spec §6.2 (e)).")
        judge: str = Field(
            "rule", pattern=r"^(rule|llm:.+)$",
            description="Who reads a wise abort's final answer (does it say the task cannot be done?): "
                        "'rule' (sentence structure, docs/verdicts.md) or 'llm:<model>', a helper model of the "
                        "sweep asked at temperature 0 (abort_judge.py); the rule's values stay beside it as "
                        "rule_tsr / rule_prr with their agreement (ack_agreement).")

    @property
    def judge_model(self) -> str | None:
        return self.options.judge.split(":", 1)[1] if self.options.judge.startswith("llm:") else None

    def helper_models(self) -> dict[str, str]:
        return {"judge": self.judge_model} if self.judge_model else {}

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._profiles: dict[tuple[str, str], Profile] = {}
        self._visible: dict[tuple[str, str], list[str]] = {}
        self._lock = threading.Lock()

    @property
    def data(self) -> TaskSet:
        return build_tasks(self.options.dataset_seed)

    def settings(self) -> dict[str, dict[str, Any]]:
        out = {}
        for name in setting_names():
            level, p, prompt = parse_setting(name)
            out[name] = {"complexity": f"C{level}", "perturbation": p, "prompt": prompt,
                         "manifestation": {"P0": None, "P1": "explicit", "P2": "explicit",
                                           "P3": "implicit", "P4": "implicit"}[p],
                         "persistence": {"P0": None, "P1": "transient", "P2": "permanent",
                                         "P3": "transient", "P4": "permanent"}[p]}
        return out

    def tasks(self, setting: str) -> list[str]:
        level, _, _ = parse_setting(setting)
        return [t.task_id for t in self.data.level(level)]

    def profile(self, task_id: str, mode: str) -> Profile:
        key = (task_id, mode)
        with self._lock:
            if key not in self._profiles:
                ts = self.data
                self._profiles[key] = build_profile(ts, ts.task(task_id), mode, self.options.c4_fault_slots,
                                                         self.options.fault_binding)
            return self._profiles[key]

    def _distractors(self, ts: TaskSet, task) -> list[str]:
        """The task's extra visible tools, computed once per task (they depend on the dataset only)."""
        key = ("distractors", task.task_id)
        with self._lock:
            if key not in self._visible:
                self._visible[key] = distractors(ts, task, self.options.n_distractors, self.options.tool_view)
            return self._visible[key]

    def make_env(self, task_id: str, setting: str, seed: int) -> Environment:
        level, p, prompt = parse_setting(setting)
        ts = self.data
        task = ts.task(task_id)
        if task.complexity != level:
            raise ValueError(f"task {task_id} is a C{task.complexity} task; setting {setting} is C{level}")
        # the environment depends only on the dataset seed: every model and run seed sees the same
        # task and the same injected responses (spec §9); `seed` is the run seed.
        return ToolMazeEnv(ts, task, self.profile(task_id, p), prompt, seed, self.options.max_steps,
                           distractors=self._distractors(ts, task),
                           judge_options=JudgeOptions(self.options.accept_abort_when_solvable,
                                                      self.options.require_failure_ack),
                           judged=self.judge_model is not None)

    def metrics(self, setting: str | None = None) -> list[MetricSpec]:
        if setting is None:
            return metric_specs(None)
        _, p, _ = parse_setting(setting)
        out = metric_specs(p != "P0")
        if self.judge_model and p != "P0":
            out += [
                MetricSpec(name="rule_tsr", kind="mean", scale=100.0,
                           description="TSR with the wise abort's acknowledgement read by rule, not the judge"),
                MetricSpec(name="rule_prr", kind="mean", scale=100.0,
                           description="PRR with the wise abort's acknowledgement read by rule, not the judge"),
                MetricSpec(name="ack_agreement", kind="mean", scale=100.0,
                           description="Share of judged final answers where the judge and the rule agree on "
                                       "whether the answer says the task cannot be done"),
                MetricSpec(name="judge_unreadable", kind="mean", scale=100.0, higher_is_better=False,
                           description="Final answers whose judge verdict stayed unreadable after every ask "
                                       "(the values that depend on it are left undefined)"),
            ]
        return out

    def scripted_policies(self) -> dict[str, str]:
        return {**POLICIES, **EXPLOITS}

    def exploit_policies(self) -> list[ExploitPolicy]:
        """Adversaries (ceilings) and positive controls (floors), checked cell by cell (pooled=False).

        `bounds.py` holds every cell's bound; tests/benchmarks/toolmaze/test_toolmaze_exploits.py checks
        all of them on a seeded sample of each cell (with a binomial allowance for non-zero ceilings)
        and on every task (slow). Declared here, for the cross-benchmark suite's small samples, are the
        bounds that hold on any sample: each adversary's zero ceilings and each control's floors (every
        task recovered). A recovery is credited only when the fault was met and then handled
        (metrics.judge), so scatter, junk and premature aborts earn none, and a real retry, switch or
        acknowledged abort earns its credit."""
        out = []
        for name, cells in CEILINGS.items():
            zero = sample_proof(cells)
            metrics = sorted({m for c in zero for m in cells[c]})
            out.append(ExploitPolicy(name=name, description=EXPLOITS.get(name) or POLICIES[name],
                                     ceilings={m: 0.0 for m in metrics}, settings=settings_of(zero)))
        for name, cells in FLOORS.items():
            floors: dict[str, float] = {}
            for bound in cells.values():
                for metric, v in bound.items():
                    floors[metric] = min(floors.get(metric, v), v)
            out.append(ExploitPolicy(name=name, description=EXPLOITS.get(name) or POLICIES[name],
                                     floors=floors, settings=settings_of(sorted(cells))))
        out += [
            ExploitPolicy(name="junk_recovery", description=EXPLOITS["junk_recovery"],
                          ceilings={"prr": 0.0, "tsr": 0.0}, settings=settings_of(_perturbed_cells())),
            ExploitPolicy(name="no_tools", description=EXPLOITS["no_tools"], ceilings={"tsr": 0.0}),
        ]
        return out

    def baseline_policy(self) -> str:
        """The searched floor: per cell, the strongest policy ToolMaze's adversary search found on the
        cell's tuning half (search.py, the table in bounds.SEARCHED, which reports it on the held-out
        half) where it beats the greedy argument binder, else the
        greedy binder. Both use no model and read only what an agent reads (query, tool schemas,
        responses). Its per-cell scores are ToolMaze's floor."""
        return "searched_floor"

    def make_scripted_policy(self, name: str, env: Environment, seed: int) -> Policy:
        if not isinstance(env, ToolMazeEnv):
            raise TypeError("toolmaze scripted policies need a ToolMaze environment")
        return make_policy(name, env, seed, bench=self)

    def fingerprint(self) -> dict[str, Any]:
        ts = self.data
        return {"version": self.version, **self.options.model_dump(),
                "corpus_sha256": ts.corpus.fingerprint(),
                "tasks_sha256": hashlib.sha256(canonical_tasks(ts).encode()).hexdigest(),
                # the searched floor plays the table's policies: a new table is another floor
                "searched_sha256": hashlib.sha256(json.dumps(SEARCHED, sort_keys=True).encode()).hexdigest()}

    def max_turns(self, setting: str) -> int:
        return self.options.max_steps

    def report_tables(self, cells: list[dict[str, Any]]) -> list[ReportTable]:
        return report_tables(cells)


# ------------------------------------------------------------------------------------------------


def _val(cells: dict, model: str, setting: str, metric: str) -> float:
    cell = cells.get((model, setting))
    if cell is None:
        return math.nan
    m = cell.get("metrics", {}).get(metric)
    return math.nan if m is None or m.get("value") is None else float(m["value"])


def _mean(xs: list[float]) -> float:
    xs = [x for x in xs if not math.isnan(x)]
    return sum(xs) / len(xs) if xs else math.nan


def _pct(x: float, partial: bool = False) -> str:
    """A percentage, marked `*` when a cell it rests on is partial (a table never shows a partial number plain)."""
    return "—" if math.isnan(x) else f"{100 * x:.2f}" + (PARTIAL_MARK if partial else "")


def _partial(cells: dict, model: str, settings: list[str]) -> bool:
    """Whether any of the model's cells in `settings` is partial (not every unit recorded)."""
    return any(is_partial(cells.get((model, s)) or {}) for s in settings)


def report_tables(cells: list[dict[str, Any]]) -> list[ReportTable]:
    """Table 2 (P-based, macro over C1-C4), Table 20 (C-based) and the trust gap, from cells."""
    cells = [c for c in cells if c.get("benchmark", "toolmaze") == "toolmaze"]
    idx = {(c["model"], c["setting"]): c for c in cells}
    models = sorted({c["model"] for c in cells})
    cols = (["Model (prompt)", "TSR NP"] + [f"TSR {p}" for p in PERTURBED] + [f"PRR {p}" for p in PERTURBED]
            + [f"RC {p}" for p in PERTURBED] + ["Avg."])
    rows, rows20, gaps = [], [], []
    for model in models:
        for prompt in ("std", "hint"):
            pset = [f"C{c}-{p}-{prompt}" for c in LEVELS for p in PERTURBED]
            if not any((model, s) in idx for s in pset):
                continue
            np_set = [f"C{c}-P0-std" for c in LEVELS]
            np_cells = [_val(idx, model, s, "tsr") for s in np_set]
            by = {m: {p: [_val(idx, model, f"C{c}-{p}-{prompt}", m) for c in LEVELS] for p in PERTURBED}
                  for m in ("tsr", "prr", "rc")}
            avg = composite_avg(np_cells + [x for p in PERTURBED for x in by["tsr"][p]],
                                [x for p in PERTURBED for x in by["prr"][p]],
                                [x for p in PERTURBED for x in by["rc"][p]])
            part = {p: _partial(idx, model, [f"C{c}-{p}-{prompt}" for c in LEVELS]) for p in PERTURBED}
            whole_partial = _partial(idx, model, np_set + pset)
            label = f"{model} ({'w/ hint' if prompt == 'hint' else 'w/o hint'})"
            rows.append([label, _pct(_mean(np_cells), _partial(idx, model, np_set))]
                        + [_pct(_mean(by[m][p]), part[p]) for m in ("tsr", "prr", "rc") for p in PERTURBED]
                        + [_pct(avg, whole_partial)])
            row20 = [label]
            for i, c in enumerate(LEVELS):
                level_partial = _partial(idx, model, [f"C{c}-{p}-{prompt}" for p in PERTURBED])
                for m in ("tsr", "prr", "rc"):
                    row20.append(_pct(_mean([by[m][p][i] for p in PERTURBED]), level_partial))
            rows20.append(row20 + [_pct(avg, whole_partial)])
            if prompt == "hint":
                g = trust_gap({p: _mean(by["prr"][p]) for p in PERTURBED})
                gap_partial = _partial(idx, model, pset)
                gaps.append([model, _pct(g["transient"], gap_partial), _pct(g["permanent"], gap_partial),
                             _pct(g["overall"], gap_partial)])
    out = [ReportTable(
        title="ToolMaze Table 2: P-based average results (%) across perturbation modes",
        columns=cols, rows=rows,
        note="Macro-averages over C1-C4. TSR NP uses the standard prompt (the hint is not used on P0). "
             "Avg. = (mean TSR over 20 cells + mean PRR over 16 + 1 - mean RC over 16) / 3; PRR cells "
             "without exposed trajectories are left out.")]
    out.append(ReportTable(
        title="ToolMaze Table 20: C-based average results (%) across complexity levels (P1-P4)",
        columns=["Model (prompt)"] + [f"C{c} {m}" for c in LEVELS for m in ("TSR", "PRR", "RC")] + ["Avg."],
        rows=rows20, note="Each C column averages the four perturbation modes."))
    for prompt, num in (("std", 21), ("hint", 22)):
        detail = []
        for model in models:
            if not any((model, f"C{c}-{p}-{prompt}") in idx for c in LEVELS for p in PERTURBED):
                continue
            row = [model]
            for c in LEVELS:
                row.append(_pct(_val(idx, model, f"C{c}-P0-std", "tsr"), _partial(idx, model, [f"C{c}-P0-std"])))
                for p in PERTURBED:
                    setting = f"C{c}-{p}-{prompt}"
                    row += [_pct(_val(idx, model, setting, m), _partial(idx, model, [setting]))
                            for m in ("tsr", "prr", "rc")]
            detail.append(row)
        if detail:
            out.append(ReportTable(
                title=f"ToolMaze Table {num}: detailed results ({'failure-aware' if prompt == 'hint' else 'standard'}"
                      " prompt) across C1-C4 and NP/P1-P4",
                columns=["Model"] + [f"C{c} {col}" for c in LEVELS for col in
                                     ["TSR NP"] + [f"{p} {m}" for p in PERTURBED for m in ("TSR", "PRR", "RC")]],
                rows=detail, note="TSR and PRR: higher is better; RC: lower is better. NP uses the standard prompt."))
    judged = [c for c in cells if "ack_agreement" in c.get("metrics", {})]
    if judged:
        out.append(ReportTable(
            title="ToolMaze wise abort: LLM judge vs rule",
            columns=["Model", "Setting", "n", "PRR (judge)", "PRR (rule)", "TSR (judge)", "TSR (rule)",
                     "agreement", "unreadable"],
            rows=[[c["model"], c["setting"], c.get("n")] + [_pct(_val(idx, c["model"], c["setting"], m)) for m in
                   ("prr", "rule_prr", "tsr", "rule_tsr", "ack_agreement", "judge_unreadable")]
                  for c in sorted(judged, key=lambda c: (c["model"], c["setting"]))],
            note="With `judge: llm:<model>` the judge reads whether a final answer after a fault says the task "
                 "cannot be done; the rule's reading (docs/verdicts.md) stays beside it. Agreement: share of "
                 "judged answers where both read the same; unreadable verdicts are out of PRR's n."))
    if gaps:
        out.append(ReportTable(
            title="ToolMaze implicit-explicit trust gap (w/ hint, PRR points)",
            columns=["Model", "transient P1-P3", "permanent P2-P4", "overall"], rows=gaps,
            note="Paper §4.3 model means: transient 53.75, permanent 20.54, overall 37.15."))
    if any(is_partial(c) for c in cells):
        out = [t.model_copy(update={"note": f"{t.note} {PARTIAL_NOTE}".strip()}) for t in out]
    return out


__all__ = ["ToolMaze", "setting_names", "parse_setting", "report_tables"]
