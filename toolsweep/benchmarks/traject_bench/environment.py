"""One TRAJECT-Bench episode: present a tool pool and a query, parse the agent's replies by the
setting's method, replay its tool calls, and score the trajectory against the gold one.

Methods (spec §3):
- `direct`, `cot`: one-shot trajectory prediction in text (the paper's JSON "tool list"); one retry on
  an unparseable reply, then an empty prediction. The predicted calls are then replayed in list order
  and, with the answer phase on (spec §3.6), the agent writes the final answer from their outputs.
- `native`: OpenAI function calling over aliased tool schemas; every call is answered by a `tool`
  message with the replayed output; a reply without calls is the final answer.
- `react-domain`, `react-static`, `react-dynamic`: Thought / Action / Observation turns with
  `Tool[{call}]` or `Finish[answer]`; the pool is the whole pool, a top-k retrieved once from the
  query, or a top-k re-retrieved before each turn from the latest thought. A JSON list inside
  `Tool[...]` is accepted as several independent calls in one step (the prompt still asks for one).
"""

from __future__ import annotations

import ast
import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from toolsweep.benchmarks.traject_bench.data import Dataset, Task, ToolDef
from toolsweep.benchmarks.traject_bench.metrics import PredCall, score_episode
from toolsweep.benchmarks.traject_bench.prompts import (
    ANSWER_PROMPT,
    COT_PROMPT,
    DIRECT_PROMPT,
    FORMAT_RETRY,
    NATIVE_SYSTEM,
    REACT_PROMPT,
    REACT_TOOLS_UPDATE,
    render_calls,
)
from toolsweep.benchmarks.traject_bench.replay import (
    AliasMap,
    Replayer,
    names_tool,
    placeholder_target,
)
from toolsweep.benchmarks.traject_bench.retrieval import ToolRetriever
from toolsweep.benchmarks.traject_bench import judge as llm_judge
from toolsweep.evaluator.judging import Reasking
from toolsweep.evaluator.types import Consult, Message, Observation, TerminationReason, stable_seed

POOLS = ("domain", "all", "retrieval", "retrieval-all", "fixed-k")
METHODS = ("direct", "cot", "native", "react-domain", "react-static", "react-dynamic")
TEXT_METHODS = ("direct", "cot")
REACT_METHODS = ("react-domain", "react-static", "react-dynamic")
RETRIEVAL_POOLS = ("retrieval", "retrieval-all")


def valid_combination(pool: str, method: str) -> bool:
    """react-domain shows a whole pool; react-static/dynamic retrieve from one, so they pair only
    with the retrieval pools (where react-domain would equal react-static)."""
    if method == "react-domain":
        return pool not in RETRIEVAL_POOLS
    if method in ("react-static", "react-dynamic"):
        return pool in RETRIEVAL_POOLS
    return True


@dataclass(frozen=True)
class SettingSpec:
    name: str
    split: str
    pool: str
    method: str
    k: int = 20
    max_turns: int = 8
    answer_phase: bool = True
    turns_from_gold: bool = False

    @property
    def defines_retrieval_rate(self) -> bool:
        """The paper reports a retrieval rate only for a top-k retrieved from the query (Table 4; the
        authors' scripts compute it for retrieval pools, once per query). A whole pool shows every
        tool, and react-dynamic retrieves from the agent's own thoughts: no rate there."""
        return self.pool in RETRIEVAL_POOLS and self.method != "react-dynamic"

    def params(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "split": self.split,
            "structure": "sequential" if self.split == "seq" else "parallel",
            "query": {"par-simple": "simple", "par-hard": "hard", "seq": "sequential"}[self.split],
            "pool": self.pool,
            "method": self.method,
        }
        if self.pool in RETRIEVAL_POOLS or self.pool == "fixed-k":
            out["k"] = self.k
        if self.pool in RETRIEVAL_POOLS:
            out["retriever"] = "bm25"
        if self.method == "native" or self.method in REACT_METHODS:
            out["max_turns"] = "gold+4" if self.turns_from_gold else self.max_turns
        if self.method in TEXT_METHODS:
            out["answer_phase"] = self.answer_phase
        return out


