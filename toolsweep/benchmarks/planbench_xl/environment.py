"""One PlanBench-XL episode (spec §3): the Fig. 21 prompt, text actions, retrieval, validated tool
execution, grounded answers, enforced exploration and the per-step log every metric reads.

Actions are text tags in the assistant's content (no native function calling, as in the paper), so
`Observation.tools` is always empty. Malformed replies become observations and count in the
metrics; nothing an agent writes raises.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from toolsweep.benchmarks.planbench_xl.blocking import SettingSpec
from toolsweep.benchmarks.planbench_xl.retriever import Retriever
from toolsweep.benchmarks.planbench_xl.tasks import Task
from toolsweep.benchmarks.planbench_xl.world import DT, Tool, World, norm_value
from toolsweep.evaluator.types import Message, Observation, TerminationReason

MAX_TURNS = 100
MAX_INVALID_CALLS = 3

SYSTEM_PROMPT = """[System Prompt]
You are an agent that solves user queries by planning over a tool ecosystem under a strict step budget. Your goal is to obtain the required information via tool interactions and produce a valid final answer.

[Environment]
- Information is only accessible via tools.
- Tools take inputs and produce outputs, and can be chained.
- The tool graph may be incomplete: direct or intuitive paths may not exist, but a valid solution path is guaranteed.
Domain context:
You are working in the retail domain.
This is a high-level overview of how records are modeled in this benchmark so you can plan tool search and tool use more effectively.
It is only background knowledge. It does not replace the actual tool definitions you retrieve.
At a high level, this retail setup contains these kinds of records:
- customer accounts
- products and product variants
- in-progress carts or draft orders
- finalized orders and order line items
- saved payment methods, payment attempts, authorizations, and completed payments
- warehouse or fulfillment requests, shipments, and delivery attempts
- return requests, return reviews, and refunds
The main business flow usually looks like this:
- a customer account leads to a draft order
- a draft order contains draft line items
- a draft order can produce a pricing result or quote
- that quote can turn into a finalized order
- a finalized order contains finalized order items
Payment usually follows a separate but connected flow:
- a saved payment method is used to start a payment attempt
- that payment attempt may go through an authorization step
- if successful, it becomes a completed payment
Fulfillment usually follows this flow:
- an order can create one or more warehouse or fulfillment requests
- each warehouse request produces one shipment in this benchmark setup
- a shipment can have one or more delivery attempts
After-sales usually follows this flow:
- a customer may create a return request for an order
- that return request may go through an internal review step
- if approved, it may lead to a refund
Some important modeling distinctions:
- draft-stage records are different from finalized order records
- a product is different from a specific product variant or SKU
- a payment attempt is different from an authorization result, and both are different from the final payment record
- a return request is different from the internal review of that request, and both are different from the final refund record
- a fulfillment request is different from a shipment, and a shipment is different from one delivery attempt
Useful planning intuition:
- many tasks start from one identifier and ask for information stored on a related record
- if you know which stage of the business process you are in, it is usually easier to search for the right tools
- if a task starts from cart or quote information, think in terms of the pre-checkout flow
- if a task starts from payment information, think in terms of the payment flow or after-sales flow
- if a task starts from shipping information, think in terms of the fulfillment flow
- if a task starts from return or refund information, think in terms of the after-sales flow
Business rules in this benchmark:
- returns are whole-order only
- each order uses exactly one payment account or payment method
- a single warehouse request is not split into multiple shipments
Use this overview as a guide for planning, but rely on retrieved tool definitions to determine what each tool actually does.
When planning, prefer transitions that follow this business flow instead of jumping to loosely related datatypes.
Stay within the retail domain unless the query explicitly requires another domain.
domain='retail'.

[Actions]
At each step, take EXACTLY ONE action:
1. <retrieve_tools> - discover tools
(already satisfied at query start in all-tools mode; use it only if you want the full inventory repeated)
2. <tool_call> - call a discovered tool
3. <final_answer> - return the final answer
Use exactly one tag per response.

[Action Usage]
- retrieve_tools
Use when you need tools to obtain required information.
<retrieve_tools>
{
  "meta_tool": "... "
}
</retrieve_tools>
{addendum}- tool_call
Use when:
- The tool was retrieved in this query
- All required inputs are available
<tool_call>
{
  "tool_name": "...",
  "arguments": { ... }
}
</tool_call>
- final_answer
- Use ONLY when the required information has been correctly obtained.
<final_answer>
...
</final_answer>

