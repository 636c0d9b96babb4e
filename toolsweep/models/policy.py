"""LLMPolicy: the generic chat agent that plays any benchmark through a chat client."""

from __future__ import annotations

import json
from typing import Any

from toolsweep.evaluator.types import AgentReply, Message, Sampling, Usage, stable_seed
from toolsweep.evaluator.failures import describe
from toolsweep.evaluator.protocols import EndpointConfigError
from toolsweep.models.client import ChatClient, PreEncoded, ModelRequestError, encode_message, request_messages

# OpenAI-compatible servers take a seed as a signed 32/64-bit int depending on the implementation;
# 31 bits fit all of them.
_SEED_BITS = 31


class LLMPolicy:
    """Builds the request from the conversation the environment produced and asks the model.

    Native tool calls when the environment shows tools (`tools` non-empty), plain text otherwise.
    Sampling parameters come from the work unit, and so does the seed: each turn's seed is derived
    from the unit's `rng_seed` and the turn's position, so a rerun of a unit asks the same questions
    with the same seeds. The reply goes back unjudged (a malformed action is the environment's to
    score); `ContextExceeded` and `InfraError` from the client propagate to `run_episode`, and so does
    `EndpointConfigError`, which a 400/422 on an episode's first request (nothing of the model's in it
    yet) becomes.
    """

    def __init__(
        self,
        client: ChatClient,
        sampling: Sampling | None = None,
        *,
        seed: int = 0,
        session: str | None = None,
        system_prompt: str | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        self.client = client
        self.sampling = sampling or Sampling()
        self.seed = seed
        self.session = session
        self.system_prompt = system_prompt
        self.extra_body = extra_body or {}
        self.calls = 0
        self._converted: list[dict[str, Any]] = []
        self._encoded: list[str] = []  # each converted message's JSON
        self._converted_from: list[Message] = []
        self._tools: PreEncoded | None = None
        self._tools_seen: list[dict[str, Any]] | None = None  # a copy of the tools last encoded

    def build_request(self, messages: list[Message]) -> list[dict[str, Any]]:
        """The messages sent to the model: the conversation, with the configured system prompt
        first when the environment gave none.

        An episode's conversation only grows, so the messages already converted are kept and only
        the new ones are converted each turn (the same objects, checked by identity; anything else
        is converted afresh)."""
        n = len(self._converted_from)
        if n <= len(messages) and all(a is b for a, b in zip(self._converted_from, messages[:n])):
            new = request_messages(messages[n:])
        else:
            self._converted, self._encoded, new = [], [], request_messages(messages)
        self._converted += new
        self._encoded += [encode_message(m) for m in new]
        self._converted_from = list(messages)
        out, encoded = list(self._converted), self._encoded
        if self.system_prompt and not (out and out[0]["role"] == "system"):
            system = {"role": "system", "content": self.system_prompt}
            out.insert(0, system)
            encoded = [encode_message(system), *encoded]
        return PreEncoded(out, ",".join(encoded))

    def encoded_tools(self, tools: list[dict[str, Any]]) -> PreEncoded | None:
        """The tool schemas with their JSON, encoded again only when they change (an environment
        usually shows the same tools turn after turn). They are compared with a copy of what was
        encoded (parsed back from the JSON: C speed, where a deepcopy of a large tool list costs tens of
        milliseconds), so a schema an environment changed in place is never sent stale."""
        if not tools:
            return None
        if self._tools is None or self._tools_seen != tools:
            text = json.dumps(tools, separators=(",", ":"))
            self._tools, self._tools_seen = PreEncoded(tools, text), json.loads(text)
        return self._tools

    def turn_seed(self, messages: list[Message]) -> int:
        return stable_seed(self.seed, "turn", len(messages)) & ((1 << _SEED_BITS) - 1)

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        try:
            response = await self.client.chat(
                self.build_request(messages),
                tools=self.encoded_tools(tools),
                sampling=self.sampling,
                seed=self.turn_seed(messages),
                session=self.session,
                extra_body=self.extra_body or None,
            )
        except ModelRequestError as exc:
            if any(m.role == "assistant" for m in messages):
                raise  # the model's own earlier output may be what the endpoint rejects: the agent's error
            # Nothing the model said is in this request: the rejection is the configuration's (the
            # endpoint's options, extra_body, the tool schemas), and every unit would get it.
            raise EndpointConfigError(describe(exc.model, "request", str(exc)), "request") from exc
        self.calls += 1
        usage = Usage(
            prompt_tokens=response.prompt_tokens,
            completion_tokens=response.completion_tokens,
            latency_s=response.latency_s,
        )
        message = response.message
        if response.finish_reason == "length":
            # A reply cut at max_tokens is still the model's answer; the flag (with the budget it was cut
            # at) lets a reader tell it apart from one the model ended itself (`toolsweep show`, and the
            # cell's `truncated_replies` in summary.json).
            message = message.model_copy(update={"truncated": True, "max_tokens": self.sampling.max_tokens})
        return AgentReply(message=message, usage=usage)
