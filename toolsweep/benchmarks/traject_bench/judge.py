"""TRAJECT-Bench's LLM-judged metrics, asked of a helper model the sweep serves (option `judge:
llm:<model>`), at temperature 0 like every helper.

- **Acc** (paper §4.1, spec §4.5): "if the predicted final answer matches the ground truth answer by
  prompting an LLM judge". The judge sees the query, the ground-truth answer and the candidate and
  answers JSON `{"match": true|false, "reason": ...}` on semantic equivalence, factual consistency and
  coverage of the key points; both answers empty is a match.
- **Traj-Satisfy** (paper §4.1, spec §4.4, rubric (a)): "to what extent a predicted trajectory can solve
  the user query", with no gold. The judge sees the query and the predicted calls as tool names with
  their descriptions cut to 120 characters (not the arguments) and answers JSON `{"score": 0-10,
  "reason": ...}` by the rubric's bands.

An unreadable verdict (prose, empty, `{"match": "maybe"}`, a string where the protocol wants a boolean, a
score off the 0-10 scale, a judge call that raised) is asked again and
then left undefined, out of the metric's n and counted in `judge_unreadable` (evaluator.judging, the
protocol of every judged benchmark). The rubric's scorer gives such a reply 0; that would count the
judge's failure as the model's, so it is not followed.

The paper does not print these prompts; the ones here state the spec's description of the rubric in
our own words. Where the outcome needs no judge (no answer against a non-empty gold answer, no
predicted call) it is decided without one, and the deterministic proxies stay beside the judged values
with their per-episode agreement.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from toolsweep.evaluator.types import Message

DESCRIPTION_CHARS = 120

ACC_SYSTEM = (
    "You are a strict grader of question answering. You compare a candidate answer with the ground-truth "
    "answer to a user's query and decide whether the candidate matches it."
)

ACC_PROMPT = """User query:
{query}

Ground-truth answer:
{gold}

Candidate answer:
{candidate}

The candidate matches when it is semantically equivalent to the ground truth: the facts it states are
consistent with the ground truth (no contradicting values, names or numbers) and it covers the ground
truth's key points. Wording, order and formatting do not matter; missing key points or wrong values do.
If both answers are empty, they match.

Reply with one JSON object and nothing else:
{{"match": true or false, "reason": "<one sentence>"}}"""

TRAJ_SYSTEM = (
    "You are an expert evaluator of tool-using agents. You judge how well a planned sequence of tool calls "
    "can solve a user's query."
)

TRAJ_PROMPT = """User query:
{query}

Predicted tool-call trajectory (in order; tool name — what the tool does):
{calls}

Rate from 0 to 10 to what extent this trajectory can solve the query:
- 0-2: irrelevant or unusable tools;
- 3-4: partially relevant, most of what the query needs is missing;
- 5-6: reasonably relevant but missing key steps or tools;
- 7-8: strong, with minor gaps;
- 9-10: excellent, the tools cover everything the query asks for.

Reply with one JSON object and nothing else:
{{"score": <integer 0-10>, "reason": "<one sentence>"}}"""


def acc_messages(query: str, gold: str, candidate: str) -> list[Message]:
    return [Message(role="system", content=ACC_SYSTEM),
            Message(role="user", content=ACC_PROMPT.format(query=query, gold=gold.strip(), candidate=candidate.strip()))]


def _short(text: str, n: int = DESCRIPTION_CHARS) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= n else text[: n - 3] + "..."


def traj_messages(query: str, calls: list[tuple[str, str]]) -> list[Message]:
    """`calls`: (tool name, its description) of each predicted call, in order."""
    lines = "\n".join(f"{i}. {name} — {_short(desc)}" for i, (name, desc) in enumerate(calls, 1))
    return [Message(role="system", content=TRAJ_SYSTEM),
            Message(role="user", content=TRAJ_PROMPT.format(query=query, calls=lines))]


def _json_object(text: str) -> dict[str, Any] | None:
    """The last JSON object in a reply (models wrap verdicts in prose or code fences)."""
    for match in reversed(list(re.finditer(r"\{[^{}]*\}", text or ""))):
        try:
            obj = json.loads(match.group(0))
        except ValueError:
            continue
        if isinstance(obj, dict):
            return obj
    return None


def parse_acc_verdict(text: str) -> bool | None:
    """The judge's match verdict, or None when the reply has no readable one. Read as the protocol asks
    (`"match": true or false`): a string ("true", "yes") is not that answer, and is asked again."""
    obj = _json_object(text)
    if obj is None:
        return None
    match = obj.get("match")
    return match if isinstance(match, bool) else None


def parse_traj_score(text: str) -> float | None:
    """The judge's score on its 0-10 scale, or None when the reply has no readable one. A score off the
    scale (42) or not a number ("9", true) is not an answer to the protocol (`<integer 0-10>`): it is asked
    again, never clamped to a grade the judge did not give."""
    obj = _json_object(text)
    if obj is None:
        return None
    score = obj.get("score")
    if isinstance(score, bool) or not isinstance(score, (int, float)):
        return None
    value = float(score)
    if not math.isfinite(value) or not 0.0 <= value <= 10.0:
        return None
    return value
