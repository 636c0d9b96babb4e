"""One ToolMaze episode (spec §5): OpenAI-style native function calling.

reset() shows the system prompt, the user query and the task's tools as OpenAI schemas. Every
assistant message with tool calls is one agent step: all its calls execute in order and each gets
one `role: tool` message with its `tool_call_id`. A message without tool calls is the final answer.
Malformed calls (unparseable arguments, unknown tools, invalid arguments) are answered with natural
error messages and count as tool calls; they are never exceptions and never perturbations.
"""

from __future__ import annotations

import json
import random
from typing import Any

from toolsweep.benchmarks.toolmaze.abort_judge import abort_messages, parse_abort_verdict
from toolsweep.benchmarks.toolmaze.metrics import NAN, CallRecord, JudgeOptions, acknowledges_failure, judge
from toolsweep.benchmarks.toolmaze.perturbation import Engine, Profile
from toolsweep.benchmarks.toolmaze.prompts import system_prompt
from toolsweep.benchmarks.toolmaze.tasks import Task, TaskSet
from toolsweep.benchmarks.toolmaze.tools import canonical, error, seeded_int
from toolsweep.evaluator.judging import Reasking
from toolsweep.evaluator.types import Consult, EpisodeMetrics, Message, Observation, TerminationReason


def _visible(ts: TaskSet, task: Task, distractors: tuple[str, ...]) -> tuple[tuple[str, ...], str]:
    """The tools an episode shows, in order, and their schemas as one JSON text. Built once per
    (task, distractors) and kept on the task set: every episode of a task shows the same list (about
    46 tools in the domain view)."""
    cache = ts.__dict__.setdefault("_visible_cache", {})  # lives and dies with the task set
    key = (task.task_id, tuple(task.tools_visible), distractors)  # a task edited in place is another list
    hit = cache.get(key)
    if hit is None:
        visible = list(task.tools_visible)
        if distractors:
            visible += [d for d in distractors if d not in visible]
            random.Random(seeded_int(ts.dataset_seed, "visible+", task.task_id)).shuffle(visible)
        hit = (tuple(visible), json.dumps([ts.corpus.tools[t].openai_schema() for t in visible]))
        cache[key] = hit
    return hit