@dataclass
class Context:
    """Per-process shared, read-only state (dataset, replay index, retrieval indexes)."""

    dataset: Dataset
    replayer: Replayer
    retriever: ToolRetriever
    paper_compat: str = "off"  # "off" | "exact" | "corrected" (metrics.paper_mode)
    breakdown_domains: tuple[str, ...] = ()
    breakdown_lengths: tuple[int, ...] = ()
    render_cache: dict[tuple[str, ...], str] = field(default_factory=dict)
    schema_cache: dict[tuple[str, ...], list[dict[str, Any]]] = field(default_factory=dict)
    _aliases: AliasMap | None = None
    tool_reprs: dict[str, str] = field(default_factory=dict)

    def render(self, pool: tuple[str, ...], domain: str | None = None) -> str:
        """`str(list_of_visible_dicts)` of a pool as a task of `domain` sees it, from per-tool reprs
        cached once."""
        reprs = self.tool_reprs
        own = self.dataset.domain_defs.get(domain or "", {})
        parts = []
        for n in pool:
            if n in own:
                parts.append(repr(own[n].visible()))
                continue
            r = reprs.get(n)
            if r is None:
                r = reprs[n] = repr(self.dataset.catalog[n].visible())
            parts.append(r)
        return "[" + ", ".join(parts) + "]"

    def catalog_aliases(self) -> AliasMap:
        """Reversible aliases of every catalog tool (built once)."""
        if self._aliases is None:
            self._aliases = AliasMap(self.dataset.catalog)
        return self._aliases

    def native_tools(self, pool: tuple[str, ...], domain: str | None = None) -> list[dict[str, Any]]:
        """Function schemas of a pool as a task of `domain` sees it, built once per pool (read-only once built)."""
        key = (domain or "", *pool) if domain in self.dataset.domain_defs else pool
        got = self.schema_cache.get(key)
        if got is None:
            aliases = self.catalog_aliases()
            got = [tool_schema(self.dataset.tool_def(n, domain), aliases.to_alias[n]) for n in pool]
            if len(self.schema_cache) < 256:
                self.schema_cache[key] = got
        return got


_TYPE_MAP = {
    "NUMBER": "number", "INTEGER": "integer", "BOOLEAN": "boolean", "ARRAY": "array",
    "OBJECT": "object", "JSON": "object",
}  # fmt: skip


def tool_schema(tool: ToolDef, alias: str) -> dict[str, Any]:
    """OpenAI function schema of a tool under its alias (spec §3.4's type map; other types -> string)."""
    props: dict[str, Any] = {}
    for p in (*tool.required, *tool.optional):
        desc = p.description or ""
        if p.default not in (None, ""):
            desc = f"{desc} (example: {p.default})".strip()
        props[p.name] = {"type": _TYPE_MAP.get(str(p.type).upper(), "string"), "description": desc}
    return {
        "type": "function",
        "function": {
            "name": alias,
            "description": f"{tool.name}: {tool.description}",
            "parameters": {
                "type": "object",
                "properties": props,
                "required": [p.name for p in tool.required],
            },
        },
    }


# --------------------------------------------------------------------------------------------------
# Reply parsing


def _params_list(v: Any) -> list[tuple[str, Any]]:
    if isinstance(v, dict):
        return [(str(k), x) for k, x in v.items()]
    out = []
    if isinstance(v, list):
        for p in v:
            if isinstance(p, dict) and "name" in p:
                out.append((str(p["name"]), p.get("value")))
    return out


def parse_call(obj: Any) -> PredCall | None:
    """A call in the paper's item schema ("tool name", "required_parameters", ...)."""
    if not isinstance(obj, dict):
        return None
    name = obj.get("tool name", obj.get("tool_name", obj.get("name")))
    if not isinstance(name, str) or not name.strip():
        return None
    req = obj.get("required_parameters", obj.get("required parameters", []))
    opt = obj.get("optional_parameters", obj.get("optional parameters", []))
    return PredCall(name=name, required=_params_list(req), optional=_params_list(opt))


_DECODER = json.JSONDecoder()


def _json_values(text: str, limit: int = 200):
    """JSON values embedded in text, fenced ```json blocks first, then from each '{' / '['."""
    for m in re.finditer(r"```(?:json)?\s*(.*?)```", text, re.S):
        try:
            yield json.loads(m.group(1))
        except json.JSONDecodeError:
            try:  # a Python-literal rendering (single quotes, True/None), as the tool list is shown
                yield ast.literal_eval(m.group(1).strip())
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                pass
    tried = 0
    for m in re.finditer(r"[{\[]", text):
        if tried >= limit:
            return
        tried += 1
        try:
            val, _ = _DECODER.raw_decode(text, m.start())
        except json.JSONDecodeError:
            continue
        yield val


