"""The tool-calling preflight against real OpenAI-compatible servers on 127.0.0.1."""

from __future__ import annotations

import json

from models_fake_server import FakeOpenAIServer, text_reply, tool_reply

from toolsweep.cluster.preflight import check_native, env_verdict, find_json_object, main, run_preflight
from toolsweep.evaluator.failures import FIXES
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


def test_a_hung_endpoint_fails_each_probe_within_its_timeout_with_the_cause():
    import time

    with FakeOpenAIServer(delay_s=3) as hung:
        models = [OpenAIModelConfig(name="hung", base_url=hung.base_url, model="x", timeout_s=600)]
        seen = []
        report = run_preflight(models, [], probe_timeout_s=0.5, on_result=seen.append)
        answered = len(hung.requests)
    # each probe gave up at its own timeout ("slow"): had it waited on the model's timeout_s (600 s, it
    # printed nothing for 15 minutes before), the hung server's answer after 3 s would have been read
    assert len(seen) == 2 and all(not r.ok and r.cause == "slow" for r in report.results)
    assert answered == 2  # one request per probe, none retried
    assert "FAILED: hung: slow" in report.text() and "chat template" not in report.text()


def test_each_failure_names_its_cause_and_its_fix():
    cases = {"auth": (401, {"error": "bad key"}), "not_found": (404, {"error": "no model"}),
             "server": (500, {"error": "boom"}), "bad_body": (200, "<html>")}
    for cause, reply in cases.items():
        with FakeOpenAIServer() as server:
            server.default = lambda body, reply=reply: reply
            models = [OpenAIModelConfig(name="m", base_url=server.base_url, model="x", max_retries=0)]
            report = run_preflight(models, [], probe_timeout_s=5)
        assert {r.cause for r in report.results} == {cause}, (cause, report.results)
        assert FIXES[cause] in report.text()
    down = run_preflight([OpenAIModelConfig(name="down", base_url="http://127.0.0.1:9/v1", model="x")], [],
                         probe_timeout_s=5)
    assert {r.cause for r in down.results} == {"unreachable"}


def test_the_benchmark_probe_uses_the_environments_own_verdict():
    # replies that a generic check passed but the benchmarks reject
    from toolsweep.benchmarks.planbench_xl import PlanBenchXL

    env = PlanBenchXL().make_env(PlanBenchXL().tasks("default")[0], "default", 0)
    env.reset()
    ok, detail = env_verdict(env.step(Message(role="assistant", content="Let me think.")), 0, env)
    assert not ok and "did not parse" in detail  # its own count of unparseable replies went up
    env.reset()
    ok, detail = env_verdict(env.step(Message(role="assistant", content="Let me think.")))  # no count given
    assert not ok and "invalid_format" in detail  # the step's info says so too
    with FakeOpenAIServer() as server:
        server.default = lambda body: text_reply("I would use a tool here.")  # prose where tools are offered
        models = [OpenAIModelConfig(name="prose", base_url=server.base_url, model="x", max_retries=0)]
        report = run_preflight(models, [("fake", ["small"])], probe_timeout_s=5)
    probe = next(r for r in report.results if r.probe == "fake/small")
    # no tool-call markup at all: the template and the parser are not what failed
    assert not probe.ok and probe.cause == "prose"
    assert FIXES["prose"] in report.text() and "check the chat template" not in report.text()


def test_markup_the_parser_rejected_blames_the_template_and_parser():
    with FakeOpenAIServer() as server:
        # the model tried a Hermes call, but the server's parser left it as text (broken JSON)
        server.default = lambda body: text_reply('<tool_call>{"name": "get_weather", "arguments": {"city": }</tool_call>')
        models = [OpenAIModelConfig(name="markup", base_url=server.base_url, model="x", max_retries=0)]
        report = run_preflight(models, [("fake", ["small"])], probe_timeout_s=5)
    failed = [r for r in report.results if not r.ok]
    assert failed and {r.cause for r in failed} == {"format"}
    assert FIXES["format"] in report.text()


def test_run_exits_4_when_the_preflight_finds_a_refused_key(tmp_path, capsys):
    from toolsweep.cluster.cli import EXIT_ENDPOINT_CONFIG
    from toolsweep.cluster.cli import main as cli_main

    with FakeOpenAIServer() as server:
        server.default = lambda body: (401, {"error": "bad key"})
        cfg = tmp_path / "sweep.yaml"
        cfg.write_text(json.dumps({
            "name": "pf401", "models": [{"name": "m", "kind": "openai", "base_url": server.base_url, "model": "x",
                                          "max_retries": 0}],
            "benchmarks": [{"name": "fake", "settings": ["small"]}], "mlflow": False,
            "output_dir": str(tmp_path / "runs")}))
        code = cli_main(["run", str(cfg), "--no-progress"])
    err = capsys.readouterr().err
    assert code == EXIT_ENDPOINT_CONFIG == 4
    assert FIXES["auth"] in err and "--skip-preflight" not in err


def test_the_preflight_closes_its_connections():
    """Its event loop ends with it: a session left open is reported "Unclosed client session" at exit
    (seen after a failed preflight)."""
    import subprocess
    import sys

    with FakeOpenAIServer() as bad:
        bad.default = broken_template_model
        script = (
            "from toolsweep.cluster.preflight import run_preflight\n"
            "from toolsweep.models.config import OpenAIModelConfig\n"
            f"m = OpenAIModelConfig(name='bad', base_url='{bad.base_url}', model='b', max_retries=0)\n"
            "print(run_preflight([m], []).failed_models())\n"
        )
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "['bad']" in done.stdout
    assert "Unclosed" not in done.stderr, done.stderr[-2000:]
