"""APB — Agent Planning Benchmark (spec `shared/specs/apb.md`): planning diagnosed apart from execution.

The model writes a whole plan (holistic), the next k steps of a partial trajectory (step-wise), a plan
among distractor tools (extraneous), the next action after a tool broke (broken), or a refusal when the
task cannot be done (unsolvable); plus the efficiency and refinement studies. Cases are generated from
a seed with no LLM (generator.py) and graded by rule against reference DAGs (grader.py).
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolsweep.benchmarks.apb.environment import APBEnv
from toolsweep.benchmarks.apb.generator import (
    EXTRANEOUS_LEVELS,
    GENERATOR_VERSION,
    REFINE_MODES,
    UNSOLVABLE_TYPES,
    case_hash,
    dataset,
)
from toolsweep.benchmarks.apb.grader import GRADER_VERSION
from toolsweep.benchmarks.apb.metrics import report_tables, setting_metrics
from toolsweep.benchmarks.apb.policies import POLICIES, make_policy
from toolsweep.evaluator.protocols import Benchmark, Environment, MetricSpec, Policy, ReportTable


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


class APB(Benchmark):
    """The APB plugin: 4,209 generated cases over the paper's settings, plus its extra studies."""

    name = "apb"
    version = "1.0.0"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid")

        gen_seed: int = Field(0, ge=0, description="Generation seed: one fixed case set per seed (§9).")
        file_mode: Literal["caption", "scene", "render"] = Field(
            "scene", description="How image/video files reach the model: a caption, the caption plus a redacted "
            "structured scene (default), or rendered PNG frames as image parts for vision models.")
        distractor_position: Literal["append", "shuffle"] = Field(
            "append", description="Extraneous tools after the originals (Figs. 37/38) or shuffled in.")
        critic: Literal["rule"] = Field(
            "rule", description="Reviewer of the Critic_R± refinement protocols. 'rule': a deterministic reviewer "
            "that names the error categories the rule grader finds (R+) or only says whether the answer is wrong "
            "(R-); an LLM critic would need a second model inside the episode, which the episode loop does not "
            "provide.")
        oracle_ref_style: Literal["dollar", "step"] = Field(
            "dollar", description="How the oracle names data sources: `$Tool.field` or 'the output of step i'.")

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._fingerprint: dict[str, Any] | None = None

    @property
    def data(self):  # noqa: ANN201 - the cached Dataset
        return dataset(self.options.gen_seed)

    def settings(self) -> dict[str, dict[str, Any]]:
        return {k: dict(v) for k, v in SETTINGS.items()}

    def _check(self, setting: str) -> None:
        if setting not in SETTINGS:
            raise KeyError(f"APB has no setting {setting!r}; available: {', '.join(SETTINGS)}")

    def tasks(self, setting: str) -> list[str]:
        self._check(setting)
        return [t["task_id"] for t in self.data.tasks[setting]]

    def make_env(self, task_id: str, setting: str, seed: int) -> Environment:
        self._check(setting)
        index = self.data.task_index(setting)
        if task_id not in index:
            raise KeyError(f"APB setting {setting!r} has no task {task_id!r} (gen_seed={self.options.gen_seed})")
        return APBEnv(self.data, setting, index[task_id], seed, self.options)

    def metrics(self, setting: str | None = None) -> list[MetricSpec]:
        if setting is not None:
            self._check(setting)
            return setting_metrics(setting)
        seen: dict[str, MetricSpec] = {}
        for s in SETTINGS:
            for m in setting_metrics(s):
                seen.setdefault(m.name, m)
        return list(seen.values())

    def scripted_policies(self) -> dict[str, str]:
        return dict(POLICIES)

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
                                 "cases_sha256": h.hexdigest(), "options": self.options.model_dump()}
        return self._fingerprint

    def report_tables(self, cells: list[dict[str, Any]]) -> list[ReportTable]:
        return report_tables(cells)


__all__ = ["APB"]
