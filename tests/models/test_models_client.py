"""The openai-kind round trip over real HTTP against a local OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from models_fake_server import FakeOpenAIServer, text_reply, tool_reply

from toolsweep.evaluator import ContextExceeded, InfraError, Message, Observation, Sampling, WorkUnit, run_episode
from toolsweep.evaluator.types import TerminationReason
from toolsweep.evaluator.protocols import EndpointConfigError
from toolsweep.models.client import Endpoint, ModelRequestError, OpenAIClient, pick_replica
from toolsweep.models.config import OpenAIModelConfig
from toolsweep.models.factory import build_policy
from toolsweep.models.policy import LLMPolicy

ADD_TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]},
    },
}


def client(server: FakeOpenAIServer | list[str], **kw) -> OpenAIClient:
    urls = server if isinstance(server, list) else [server.base_url]
    ep = Endpoint(name="m", model="served-m", base_urls=urls, max_retries=kw.pop("max_retries", 3), **kw)
    return OpenAIClient(ep, backoff_s=0.01, backoff_max_s=0.05)


def run(coro):
    return asyncio.run(coro)


@pytest.fixture()
def server():
    with FakeOpenAIServer() as s:
        yield s


def test_text_reply_round_trip_records_usage_and_sampling(server):
    server.script.append(text_reply("The answer is 4.", prompt_tokens=17, completion_tokens=6))
    policy = LLMPolicy(client(server), Sampling(temperature=0.7, top_p=0.9, max_tokens=64), seed=123, session="u1")
    reply = run(policy.act([Message(role="user", content="2+2?")], []))
    assert reply.message.role == "assistant"
    assert reply.message.content == "The answer is 4."
    assert reply.message.tool_calls is None
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (17, 6)
    assert reply.usage.latency_s > 0
    (req,) = server.requests
    assert req["model"] == "served-m"
    assert "tools" not in req and "tool_choice" not in req
    assert (req["temperature"], req["top_p"], req["max_tokens"]) == (0.7, 0.9, 64)
    assert req["messages"] == [{"role": "user", "content": "2+2?"}]
    assert isinstance(req["seed"], int) and 0 <= req["seed"] < 2**31


def test_native_tool_call_round_trip(server):
    server.script.append(tool_reply("add", '{"a": 2, "b": 3}', call_id="call_7"))
    policy = LLMPolicy(client(server), Sampling(), seed=1, session="u1")
    reply = run(policy.act([Message(role="user", content="add 2 and 3")], [ADD_TOOL]))
    (call,) = reply.message.tool_calls
    assert call.id == "call_7" and call.function.name == "add"
    assert json.loads(call.function.arguments) == {"a": 2, "b": 3}
    assert reply.usage.completion_tokens == 12
    req = server.requests[0]
    assert req["tools"] == [ADD_TOOL] and req["tool_choice"] == "auto"


def test_unparseable_tool_arguments_pass_through_unjudged(server):
    server.script.append(tool_reply("add", '{"a": 2, "b": '))
    reply = run(LLMPolicy(client(server)).act([Message(role="user", content="x")], [ADD_TOOL]))
    assert reply.message.tool_calls[0].function.arguments == '{"a": 2, "b": '


def test_500_then_success_is_retried(server):
    server.script.extend([(500, {"error": "engine hiccup"}), (503, "busy"), text_reply("ok")])
    c = client(server)
    resp = run(c.chat([{"role": "user", "content": "hi"}]))
    assert resp.message.content == "ok"
    assert resp.attempts == 3
    assert len(server.requests) == 3


def test_429_is_retried_after_retry_after(server):
    server.script.extend([(429, {"error": "rate limited"}), text_reply("ok")])
    resp = run(client(server).chat([{"role": "user", "content": "hi"}]))
    assert resp.message.content == "ok" and len(server.requests) == 2


def test_400_is_not_retried(server):
    server.script.append((400, {"error": {"message": "unknown field 'foo'"}}))
    server.script.append(text_reply("should never be fetched"))
    with pytest.raises(ModelRequestError) as info:
        run(client(server).chat([{"role": "user", "content": "hi"}]))
    assert info.value.status == 400
    assert len(server.requests) == 1


def test_context_overflow_becomes_context_exceeded(server):
    msg = "This model's maximum context length is 2048 tokens. However, you requested 3000 tokens"
    server.script.append((400, {"object": "error", "message": msg, "code": 400}))
    with pytest.raises(ContextExceeded):
        run(client(server).chat([{"role": "user", "content": "long"}]))
    assert len(server.requests) == 1


def test_persistent_500_exhausts_retries_into_infra_error(server):
    server.script.extend([(500, "down")] * 3)
    with pytest.raises(InfraError, match="3 attempts"):
        run(client(server, max_retries=2).chat([{"role": "user", "content": "hi"}]))
    assert len(server.requests) == 3


def test_refused_connection_becomes_infra_error():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(InfraError, match="unreachable after 3 attempts") as info:  # the retries, counted
        run(client([f"http://127.0.0.1:{port}/v1"], max_retries=2).chat([{"role": "user", "content": "hi"}]))
    assert info.value.cause == "unreachable"


def test_malformed_body_is_transport_error(server):
    server.script.extend([(200, "<html>gateway</html>"), text_reply("fine")])
    resp = run(client(server).chat([{"role": "user", "content": "hi"}]))
    assert resp.message.content == "fine" and resp.attempts == 2


def test_api_key_read_from_named_env_var(server, monkeypatch):
    monkeypatch.setenv("TS_TEST_KEY", "sk-secret")
    c = OpenAIClient(Endpoint(name="m", model="x", base_urls=[server.base_url], api_key_env="TS_TEST_KEY"))
    run(c.chat([{"role": "user", "content": "hi"}]))
    assert server.headers[0]["Authorization"] == "Bearer sk-secret"
    assert "sk-secret" not in repr(c.endpoint)
    monkeypatch.delenv("TS_TEST_KEY")
    with pytest.raises(EndpointConfigError, match="TS_TEST_KEY"):
        run(c.chat([{"role": "user", "content": "hi"}]))


def test_session_sticky_routing_across_replicas():
    with FakeOpenAIServer() as a, FakeOpenAIServer() as b:
        c = client([a.base_url, b.base_url])

        async def episode(session: str) -> set[str]:
            seen = set()
            for _ in range(4):
                r = await c.chat([{"role": "user", "content": "q"}], session=session)
                seen.add(r.replica)
            return seen

        async def main():
            return await asyncio.gather(*(episode(f"unit-{i}") for i in range(12)))

        results = run(main())
        assert all(len(s) == 1 for s in results)  # each episode stayed on one replica
        assert {next(iter(s)) for s in results} == {a.base_url, b.base_url}  # both replicas used
        assert len(a.requests) + len(b.requests) == 48
        assert pick_replica([a.base_url, b.base_url], "unit-3") == pick_replica([a.base_url, b.base_url], "unit-3")


def test_retry_moves_to_another_replica():
    with FakeOpenAIServer() as a, FakeOpenAIServer() as b:
        urls = [a.base_url, b.base_url]
        first = pick_replica(urls, "s")
        bad, good = (a, b) if first == a.base_url else (b, a)
        bad.script.append((502, "bad gateway"))
        resp = run(client(urls).chat([{"role": "user", "content": "q"}], session="s"))
        assert resp.replica == good.base_url and len(bad.requests) == 1


def test_max_in_flight_caps_concurrency():
    with FakeOpenAIServer(delay_s=0.05) as s:
        c = client(s, max_in_flight=3)

        async def main():
            await asyncio.gather(*(c.chat([{"role": "user", "content": str(i)}]) for i in range(12)))

        run(main())
        assert s.max_in_flight == 3
        assert len(s.requests) == 12


class AddEnv:
    """A two-turn tool-use environment: call add(a, b), then answer with the sum."""

    def __init__(self) -> None:
        self.answer: str | None = None
        self.calls = 0

    def reset(self) -> Observation:
        return Observation(messages=[Message(role="system", content="Use tools."), Message(role="user", content="What is 2+3?")], tools=[ADD_TOOL])

    def step(self, reply: Message) -> Observation:
        if reply.tool_calls:
            self.calls += 1
            call = reply.tool_calls[0]
            args = json.loads(call.function.arguments)
            out = Message(role="tool", tool_call_id=call.id, content=str(args["a"] + args["b"]))
            return Observation(messages=[out], tools=[ADD_TOOL])
        self.answer = reply.text()
        return Observation(done=True, termination=TerminationReason.ANSWERED)

    def result(self) -> dict[str, float]:
        return {"correct": float(self.answer == "5"), "calls": float(self.calls)}


def test_episode_end_to_end_through_build_policy(server):
    server.script.extend([tool_reply("add", '{"a": 2, "b": 3}', call_id="c1"), text_reply("5", 60, 1)])
    model = OpenAIModelConfig(name="remote", base_url=server.base_url, model="served-m", system_prompt="ignored: env has one")
    unit = WorkUnit(sweep="s", model="remote", benchmark="add", setting="default", task_id="t0", seed=0)
    env = AddEnv()
    policy = build_policy(model, None, env, unit)  # type: ignore[arg-type]
    result = run(run_episode(env, policy, unit))
    assert result.termination == TerminationReason.ANSWERED
    assert result.metrics == {"correct": 1.0, "calls": 1.0}
    assert result.trajectory.prompt_tokens == 100 and result.trajectory.completion_tokens == 13
    second = server.requests[1]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool"]
    assert second[2]["tool_calls"][0]["id"] == "c1" and second[2]["content"] is None
    assert second[3] == {"role": "tool", "content": "5", "tool_call_id": "c1"}
    assert server.requests[0]["seed"] != server.requests[1]["seed"]  # per-turn seeds


def test_context_exceeded_ends_episode_as_result(server):
    server.script.append((400, {"message": "prompt is longer than the maximum model length of 512"}))
    unit = WorkUnit(sweep="s", model="remote", benchmark="add", setting="default", task_id="t0", seed=0)
    policy = LLMPolicy(client(server), seed=unit.rng_seed, session=unit.unit_id)
    result = run(run_episode(AddEnv(), policy, unit))
    assert result.termination == TerminationReason.CONTEXT_EXCEEDED


def test_infra_error_propagates_out_of_episode():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    unit = WorkUnit(sweep="s", model="remote", benchmark="add", setting="default", task_id="t0", seed=0)
    policy = LLMPolicy(client([f"http://127.0.0.1:{port}/v1"], max_retries=1))
    with pytest.raises(InfraError):
        run(run_episode(AddEnv(), policy, unit))


def test_reply_cut_at_max_tokens_is_flagged_not_judged(server):
    body = text_reply("The answer is")
    body["choices"][0]["finish_reason"] = "length"
    server.script.append(body)
    reply = run(LLMPolicy(client(server)).act([Message(role="user", content="q")], []))
    assert reply.message.content == "The answer is" and reply.message.model_extra == {"truncated": True, "max_tokens": 1024}


def test_policy_system_prompt_and_request_fields():
    policy = LLMPolicy(None, system_prompt="Be terse.")  # type: ignore[arg-type]
    convo = [
        Message(role="user", content="hi"),
        Message(role="assistant", content="", reasoning_content="hidden thoughts"),
    ]
    req = policy.build_request(convo)
    assert req[0] == {"role": "system", "content": "Be terse."}
    assert req[2] == {"role": "assistant", "content": ""}  # reasoning is not sent back
    own = policy.build_request([Message(role="system", content="env's own"), Message(role="user", content="x")])
    assert [m["content"] for m in own] == ["env's own", "x"]  # the environment's system prompt wins
    assert policy.turn_seed(convo) == policy.turn_seed(list(convo)) != policy.turn_seed(convo[:1])


def test_growing_conversation_is_converted_once_and_a_changed_one_afresh():
    """build_request keeps what it converted for an episode's growing conversation; a conversation
    that is not the last one extended (another episode, an edited history) is converted whole."""
    from toolsweep.models import client as client_module

    policy = LLMPolicy(None)  # type: ignore[arg-type]
    convo = [Message(role="user", content="q1")]
    seen: list[int] = []
    real = client_module.request_messages

    def counting(messages):
        seen.append(len(messages))
        return real(messages)

    import toolsweep.models.policy as policy_module

    policy_module.request_messages, saved = counting, policy_module.request_messages
    try:
        first = policy.build_request(convo)
        convo = convo + [Message(role="assistant", content="a1"), Message(role="user", content="q2")]
        grown = policy.build_request(convo)
        edited = [Message(role="user", content="other")] + convo[1:]
        fresh = policy.build_request(edited)
    finally:
        policy_module.request_messages = saved
    assert seen == [1, 2, 3]  # the two new messages only, then the whole edited conversation
    assert grown == real(convo) and fresh == real(edited) and first == real(convo[:1])
    # the JSON the client sends is the conversation's, message for message
    assert [json.loads("[" + r.json + "]") for r in (first, grown, fresh)] == [list(first), list(grown), list(fresh)]
    grown.append({"role": "user", "content": "appended by a caller"})
    assert policy.build_request(convo) == real(convo)  # a caller's change to a request stays its own


def test_tool_schemas_changed_in_place_are_sent_as_they_now_are(server):
    """The policy encodes the tools once while they stay the same; an environment that edits a schema
    in place (same objects) must not have the old one sent."""
    tool = json.loads(json.dumps(ADD_TOOL))
    tools = [tool]
    server.script.extend([text_reply("one"), text_reply("two"), text_reply("three")])
    policy = LLMPolicy(client(server), Sampling(), session="s")
    run(policy.act([Message(role="user", content="q")], tools))
    run(policy.act([Message(role="user", content="q")], tools))
    assert policy.encoded_tools(list(tools)) is policy.encoded_tools(tools)  # unchanged: encoded once
    tool["function"]["description"] = "Add two integers, carefully."
    run(policy.act([Message(role="user", content="q")], tools))
    sent = [r["tools"][0]["function"]["description"] for r in server.requests]
    assert sent == ["Add two integers.", "Add two integers.", "Add two integers, carefully."]


def test_unsendable_urls_and_keys_stop_the_run_and_transport_faults_are_never_the_agents(server, monkeypatch):
    """A host that is not a name and a key HTTP cannot carry are configuration errors; anything else the
    transport raises is retried and reported as infrastructure, never an agent's format error."""
    with pytest.raises(EndpointConfigError, match="unreachable"):
        run(client(["http://bad..host/v1"]).chat([{"role": "user", "content": "hi"}]))
    monkeypatch.setenv("TS_TEST_KEY", "sk-ключ")
    keyed = OpenAIClient(Endpoint(name="m", model="x", base_urls=[server.base_url], api_key_env="TS_TEST_KEY"))
    with pytest.raises(EndpointConfigError, match="auth"):
        run(keyed.chat([{"role": "user", "content": "hi"}]))

    from toolsweep.models import http

    async def broken(*args, **kwargs):
        raise RuntimeError("a bug in the transport")

    monkeypatch.setattr(http.ConnectionPool, "post", broken)
    with pytest.raises(InfraError, match="RuntimeError"):
        run(client(server, max_retries=1).chat([{"role": "user", "content": "hi"}]))
    assert not server.requests


