"""PlanBench-XL: long-horizon planning over a 1,665-tool retail ecosystem with retrieval-time
blocking (Liu, Lin et al.). The world, tasks and blockers are generated deterministically; see
`../shared/specs/planbench_xl.md` for every choice the paper left open.

The paper passage behind each generator choice that decides how hard the benchmark is. The four
that make a typed search work are options (defaults = the paper's design; the fingerprint carries
them, so a harder variant gets its own unit ids):
- Exact type retrieval (`type_neighbours=0`): "tool retrieval is performed by exact matching over
  the typed tool interfaces" after "the retriever selects the top-1 datatype" (App. E, "Request
  Matching Mechanism"). `type_neighbours=n` also returns the tools of the n nearest datatypes.
- Executables listed before noisy tools (`list_order="executables_first"`): the retriever "returns
  these tools before adding any distractors. It then fills the remaining slots with noisy variants
  ... as evenly as possible" (App. E). In block settings the alternatives take the blocked tool's
  place among the matches (Eq. 50), in a per-tool seeded order. `"shuffled"` orders each list by
  a seed of its own (the same for every model).
- Parameter description = datatype description (`param_descriptions="datatype"`): Fig. 20 shows
  the parameter `delivery_attempt_id` described by the datatype's description, and App. B.2.1
  gives each datatype one description; none names its own datatype (App. F.1: the agent never
  observes datatypes). `"parameter"` describes each parameter from its own name instead.
- Output datatype exposed (`expose_output_datatype=True`): the observations in Figs. 11-18 print
  `shipment_id = "shp_14001"`, while App. F.1 says the agent never observes datatypes (spec
  §11.5); False hides it.
Measured with bench/planbench_xl_adversaries.py --option: the planner solves default 327/327 with
the paper's choices; see docs/planbench_xl.md for each variant.

Other choices, fixed:
- Names: a tool and its noisy twins and explicit/implicit alternatives share one naming family,
  drawn before roles are assigned (world._family_names; App. B.2.2 "a small suffix or version
  change", App. B.9.2 "may differ only in the optional suffix", Fig. 21 "suffixes ... are not
  reliable signals"), so no name pattern tells a role.
- Tool descriptions end in a purpose clause written for the tool (Fig. 20), so each tool draws
  one of several clauses filled with its own glosses rather than one fixed clause per workflow.
- Noisy tools disclose why they are unreliable in their description, in prose that varies by tool
  and sits before or after the functional text (§3.1, App. B.2.2: "explicitly describes why the
  tool is unavailable or unreliable", "not meant to be indistinguishable"). Every other tool carries
  a neutral sentence of the same lengths in the same places, and the twelve tools of a family draw
  twelve different functional texts before roles are given, so only what the sentence says tells a
  role (spec §1.5 appends the note to the paired description; that made "my description lies inside
  another's" and "shortest description first" find every executable; docs/planbench_xl.md).
- Implicit-failure alternatives and noisy tools return values drawn as real values are (App.
  B.9.4: "syntactically well-formed but ... counterfactual"; Takeaway 10: "superficially
  plausible outputs"): IDs from the same number range, categorical decoys of the same shapes.
- A value counts only under the datatype a trusted call returned it as (§3.2 "datatype checking
  to ensure that the final answer is derived from a valid tool-call result"; Figs. 11 and 14).
- Misleading alternatives support a different function and answer consistently with their own
  description (Tab. 4 "Aligned", App. B.9.2): another field of the same lookup, a real function of
  the world where one exists (172 of 185), otherwise returned but untrusted.
- Single-type block settings keep the blocked tools and the number of alternatives and change only
  their behaviour (§5 Takeaway 5), so they inject three alternatives of their one type.
- Blocked sets follow App. B.9.3 (C = {} first, then combinations up to K_blk, closest to n*,
  seeded uniform tie-break); the 21 tasks with a single minimal set stay unblocked under n* = 1 by
  that rule; beyond K_blk, keep_* keep one designated path of the wanted length (blocking.py).
- Error categories and endings are the paper's (§6.1, §6.3); what fits none is reported as "other".
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolsweep.benchmarks.planbench_xl.analysis import report_tables as _report_tables
from toolsweep.benchmarks.planbench_xl.blocking import K_BLK, POOL_CAP, SETTINGS, Blocker, cache_path
from toolsweep.benchmarks.planbench_xl.environment import MAX_INVALID_CALLS, MAX_TURNS, PlanBenchEnv
from toolsweep.benchmarks.planbench_xl.metrics import all_metrics
from toolsweep.benchmarks.planbench_xl.policies import (
    EXPLOITS,
    DefaultMethodTrapPolicy,
    POLICIES,
    GuessIdsPolicy,
    NameRulePlannerPolicy,
    OraclePolicy,
    PlannerPolicy,
    RandomPolicy,
)
from toolsweep.benchmarks.planbench_xl.bounds import SEARCHED
from toolsweep.benchmarks.planbench_xl.retriever import Retriever
from toolsweep.benchmarks.planbench_xl.search import FLOOR as SEARCHED_FLOOR
from toolsweep.benchmarks.planbench_xl.search import PREFIX as SEARCH_PREFIX
from toolsweep.benchmarks.planbench_xl.search import make_searched_policy
from toolsweep.benchmarks.planbench_xl.tasks import TaskSet, build_tasks
from toolsweep.benchmarks.planbench_xl.world import N_CASES, World, build_world
from toolsweep.evaluator.protocols import Benchmark, Environment, ExploitPolicy, MetricSpec, Policy, ReportTable

__all__ = ["PlanBenchXL", "PlanBenchEnv", "lstar_of"]


class PlanBenchXL(Benchmark):
    name = "planbench_xl"
    version = "1.4.0"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid")

        n_cases: int = Field(N_CASES, ge=1, le=8, description="Backend retail cases (1 mimics the paper's IDs).")
        k_blk: int = Field(K_BLK, ge=1, le=10, description="Largest blocked tool combination searched.")
        pool_cap: int = Field(POOL_CAP, gt=0, description="Blocker combinations examined per level at most.")
        max_invalid_calls: int = Field(MAX_INVALID_CALLS, ge=1, description="Invalid calls before termination.")
        meta_tool_addendum: bool = Field(True, description="Describe the retrieval payloads in the prompt.")
        expose_output_datatype: bool = Field(True, description="Show canonical output datatypes (Figs. 11-18).")
        implicit_updates_state: bool = Field(True, description="An implicit-failure output adds d_out to D_t.")
        enf_only_if_target_unreached: bool = Field(
            False, description="Enforced exploration fires only if the target datatype was not reached.")
        blocker_pool: Literal["smallest", "paper"] = Field(
            "smallest", description="Tie-break among the blocker's best candidates: the smallest "
                                    "intervention, or the paper's literal pool of every size up to k_blk.")
        injected_alternatives: int = Field(
            3, ge=1, le=3, description="Alternatives that replace each blocked tool (one per type when mixed, "
                                       "all of the setting's type otherwise; the paper uses 3).")
        show_steps_left: bool = Field(False, description="Tell the agent its remaining step budget each turn.")
        blocker_cache: bool = Field(True, description="Keep blocked-set choices in $TOOLSWEEP_CACHE (or "
                                                      "~/.cache/toolsweep) for every process on the machine.")
        # The generator choices that make a typed search work (module docstring: the paper passage
        # behind each). The defaults are the paper's; each other value is a harder variant.
        type_neighbours: int = Field(
            0, ge=0, le=3, description="Retrieval also matches the n datatypes nearest to each resolved one "
                                       "(0 = the paper's exact typed match, App. E).")
        list_order: Literal["executables_first", "shuffled"] = Field(
            "executables_first", description="Executable matches before any distractor (App. B.6), or each "
                                             "list in a seeded order of its own.")
        param_descriptions: Literal["datatype", "parameter"] = Field(
            "datatype", description="A parameter is described by its datatype's description (Fig. 20), or "
                                    "by a sentence from its own name.")

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._lock = threading.Lock()
        self._built: tuple[World, TaskSet, Retriever, Blocker] | None = None

    def _data(self) -> tuple[World, TaskSet, Retriever, Blocker]:
        if self._built is None:
            with self._lock:
                if self._built is None:
                    world = build_world(self.options.n_cases)
                    tasks = build_tasks(world, n_cases=self.options.n_cases)
                    retriever = Retriever(world, type_neighbours=self.options.type_neighbours,
                                          list_order=self.options.list_order)
                    o = self.options
                    cache = None
                    if o.blocker_cache:
                        try:
                            cache = cache_path({"world": world.world_hash, "tasks": tasks_hash(tasks),
                                                "k_blk": o.k_blk, "pool_cap": o.pool_cap,
                                                "pool": o.blocker_pool})
                        except RuntimeError:  # no home directory to put it in: search every time
                            cache = None
                    self._built = (world, tasks, retriever,
                                   Blocker(world, pool_cap=o.pool_cap, k_blk=o.k_blk, pool=o.blocker_pool,
                                           cache_file=cache))
        return self._built

    @property
    def world(self) -> World:
        return self._data()[0]

    @property
    def task_set(self) -> TaskSet:
        return self._data()[1]

    @property
    def blocker(self) -> Blocker:
        return self._data()[3]

    def settings(self) -> dict[str, dict[str, Any]]:
        return {n: s.params() for n, s in SETTINGS.items()}

    def _spec(self, setting: str):
        if setting not in SETTINGS:
            raise KeyError(f"unknown PlanBench-XL setting {setting!r}; available: {', '.join(SETTINGS)}")
        return SETTINGS[setting]

    def tasks(self, setting: str) -> list[str]:
        ts = self.task_set
        return [t.id for t in (ts.single_step if self._spec(setting).single_step else ts.tasks)]

    def make_env(self, task_id: str, setting: str, seed: int) -> Environment:
        world, ts, retriever, blocker = self._data()
        spec = self._spec(setting)
        task = ts.by_id.get(task_id)
        if task is None or task.single_step != spec.single_step:
            raise KeyError(f"task {task_id!r} is not part of setting {setting!r}; see tasks({setting!r})")
        blocked = blocker.choose(task, spec, seed).blocked
        o = self.options
        return PlanBenchEnv(world, retriever, task, spec, blocked, seed, max_turns=MAX_TURNS,
                            max_invalid_calls=o.max_invalid_calls, meta_tool_addendum=o.meta_tool_addendum,
                            expose_output_datatype=o.expose_output_datatype,
                            implicit_updates_state=o.implicit_updates_state,
                            enf_only_if_target_unreached=o.enf_only_if_target_unreached,
                            show_steps_left=o.show_steps_left, alternatives=o.injected_alternatives,
                            param_descriptions=o.param_descriptions)

    def metrics(self, setting: str | None = None) -> list[MetricSpec]:
        return all_metrics()

    def exploit_policies(self) -> list[ExploitPolicy]:
        """Guessed values and implicit-failure values are never grounded, so none of these is ever correct."""
        implicit = [s for s in self.settings() if "implicit" in s]
        with_implicit = [n for n, s in SETTINGS.items() if s.objective != "none" and "imp" in s.btypes]
        return [
            ExploitPolicy(name="guess_ids", description=EXPLOITS["guess_ids"], ceilings={"accuracy": 0.0},
                          settings=implicit),
            ExploitPolicy(name="answer_implicit", description=EXPLOITS["answer_implicit"],
                          ceilings={"accuracy": 0.0}),
            ExploitPolicy(name="no_tools", description=EXPLOITS["no_tools"], ceilings={"accuracy": 0.0}),
            ExploitPolicy(name="default_method_trap", description=EXPLOITS["default_method_trap"],
                          ceilings={"accuracy": 0.0}, settings=with_implicit),
        ] + [
            ExploitPolicy(name=f"name_rule_planner@{setting}", description=EXPLOITS["name_rule_planner"],
                          ceilings={"accuracy": ceiling}, settings=[setting])
            for setting, ceiling in _name_rule_ceilings().items()
        ]

    def scripted_policies(self) -> dict[str, str]:
        cells = {f"name_rule_planner@{s}": f"{EXPLOITS['name_rule_planner']} (bounded in {s})"
                 for s in _name_rule_ceilings()}
        return {**POLICIES, **EXPLOITS, **cells,
                SEARCHED_FLOOR: "per setting, the strongest policy PlanBench-XL's adversary search found on "
                                "accuracy (search.py, bounds.SEARCHED); no ground truth, no model"}

    def baseline_policy(self) -> str | None:
        """The searched floor: per setting, the strongest policy PlanBench-XL's adversary search found on
        accuracy (search.py; the table in bounds.SEARCHED) where it beats the planner (a typed backward
        search that reads no prose and no ground truth), else the planner."""
        return SEARCHED_FLOOR

    def make_scripted_policy(self, name: str, env: Environment, seed: int) -> Policy:
        name = name.split("@", 1)[0]  # name_rule_planner@<setting>: the same policy, bounded per cell
        if name.startswith(SEARCH_PREFIX) or name == SEARCHED_FLOOR:
            return make_searched_policy(name, env.spec.name)  # type: ignore[attr-defined]
        if name == "oracle":
            return OraclePolicy(env)  # type: ignore[arg-type]
        if name == "random":
            return RandomPolicy(seed)
        if name == "planner":
            return PlannerPolicy()
        if name == "default_method_trap":
            return DefaultMethodTrapPolicy(env)  # type: ignore[arg-type]
        if name == "name_rule_planner":
            return NameRulePlannerPolicy()
        if name in ("guess_ids", "answer_implicit", "no_tools"):
            return GuessIdsPolicy(env, name)  # type: ignore[arg-type]
        return super().make_scripted_policy(name, env, seed)

    def fingerprint(self) -> dict[str, Any]:
        world, ts, _, _ = self._data()
        return {"version": self.version, "world_hash": world.world_hash, "tasks_hash": tasks_hash(ts),
                "n_tools": len(world.tools), "n_tasks": len(ts.tasks),
                "options": self.options.model_dump(exclude={"blocker_cache"}),  # the cache changes no episode
                # the searched floor plays the table's policies: a new table is another floor
                "searched_sha256": hashlib.sha256(json.dumps(SEARCHED, sort_keys=True).encode()).hexdigest()}

    def max_turns(self, setting: str) -> int:
        # Injected enforced-exploration feedback is not a turn; the env's own budget is 100.
        return MAX_TURNS + 10

    def report_tables(self, cells: list[dict[str, Any]]) -> list[ReportTable]:
        return _report_tables([c for c in cells if c.get("benchmark", self.name) == self.name])

    def lstar(self, task_id: str) -> int:
        return self.task_set.by_id[task_id].lstar


# The plain planner's accuracy per blocking setting over all 327 tasks (seed 42, bench/
# planbench_xl_adversaries.py). The planner with the name rule scored 1.000 in every one of them;
# per cell it may not beat the planner materially. The exploit suite plays a few tasks per cell, so
# each ceiling is the planner's score plus 0.2 of sampling slack, and never above 0.95.
_PLANNER_ACCURACY = {"ratio_0.2": 0.893, "ratio_0.4": 0.835, "ratio_0.6": 0.709, "ratio_0.8": 0.713,
                     "one_path_mixed": 0.654, "one_path_explicit": 0.694, "one_path_implicit": 0.694,
                     "one_path_misleading": 0.621, "keep_shortest": 0.948, "keep_longest": 0.092}


def _name_rule_ceilings() -> dict[str, float]:
    out = {s: round(min(0.95, a + 0.2), 3) for s, a in _PLANNER_ACCURACY.items()}
    out.update({f"one_path_mixed_enf{k}": out["one_path_mixed"] for k in range(1, 6)})
    return out


def tasks_hash(ts: TaskSet) -> str:
    """sha256 over the task records that selection fixes (inputs, values, gold, query, pi*)."""
    blob = [[t.id, list(t.inputs), t.target, t.case, list(t.input_values), t.gold, t.query, t.lstar,
             list(t.gt_path)] for t in ts.tasks + ts.single_step]
    return hashlib.sha256(json.dumps(blob, separators=(",", ":")).encode()).hexdigest()


def lstar_of(task_id: str, n_cases: int = N_CASES) -> int:
    """L* of a task id (for grouping results by shortest-path length)."""
    return build_tasks(build_world(n_cases), n_cases=n_cases).by_id[task_id].lstar