def parse_trajectory(text: str) -> tuple[list[PredCall] | None, str]:
    """The predicted "tool list" of a Direct/CoT reply, or (None, reason)."""
    if not text.strip():
        return None, "empty reply"
    for val in _json_values(text):
        items = None
        if isinstance(val, dict):
            items = val.get("tool list", val.get("tool_list"))
        elif isinstance(val, list) and val and all(isinstance(x, dict) for x in val):
            items = val
        if isinstance(items, list):
            calls = [c for c in (parse_call(x) for x in items) if c is not None]
            if len(calls) == len(items):
                return calls, ""
    return None, 'no JSON object with a "tool list" found'


_ACTION = re.compile(r"Action\s*\d*\s*:\s*(Tool|Finish)\s*\[", re.I)
_BARE = re.compile(r"\b(Tool|Finish)\s*\[")
_THOUGHT = re.compile(r"Thought\s*\d*\s*:\s*(.*?)(?=\n\s*Action\s*\d*\s*:|$)", re.I | re.S)


def parse_react(text: str) -> tuple[str, Any, str]:
    """(kind, payload, error) with kind in {"tool", "finish", "invalid"}.

    Only the first action counts (a model that writes its own "Observation" lines is cut there, like
    the paper's stop sequence)."""
    m = _ACTION.search(text) or _BARE.search(text)
    if not m:
        return "invalid", None, "no `Action i: Tool[...]` or `Finish[...]` found"
    start = m.end()
    if m.group(1).lower() == "finish":
        rest = text[start:]
        cut = re.search(r"\n\s*Observation\s*\d*\s*:", rest)
        rest = rest[: cut.start()] if cut else rest
        end = rest.rfind("]")
        return "finish", (rest[:end] if end >= 0 else rest).strip(), ""
    i = start
    while i < len(text) and text[i].isspace():
        i += 1
    try:
        val, _ = _DECODER.raw_decode(text, i)
    except json.JSONDecodeError as exc:
        return "invalid", None, f"the Tool[...] argument is not valid JSON ({exc.msg})"
    items = val if isinstance(val, list) else [val]
    calls = [parse_call(x) for x in items]
    if not calls or any(c is None for c in calls):
        return "invalid", None, 'a tool call needs a "tool name" and parameter lists'
    return "tool", calls, ""


def react_thought(text: str) -> str:
    m = _THOUGHT.search(text)
    return m.group(1).strip() if m else ""


# --------------------------------------------------------------------------------------------------


