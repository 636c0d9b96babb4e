"""APB — Agent Planning Benchmark (spec `shared/specs/apb.md`): planning diagnosed apart from execution.

The model writes a whole plan (holistic), the next k steps of a partial trajectory (step-wise), a plan
among distractor tools (extraneous), the next action after a tool broke (broken), or a refusal when the
task cannot be done (unsolvable); plus the efficiency and refinement studies. Cases are generated from
a seed with no LLM (generator.py) and graded by rule against reference DAGs (grader.py).
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolsweep.benchmarks.apb.environment import JUDGE_PROTOCOL, APBEnv
from toolsweep.benchmarks.apb.generator import (
    EXTRANEOUS_LEVELS,
    GENERATOR_VERSION,
    REFINE_MODES,
    UNSOLVABLE_TYPES,
    case_hash,
    dataset,
)
from toolsweep.benchmarks.apb.grader import GRADER_VERSION
from toolsweep.benchmarks.apb.metrics import judge_specs, report_tables, setting_metrics
from toolsweep.benchmarks.apb.baseline import NAME as BASELINE
from toolsweep.benchmarks.apb.bounds import SEARCHED
from toolsweep.benchmarks.apb.policies import EXPLOITS, POLICIES, make_policy
from toolsweep.evaluator.protocols import Benchmark, Environment, ExploitPolicy, MetricSpec, Policy, ReportTable


def _settings() -> dict[str, dict[str, Any]]:
    s: dict[str, dict[str, Any]] = {"holistic": {"kind": "holistic", "in_4209": True}}
    for k in (1, 2, 3):
        s[f"stepwise_k{k}"] = {"kind": "stepwise", "k": k, "stage": "middle", "in_4209": True}
    for stage in ("early", "late"):
        s[f"stepwise_stage_{stage}"] = {"kind": "stepwise", "k": 1, "stage": stage, "in_4209": False}
    for half in ("holistic", "stepwise"):
        for n in (0, *EXTRANEOUS_LEVELS):
            s[f"extraneous_{half}_n{n}"] = {"kind": f"extraneous_{half}", "n_e": n, "in_4209": n > 0}
    s["broken"] = {"kind": "broken", "in_4209": True}
    for u in UNSOLVABLE_TYPES:
        s[f"unsolvable_{u}"] = {"kind": "unsolvable", "unsolvable_type": u, "in_4209": True}
    s["unsolvable_control"] = {"kind": "unsolvable_control", "in_4209": False}
    s["efficiency"] = {"kind": "efficiency", "in_4209": False}
    for mode in REFINE_MODES:
        s[f"refine_{mode}"] = {"kind": "refine", "mode": mode, "turns": 3, "in_4209": False}
    return s


SETTINGS = _settings()
SETTING_PARAM_DOCS = {
    "kind": "the task format: holistic (the whole plan at once), stepwise (the next k steps of a plan), "
            "extraneous_* (with distractor tools), broken (a tool fails), unsolvable, refine, efficiency",
    "in_4209": "true: one of the paper's 4,209 main cases; false: an additional study outside that count",
    "k": "stepwise: how many next steps the model plans",
    "stage": "stepwise: where in the plan the prefix stops (early, middle, late)",
    "n_e": "extraneous: how many distractor tools are added",
    "unsolvable_type": "unsolvable: what makes the query unanswerable (conflict, info, tool, visual)",
    "mode": "refine: who critiques the first answer and how (self/critic model, plus: with the 6 error "
            "types, minus: a general critique; Tab. 4's Self_R+/-, Critic_R+/-)",
    "turns": "refine: turns of the protocol (answer, critique, refined answer)",
}
JUDGE_VALIDATION = "judge_validation"


class APB(Benchmark):
    """The APB plugin: the paper's 4,209 generated cases over its settings (by default each Unsolvable and
    Tool-Broken case beside its twin, option `twins`), plus its extra studies."""

    name = "apb"
    version = "1.8.0"

    def setting_param_docs(self) -> dict[str, str]:
        return dict(SETTING_PARAM_DOCS)

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid")

        gen_seed: int = Field(0, ge=0, description="Generation seed: one fixed case set per seed (§9).")
        file_mode: Literal["caption", "scene", "render"] = Field(
            "scene", description="How image/video files reach the model: a caption, the caption plus a redacted "
            "structured scene (default), or rendered PNG frames as image parts for vision models.")
        distractor_position: Literal["append", "shuffle"] = Field(
            "shuffle", description="Extraneous tools shuffled in among the originals (default: appended after "
            "Finish, a distractor is found by its position) or 'append': after the originals as the paper lists "
            "them (Figs. 37/38), for its exact setup.")
        unsolvable_visual: Literal["other_file", "no_file"] = Field(
            "other_file", description="What an Unsolvable visual case attaches: another case's files, so the "
            "file the query names is missing while something is attached (default: with no file at all, the "
            "file count alone tells the case from every solvable one), or 'no_file': nothing, as the paper's "
            "Fig. 17 (`files = []`), for its exact setup.")
        twins: bool = Field(
            True, description="Each Unsolvable and Tool-Broken setting also holds every case's twin, so `correct` "
            "goes only to a response to what the case shows (default). An Unsolvable case's twin is solvable "
            "(the same requirement, a world that meets it, the same refusal prompt): a refusal of the case or a "
            "correct plan for the twin is correct, and refusing everything earns 50%. A Tool-Broken case's twin "
            "shows the same call succeeding: Replace or Alter on the case, the right next step on the twin, "
            "and switching tools without reading the error earns 50%. With the paper's cases alone both earned "
            "100%. false: the paper's layout, for its exact setup. `pass` (the refusal rate) and the 5-way "
            "Tool-Broken shares are the paper's, over its cases, either way.")
        lookalikes: bool = Field(
            True, description="Each Tool-Broken case also lists 3 look-alikes of the broken tool (default): the "
            "replacement and each look-alike read as the broken tool reworded (another name, renamed parameters, "
            "the operation said in another word), and only the replacement's word means the same operation. "
            "With the replacement alone it was the listed tool whose description is nearest the broken one's, "
            "so a rule over strings replaced on every case; with look-alikes that rule picks it in about 1 case "
            "of 4. false: the paper's layout (the replacement alone, described as the broken tool is), for its "
            "exact setup.")
        critic: str = Field(
            "rule", pattern=r"^(rule|model:\S+)$",
            description="Reviewer of the Critic_R± refinement protocols (§8.1). 'model:<name>': a served model of the "
            "sweep (under `helpers:` or `models:`; the paper used its strongest model) reviews the initial answer "
            "with P8/P7. 'rule': a deterministic reviewer that names the error categories the rule grader finds "
            "(R+) or only says whether the answer is wrong (R-).")
        grader: str = Field(
            "rule", pattern=r"^(rule|llm:\S+)$",
            description="'rule': the deterministic grader of §6.2 (apb-rule-4). 'llm:<name>': the paper's judge "
            "prompts J1-J9 sent to that served model at temperature 0 grade every answer instead (§6.5); the rule "
            "grade is kept as rule_* with the Tab. 7 agreement statistics, and the setting "
            "'judge_validation' (a seeded sample of `judge_sample` cases) becomes available.")
        judge_sample: int = Field(720, gt=0, description="Cases in the judge_validation sample (the paper: 720).")
        oracle_ref_style: Literal["dollar", "step"] = Field(
            "dollar", description="How the oracle names data sources: `$Tool.field` or 'the output of step i'.")

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._fingerprint: dict[str, Any] | None = None
        self.judge_model = self.options.grader.split(":", 1)[1] if self.options.grader != "rule" else None
        self.critic_model = self.options.critic.split(":", 1)[1] if self.options.critic != "rule" else None
        self._settings = dict(SETTINGS)
        if self.judge_model:
            self._settings[JUDGE_VALIDATION] = {"kind": "judge_validation", "n": self.options.judge_sample,
                                                "in_4209": False}
        self._judge_sample: dict[str, str] | None = None

    @property
    def data(self):  # noqa: ANN201 - the cached Dataset
        return dataset(self.options.gen_seed)

    def settings(self) -> dict[str, dict[str, Any]]:
        return {k: dict(v) for k, v in self._settings.items()}

    def helper_models(self) -> dict[str, str]:
        roles = {}
        if self.judge_model:
            roles["judge"] = self.judge_model
        if self.critic_model:
            roles["critic"] = self.critic_model
        return roles

    def _check(self, setting: str) -> None:
        if setting not in self._settings:
            hint = " (it needs grader: llm:<model>)" if setting == JUDGE_VALIDATION else ""
            raise KeyError(f"APB has no setting {setting!r}{hint}; available: {', '.join(self._settings)}")

    def judge_sample(self) -> dict[str, str]:
        """The judge-validation sample (§6.5): `judge_sample` cases drawn with a fixed seed from the
        4,209 of Table 1, as task id -> the setting it belongs to."""
        if self._judge_sample is None:
            pool = [(t["task_id"], s) for s, spec in SETTINGS.items() if spec["in_4209"]
                    for t in self.data.cell(s, twins=False, lookalikes=self.options.lookalikes)]
            rng = random.Random(f"apb-judge-sample|{self.options.gen_seed}")
            picked = rng.sample(pool, min(self.options.judge_sample, len(pool)))
            self._judge_sample = dict(sorted(picked))
        return self._judge_sample

    def tasks(self, setting: str) -> list[str]:
        self._check(setting)
        if setting == JUDGE_VALIDATION:
            return list(self.judge_sample())
        return [t["task_id"] for t in self.data.cell(setting, self.options.twins, self.options.lookalikes)]

    def make_env(self, task_id: str, setting: str, seed: int) -> Environment:
        self._check(setting)
        if setting == JUDGE_VALIDATION:  # a case of another setting, graded by both graders
            if task_id not in self.judge_sample():
                raise KeyError(f"APB's judge_validation sample has no task {task_id!r}")
            setting = self.judge_sample()[task_id]
        index = self.data.task_index(setting, self.options.twins, self.options.lookalikes)
        if task_id not in index:
            if not self.options.twins and task_id in self.data.task_index(setting, True, self.options.lookalikes):
                raise KeyError(f"APB task {task_id!r} is the twin of a case, which setting {setting!r} holds only "
                               "with twins: true")
            raise KeyError(f"APB setting {setting!r} has no task {task_id!r} (gen_seed={self.options.gen_seed})")
        return APBEnv(self.data, setting, index[task_id], seed, self.options)

    def metrics(self, setting: str | None = None) -> list[MetricSpec]:
        if setting is not None:
            self._check(setting)
            if setting == JUDGE_VALIDATION:
                return judge_specs(judged_cr=True)
            return setting_metrics(setting, self.options.twins) + (judge_specs() if self.judge_model else [])
        seen: dict[str, MetricSpec] = {}
        for s in self._settings:
            for m in self.metrics(s):
                seen.setdefault(m.name, m)
        return list(seen.values())

    def scripted_policies(self) -> dict[str, str]:
        return {**POLICIES, **EXPLOITS}

    def exploit_policies(self) -> list[ExploitPolicy]:
        """Adversaries (ceilings) and positive controls (floors), every bound checked per cell (setting).

        No adversary plans, so none is ever correct, passes an unsolvable case or recovers from a broken
        tool. Only a real refusal (`prose_refusal`, `empty_chain`, which the paper's J8 counts as
        termination) counts as one on solvable cases; a refusal that still executes (`reject_with_chain`,
        `prose_refusal_plus_plan`) counts as a refusal there too (it says it declines) and fails every
        unsolvable type (J8: blind execution). The controls must get their credit in every cell: the
        designated replacement with the failed step's arguments is Replace (J5, C.4), a REJECT with no
        chain or a termination-only chain passes every unsolvable type (J8), and ordinary prose around
        the reference answer keeps it correct."""
        settings = [s for s in self.settings() if not s.startswith("refine_") and s != JUDGE_VALIDATION]
        unsolvable = [s for s in settings if s.startswith("unsolvable_") and s != "unsolvable_control"]
        not_unsolvable = [s for s in settings if s not in unsolvable]
        never = {"correct": 0.0, "pass": 0.0, "pass_strict": 0.0, "recovery": 0.0, "optimal_rate": 0.0}
        not_refusal = {**never, "false_refusal": 0.0, "refused": 0.0, "refuse": 0.0}
        refusal = {"false_refusal": 1.0, "refused": 1.0, "refuse": 1.0}  # J5: a stated refusal is Refuse
        no_recovery = {**never, "replace": 0.0, "alter": 0.0}

        def bounded(name: str, **kw: Any) -> ExploitPolicy:
            return ExploitPolicy(name=name, description={**EXPLOITS, **POLICIES}[name], **kw)

        out = [bounded(name, ceilings=not_refusal)
               for name in ("string_chain", "negated_refusal", "deep_nesting", "stray_braces", "all_tools")]
        out.append(bounded("prose_refusal", ceilings=never, floors=refusal, settings=not_unsolvable))
        out.append(bounded("empty_chain", ceilings=never, floors={"false_refusal": 1.0, "refused": 1.0},
                           settings=not_unsolvable))
        # adversaries of issue #30
        out.append(bounded("all_offered", ceilings={**no_recovery, "false_refusal": 0.0, "refused": 0.0},
                           settings=settings))
        out.append(bounded("empty_arguments", ceilings={**no_recovery, "false_refusal": 0.0, "refused": 0.0},
                           settings=settings))
        for name in ("reject_with_chain", "prose_refusal_plus_plan"):
            out.append(bounded(name, ceilings=no_recovery, floors=refusal, settings=settings))
        # positive controls
        out.append(bounded("replace_with_args", floors={"replace": 1.0, "recovery": 1.0, "correct": 1.0},
                           ceilings={"retry": 0.0, "refuse": 0.0, "other": 0.0, "false_recovery": 0.0},
                           settings=["broken"]))
        # never reads the error: on a twin, whose call succeeded, it recovers from no fault (test_apb_twins);
        # beside look-alikes the nearest description is the replacement in about 1 case of 4 (test_apb_lookalikes)
        unread: dict[str, float] = {} if self.options.lookalikes else {"replace": 1.0}
        if self.options.twins:
            unread["false_recovery"] = 1.0
        elif unread:
            unread["correct"] = 1.0
        out.append(bounded("blind_switch", floors=unread, ceilings={"retry": 0.0, "refuse": 0.0}, settings=["broken"]))
        # with the twins (the default) it refuses them too: `correct` is then half (test_apb_twins)
        out.append(bounded("always_refuse", floors={"pass": 1.0, "refused": 1.0} if self.options.twins
                           else {"pass": 1.0, "correct": 1.0}, settings=unsolvable))
        out.append(bounded("refusal_report_only", floors={"pass": 1.0, **refusal},
                           settings=settings))
        out.append(bounded("prose_plus_plan", floors={"correct": 1.0, "recovery": 1.0, "pass": 1.0},
                           ceilings={"false_refusal": 0.0, "refused": 0.0, "refuse": 0.0}, settings=settings))
        return out

    def baseline_policy(self) -> str:
        """`heuristic`: the searched floor. Per setting it plays the strongest policy APB's adversary
        search found on `correct` (search.py; the table in bounds.SEARCHED) where that beats the
        hand-written heuristic (baseline.py), else the heuristic (so far in every setting). Both read only
        what a model reads; the per-setting scores are the floor a model's APB score is read against."""
        return BASELINE

    def make_scripted_policy(self, name: str, env: Environment, seed: int) -> Policy:
        if not isinstance(env, APBEnv):
            raise TypeError("APB scripted policies need an APB environment")
        return make_policy(name, env, seed)

    def max_turns(self, setting: str) -> int:
        return 4 if setting.startswith("refine_") else 2

    def fingerprint(self) -> dict[str, Any]:
        if self._fingerprint is None:
            h = hashlib.sha256()
            for b in self.data.bases:
                h.update(case_hash(b).encode())
            self._fingerprint = {"version": self.version, "generator_version": GENERATOR_VERSION,
                                 "grader_version": GRADER_VERSION, "gen_seed": self.options.gen_seed,
                                 "cases_sha256": h.hexdigest(), "options": self.options.model_dump(),
                                 # the searched floor plays the table's policies: a new table is another floor
                                 "searched_sha256": hashlib.sha256(
                                     json.dumps(SEARCHED, sort_keys=True).encode()).hexdigest()}
            if self.judge_model:  # judged episodes made before the current unreadable-verdict policy differ
                self._fingerprint["judge_protocol"] = JUDGE_PROTOCOL
        return self._fingerprint

    def report_tables(self, cells: list[dict[str, Any]], episodes: Any = None) -> list[ReportTable]:
        return report_tables(cells, episodes)


__all__ = ["APB"]
