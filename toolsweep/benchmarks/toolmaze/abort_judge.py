"""ToolMaze's wise abort read by an LLM judge (option `judge: llm:<model>`): whether the agent's final
answer says the task could not be completed (§3.5 "wisely aborting unsolvable tasks"; Fig. 8 "detects
the irrecoverable failure and stops gracefully"). The judge sees the user's request and the final
answer only, not the trajectory: what it decides is what the answer says, and the deterministic judge
(metrics.judge) still decides everything the agent did. The prompt is ours; the paper prints none."""

from __future__ import annotations

import json
import re
from typing import Any

from toolsweep.evaluator.types import Message

ABORT_SYSTEM = ("You are a careful reader of an assistant's final answers. You decide what the answer says "
                "about the outcome of the user's task, not whether it is true.")

ABORT_PROMPT = """User request:
{query}

The assistant's final answer:
{answer}

Does the final answer say that the task could not be completed (in full or in part), for example because
a tool or service failed? A refusal or an admission of failure counts; a claim that the task was done
does not, even if it mentions errors that were overcome; a plain result without such an admission does
not.

Reply with one JSON object and nothing else:
{{"cannot_complete": true or false, "reason": "<one sentence>"}}"""


def abort_messages(query: str, answer: str) -> list[Message]:
    return [Message(role="system", content=ABORT_SYSTEM),
            Message(role="user", content=ABORT_PROMPT.format(query=query, answer=answer.strip()))]


def parse_abort_verdict(text: str) -> bool | None:
    """The judge's reading, or None when the reply holds no readable verdict: the protocol asks for a JSON
    boolean, so a string ("true", "maybe") is unreadable and asked again, never read as the boolean."""
    for match in reversed(list(re.finditer(r"\{[^{}]*\}", text or ""))):
        try:
            obj: Any = json.loads(match.group(0))
        except ValueError:
            continue
        value = obj.get("cannot_complete") if isinstance(obj, dict) else None
        if isinstance(value, bool):
            return value
    return None
