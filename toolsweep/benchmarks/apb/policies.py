"""Scripted APB policies: `oracle` (the reference answer, refusing exactly the unsolvable cases),
`always_refuse` (the calibration baseline of §12.16), `random` (§12.22), and the exploit policies
that try to score without planning (their bounds are in `APB.exploit_policies`)."""

from __future__ import annotations

import json
import random
from typing import Any

from toolsweep.benchmarks.apb import baseline, plans
from toolsweep.benchmarks.apb.environment import APBEnv
from toolsweep.benchmarks.apb.tools import FINISH
from toolsweep.evaluator.types import AgentReply, Message

POLICIES = {
    baseline.NAME: baseline.DESCRIPTION,
    "oracle": "emits the reference plan / next steps / recovery, and refuses exactly the unsolvable cases",
    "always_refuse": 'always answers {"status": "REJECT"} (calibration 0.5)',
    "random": "uniform-random tools in the right JSON format",
}

EXPLOITS = {
    "string_chain": "a tool_chain of bare tool-name strings (the reference tools, no objects, no arguments)",
    "prose_refusal": "a plain-text refusal, no JSON",
    "negated_refusal": "prose that uses refusal words in negation and then lists tools as a plan",
    "empty_chain": 'answers without tools: {"plan": ..., "tool_chain": []}',
    "deep_nesting": "about 30 KB of nested {\"a\": (a parser that recurses crashes on it)",
    "stray_braces": "about 60 KB of unbalanced braces and quotes (a parser that retries at every brace is quadratic)",
    "all_tools": "a maximal chain: every visible tool once, with empty arguments",
    # the adversaries of issue #30, one named policy each (bounds per cell in `APB.exploit_policies`)
    "all_offered": "every offered tool at once with {} arguments: one step-wise step calling them all "
                   "(Tool-Broken: the scatter that reaches the replacement), or a chain of them all",
    "empty_arguments": "the right tools with {} arguments: Tool-Broken's replacement alone, the reference "
                       "next step(s) or chain with every argument dropped",
    "reject_with_chain": '{"status": "REJECT", "reason", "plan", "tool_chain": [the full reference chain]} '
                         "(step-wise: REJECT beside the reference tool_calls): a refusal that still executes",
    "prose_refusal_plus_plan": "a prose refusal followed by the reference answer's JSON (on unsolvable "
                               "cases, the solvable twin's full plan)",
    "blind_switch": "Tool-Broken: the listed tool nearest the last one called (its description), with that "
                    "call's arguments, whatever the call returned (the heuristic's recovery, never reading the error)",
    # positive controls: behaviour the paper credits, which must get its credit (floors per cell)
    "replace_with_args": "Tool-Broken: the designated replacement called once with the failed step's own "
                         "arguments (read from the trajectory) under the replacement's parameter names",
    "refusal_report_only": '{"status": "REJECT", "reason", "tool_chain": [Finish only]}: J8\'s refusal with '
                           "a termination-only chain",
    "prose_plus_plan": "ordinary prose ('Here is my plan:') around the reference answer's JSON; must stay correct",
}


class _Scripted:
    def __init__(self, env: APBEnv, seed: int) -> None:
        self.env = env
        self.rng = random.Random(f"apb-policy|{seed}|{env.task['task_id']}")

    def answer(self) -> str:
        raise NotImplementedError

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        return AgentReply(message=Message(role="assistant", content=self.answer()))


class OraclePolicy(_Scripted):
    def answer(self) -> str:
        return self.env.reference_answer()


class AlwaysRefusePolicy(_Scripted):
    def answer(self) -> str:
        return json.dumps({"status": "REJECT", "reason": "I cannot complete this task with what is available."})


class RandomPolicy(_Scripted):
    def answer(self) -> str:
        return self.env.random_answer(self.rng)


class HeuristicPolicy(_Scripted):
    """The no-LLM baseline (`baseline.py`): reads what a model reads, never the reference."""

    def answer(self) -> str:
        env = self.env
        visible = [{"name": t["name"], "description": t["description"], "parameters": t["parameters"]}
                   for t in env.tools]
        if env.kind == "refine" and env.turn == 1 and not env.task["mode"].startswith("critic"):
            return "The answer follows the query's steps in order."
        if env.half == "stepwise":
            recovery = baseline.broken_answer(env.prefix, visible)
            if recovery is not None:
                return recovery
            return baseline.stepwise_answer(env.query, visible, env.prefix, env.k)
        if env.kind in ("unsolvable", "control"):  # the P4u prompt: refusing is an option
            why = baseline.rejects(env.query, env.files, visible)
            if why:
                return json.dumps({"status": "REJECT", "reason": f"This cannot be completed: {why}."})
        return baseline.holistic_answer(env.query, visible)