class TrajectEnv:
    """One episode of one task under one setting."""

    def __init__(self, ctx: Context, task: Task, spec: SettingSpec, seed: int, *, judge: bool = False) -> None:
        self.ctx = ctx
        # `judge`: Acc and Traj-Satisfy are also asked of the sweep's "judge" helper model (judge.py)
        self.judge = judge
        self.judged: dict[str, float] = {}
        self._consults: list[tuple[list[Message], Any]] = []
        self._final: Observation | None = None
        self.task = task
        self.spec = spec
        self.seed = seed
        self.local = ctx.replayer.task_index(task)
        self.turn_cap = task.n + 4 if spec.turns_from_gold else spec.max_turns
        self.used: dict[tuple[str, str], int] = {}
        self.base_pool = self._base_pool()
        self.pool = self._initial_pool()
        self.retrieved: set[str] = set(self.pool)
        # Like a text tool name, any catalog tool's alias executes; the pool decides what is shown.
        self.aliases, self.schemas = (
            (ctx.catalog_aliases(), ctx.native_tools(self.pool, task.domain)) if spec.method == "native" else (None, [])
        )
        self.pred: list[PredCall] = []
        self.executed: list[tuple[str, dict[str, Any], str, str]] = []  # name, args, output, status
        self.final_answer = ""
        self.turns = 0
        self.format_errors = 0
        self.retries_left = 1
        self.phase = "plan"
        self.done = False

    # -- pools ---------------------------------------------------------------------------------------
    def _base_pool(self) -> tuple[str, ...]:
        ds = self.ctx.dataset
        domain_pool = ds.pools.get(self.task.domain, ())
        pool = self.spec.pool
        if pool in ("all", "retrieval-all"):
            return ds.all_pool
        if pool == "fixed-k":
            gold = list(dict.fromkeys(c.name for c in self.task.calls))
            rng = random.Random(stable_seed("traject_bench", "fixed-k", self.task.task_id, self.spec.k, self.seed))
            others = [n for n in domain_pool if n not in gold]
            extra = rng.sample(others, max(0, min(len(others), self.spec.k - len(gold))))
            chosen = gold + extra
            rng.shuffle(chosen)
            return tuple(chosen)
        return domain_pool

    def _initial_pool(self) -> tuple[str, ...]:
        if self.spec.pool in RETRIEVAL_POOLS:
            return tuple(self.ctx.retriever.retrieve(self.task.query, self.base_pool, self.spec.k, self.task.domain))
        return self.base_pool

    def visible(self, names: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
        ds = self.ctx.dataset
        return [ds.tool_def(n, self.task.domain).visible() for n in (names if names is not None else self.pool)]

    def rendered_pool(self) -> str:
        """The pool as prompt text, as the task's own domain describes its tools (a prompt never
        depends on which other domains are loaded); shared pools are rendered once per process."""
        domain = self.task.domain if self.task.domain in self.ctx.dataset.domain_defs else ""
        key = (domain, *self.pool) if domain else self.pool
        text = self.ctx.render_cache.get(key)
        if text is None:
            text = self.ctx.render(self.pool, domain or None)
            if len(self.ctx.render_cache) < 4096:
                self.ctx.render_cache[key] = text
        return text

    # -- execution -----------------------------------------------------------------------------------
    def _resolve(self, call: PredCall, name: str, value: Any) -> Any:
        """A placeholder resolves to the gold value iff the gold binds this parameter from a tool
        that this episode already ran and got the gold recorded output from (spec §3.6)."""
        target = placeholder_target(value)
        if target is None:
            return value
        calls = self.task.calls
        for b in self.task.bindings:
            src, dst = calls[b.src], calls[b.dst]
            if dst.name != call.name or b.param != name:
                continue
            named = names_tool(target, src.name) or (
                "previous" in target.lower() and self.executed and self.executed[-1][0] == src.name
            )
            if named and any(n == src.name and out == src.output for n, _, out, _ in self.executed):
                return dst.args().get(name, value)
        return value

    def _execute(self, call: PredCall) -> str:
        args = [(k, self._resolve(call, k, v)) for k, v in call.required + call.optional]
        out, status = self.ctx.replayer.execute(call.name, args, self.local, self.used)
        self.pred.append(call)
        self.executed.append((call.name, dict(args), out, status))
        return out

    # -- protocol ------------------------------------------------------------------------------------
    def reset(self) -> Observation:
        m = self.spec.method
        q = self.task.query
        if m in TEXT_METHODS:
            tmpl = DIRECT_PROMPT if m == "direct" else COT_PROMPT
            text = tmpl.format(tools=self.rendered_pool(), query=q)
            return Observation(messages=[Message(role="user", content=text)], info=self._info("reset"))
        if m == "native":
            msgs = [Message(role="system", content=NATIVE_SYSTEM), Message(role="user", content=q)]
            # model_construct: the cached schemas are already valid, and validating ~100 nested
            # schemas per episode would dominate the environment's cost.
            return Observation.model_construct(
                messages=msgs, tools=self.schemas, done=False, termination=None, info=self._info("reset")
            )
        text = REACT_PROMPT.format(tools=self.rendered_pool(), query=q)
        return Observation(messages=[Message(role="user", content=text)], info=self._info("reset"))

    def step(self, reply: Message) -> Observation:
        if self.done:
            return Observation(done=True, termination=TerminationReason.ANSWERED)
        self.turns += 1
        m = self.spec.method
        if m in TEXT_METHODS:
            return self._step_text(reply)
        if m == "native":
            return self._step_native(reply)
        return self._step_react(reply)

    def _end(self, reason: TerminationReason, messages: list[Message] | None = None, **info: Any) -> Observation:
        self.done = True
        final = Observation(messages=messages or [], done=True, termination=reason, info=self._info("end", **info))
        return self._judge_then(final) if self.judge else final

    # -- the LLM judge (judge.py) --------------------------------------------------------------------
    def _judge_then(self, final: Observation) -> Observation:
        """Ask the judge for Acc and Traj-Satisfy, then end with `final`. An outcome that needs no
        judge is decided here: no answer matches only an empty gold answer; no call scores 0. An
        unreadable verdict is asked again, then left undefined (evaluator.judging)."""
        gold, answer = self.task.final_answer or "", self.final_answer or ""
        self.judged["judge_unreadable"] = 0.0
        self.judged["judge_reasks"] = 0.0
        if answer.strip():
            self._ask(llm_judge.acc_messages(self.task.query, gold, answer), llm_judge.parse_acc_verdict, self._on_acc)
        else:
            self.judged["acc_llm"] = float(not gold.strip())
        if self.pred:
            ds = self.ctx.dataset
            calls = [(c.name, ds.tool_def(c.name, self.task.domain).description if c.name in ds.catalog
                      else "(no such tool)") for c in self.pred]
            self._ask(llm_judge.traj_messages(self.task.query, calls), llm_judge.parse_traj_score, self._on_traj)
        else:
            self.judged["traj_satisfy_llm"] = 0.0
        self._final = final
        return self._next_consult()

    def _ask(self, messages: list[Message], parse, on_verdict) -> None:
        def again(msgs: list[Message], handler) -> None:
            self.judged["judge_reasks"] += 1
            self._consults.insert(0, (msgs, handler))  # asked next, before the other consult

        self._consults.append((messages, Reasking(messages, parse, on_verdict, again)))

    def _next_consult(self) -> Observation:
        if self._consults:
            return Observation(consult=Consult(role="judge", messages=self._consults[0][0]), info={"consult": "judge"})
        final, self._final = self._final, None
        return final if final is not None else Observation(done=True, termination=TerminationReason.ANSWERED)

    def consult_reply(self, role: str, reply: Message) -> Observation:
        if role != "judge" or not self._consults:
            raise RuntimeError(f"traject_bench received a {role!r} reply it did not ask for")
        _, handle = self._consults.pop(0)
        handle(reply.text())
        return self._next_consult()

    def _on_acc(self, verdict: bool | None) -> None:
        if verdict is None:
            self.judged["judge_unreadable"] += 1
        self.judged["acc_llm"] = float("nan") if verdict is None else float(verdict)

    def _on_traj(self, score: float | None) -> None:
        if score is None:
            self.judged["judge_unreadable"] += 1
        self.judged["traj_satisfy_llm"] = float("nan") if score is None else score

    def _info(self, phase: str, **extra: Any) -> dict[str, Any]:
        return {"phase": phase, "turn": self.turns, **extra}

    def _step_text(self, reply: Message) -> Observation:
        if self.phase == "answer":
            self.final_answer = reply.text()
            return self._end(TerminationReason.ANSWERED)
        calls, err = parse_trajectory(reply.text())
        if calls is None:
            self.format_errors += 1
            if self.retries_left > 0:
                self.retries_left -= 1
                msg = Message(role="user", content=FORMAT_RETRY.format(error=err))
                return Observation(messages=[msg], info=self._info("plan", parse_error=err))
            return self._end(TerminationReason.AGENT_FORMAT_ERROR, parse_error=err)
        for c in calls:
            self._execute(c)
        info = {"calls": [{"tool": n, "status": s} for n, _, _, s in self.executed]}
        if not self.spec.answer_phase:
            return self._end(TerminationReason.ANSWERED, **info)
        self.phase = "answer"
        text = ANSWER_PROMPT.format(
            query=self.task.query,
            calls=render_calls([(n, a, o) for n, a, o, _ in self.executed]),
        )
        return Observation(messages=[Message(role="user", content=text)], info=self._info("answer", **info))

    def _step_native(self, reply: Message) -> Observation:
        if not reply.tool_calls:
            self.final_answer = reply.text()
            return self._end(TerminationReason.ANSWERED)
        msgs = []
        statuses = []
        for tc in reply.tool_calls:
            name = self.aliases.name(tc.function.name)
            try:
                args = json.loads(tc.function.arguments or "{}")
                if not isinstance(args, dict):
                    raise ValueError("arguments must be a JSON object")
            except (json.JSONDecodeError, ValueError) as exc:
                self.format_errors += 1
                args = None
                err = f"invalid JSON arguments: {exc}"
            if name is None:
                out = json.dumps({"error": f"Tool '{tc.function.name}' not found"})
                self.pred.append(PredCall(name=tc.function.name, split_known=False))
                status = "not_found"
            elif args is None:
                out = json.dumps({"error": err})
                self.pred.append(PredCall(name=name, split_known=False))
                status = "bad_arguments"
            else:
                shown = self.ctx.dataset.tool_def(name, self.task.domain).shown_name
                out = self._execute(PredCall(name=name, required=list(args.items()), split_known=False,
                                             raw_name=shown))
                status = self.executed[-1][3]
            statuses.append({"tool": name or tc.function.name, "status": status})
            msgs.append(Message(role="tool", tool_call_id=tc.id, content=out, name=tc.function.name))
        if self.turns >= self.turn_cap:
            return self._end(TerminationReason.MAX_TURNS, msgs, calls=statuses)
        return Observation(messages=msgs, info=self._info("call", calls=statuses))

    def _step_react(self, reply: Message) -> Observation:
        text = reply.text()
        kind, payload, err = parse_react(text)
        i = self.turns
        info: dict[str, Any] = {"action": kind}
        if kind == "finish":
            self.final_answer = payload
            return self._end(TerminationReason.ANSWERED, **info)
        if kind == "tool":
            outs = [self._execute(c) for c in payload]
            obs_text = f"Observation {i}: " + "\n".join(outs)
            info["calls"] = [{"tool": c.name, "status": s} for c, (_, _, _, s) in zip(payload, self.executed[-len(payload):])]
        else:
            self.format_errors += 1
            obs_text = f"Observation {i}: Invalid action: {err}. Use Tool[{{...}}] or Finish[...]."
            info["error"] = err
        if self.turns >= self.turn_cap:
            return self._end(TerminationReason.MAX_TURNS, [Message(role="user", content=obs_text)], **info)
        if self.spec.method == "react-dynamic":
            q = react_thought(text) or self.task.query
            self.pool = tuple(self.ctx.retriever.retrieve(q, self.base_pool, self.spec.k, self.task.domain))
            self.retrieved |= set(self.pool)
            obs_text += "\n\n" + REACT_TOOLS_UPDATE.format(tools=self.rendered_pool())
        return Observation(messages=[Message(role="user", content=obs_text)], info=self._info("react", **info))

    # -- scoring -------------------------------------------------------------------------------------
    def result(self) -> dict[str, float]:
        nan = float("nan")
        shown = self.retrieved if self.spec.defines_retrieval_rate else None
        raw = None
        if shown is not None:
            ds = self.ctx.dataset
            raw = {ds.tool_def(n, self.task.domain).shown_name for n in shown}
        out = score_episode(
            self.task, self.pred, self.final_answer, shown, paper_compat=self.ctx.paper_compat, retrieved_raw=raw
        )
        out["format_errors"] = float(self.format_errors)
        if self.judge and self.judged:
            out.update(self.judged)
            # NaN (undefined) where the judge's verdict stayed unreadable: out of the agreement's n too
            acc = out["acc_llm"]
            out["acc_agreement"] = acc if acc != acc else float(acc == out["answer_facts"])
            out["traj_satisfy_abs_diff"] = abs(out["traj_satisfy_llm"] - out["traj_satisfy_proxy"])
        cat = self.ctx.dataset.catalog
        out["uses_synthesized_tool"] = float(any(cat[c.name].synthesized for c in self.task.calls))
        out["replay_miss"] = (
            sum(1 for *_, s in self.executed if s != "recorded") / len(self.executed) if self.executed else nan
        )
        for d in self.ctx.breakdown_domains:
            mine = d == self.task.domain
            for key in ("em", "inclusion", "answer_facts", "traj_satisfy_proxy"):
                out[f"{key}/{d}"] = out[key] if mine else nan
            out[f"usage_num/{d}"] = out["usage_num"] if mine else 0.0
            out[f"usage_den/{d}"] = out["usage_den"] if mine else 0.0
        for n in self.ctx.breakdown_lengths:
            mine = n == self.task.n
            for key in ("em", "inclusion", "answer_facts"):
                out[f"{key}/n={n}"] = out[key] if mine else nan
        return out