def test_waiting_for_a_connection_slot_longer_than_the_budget_does_not_expire_the_episode():
    """With max_in_flight=1, an episode whose one request waits 2 s behind another request for the slot,
    under a 1 s `episode_timeout_s`: the wait is the endpoint's queue, not the model, so the episode ends
    answered. Before, the wait was credited only once it was over: the guard fired during it."""
    with FakeOpenAIServer(delay_s=2.0) as s:
        c = client(s, max_in_flight=1)
        s.script.extend([text_reply("first"), tool_reply("add", '{"a": 2, "b": 3}', call_id="c1"), text_reply("5")])
        unit = WorkUnit(sweep="s", model="remote", benchmark="add", setting="default", task_id="t0", seed=0)

        async def main():
            ahead = asyncio.create_task(c.chat([{"role": "user", "content": "ahead"}]))
            await asyncio.sleep(0.1)  # it holds the only slot for 2 s
            s.delay_s = 0.0  # the episode's own requests are quick
            policy = LLMPolicy(c, seed=unit.rng_seed, session=unit.unit_id)
            result = await run_episode(AddEnv(), policy, unit, timeout_s=1.0)
            await ahead
            return result

        result = run(main())
    assert result.termination == TerminationReason.ANSWERED, result.error
    assert result.metrics["correct"] == 1.0
    assert result.wall_time_s > 1.0  # the precondition: the episode took longer than its budget
