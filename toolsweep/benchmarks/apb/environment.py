"""One APB episode: the model reads the case and writes a plan (or next steps, or a refusal) as
JSON text; the environment grades it. Single-turn for every setting except refinement, which is the
three-turn protocol of §8.1. `Observation.tools` is always empty: plans are text, not tool calls.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toolsweep.benchmarks.apb import plans, prompts
from toolsweep.benchmarks.apb.generator import Dataset, broken_listing, renamed_base, step_bin
from toolsweep.benchmarks.apb.grader import FLAGS, PlanGrader, PlanResult, extract_with_prose, parse_judge_verdict
from toolsweep.benchmarks.apb.metrics import BREAKDOWNS, domain_slug
from toolsweep.benchmarks.apb.tools import FINISH, render_tool_line
from toolsweep.evaluator.judging import JUDGE_ASKS, JUDGE_REMINDER, Reasking  # noqa: F401 (re-exported)
from toolsweep.evaluator.types import Consult, Message, Observation, TerminationReason

NAN = float("nan")
BROKEN_CATEGORIES = ("replace", "alter", "retry", "refuse", "other")
# The judge protocol every judged benchmark shares (evaluator.judging): an unreadable verdict is the
# judge's failure, not the evaluated model's; it is asked again with its reply and JUDGE_REMINDER, up to
# JUDGE_ASKS asks; still unreadable, the answer's judged values are undefined (NaN, out of those metrics'
# n) and count in `judge_unreadable`. It never falls back to the rule grade, which would mix two graders.
JUDGE_PROTOCOL = "reask-3-nan/efficiency-judged"
"""In the fingerprint of a judged APB (grader: llm:<name>): what an unreadable verdict does, and that
C_pass and the optimal rate follow the judge. Judged episodes recorded before either (when the rule
grade stood in) are not mixed with new ones."""


def fine_bin(L: int) -> str:
    """Tab. 12's step ranges."""
    if L <= 5:
        return "1-5"
    if L <= 10:
        return "6-10"
    if L <= 15:
        return "11-15"
    if L <= 20:
        return "16-20"
    return ">20"


def _redacted_scene(f: dict[str, Any]) -> dict[str, Any]:
    """The file's structure without any secret: classes not counts, text boxes not their strings."""
    sc = f.get("scene", {})
    if "widgets" in sc:
        return {"widgets": [{"label": w["label"], "role": w["role"], "bbox": w["bbox"]} for w in sc["widgets"]]}
    if "fps" in sc:
        return {"fps": sc["fps"], "frame_count": sc["frame_count"],
                "sampled_frames": [{"frame": x["frame"], "objects": x["objects"]} for x in sc["sampled_frames"]]}
    classes: dict[str, set[str]] = {}
    for o in sc.get("objects", []):
        classes.setdefault(o["class"], set()).update(o["attributes"])
    return {"object_classes": [{"class": c, "attributes": sorted(a)} for c, a in sorted(classes.items())],
            "text_regions": [{"bbox": r["bbox"], "text": "<unread>"} for r in sc.get("text_regions", [])]}


@dataclass
class Judged:
    """A plan verdict from the LLM judge, shaped like the rule grader's PlanResult where it matters."""

    correct: bool
    grade: float
    flags: set[str] = field(default_factory=set)


def judged_plan(verdict: dict[str, Any]) -> Judged | None:
    """The judge's verdict on a plan; None when it is unreadable (the plan's judged values are then
    undefined, never the rule grader's)."""
    if "correct" not in verdict:
        return None
    grade = verdict.get("grade")
    grade = min(1.0, max(0.0, float(grade))) if grade is not None and math.isfinite(grade) else NAN
    return Judged(bool(verdict["correct"]), grade, set(verdict.get("flags", ())))