class _Exploit(_Scripted):
    """An exploit policy: a fixed kind of answer that does not plan."""

    kind = ""

    def _names(self) -> list[str]:
        return [x["name"] for x in self.env.tools if x["name"] != FINISH]

    def _reference_names(self) -> list[str]:
        names = [n["tool"] for n in self.env.base["reference"]["nodes"]]
        return [n for n in names if n in set(self._names())] or self._names()[:3]

    def answer(self) -> str:
        return getattr(self, f"_{self.kind}")()

    def _string_chain(self) -> str:
        return json.dumps({"plan": "Use the listed tools in order.", "tool_chain": self._reference_names()})

    def _prose_refusal(self) -> str:
        return "I cannot complete this task: the required information is missing and the tool is unavailable."

    def _negated_refusal(self) -> str:
        steps = "; ".join(f"step {i + 1}: call {n}" for i, n in enumerate(self._reference_names()))
        return f"Nothing is missing and nothing is unavailable, so this is possible. Here is my plan: {steps}."

    def _empty_chain(self) -> str:
        return json.dumps({"plan": "The answer is straightforward; no tools are needed.", "tool_chain": []})

    def _deep_nesting(self) -> str:
        return '{"a":' * 6000

    def _stray_braces(self) -> str:
        return '{"x' * 20000

    def _all_tools(self) -> str:
        chain = [{"name": n, "parameter_description": {}, "reason": "cover everything"} for n in self._names()]
        return json.dumps({"plan": "Call every tool.", "tool_chain": chain})

    # -- the adversaries of issue #30
    def _stepwise_half(self) -> bool:
        return self.env.half == "stepwise"

    def _steps(self, steps: list[dict[str, Any]]) -> str:
        """k steps in the step-wise format: one object for k = 1, else an array of k."""
        return json.dumps(steps[0] if self.env.k == 1 else steps)

    def _reference_steps(self) -> list[dict[str, Any]]:
        ref = json.loads(self.env.reference_plan())
        return ref if isinstance(ref, list) else [ref]

    def _reference_chain(self) -> dict[str, Any]:
        """The holistic reference answer; on an unsolvable case, the solvable twin's full plan."""
        if self.env.kind == "unsolvable":
            ref = self.env.base["reference"]
            return {"plan": ref["plan"], "tool_chain": plans.holistic_chain(ref["nodes"], ref["linearization"])}
        return json.loads(self.env.reference_plan())

    def _all_offered(self) -> str:
        if not self._stepwise_half():
            return self._all_tools()
        calls = [{"type": "function", "function": {"name": n, "arguments": {}}} for n in self._names()]
        step = {"role": "assistant", "thought": "Try every tool.", "tool_calls": calls}
        return self._steps([step] * self.env.k)

    def _empty_arguments(self) -> str:
        if self.env.kind == "broken":
            return json.dumps(plans.assistant_call("Use the new tool.", self.env.task["replacement_tool"]["name"], {}))
        if self._stepwise_half():
            steps = self._reference_steps()
            for st in steps:
                for tc in st["tool_calls"]:
                    tc["function"]["arguments"] = {}
            return self._steps(steps)
        obj = self._reference_chain()
        for st in obj["tool_chain"]:
            st["parameter_description"] = {}
        return json.dumps(obj)

    _REASON = "The task cannot be completed as asked with the tools, files and information available."

    def _reject_with_chain(self) -> str:
        if self._stepwise_half():
            steps = self._reference_steps()
            return self._steps([{"status": "REJECT", "reason": self._REASON, **st} for st in steps])
        return json.dumps({"status": "REJECT", "reason": self._REASON, **self._reference_chain()})

    def _prose_refusal_plus_plan(self) -> str:
        body = self.env.reference_plan() if self._stepwise_half() else json.dumps(self._reference_chain())
        return f"{self._prose_refusal()}\n{body}"

    def _blind_switch(self) -> str:
        if not self._stepwise_half():
            return self._all_tools()
        visible = [{"name": t["name"], "description": t["description"], "parameters": t["parameters"]}
                   for t in self.env.tools]
        switched = baseline.nearest_equivalent_call(self.env.prefix, visible)
        return switched if switched is not None else self._all_offered()

    # -- positive controls
    def _replace_with_args(self) -> str:
        """The recovery the paper credits, built from what the agent sees: the failed call's arguments
        (the last assistant turn of the prefix) renamed onto the replacement's parameters."""
        if self.env.kind != "broken":
            return self.env.reference_answer()
        task = self.env.task
        failed = task["prefix"][-2]["tool_calls"][0]["function"]["arguments"]
        rename = task.get("arg_map") or task["replacement_tool"]["hidden"]["param_map"]
        args = {rename.get(p, p): v for p, v in failed.items()}
        return json.dumps(plans.assistant_call(f"{task['broken_tool']} is broken; its replacement does the same job.",
                                               task["replacement_tool"]["name"], args))

    def _refusal_report_only(self) -> str:
        finish = {"name": FINISH, "parameter_description": {"mode": "give_up"}, "reason": "report that it cannot be done"}
        return json.dumps({"status": "REJECT", "reason": self._REASON, "tool_chain": [finish]})

    def _prose_plus_plan(self) -> str:
        return f"Here is my plan:\n{self.env.reference_answer()}\nThat should solve the task."


def make_policy(name: str, env: APBEnv, seed: int) -> _Scripted:
    if name.startswith("search:") or name == baseline.NAME:
        # the heuristic is the searched floor: the table's stronger policy where the search found one
        from toolsweep.benchmarks.apb.search import FLOOR, SPACE, floor_policy_of, make_searched_policy, policy_name

        if name.startswith("search:") or floor_policy_of(env.setting) != policy_name(SPACE.baseline):
            return make_searched_policy(FLOOR if name == baseline.NAME else name, env, seed)
    if name in EXPLOITS:
        policy = _Exploit(env, seed)
        policy.kind = name
        return policy
    classes = {"oracle": OraclePolicy, "always_refuse": AlwaysRefusePolicy, "random": RandomPolicy,
               baseline.NAME: HeuristicPolicy}
    if name not in classes:
        raise KeyError(f"APB has no scripted policy {name!r}; available: {sorted(classes) + sorted(EXPLOITS)}")
    return classes[name](env, seed)