[Planning]
At each step, decide based on:
1. What information you currently have
2. What information is required for the final answer
3. What step will bring you closer to obtaining it
4. Which tool best helps produce that information

[Execution Strategy]
- Prefer making progress via tool calls once relevant tools are identified.
- Do not over-retrieve when actionable tools are available.
- If progress stalls, revise the plan and explore alternative compositions, instead of declaring the task unsolvable or guessing the answer.

[Tool Selection]
- Tool suffixes (v2, lite, pro, turbo, etc.) are not reliable signals of quality.
- The transformation defined by the tool's inputs, outputs, and description is meaningful.
If one tool does not lead to progress, consider alternative variants.

[Correctness and Validation]
Before using <final_answer>:
- The required information MUST come from a successful tool call in this query
- Similar-looking fields are NOT sufficient
Strictly:
- Do NOT guess or fabricate missing values
- If the required information was not produced by a tool, you are NOT done

[Budget]
You have at most 100 steps.
- Each action costs 1 step
- Avoid unproductive loops
- Balance retrieval and execution

[Rules]
You MUST:
- Retrieve before calling tools
- Only call tools retrieved in previous turns
- Ensure inputs are satisfied before calling
You MUST NOT:
- Mix multiple actions in one response
- Output outside the required tags
- Produce plausible but unverified outputs

[Mindset]
You are a constrained planner:
- Each step should reduce the gap between what you have and what is required
- When tools are available, act instead of over-searching
- If a path fails, adapt - solutions may require indirect reasoning
Begin."""

META_TOOL_ADDENDUM = """Retrieval meta tools (put one of these JSON objects inside <retrieve_tools>):
- by_inputs: tools whose required inputs are exactly the listed information. {"meta_tool": "by_inputs", "arguments": {"inputs": ["<information you have>", ...]}}
- by_outputs: tools that produce the listed information. {"meta_tool": "by_outputs", "arguments": {"outputs": ["<information you need>"]}}
- by_io_info: tools that take the listed inputs and produce the output. {"meta_tool": "by_io_info", "arguments": {"input": ["..."], "output": "..."}}
Describe information in plain words, e.g. "delivery attempt" or "payment method id".
"""

ENFORCED_FEEDBACK = """Environment feedback:

The final answer you just gave does not appear to be correct, and you have not obtained the target information yet. Please continue exploring if needed before giving another final answer."""

INVALID_ACTION = "Invalid action: respond with exactly one of <retrieve_tools>, <tool_call>, <final_answer>."
NO_OUTPUT = ("the requested output datatypes cannot be obtained from the provided arguments through the "
             "called tool")
RETRIEVAL_FORMAT_NOTE = (
    'Could not parse the retrieval request. Use {"meta_tool": "by_inputs", "arguments": {"inputs": [...]}}, '
    '{"meta_tool": "by_outputs", "arguments": {"outputs": [...]}} or '
    '{"meta_tool": "by_io_info", "arguments": {"input": [...], "output": "..."}}.'
)


def system_prompt(meta_tool_addendum: bool = True) -> str:
    return SYSTEM_PROMPT.replace("{addendum}", META_TOOL_ADDENDUM if meta_tool_addendum else "")


_THINK = re.compile(r"<think>.*?</think>", re.S)
_OPEN = re.compile(r"<(retrieve_tools|tool_call|final_answer)>")
_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


def parse_action(text: str) -> tuple[str, str]:
    """(action, payload) with action in retrieve_tools | tool_call | final_answer | invalid_format."""
    text = _THINK.sub("", text or "")
    if "</think>" in text:  # an unterminated reasoning block before the answer
        text = text.split("</think>")[-1]
    opens = list(_OPEN.finditer(text))
    if len(opens) != 1:
        return "invalid_format", ""
    tag = opens[0].group(1)
    rest = text[opens[0].end():]
    end = rest.find(f"</{tag}>")
    return tag, (rest if end < 0 else rest[:end]).strip()


def parse_json(payload: str) -> Any:
    """Lenient JSON: strip code fences; fall back to the outermost {...} span."""
    s = _FENCE.sub("", payload.strip()).strip()
    try:
        return json.loads(s)
    except (json.JSONDecodeError, ValueError):
        i, j = s.find("{"), s.rfind("}")
        if 0 <= i < j:
            try:
                return json.loads(s[i: j + 1])
            except (json.JSONDecodeError, ValueError):
                return None
    return None


def _as_list(v: Any) -> list[str] | None:
    if isinstance(v, str):
        return [v]
    if isinstance(v, list) and all(isinstance(x, (str, int, float)) for x in v):
        return [str(x) for x in v]
    return None


def parse_retrieval(obj: Any) -> tuple[str, list[str], list[str]] | None:
    """(mode, inputs, outputs) from any accepted payload form (spec §3.2), else None."""
    if not isinstance(obj, dict):
        return None
    mode, args = None, None
    if isinstance(obj.get("meta_tool"), str):
        mode = obj["meta_tool"].strip()
        args = obj.get("arguments") if isinstance(obj.get("arguments"), dict) else \
            {k: v for k, v in obj.items() if k != "meta_tool"}
    else:
        for m in ("by_inputs", "by_outputs", "by_io_info"):
            if m in obj:
                mode, val = m, obj[m]
                if m == "by_io_info":
                    args = val if isinstance(val, dict) else None
                else:
                    args = {"inputs" if m == "by_inputs" else "outputs": val}
                break
    if mode not in ("by_inputs", "by_outputs", "by_io_info") or not isinstance(args, dict):
        return None

    def pick(*keys: str) -> list[str] | None:
        for k in keys:
            if k in args:
                return _as_list(args[k])
        return None

    ins = pick("inputs", "input", "input_info")
    outs = pick("outputs", "output", "output_info")
    if mode == "by_inputs" and ins:
        return mode, ins, []
    if mode == "by_outputs" and outs:
        return mode, [], outs
    if mode == "by_io_info" and ins and outs:
        return mode, ins, outs
    return None


@dataclass
class EpisodeState:
    """The latent state s_t = (q, U_t, D_t) plus the counters and log the metrics need."""

    turns: int = 0
    retrievals: int = 0
    tool_calls: int = 0
    invalid_calls: int = 0
    untrusted: int = 0
    format_errors: int = 0
    retrieved: dict[str, Tool] = field(default_factory=dict)  # U_t by name
    last_seen: dict[str, int] = field(default_factory=dict)  # tool name -> retrieval index
    have: set[str] = field(default_factory=set)  # D_t
    executed: set[str] = field(default_factory=set)  # D_exec
    trusted_vals: dict[str, set[str]] = field(default_factory=dict)
    untrusted_vals: set[str] = field(default_factory=set)
    grounded: set[str] = field(default_factory=set)  # norm_value of every value the query gave or a trusted call returned
    # norm_value -> the datatypes it was given or returned as by a trusted call: a value counts only
    # under those (Figs. 11 and 14: the default payment method's ID is not the payment method's).
    grounded_as: dict[str, set[str]] = field(default_factory=dict)
    ungrounded: int = 0  # calls rejected for an argument no trusted source produced (a guess)
    log: list[dict[str, Any]] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    correct: bool = False
    done: bool = False
    failure: str = ""
    enf_used: int = 0
    first_progress: bool = False
    drift_started: bool = False
    reappeared_after_drift: bool = False


class PlanBenchEnv:
    """Environment for one task in one setting; `state` is public for metrics and policies."""

    def __init__(self, world: World, retriever: Retriever, task: Task, spec: SettingSpec,
                 blocked: frozenset[str], seed: int, *, max_turns: int = MAX_TURNS,
                 max_invalid_calls: int = MAX_INVALID_CALLS, meta_tool_addendum: bool = True,
                 expose_output_datatype: bool = True, implicit_updates_state: bool = True,
                 enf_only_if_target_unreached: bool = False, show_steps_left: bool = False,
                 alternatives: int = 3, param_descriptions: str = "datatype") -> None:
        self.world, self.retriever, self.task, self.spec = world, retriever, task, spec
        self.blocked, self.seed = blocked, seed
        self.max_turns, self.max_invalid_calls = max_turns, max_invalid_calls
        self.meta_tool_addendum = meta_tool_addendum
        self.expose_output_datatype = expose_output_datatype
        self.implicit_updates_state = implicit_updates_state
        self.enf_only_if_target_unreached = enf_only_if_target_unreached
        self.show_steps_left, self.alternatives = show_steps_left, alternatives
        self.param_descriptions = param_descriptions
        self.out_gt = task.out_gt
        self.state = EpisodeState()

    # -- protocol ------------------------------------------------------------------------------

    def reset(self) -> Observation:
        self.state = EpisodeState(have=set(self.task.inputs))
        for d, v in zip(self.task.inputs, self.task.input_values):
            self.state.trusted_vals.setdefault(v, set()).add(d)
            self.state.grounded.add(norm_value(v))
            self.state.grounded_as.setdefault(norm_value(v), set()).add(d)
        return Observation(messages=[Message(role="system", content=system_prompt(self.meta_tool_addendum)),
                                     Message(role="user", content=self.task.query)], tools=[])

    def step(self, reply: Message) -> Observation:
        st = self.state
        if st.done:
            return Observation(done=True, termination=self._termination(), info={"action": "after_end"})
        st.turns += 1
        action, payload = parse_action(reply.text())
        if action == "retrieve_tools":
            text, rec = self._retrieve(payload)
        elif action == "tool_call":
            text, rec = self._call(payload)
        elif action == "final_answer":
            text, rec = self._answer(payload)
        else:
            st.format_errors += 1
            text, rec = INVALID_ACTION, {"action": "invalid_format"}
        rec["t"] = st.turns
        st.log.append(rec)
        if not st.done and st.invalid_calls >= self.max_invalid_calls:
            st.done, st.failure = True, "exceeded_max_tool_call_errors"
        if not st.done and st.turns >= self.max_turns:
            st.done, st.failure = True, "exceeded_max_steps"
        if text is not None and self.show_steps_left and not st.done:
            text = _with_steps_left(text, self.max_turns - st.turns)
        messages = [] if text is None else [Message(role="user", content=text)]
        info = {k: v for k, v in rec.items() if k in ("action", "outcome", "mode", "tool", "kind", "tool_count")}
        if st.done:
            info["failure_reason"] = st.failure
            return Observation(messages=messages, done=True, termination=self._termination(), info=info)
        return Observation(messages=messages, info=info)

    def result(self) -> dict[str, float]:
        from toolsweep.benchmarks.planbench_xl.metrics import episode_metrics

        return episode_metrics(self)

    # -- actions -------------------------------------------------------------------------------

    def _termination(self) -> TerminationReason:
        return {"exceeded_max_tool_call_errors": TerminationReason.AGENT_FORMAT_ERROR,
                "exceeded_max_steps": TerminationReason.MAX_TURNS}.get(self.state.failure,
                                                                      TerminationReason.ANSWERED)

    def progress_capable(self) -> list[Tool]:
        """Retrieved, executable, unblocked tools that would add a needed datatype now (§6.4)."""
        have = self.trusted_holdings()
        return [t for t in self.state.retrieved.values()
                if t.is_exec and t.output not in have and t.output in self.out_gt and t.input_set <= have]

    def trusted_holdings(self) -> set[str]:
        """D_0 plus what trusted calls produced: a datatype held only through an implicit failure
        (in D_t by Fig. 17) is not progress, and a call that first obtains it for real is."""
        return set(self.task.inputs) | self.state.executed

    def _retrieve(self, payload: str) -> tuple[str, dict[str, Any]]:
        st = self.state
        st.retrievals += 1
        parsed = parse_retrieval(parse_json(payload))
        if parsed is None:
            body = {"tool_count": 0, "tools": [], "retriever_note": RETRIEVAL_FORMAT_NOTE}
            return json.dumps(body), {"action": "retrieve", "mode": "malformed", "tool_count": 0,
                                      "returned": [], "resolved_inputs": []}
        mode, ins, outs = parsed
        matched = self.retriever.matches(mode, ins, outs)
        returned, replaced = self.retriever.result_list(matched, self.blocked, self.spec.btypes,
                                                        self.alternatives)
        for t in returned:
            st.retrieved[t.name] = t
            st.last_seen[t.name] = st.retrievals
        rec: dict[str, Any] = {
            "action": "retrieve", "mode": mode, "phrases": ins + outs, "tool_count": len(returned),
            "returned": [t.id for t in returned], "blocked_replaced": replaced,
            "resolved_inputs": sorted({self.retriever.resolve(p) for p in ins}),
        }
        if st.drift_started and not st.reappeared_after_drift:
            capable = {t.name for t in self.progress_capable()}
            if any(t.name in capable for t in returned):
                st.reappeared_after_drift = True
        if not returned:
            n = len(set(ins)) if mode != "by_outputs" else len(set(outs))
            what = "outputs" if mode == "by_outputs" else "inputs"
            note = (f"No {n}-input baseline tool exists for the requested {what}. No direct one-step tool is "
                    "available; you may need to search through intermediate datatypes.")
            return json.dumps({"tool_count": 0, "tools": [], "retriever_note": note}), rec
        tools_json = ", ".join(_schema_json(t, self.param_descriptions) for t in returned)
        return f'{{"tool_count": {len(returned)}, "tools": [{tools_json}]}}', rec

    def _reject(self, name: str, error: str, rec: dict[str, Any], untrusted: bool = False) -> str:
        st = self.state
        if untrusted:
            st.untrusted += 1
            rec["outcome"] = "untrusted"
        else:
            st.invalid_calls += 1
            rec["outcome"] = f"invalid:{error.split(':')[0][:40]}"
        rec["error"] = error
        return json.dumps({"tool_name": name, "status": "rejected", "error": error})

    def _call(self, payload: str) -> tuple[str, dict[str, Any]]:
        st = self.state
        st.tool_calls += 1
        rec: dict[str, Any] = {"action": "tool_call", "args": {}}
        obj = parse_json(payload)
        name = obj.get("tool_name", obj.get("name")) if isinstance(obj, dict) else None
        args = obj.get("arguments", obj.get("args", {})) if isinstance(obj, dict) else None
        if isinstance(args, str):
            args = parse_json(args)
        if args is None and isinstance(obj, dict) and "arguments" not in obj:
            args = {}
        if not isinstance(name, str) or not isinstance(args, dict):
            return self._reject(str(name or ""), "could not parse tool call", rec), rec
        name_l = name.strip().lower()
        rec["tool"] = name_l
        rec["args"] = {str(k): str(v) for k, v in args.items()}
        tool = st.retrieved.get(name_l)
        if tool is None:
            return self._reject(name, f"tool '{name}' has not been retrieved in this query", rec), rec
        rec["tool_id"], rec["kind"] = tool.id, tool.kind
        required = [p for p, _ in tool.params]
        if set(args) != set(required):
            return self._reject(name, f"argument keys {sorted(args)} do not match required parameters {required}",
                                rec), rec
        values = {p: str(args[p]).strip() for p in required}
        for p, v in values.items():
            if v in st.untrusted_vals and norm_value(v) not in st.grounded:  # the paper's UIRR
                return self._reject(name, NO_OUTPUT, rec, untrusted=True), rec
        missing = [d for d in tool.inputs if d not in st.have]
        if missing:
            return self._reject(name, "missing required datatype " + json.dumps(missing), rec), rec
        # Value-level provenance: an argument must have come from the query or a trusted call of this
        # episode, as the parameter's datatype. A value from an unreliable tool (UIRR), a guess, or the
        # right string obtained as another datatype (Fig. 14: the default payment method's ID for a
        # payment method) is refused like a lookup that finds nothing; the environment does not say why
        # (the paper's agent has to notice on its own).
        dtype_of = dict(tool.params)
        for p, v in values.items():
            if dtype_of[p] in st.grounded_as.get(norm_value(v), ()):
                continue
            rec["ungrounded_arg"] = p
            st.ungrounded += 1
            rec["outcome"] = "ungrounded"
            rec["error"] = NO_OUTPUT
            return json.dumps({"tool_name": name, "status": "rejected", "error": NO_OUTPUT}), rec
        # The call is valid: decide progress-related diagnostics before the state changes.
        capable = self.progress_capable()
        rec["capable_before"] = bool(capable)
        rec["capable_min_age"] = min((st.retrievals - st.last_seen.get(t.name, st.retrievals) + 1
                                      for t in capable), default=None)
        rec["tool_age"] = st.retrievals - st.last_seen.get(tool.name, st.retrievals) + 1
        have_before = tool.output in self.trusted_holdings()
        # A misleading alternative does what its own description says (Tab. 4, "aligned"): it looks
        # up its declared field on the record. Where the world has that function as an executable
        # tool the value is as good as that tool's; otherwise it is returned but not trusted, since
        # trusting it would add a path the task's graph does not have.
        looked_up = tool.is_exec or tool.kind == "blocker:sem"
        trusted_lookup = tool.is_exec or tool.id in self.world.sem_relation
        if looked_up:
            out = self.world.lookup[tool.id].get(tuple(values[p] for p, _ in tool.params))
            if out is None:
                rec.pop("capable_before"), rec.pop("capable_min_age"), rec.pop("tool_age")
                return self._reject(name, NO_OUTPUT, rec), rec
        if looked_up and not trusted_lookup:
            out_dt, trusted = tool.output, False
            st.untrusted_vals.add(out)
        elif looked_up:
            st.have.add(tool.output)
            st.executed.add(tool.output)
            st.trusted_vals.setdefault(out, set()).add(tool.output)
            st.grounded.add(norm_value(out))
            st.grounded_as.setdefault(norm_value(out), set()).add(tool.output)
            out_dt, trusted = tool.output, True
        else:
            out, out_dt, trusted = tool.fixed_output or "", tool.output, False
            st.untrusted_vals.add(out)
            if tool.kind == "blocker:imp" and self.implicit_updates_state:
                st.have.add(tool.output)
        progress = trusted and not have_before and tool.output in self.out_gt
        rec.update(outcome="ok", output_datatype=out_dt, output_value=out, trusted=trusted, progress=progress)
        if progress:
            st.first_progress = True
        elif st.first_progress and not st.drift_started:
            st.drift_started = True
        body: dict[str, Any] = {"tool_name": tool.name}
        if self.expose_output_datatype:
            body["output_datatype"] = out_dt
        body["output_value"] = out
        return json.dumps(body), rec

    def _answer(self, payload: str) -> tuple[str | None, dict[str, Any]]:
        st = self.state
        answer = payload.strip()
        st.answers.append(answer)
        reached = self.task.target in st.have
        match = norm_value(self.task.gold) in norm_value(answer)
        # Obtained, not guessed, and as the target datatype: the same string returned as another
        # datatype (the default payment method equals the method used in odd cases, Fig. 11) does not
        # count, even when an implicit failure put the target datatype in D_t (Fig. 17).
        grounded = self.task.target in st.grounded_as.get(norm_value(self.task.gold), ())
        correct = match and reached and grounded
        rec = {"action": "final_answer", "answer": answer, "norm_match": match, "target_reached": reached,
               "answer_grounded": grounded, "correct": correct}
        if (not correct and st.enf_used < self.spec.enf
                and not (self.enf_only_if_target_unreached and reached)):
            st.enf_used += 1
            rec["outcome"] = "enforced_feedback"
            return ENFORCED_FEEDBACK, rec
        st.done, st.correct = True, correct
        st.failure = "correct" if correct else ("final_answer_wrong" if reached else "target_datatype_not_reached")
        return None, rec


def _with_steps_left(text: str, left: int) -> str:
    """The remaining budget in an observation (spec §3.4 `show_steps_left`): a key of a JSON
    observation, a closing line of a plain-text one."""
    if text.startswith("{") and text.endswith("}"):
        return f'{{"steps_left": {left}, {text[1:]}' if len(text) > 2 else f'{{"steps_left": {left}}}'
    return f"{text}\n(Steps left: {left})"


_SCHEMA_CACHE: dict[tuple[str, str], str] = {}


def _schema_json(tool: Tool, param_descriptions: str = "datatype") -> str:
    key = (tool.id, param_descriptions)
    s = _SCHEMA_CACHE.get(key)
    if s is None:
        s = _SCHEMA_CACHE[key] = json.dumps(tool.schema(param_descriptions))
    return s


def datatype_phrase(name: str) -> str:
    """Canonical name in plain words (what the oracle sends to the retriever)."""
    return DT[name].name.replace("_", " ")