def agreement_metrics(rule: dict[str, float], judge: dict[str, float] | None) -> dict[str, float]:
    """Per-case pieces of Tab. 7's statistics, the judge read against the rule grader (positive =
    correct): agreement, TP and positives for precision/recall/F1, |grade difference|, flag agreement.
    All undefined (NaN, or 0 in ratio parts) when the judge's reply was unreadable."""
    out = {"judge_unreadable": float(judge is None), "rule_correct": rule["correct"]}
    if judge is None:
        out.update(judge_agree=NAN, judge_tp=0.0, judge_pos=0.0, rule_pos=0.0, judge_f1_num=0.0, judge_f1_den=0.0,
                   judge_grade_abs_err=NAN, judge_flag_agree=NAN)
        return out
    j, r = judge["correct"], rule["correct"]
    out.update(judge_agree=float(j == r), judge_tp=j * r, judge_pos=j, rule_pos=r,
               judge_f1_num=2 * j * r, judge_f1_den=j + r)
    rg, jg = rule.get("grade", NAN), judge.get("grade", NAN)
    out["judge_grade_abs_err"] = abs(rg - jg) if math.isfinite(rg) and math.isfinite(jg) else NAN
    if all(f in rule and f in judge for f in FLAGS):
        out["judge_flag_agree"] = sum(float(rule[f] == judge[f]) for f in FLAGS) / len(FLAGS)
    else:
        out["judge_flag_agree"] = NAN
    return out


def _plan_values(res: PlanResult | Judged | None) -> dict[str, float]:
    """A plan's correct, grade and flags; all NaN for an unreadable verdict (None)."""
    if res is None:
        return {"correct": NAN, "grade": NAN, **{f: NAN for f in FLAGS}}
    return {"correct": float(res.correct), "grade": res.grade, **{f: float(f in res.flags) for f in FLAGS}}


def _fill_all(text: str, slots: dict[str, str]) -> str:
    for k, v in slots.items():
        text = text.replace(k, v)
    return text


def render_files(files: list[dict[str, Any]], mode: str) -> str:
    """The file manifest (§2.4): captions, plus the redacted structured scene in `scene` mode."""
    if not files:
        return "Files: (none)"
    lines = ["Files: " + ", ".join(f"{f['name']} ({f['type']})" for f in files)]
    for f in files:
        lines.append(f"- {f['name']}: {f['caption']}")
        if mode == "scene":
            lines.append(f"  Scene structure: {json.dumps(_redacted_scene(f), ensure_ascii=False)}")
    return "\n".join(lines)


