"""One protocol for every LLM-judged value, whatever the benchmark.

An unreadable verdict (prose, an empty reply, `{"match": "maybe"}`, or a judge call that raised, which
the episode loop turns into an empty reply) is the judge's failure, not the evaluated model's: the judge
is asked again with its reply and a reminder of the output format, up to `JUDGE_ASKS` asks in all; a
verdict still unreadable then leaves the value undefined (NaN: out of that metric's n) and counts in the
benchmark's `judge_unreadable`. It is never scored 0 and never replaced by the rule's value. A judge
endpoint that stays down raises `InfraError` from the model client, which the scheduler's endpoint
health logic pauses and retries: an outage, not a score.
"""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

from toolsweep.evaluator.types import Message

JUDGE_ASKS = 3
JUDGE_PROTOCOL = "reask-3-nan"
"""In the fingerprint of a judged benchmark: what an unreadable verdict does (so episodes judged under
an older rule, where it scored 0, are not mixed with new ones)."""
JUDGE_REMINDER = ("Your reply could not be read as a verdict. Reply again with ONLY the JSON object that the "
                  "Output Format above asks for, with every key it names, and no other text.")

V = TypeVar("V")


class Reasking(Generic[V]):
    """A judge consult that asks again while the reply is unreadable.

    `parse(reply)` returns the verdict or None; `on_verdict` gets the first readable verdict, or None
    after `asks` unreadable replies; `ask(messages, handler)` queues a further ask (the benchmark's
    consult queue, asked next). `reasks` counts the asks after the first."""

    def __init__(self, messages: list[Message], parse: Callable[[str], V | None],
                 on_verdict: Callable[[V | None], None], ask: Callable[[list[Message], Callable[[str], None]], None],
                 asks: int = JUDGE_ASKS) -> None:
        self.messages, self.parse, self.on_verdict, self.ask, self.asks = messages, parse, on_verdict, ask, asks
        self.asked = 1
        self.reasks = 0

    def __call__(self, reply: str) -> None:
        verdict = self.parse(reply)
        if verdict is not None or self.asked >= self.asks:
            self.on_verdict(verdict)
            return
        self.asked += 1
        self.reasks += 1
        again = [*self.messages, Message(role="assistant", content=reply), Message(role="user", content=JUDGE_REMINDER)]
        self.ask(again, self)