class ToolMazeEnv:
    def __init__(self, ts: TaskSet, task: Task, profile: Profile, prompt: str, seed: int,
                 max_steps: int = 25, distractors: list[str] | None = None,
                 judge_options: JudgeOptions | None = None, judged: bool = False) -> None:
        self.judge_options = judge_options or JudgeOptions()
        self.judged = judged  # an LLM judge reads the final answer's acknowledgement (abort_judge.py)
        self.ts = ts
        self.task = task
        self.profile = profile
        self.prompt = prompt
        self.seed = seed
        self.max_steps = max_steps
        visible, schemas = _visible(ts, task, tuple(distractors or ()))
        self.schemas = json.loads(schemas)  # a fresh copy per episode
        self.visible = frozenset(visible)
        self.reset()

    # --- protocol
    def reset(self) -> Observation:
        self.engine = Engine(self.profile)
        self.state: dict[str, Any] = {}
        self.calls: list[CallRecord] = []
        self.n_steps = 0
        self.final_text: str | None = None
        self.judge_ack: bool | None = None
        self.judge_asked = False
        self.judge_reasks = 0
        self._consult: tuple[list[Message], Reasking] | None = None
        self._final: Observation | None = None
        self.done = False
        self.termination: TerminationReason | None = None
        msgs = [Message(role="system", content=system_prompt(self.prompt)),
                Message(role="user", content=self.task.query)]
        return Observation(messages=msgs, tools=self.schemas,
                           info={"task_id": self.task.task_id, "mode": self.profile.mode})

    def step(self, reply: Message) -> Observation:
        if self.done:
            return Observation(done=True, termination=self.termination, info={"note": "episode already over"})
        self.n_steps += 1
        calls = reply.tool_calls or []
        if not calls:
            self.final_text = reply.text()
            final = self._end(TerminationReason.ANSWERED, [])
            if self.judged and self.final_text.strip() and any(c.perturbed for c in self.calls):
                return self._ask_judge(final)  # only a final answer after a fault can be a wise abort
            return final
        out: list[Message] = []
        records = []
        for call in calls:
            rec = self.execute(call.id, call.function.name, call.function.arguments)
            records.append(rec)
            # role/tool_call_id/content only: strict OpenAI-compatible servers reject other fields
            out.append(Message(role="tool", tool_call_id=call.id, content=canonical(rec.response)))
        info = {"calls": [r.to_json() for r in records]}
        if self.n_steps >= self.max_steps:
            return self._end(TerminationReason.MAX_TURNS, out, info)
        return Observation(messages=out, info=info)

    def _end(self, reason: TerminationReason, msgs: list[Message], info: dict | None = None) -> Observation:
        self.done = True
        self.termination = reason
        return Observation(messages=msgs, done=True, termination=reason, info=info or {})

    # --- the LLM judge of the wise abort (abort_judge.py, evaluator.judging)
    def _ask_judge(self, final: Observation) -> Observation:
        self.judge_asked = True
        self._final = final
        messages = abort_messages(self.task.query, self.final_text or "")

        def again(msgs: list[Message], handler: Reasking) -> None:
            self.judge_reasks += 1
            self._consult = (msgs, handler)

        self._consult = (messages, Reasking(messages, parse_abort_verdict, self._on_verdict, again))
        return self._next_consult()

    def _on_verdict(self, verdict: bool | None) -> None:
        self.judge_ack = verdict

    def _next_consult(self) -> Observation:
        if self._consult is not None:
            return Observation(consult=Consult(role="judge", messages=self._consult[0]), info={"consult": "judge"})
        final, self._final = self._final, None
        return final if final is not None else Observation(done=True, termination=self.termination)

    def consult_reply(self, role: str, reply: Message) -> Observation:
        if role != "judge" or self._consult is None:
            raise RuntimeError(f"toolmaze received a {role!r} reply it did not ask for")
        _, handle = self._consult
        self._consult = None
        handle(reply.text())
        return self._next_consult()

    def execute(self, call_id: str, name: str, raw_args: str | None) -> CallRecord:
        """Run one tool call through the engine and the simulator; never raises for agent input."""
        rec = CallRecord(step=self.n_steps, idx=len(self.calls), call_id=call_id, tool=str(name),
                         raw_args=raw_args if isinstance(raw_args, str) else str(raw_args), args=None,
                         response=None)
        self.calls.append(rec)
        if name not in self.visible:
            rec.malformed = "unknown_tool"
            rec.response = error(404, "UNKNOWN_TOOL", f"Unknown tool '{name}'. Use one of the provided tools.")
            return rec
        try:
            args = json.loads(raw_args) if raw_args not in (None, "") else {}
        except (TypeError, ValueError) as exc:
            rec.malformed = "bad_json"
            rec.response = error(400, "INVALID_ARGUMENTS", f"Arguments are not valid JSON: {exc}")
            return rec
        if not isinstance(args, dict):
            rec.malformed = "bad_json"
            rec.response = error(400, "INVALID_ARGUMENTS", "Arguments must be a JSON object.")
            return rec
        rec.args = args
        hit = self.engine.on_call(name)
        if hit is not None:
            rec.perturbed, rec.rule_id = hit.kind, hit.rule_id
            rec.response = json.loads(hit.response)
            return rec
        rec.forwarded = True
        rec.response = self.ts.simulator.respond(name, args, self.state)
        return rec

    def result(self) -> EpisodeMetrics:
        """The deterministic judge's metrics. With an LLM judge, the wise abort's acknowledgement is the
        judge's reading; the rule's values stay beside it (`rule_tsr`, `rule_prr`) with their agreement
        (`ack_agreement`). A verdict unreadable after every ask leaves undefined (NaN) exactly the values
        that depend on it, and counts in `judge_unreadable`."""
        counts = (self.n_steps, len(self.calls), sum(1 for c in self.calls if c.malformed),
                  self.termination == TerminationReason.ANSWERED)
        rule = self.verdict().metrics(*counts)
        if not self.judged:
            return rule
        out = dict(rule)
        if self.judge_asked and self.judge_ack is not None:
            out.update(self.verdict(self.judge_ack).metrics(*counts))
        elif self.judge_asked:
            said, unsaid = self.verdict(True).metrics(*counts), self.verdict(False).metrics(*counts)
            out.update({k: v if v == unsaid[k] or (v != v and unsaid[k] != unsaid[k]) else NAN
                        for k, v in said.items()})
        out["rule_tsr"], out["rule_prr"] = rule["tsr"], rule["prr"]
        out["judge_unreadable"] = float(self.judge_asked and self.judge_ack is None)
        out["judge_reasks"] = float(self.judge_reasks)
        out["ack_agreement"] = (float(self.judge_ack == acknowledges_failure(self.final_text))
                                if self.judge_asked and self.judge_ack is not None else NAN)
        return out

    def verdict(self, acknowledged: bool | None = None):
        return judge(self.task, self.profile, self.engine, self.calls,
                     answered=self.termination == TerminationReason.ANSWERED, corpus=self.ts.corpus,
                     final_text=self.final_text, options=self.judge_options, acknowledged=acknowledged)
