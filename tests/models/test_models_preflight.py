"""The tool-calling preflight against real OpenAI-compatible servers on 127.0.0.1."""

from __future__ import annotations

import json

from models_fake_server import FakeOpenAIServer, text_reply, tool_reply

from toolsweep.cluster.preflight import check_native, env_verdict, find_json_object, main, run_preflight
from toolsweep.evaluator.types import FunctionCall, Message, Observation, TerminationReason, ToolCall
from toolsweep.models.config import OpenAIModelConfig, ScriptedModelConfig


def good_model(body: dict) -> dict:
    """A model whose template and parser work: native calls of the visible tool, JSON when asked."""
    names = [t["function"]["name"] for t in body.get("tools") or []]
    if "get_weather" in names:
        return tool_reply("get_weather", json.dumps({"city": "Paris"}))
    if "add" in names:
        return tool_reply("add", json.dumps({"a": 1, "b": 2}))
    return text_reply('Sure: {"action": "get_weather", "arguments": {"city": "Paris"}}')


def broken_template_model(body: dict) -> dict:
    """What a wrong tool parser looks like: the call leaks into the text."""
    return text_reply('<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call')


def test_preflight_tells_a_working_model_from_a_broken_one(tmp_path):
    with FakeOpenAIServer() as good, FakeOpenAIServer() as bad:
        good.default, bad.default = good_model, broken_template_model
        models = [
            OpenAIModelConfig(name="good", base_url=good.base_url, model="g", max_retries=0),
            OpenAIModelConfig(name="bad", base_url=bad.base_url, model="b", max_retries=0),
            ScriptedModelConfig(name="oracle", policy="oracle"),
        ]
        report = run_preflight(models, [("fake", ["small"])])
    by = {(r.model, r.probe): r for r in report.results}
    assert set(report.models()) == {"good", "bad"}  # scripted models need no preflight
    assert by["good", "native_tool_call"].ok and by["good", "json_action"].ok and by["good", "fake/small"].ok
    assert not by["bad", "native_tool_call"].ok and "no native tool call" in by["bad", "native_tool_call"].detail
    assert not by["bad", "json_action"].ok
    assert report.failed_models() == ["bad"]
    assert "FAILED: bad" in report.text()
    # the benchmark probe sent the benchmark's own prompt and tool schemas
    sent = [r for r in good.requests if any(t["function"]["name"] == "add" for t in r.get("tools", []))]
    assert sent and sent[0]["messages"][-1]["content"].startswith("What is")


def test_unreachable_model_fails_its_probes():
    models = [OpenAIModelConfig(name="down", base_url="http://127.0.0.1:9/v1", model="x", max_retries=0)]
    report = run_preflight(models, [])
    assert report.failed_models() == ["down"]
    assert all("InfraError" in r.detail for r in report.results)


def test_checks():
    tools = [{"type": "function", "function": {"name": "add", "parameters": {}}}]
    call = lambda name, args: Message(role="assistant", tool_calls=[ToolCall(id="1", function=FunctionCall(name=name, arguments=args))])  # noqa: E731
    assert check_native(call("add", '{"a": 1}'), tools)[0]
    assert not check_native(call("mul", '{"a": 1}'), tools)[0]
    assert not check_native(call("add", '[1, 2]'), tools)[0]
    assert not check_native(Message(role="assistant", content="5"), tools)[0]
    assert check_native(Message(role="assistant", content="5"), tools, required=False)[0]
    assert find_json_object('text ```json\n{"action": "x", "arguments": {}}\n```') == {"action": "x", "arguments": {}}
    assert find_json_object("{not json} nothing") is None
    assert not env_verdict(Observation(done=True, termination=TerminationReason.AGENT_FORMAT_ERROR))[0]
    assert not env_verdict(Observation(info={"parse_error": "bad plan"}))[0]
    assert env_verdict(Observation(info={"calls": [{"tool": "add", "status": "ok"}]}))[0]


def test_cli_reads_a_sweep_config_and_exits_nonzero_on_failure(tmp_path, capsys):
    with FakeOpenAIServer() as bad:
        bad.default = broken_template_model
        cfg = tmp_path / "sweep.yaml"
        cfg.write_text(
            "name: pf\nseeds: [0]\nmodels:\n"
            f"  - {{name: bad, kind: openai, base_url: '{bad.base_url}', model: b, max_retries: 0}}\n"
            "benchmarks:\n  - {name: fake, settings: [small]}\n"
        )
        code = main([str(cfg)])
    out = capsys.readouterr().out
    assert code == 1 and "bad" in out and "FAIL" in out


def test_require_preflight_raises_with_the_report():
    import pytest

    from toolsweep.cluster.preflight import PreflightFailed, require_preflight

    with FakeOpenAIServer() as good, FakeOpenAIServer() as bad:
        good.default, bad.default = good_model, broken_template_model
        g = OpenAIModelConfig(name="good", base_url=good.base_url, model="g", max_retries=0)
        b = OpenAIModelConfig(name="bad", base_url=bad.base_url, model="b", max_retries=0)
        assert require_preflight([g], [("fake", ["small"])], {}).failed_models() == []
        with pytest.raises(PreflightFailed, match="FAILED: bad") as info:
            require_preflight([g, b], [("fake", ["small"])], {})
    assert info.value.report.failed_models() == ["bad"]