class APBEnv:
    """Environment for one (setting, task). Ground truth stays inside; `reference_reply()` serves the oracle."""

    def __init__(self, ds: Dataset, setting: str, task: dict[str, Any], seed: int, options: Any) -> None:
        self.ds = ds
        self.setting = setting
        self.task = task
        self.seed = seed
        self.options = options
        # a conflict case and its twin may list the step's tool under its other name (generator.unsolvable_gate)
        self.base = renamed_base(ds.bases[task["base"]], task.get("renamed") or {})
        self.kind = task["kind"]
        # a twin scored beside its case: an Unsolvable setting's solvable twin (generator.twin_variant,
        # a control) or a Tool-Broken case's twin whose call succeeds (generator.broken_twin, a step-wise case)
        self.twin_of: str | None = task.get("twin_of")
        self.turn = 0
        self.replies: list[str] = []
        self.results: dict[str, float] = {}
        self.done = False
        self.info: dict[str, Any] = {}
        # helper models (§6.5, §8.1): the LLM judge grades in place of the rules; the critic reviews
        self.uses_judge = options.grader.startswith("llm:")
        self.uses_model_critic = options.critic.startswith("model:")
        self.rule_result: PlanResult | None = None  # the rule grade of the final plan, kept when a judge grades
        self.judge_reasks = 0  # the judge's replies that were unreadable and asked again (`_ask_judge`)
        self.critique: str | None = None  # the critic model's review of the initial answer
        self._consults: list[tuple[str, list[Message], Callable[[str], None]]] = []
        self._after: Callable[[], Observation] | None = None
        self._build()

    # ------------------------------------------------------------------ case materialization
    def _build(self) -> None:
        b, t = self.base, self.task
        ref = b["reference"]
        query, files, tools = b["query"], b["background"]["files"], list(b["tools"])
        self.half = t.get("half", "stepwise" if self.kind in ("stepwise", "broken") else "holistic")
        if self.kind == "refine" and t["half"] == "stepwise":
            self.half = "stepwise"
        if t.get("distractors"):
            tools = tools + list(t["distractors"])  # appended after the originals, Finish included (§4.3)
            if self.options.distractor_position == "shuffle":
                rng = random.Random(f"{t['task_id']}|shuffle")
                rng.shuffle(tools)
        if self.kind == "broken" or self.twin_of == "broken":  # the twin lists what its case lists
            tools = broken_listing(tools, t)
        if self.kind == "unsolvable":
            query, files, tools = t["query"], t["files"], list(t["tools"])
            if t["unsolvable_type"] == "visual" and self.options.unsolvable_visual == "no_file":
                files = []  # the paper's layout (Fig. 17)
        if self.kind == "control":
            query = t.get("query", query)  # the solvable twin reads its kind's requirement (generator.control_variant)
            tools = list(t.get("tools", tools))  # its kind's list (a look-alike, the step's tool's other name)
        if self.kind == "efficiency":
            tools = [dict(x, hidden=dict(x["hidden"], cost=t["costs"][x["name"]])) for x in tools]
            extra = list(t["composites"]) + list(t["traps"])
            rng = random.Random(f"{t['task_id']}|bank")
            for x in extra:
                tools.insert(rng.randint(0, len(tools) - 1), x)
        self.tools = tools
        self.query, self.files = query, files
        self.view = {"nodes": ref["nodes"], "order": ref["linearization"], "goal": ref["goal_node"], "tools": tools,
                     "constraints": b["constraints"], "secrets": b["world"]["secrets"]}
        self.grader = PlanGrader(self.view)
        self.tool_lines = [render_tool_line(x, with_cost=self.kind == "efficiency") for x in tools]
        self.query_block = f"{query}\n{render_files(files, self.options.file_mode)}"
        order = ref["linearization"]
        if self.half == "stepwise":
            if self.kind == "broken":
                self.j = t["j"] - 1
                self.prefix = t["prefix"]
            else:
                self.j = t["j"]
                self.prefix = t["prefix"] if self.twin_of == "broken" else ref["trajectory"][: 2 * self.j]
            self.k = t.get("k", 1)
            self.done_nodes = order[: self.j]
            self.context = json.dumps(self.prefix, ensure_ascii=False).casefold()
            self.first_prompt = prompts.render_stepwise(self.k, self.query_block, self.tool_lines, self.prefix)
        else:
            self.first_prompt = prompts.render_holistic(
                self.query_block, self.tool_lines,
                unsolvable_prompt=self.kind in ("unsolvable", "control"), efficiency=self.kind == "efficiency")

    def _attachments(self) -> list[dict[str, Any]]:
        if self.options.file_mode != "render" or not self.files:
            return []
        from toolsweep.benchmarks.apb.render import render_file_parts

        return render_file_parts(self.files)

    # ------------------------------------------------------------------ protocol
    def reset(self) -> Observation:
        self.turn = 0
        self.replies = []
        self.done = False
        parts = self._attachments()
        content: Any = self.first_prompt if not parts else [{"type": "text", "text": self.first_prompt}, *parts]
        msgs = [Message(role="system", content=self.base["system_prompt"]), Message(role="user", content=content)]
        return Observation(messages=msgs, tools=[], info={"setting": self.setting, "task_id": self.task["task_id"]})

    @staticmethod
    def _reply_text(reply: Message) -> str:
        text = reply.text()
        if not text.strip() and reply.tool_calls:
            # a model that answered with native function calls: read them as the step-wise format
            calls = []
            for tc in reply.tool_calls:
                try:
                    args = json.loads(tc.function.arguments or "{}")
                except ValueError:
                    args = {"__raw__": tc.function.arguments}
                calls.append({"type": "function", "function": {"name": tc.function.name, "arguments": args}})
            text = json.dumps({"role": "assistant", "thought": "", "tool_calls": calls})
        return text

    def step(self, reply: Message) -> Observation:
        if self.done:
            return Observation(done=True, termination=TerminationReason.ANSWERED)
        text = self._reply_text(reply)
        self.replies.append(text)
        self.turn += 1
        if self.kind == "refine":
            return self._refine_step(text)
        self.results = self._grade_final(text)
        self.done = True
        if self.uses_judge:
            return self._consult([self._ask_judge(text, self._apply_judge)], self._final_obs)
        return self._final_obs()

    # ------------------------------------------------------------------ helper models
    def _consult(self, requests: list[tuple[str, list[Message], Callable[[str], None]]],
                 after: Callable[[], Observation]) -> Observation:
        """Ask the helper models in turn; each reply goes to its handler, then `after` continues."""
        self._consults, self._after = list(requests), after
        return self._next_consult()

    def _next_consult(self) -> Observation:
        if self._consults:
            role, messages, _ = self._consults[0]
            return Observation(consult=Consult(role=role, messages=messages), info={"consult": role})
        after, self._after = self._after, None
        return after() if after is not None else Observation(done=True, termination=TerminationReason.ANSWERED)

    def consult_reply(self, role: str, reply: Message) -> Observation:
        if not self._consults or self._consults[0][0] != role:
            raise RuntimeError(f"APB received a {role!r} reply it did not ask for")
        _, _, handle = self._consults.pop(0)
        handle(reply.text())
        return self._next_consult()

    def _verdict_readable(self, verdict: dict[str, Any]) -> bool:
        """Whether a parsed verdict says what this case's judge must say (J5: a category; else is_correct)."""
        return "category" in verdict if self.kind == "broken" else "correct" in verdict

    def _ask_judge(self, answer: str, on_verdict: Callable[[dict[str, Any]], None]
                   ) -> tuple[str, list[Message], Callable[[str], None]]:
        """The judge's consult for `answer`. An unreadable reply is asked again (up to `JUDGE_ASKS` in
        all), with the reply and `JUDGE_REMINDER` added; `on_verdict` gets the first readable verdict, or
        {} (unreadable) after the last ask. The asks after the first are counted in `judge_reasks`."""
        messages = self.judge_messages(answer)

        def readable(reply: str) -> dict[str, Any] | None:
            verdict = parse_judge_verdict(reply)
            return verdict if self._verdict_readable(verdict) else None

        def again(msgs: list[Message], handler: Callable[[str], None]) -> None:
            self.judge_reasks += 1
            self._consults.insert(0, ("judge", msgs, handler))  # asked next, before any other consult

        handle = Reasking(messages, readable, lambda verdict: on_verdict(verdict or {}), again)
        return "judge", messages, handle

    def _apply_judge(self, verdict: dict[str, Any]) -> None:
        """Grade by the judge's verdict (J1-J9) in place of the rules; the rule values stay under
        `rule_*`, with the per-case agreement between the two. A verdict unreadable after every ask
        (`JUDGE_ASKS`) leaves the judged values undefined (NaN) and counts in `judge_unreadable`."""
        m = self.results
        rule = {k: m[k] for k in ("correct", "grade", *FLAGS) if k in m}
        readable = self._verdict_readable(verdict)
        if self.kind == "broken":
            cat = verdict.get("category")
            judged = {c: float(cat == c) if readable else NAN for c in BROKEN_CATEGORIES}
            judged["recovery"] = judged["correct"] = float(cat in ("replace", "alter")) if readable else NAN
            if readable:
                self.info["judge_category"] = cat
            for k in (*BROKEN_CATEGORIES, "recovery"):
                m[f"rule_{k}"] = m[k]
        elif self.kind == "unsolvable":
            passed = float(verdict["correct"]) if readable else NAN
            judged = {"pass": passed, "correct": passed}
            m["rule_pass"] = m["pass"]
        else:
            judged = _plan_values(judged_plan(verdict))
            m["rule_grade"] = m.get("grade", NAN)  # a twin of an Unsolvable setting records no grade
            if self.kind == "efficiency":
                judged.update(self._judged_efficiency(m, judged["correct"]))
        m.update(judged)
        for key in list(m):  # the breakdowns (by modality, step bin, ...) follow the judged values
            if key.startswith(("correct_", "grade_")) and math.isfinite(m[key]):
                m[key] = m[key.split("_", 1)[0]]
        m.update(agreement_metrics(rule, judged if readable else None))
        m["judge_reasks"] = float(self.judge_reasks)
        self.info["judge"] = {"readable": readable, "correct": m["correct"], "reasks": self.judge_reasks}

    def _judged_efficiency(self, m: dict[str, float], correct: float) -> dict[str, float]:
        """C_pass and the optimal rate over the cases the judge calls solved (the plan's cost is still the
        rule grader's reading); undefined when the verdict was unreadable. The rule values stay under
        `rule_cost_pass`, `rule_optimal_rate`."""
        m["rule_cost_pass"], m["rule_optimal_rate"] = m["cost_pass"], m["optimal_rate"]
        if not math.isfinite(correct):
            return {"cost_pass": NAN, "optimal_rate": NAN}
        solved = correct == 1.0
        return {"cost_pass": m["cost"] if solved else NAN,
                "optimal_rate": float(solved and math.isclose(m["cost"], float(self.task["optimal_cost"])))}

    def critic_messages(self, initial: str, metric: bool) -> list[Message]:
        """What the critic model of Critic_R± sees (§8.1): the task, the initial answer, and P8 (holistic)
        or the self-contained P7 (step-wise)."""
        if self.half == "holistic":
            text = (f"{self.first_prompt}\n\nInitial response:\n{initial}\n\n"
                    + prompts.render_p8(metric=metric, gui=self.base["source_style"] == "OpenCUA"))
        else:
            text = prompts.render_p7(self.query_block, self.tool_lines, self.prefix, initial, metric=metric)
        return [Message(role="user", content=text)]

    def _final_obs(self) -> Observation:
        parsed = self.info.get("parsed", True)
        term = TerminationReason.ANSWERED if parsed else TerminationReason.AGENT_FORMAT_ERROR
        return Observation(done=True, termination=term, info=dict(self.info))

    def _refine_step(self, text: str) -> Observation:
        mode = self.task["mode"]
        critic = mode.startswith("critic")
        metric = mode.endswith("plus")
        if self.turn == 1:
            self.base_result = self._grade(text)
            self.base_judged: PlanResult | Judged | None = self.base_result
            requests: list[tuple[str, list[Message], Callable[[str], None]]] = []
            if self.uses_judge:
                requests.append(self._ask_judge(text, self._judge_base))
            if critic and self.uses_model_critic:
                requests.append(("critic", self.critic_messages(text, metric), self._keep_critique))

            def second_turn() -> Observation:
                if critic:
                    review = self.critique or self.rule_critique(self.base_result, metric)
                    msg = prompts.CRITIC_PREFIX.format(critique=review) + prompts.REFINE_FINAL
                elif self.half == "holistic":
                    msg = prompts.render_p8(metric=metric, gui=self.base["source_style"] == "OpenCUA")
                else:
                    msg = prompts.render_p7(self.query_block, self.tool_lines, self.prefix, text, metric=metric)
                return Observation(messages=[Message(role="user", content=msg)], info={"turn": 1})

            return self._consult(requests, second_turn)
        if self.turn == 2 and not critic:
            return Observation(messages=[Message(role="user", content=prompts.REFINE_FINAL)], info={"turn": 2})
        final = self._grade(text)
        self.results = self._refine_metrics(self.base_judged, final)
        self.done = True
        self.info = {"parsed": final.parsed, "flags": sorted(final.flags), "base_flags": sorted(self.base_result.flags)}
        if self.uses_judge:
            return self._consult([self._ask_judge(text, lambda v: self._judge_final(final, v))], self._final_obs)
        return Observation(done=True, termination=TerminationReason.ANSWERED, info=dict(self.info))

    def _keep_critique(self, reply: str) -> None:
        self.critique = reply.strip() or "(the critic gave no review)"

    def _judge_base(self, verdict: dict[str, Any]) -> None:
        self.base_judged = judged_plan(verdict)  # None (undefined) when unreadable after every ask

    def _judge_final(self, final: PlanResult, verdict: dict[str, Any]) -> None:
        judged = judged_plan(verdict)
        base_readable = self.base_judged is not None
        self.results = self._refine_metrics(self.base_judged, judged)
        self.results.update(agreement_metrics(_plan_values(final), _plan_values(judged) if judged is not None else None))
        self.results["judge_unreadable"] = 1.0 - (float(judged is not None) + float(base_readable)) / 2
        self.results["judge_reasks"] = float(self.judge_reasks)
        self.info["judge"] = {"readable": judged is not None, "base_readable": base_readable, "reasks": self.judge_reasks}

    @staticmethod
    def rule_critique(res: PlanResult, metric: bool) -> str:
        """The critic of Critic_R± (§8.1) as a rule-based reviewer: with the taxonomy it names the error
        categories it finds; without it, it only says whether something is wrong."""
        if res.correct:
            return "The answer is correct and complete; keep it as it is."
        if not metric:
            return "There are issues with this answer; check that it fully and correctly solves the original request."
        names = {"E1": "E1_GOAL_UNDERSTANDING", "E2": "E2_TASK_COMPLETENESS", "E3": "E3_CONSTRAINT_VIOLATION",
                 "E4": "E4_LOGICAL_DEFECT", "E5": "E5_TOOL_USE_ERROR", "E6": "E6_HALLUCINATION_ERROR"}
        lines = [f"- {names[n.split(':')[0]]}: {n.split(': ', 1)[1]}" for n in res.notes if n[:2] in names]
        return "The answer has these errors:\n" + "\n".join(lines[:12])

    # ------------------------------------------------------------------ grading
    def _grade(self, text: str) -> PlanResult:
        if self.half == "stepwise":
            return self.grader.stepwise(text, self.k, self.done_nodes, self.context)
        return self.grader.holistic(text)

    def _recovers(self, text: str) -> bool:
        """Whether the first predicted action calls the step's tool again, its replacement or one of its
        look-alikes, as a recovery would: on a Tool-Broken twin, whose call succeeded, that recovers from
        no fault."""
        obj, ok, _ = extract_with_prose(text)
        step = obj[0] if ok and isinstance(obj, list) and obj and isinstance(obj[0], dict) else obj
        if not ok or not isinstance(step, dict):
            return False
        names = {n for n, _ in self.grader.step_calls(step)}
        switched = {self.task["broken_tool"], self.task["replacement_tool"]["name"],
                    *(x["tool"]["name"] for x in self.task.get("lookalikes", ()))}
        return bool(names & switched)

    def _grade_final(self, text: str) -> dict[str, float]:
        m: dict[str, float] = {}
        if self.kind == "broken":
            t = self.task
            cat = self.grader.broken(text, self.done_nodes, t["broken_node"], t["broken_tool"],
                                     t["replacement_tool"]["name"], self.context)
            for c in BROKEN_CATEGORIES:
                m[c] = float(cat == c)
            m["recovery"] = float(cat in ("replace", "alter"))
            m["correct"] = m["recovery"]
            if self.options.twins:
                m["false_recovery"] = NAN  # recorded on the twins, whose call succeeded
            self.info = {"category": cat, "parsed": True}
            return m
        if self.kind == "unsolvable":
            passed, strict = self.grader.unsolvable(text, self.task["unsolvable_type"], self.task["blocking_terms"])
            m = {"pass": float(passed), "pass_strict": float(strict), "correct": float(passed)}
            if self.options.twins:
                m["refused"] = NAN  # recorded on the solvable twins
            self.info = {"pass": passed, "parsed": True}
            return m
        res = self.rule_result = self._grade(text)
        m = res.metrics()
        if self.half == "stepwise" or self.kind == "control":
            m.pop("coverage")
        self.info = {"parsed": res.parsed, "flags": sorted(res.flags), "notes": res.notes[:20], "grade": res.grade}
        if self.kind == "control":
            m["refused"] = float(self.grader.refused(text))
            if self.twin_of:  # scored beside the Unsolvable cases: a correct plan, or a false refusal
                m = {"correct": m["correct"], "refused": m["refused"], "pass": NAN, "pass_strict": NAN}
            return m
        if self.twin_of == "broken":  # scored beside the Tool-Broken cases: the next step, no recovery
            return {"correct": m["correct"], "false_recovery": float(self._recovers(text)),
                    **{c: NAN for c in (*BROKEN_CATEGORIES, "recovery")}}
        m["false_refusal"] = float(res.false_refusal)  # a stated refusal of a solvable case, in either half
        if self.task.get("n_e") is not None:
            m["ext_used"] = float(res.ext_use > 0)
            m["ext_calls"] = float(res.ext_use)
        if self.kind == "efficiency":
            opt = float(self.task["optimal_cost"])
            m["cost"] = res.cost
            m["cost_pass"] = res.cost if res.correct else NAN
            m["cost_ratio"] = res.cost / opt if res.cost > 0 else NAN
            m["optimal_rate"] = float(res.correct and math.isclose(res.cost, opt))
        if self.setting == "holistic":
            L = self.base["meta"]["L"]
            mine = {"mod": self.base["modality"], "bin": fine_bin(L), "src": self.base["source_style"],
                    "dom": domain_slug(self.base["domain"])}
            for key, vals, _ in BREAKDOWNS:
                for val in vals:  # NaN outside the episode's own group: the metric is a mean over that group
                    m[f"correct_{key}_{val}"] = m["correct"] if val == mine[key] else NAN
                    m[f"grade_{key}_{val}"] = m["grade"] if val == mine[key] else NAN
        return m

    def _refine_metrics(self, base: PlanResult | Judged | None, final: PlanResult | Judged | None) -> dict[str, float]:
        """The refinement's metrics from the graded initial and final answers; a judge's verdict that
        stayed unreadable (None) leaves what depends on it undefined (NaN)."""
        h = "hol" if self.half == "holistic" else "sw"
        m: dict[str, float] = {}
        for half in ("hol", "sw"):
            for key in ("base_cr", "refined_cr", "delta", "over_correction", "repair", "base_grade", "refined_grade"):
                m[f"{half}_{key}"] = NAN
        bv, fv = _plan_values(base), _plan_values(final)
        b, f = bv["correct"], fv["correct"]
        m[f"{h}_base_cr"], m[f"{h}_refined_cr"], m[f"{h}_delta"] = b, f, f - b
        m[f"{h}_base_grade"], m[f"{h}_refined_grade"] = bv["grade"], fv["grade"]
        m[f"{h}_over_correction"] = (1.0 - f) if b == 1.0 else NAN
        m[f"{h}_repair"] = f if b == 0.0 else NAN
        m["correct"] = f
        m["grade"] = fv["grade"]
        for flag in FLAGS:
            m[flag] = fv[flag]
        return m

    def result(self) -> dict[str, float]:
        if not self.done:
            # the episode ended before an answer (max turns, timeout): graded as an empty answer
            if self.kind == "refine" and hasattr(self, "base_result"):
                return self._refine_metrics(self.base_result, self._grade(""))
            return self._grade_final("")
        return dict(self.results)

    # ------------------------------------------------------------------ ground truth for scripted policies
    def reference_answer(self) -> str:
        """The correct answer for the current turn (a review on the self-refinement's second turn)."""
        if self.kind == "refine" and self.turn == 1 and not self.task["mode"].startswith("critic"):
            return "The initial answer is correct: every step is needed, in a valid order, with valid arguments."
        return self.reference_plan()

    def reference_plan(self) -> str:
        """The correct JSON answer to the case: the plan, the next steps, the recovery or the refusal."""
        t, ref = self.task, self.base["reference"]
        nodes = plans.node_map(ref["nodes"])
        if self.kind == "unsolvable":
            reason = (f"This cannot be completed as asked: {', '.join(t['blocking_terms'][:2])} "
                      f"is missing or unavailable, so no valid plan exists.")
            return json.dumps({"status": "REJECT", "reason": reason})
        if self.kind == "broken":
            return json.dumps(t["reference_action"])
        if self.half == "stepwise":
            observed = set(self.done_nodes)
            acts = []
            for nid in ref["linearization"][self.j: self.j + self.k]:
                acts.append(plans.stepwise_action(nodes[nid], nodes, observed))
            while len(acts) < self.k:
                acts.append(plans.finish_action())
            return json.dumps(acts[0] if self.k == 1 else acts)
        calls = None
        if self.kind == "efficiency":
            calls = []
            comps = {c["name"]: c for c in t["composites"]}
            for c in t["optimal_calls"]:
                if c["name"] is None:
                    calls.append({"name": nodes[c["covers"][0]]["tool"], "covers": c["covers"], "param_map": None})
                else:
                    calls.append({"name": c["name"], "covers": c["covers"],
                                  "param_map": comps[c["name"]]["hidden"]["param_map"]})
        chain = plans.holistic_chain(ref["nodes"], ref["linearization"], style=self.options.oracle_ref_style,
                                     calls=calls)
        return json.dumps({"plan": ref["plan"], "tool_chain": chain})

    def random_answer(self, rng: random.Random) -> str:
        """A uniform-random answer in the right format (the random baseline of §12.22)."""
        names = [x["name"] for x in self.tools if x["name"] != FINISH]
        if self.half == "stepwise":
            acts = []
            for _ in range(self.k):
                name = rng.choice(names + [FINISH])
                props = next(x for x in self.tools if x["name"] == name)["parameters"].get("properties", {})
                acts.append(plans.assistant_call("random", name, {p: "x" for p in props}))
            return json.dumps(acts[0] if self.k == 1 else acts)
        if self.kind == "refine" and self.turn == 1 and not self.task["mode"].startswith("critic"):
            return "No comment."
        chain = [{"name": rng.choice(names), "parameter_description": {}, "reason": "random"}
                 for _ in range(rng.randint(1, max(2, len(self.base["reference"]["nodes"]))))]
        return json.dumps({"plan": "random", "tool_chain": chain})

    # ------------------------------------------------------------------ optional LLM-judge mode (§6.5)
    def judge_messages(self, answer: str) -> list[Message]:
        """The paper's judge prompt (J1-J9) for this case and an answer, ready to send to any served model
        at temperature 0; `grader.parse_judge_verdict` reads the reply. The rule grader stays the default."""
        P = prompts.JUDGE_PROMPTS
        tools_text = "\n".join(self.tool_lines)
        ref_answer = self.reference_plan() if self.kind != "unsolvable" else ""
        distractors = [d["name"] for d in self.task.get("distractors") or []]
        if self.kind == "broken":
            t = self.task
            text = _fill_all(P["J5"], {
                "[Dataset Name]": self.base["source_style"], "[Query]": self.query_block,
                "[Broken Tool Name]": t["broken_tool"], "[Replacement Tool Name]": t["replacement_tool"]["name"],
                "[Trajectory Prefix]": json.dumps(self.prefix, ensure_ascii=False, indent=2),
                "[Tool Definitions]": tools_text, "[Model Prediction]": answer})
        elif self.kind == "unsolvable":
            # J8 holds four judges, "1. ... Judge Prompt" to "4. ... Judge Prompt"; the title is not sent
            heads = list(re.finditer(r"(\d)\. [A-Za-z ]+? Judge Prompt ", P["J8"]))
            idx = {"visual": 0, "tool": 1, "conflict": 2, "info": 3}[self.task["unsolvable_type"]]
            end = heads[idx + 1].start() if idx + 1 < len(heads) else len(P["J8"])
            text = P["J8"][heads[idx].end():end].strip()
            text = text.replace("{available_tools_str}", ", ".join(x["name"] for x in self.tools))
            text += f"\n\nUser Query: {self.query_block}\n\nAgent Output: {answer}"
        elif self.half == "stepwise":
            text = _fill_all(P["J1"], {
                "[Dataset Name]": self.base["source_style"], "[Query]": self.query_block,
                "[Context]": json.dumps(self.prefix, ensure_ascii=False, indent=2), "[Tool Definitions]": tools_text,
                "[Ground Truth]": ref_answer, "[Model Prediction]": answer,
                "[Insert Error Classification Framework (see Figure 32)]": P["J2"],
                "[Insert Scoring Rubric (see Figure 33)]": P["J3"]})
            if distractors:
                text += "\n\n" + P["J6"].replace("[Extraneous Tool 1], [Extraneous Tool 2], ...", ", ".join(distractors)) \
                    .replace("[Extraneous Tool List]", ", ".join(distractors)).replace("[Model Prediction]", answer)
        else:
            text = P["J4"]
            if self.kind == "efficiency":
                text += "\n" + P["J9"]
            if distractors:
                text += "\n" + P["J7"].replace("[Extraneous Tool List]", ", ".join(distractors))
            text += (f"\n\nDataset: {self.base['source_style']}\nUser Query: {self.query_block}\n"
                     f"Available Tools:\n{tools_text}\nExpert Example: {ref_answer}\nModel Prediction: {answer}")
        return [Message(role="user", content=text)]

    @property
    def step_bin(self) -> int:
        return step_bin(self.base["meta"]["L"])
