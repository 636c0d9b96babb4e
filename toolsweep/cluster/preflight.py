"""Tool-calling preflight: does each model's reply parse into a valid action, before a sweep?

A wrong chat template or tool parser shows up as replies no environment can read: every episode
ends as `agent_format_error` and the sweep's numbers say nothing about the model. The preflight
sends each model a few canned prompts and reports, per probe, whether the reply parses:

- `native_tool_call`: a prompt with one tool schema; the reply must be a native tool call of that
  tool with JSON-object arguments (this is what the tool parser produces).
- `json_action`: no tools; the reply must contain a JSON object action (text-action benchmarks).
- one probe per benchmark setting checked: the benchmark's own first observation (its system
  prompt and tool schemas); the reply goes to the environment, which judges it as in a sweep
  (invalid = `agent_format_error` or a parse error flagged in the step info), and native tool
  calls must name a visible tool with JSON-object arguments.

Each probe has its own timeout and the client retries at most once, so an unreachable or hung
endpoint is told in seconds; each failure names its cause (auth, not found, unreachable, slow,
format, ...) and the fix for that cause. `toolsweep preflight CONFIG` prints a line per probe as it
finishes, then the table, and exits 1 when a model fails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from pydantic import BaseModel, Field

from toolsweep.evaluator.failures import CONFIG_CAUSES, FIXES, reply_cause
from toolsweep.evaluator.protocols import Benchmark, ContextExceeded
from toolsweep.evaluator.types import Message, Sampling, TerminationReason
from toolsweep.models.client import Endpoint, client_for
from toolsweep.models.config import ScriptedModelConfig
from toolsweep.models.factory import static_endpoint
from toolsweep.models.policy import LLMPolicy

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "City name, e.g. Paris"}},
            "required": ["city"],
        },
    },
}
NATIVE_PROMPT = [
    Message(role="system", content="You are a helpful assistant. Use the provided tools to answer."),
    Message(role="user", content="What is the weather in Paris right now? Call the get_weather tool."),
]
JSON_PROMPT = [
    Message(
        role="system",
        content='You control an agent. Reply with exactly one JSON object of the form '
        '{"action": "<name>", "arguments": {...}} and nothing else.',
    ),
    Message(role="user", content='Look up the weather in Paris using the action "get_weather" with argument "city".'),
]
_INFO_ERROR_KEYS = ("parse_error", "format_error", "invalid", "invalid_action")


class ProbeResult(BaseModel):
    model: str
    probe: str
    ok: bool
    detail: str = ""
    cause: str = Field("", description="Why it failed (evaluator.failures causes): auth, not_found, unreachable, "
                       "slow, overloaded, server, bad_body, context, request, format (markup the parser or "
                       "benchmark rejected), prose (no tool-call markup at all).")
    latency_s: float = 0.0
    reply: str = Field("", description="The reply, shortened, for the report.")

    def line(self) -> str:
        """One line as the probe finishes (`toolsweep preflight` and `run` print it)."""
        verdict = "ok" if self.ok else f"FAIL ({self.cause or 'format'})"
        return f"  {self.model}  {self.probe}  {verdict}  {self.latency_s:.1f}s  {self.detail[:80]}"


class PreflightReport(BaseModel):
    results: list[ProbeResult] = Field(default_factory=list)

    def models(self) -> list[str]:
        return list(dict.fromkeys(r.model for r in self.results))

    def failed_models(self) -> list[str]:
        return [m for m in self.models() if any(not r.ok for r in self.results if r.model == m)]

    def config_causes(self) -> list[str]:
        """Failures that are the endpoint's configuration (a bad key, an unknown model): not fixed by
        running anyway."""
        return sorted({r.cause for r in self.results if not r.ok and r.cause in CONFIG_CAUSES})

    def passed(self, model: str) -> bool:
        return model not in self.failed_models()

    def text(self) -> str:
        rows = [("model", "probe", "result", "latency", "detail")]
        for r in self.results:
            rows.append((r.model, r.probe, "ok" if r.ok else "FAIL", f"{r.latency_s:.1f}s", r.detail[:90]))
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        lines = ["  ".join(c.ljust(w) for c, w in zip(row[:4], widths)) + "  " + row[4] for row in rows]
        failed = self.failed_models()
        lines.append("")
        if not failed:
            lines.append("all models passed")
        for model in failed:
            causes = list(dict.fromkeys(r.cause or "format" for r in self.results if r.model == model and not r.ok))
            lines.append(f"FAILED: {model}: " + "; ".join(f"{c.replace('_', ' ')} — {FIXES[c]}" for c in causes))
        return "\n".join(lines)


def _short(message: Message) -> str:
    if message.tool_calls:
        return "; ".join(f"{c.function.name}({c.function.arguments})" for c in message.tool_calls)[:200]
    return (message.text() or "")[:200].replace("\n", " ")


def _json_object_args(arguments: str) -> bool:
    try:
        return isinstance(json.loads(arguments), dict)
    except ValueError:
        return False


def check_native(message: Message, tools: list[dict[str, Any]], required: bool = True) -> tuple[bool, str]:
    """Native tool calls must name a visible tool and carry JSON-object arguments."""
    names = {t.get("function", {}).get("name") for t in tools}
    if not message.tool_calls:
        return (not required), "no native tool call (text reply)"
    for call in message.tool_calls:
        if call.function.name not in names:
            return False, f"tool call names {call.function.name!r}, not a visible tool"
        if not _json_object_args(call.function.arguments):
            return False, f"arguments of {call.function.name!r} are not a JSON object: {call.function.arguments[:80]!r}"
    return True, f"{len(message.tool_calls)} valid tool call(s)"


def find_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in a text (a fenced block or bare braces)."""
    decoder = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch == "{":
            try:
                obj, _ = decoder.raw_decode(text[i:])
            except ValueError:
                continue
            if isinstance(obj, dict):
                return obj
    return None


def _format_errors(env: Any) -> int:
    """The environment's own count of replies it could not parse, where it keeps one."""
    for holder in (env, getattr(env, "state", None)):
        n = getattr(holder, "format_errors", None)
        if isinstance(n, int):
            return n
    return 0


def env_verdict(obs: Any, format_errors_before: int = 0, env: Any = None) -> tuple[bool, str]:
    """The environment's judgement of a reply, as a sweep would record it: a termination as a format
    error, an error in the step info, an `invalid...` action or outcome, or one more unparseable reply
    in the environment's own count."""
    if obs.termination == TerminationReason.AGENT_FORMAT_ERROR:
        return False, "environment: agent_format_error"
    if env is not None and _format_errors(env) > format_errors_before:
        return False, "environment: the reply did not parse as an action"
    info = obs.info or {}
    for key in ("action", "outcome"):
        if str(info.get(key, "")).startswith(("invalid", "parse")):
            return False, f"environment: {key} {info[key]}"
    if info.get("error"):
        return False, f"environment: {str(info['error'])[:80]}"
    for key in _INFO_ERROR_KEYS:
        if info.get(key):
            return False, f"environment: {key}: {str(info[key])[:80]}"
    if info.get("valid") is False:
        return False, "environment: invalid action"
    for call in info.get("calls") or []:
        if isinstance(call, dict) and str(call.get("status", "")).startswith(("invalid", "unknown", "parse")):
            return False, f"environment: call {call.get('tool')!r} {call.get('status')}"
    return True, "environment accepted the reply" + (" (episode ended)" if obs.done else "")


def _probe_endpoint(endpoint: Any, timeout_s: float) -> Endpoint:
    """The endpoint as probed: one retry at most and a request timeout within the probe's, so a dead
    or hung endpoint is told in seconds."""
    ep = endpoint if isinstance(endpoint, Endpoint) else Endpoint.model_validate(endpoint)
    return ep.model_copy(update={"max_retries": min(ep.max_retries, 1), "timeout_s": min(ep.timeout_s, timeout_s)})


def failure_cause(exc: BaseException) -> str:
    """The failures-table cause of an exception a probe raised."""
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "slow"
    if isinstance(exc, ContextExceeded):
        return "context"
    return getattr(exc, "cause", None) or "request"


async def _probe(model: str, name: str, policy: LLMPolicy, messages: list[Message], tools: list[dict[str, Any]],
                 judge, timeout_s: float, on_result: Any = None) -> ProbeResult:
    start = time.monotonic()
    try:
        reply = await asyncio.wait_for(policy.act(messages, tools), timeout_s)
    except Exception as exc:  # noqa: BLE001 - an unreachable or rejecting model fails its probe
        detail = f"no reply within {timeout_s:.0f} s" if isinstance(exc, (asyncio.TimeoutError, TimeoutError)) \
            else f"{type(exc).__name__}: {str(exc)[:300]}"
        result = ProbeResult(model=model, probe=name, ok=False, detail=detail, cause=failure_cause(exc),
                             latency_s=time.monotonic() - start)
    else:
        latency = time.monotonic() - start
        try:
            ok, detail = await asyncio.to_thread(judge, reply.message)
        except Exception as exc:  # noqa: BLE001 - an environment that crashes on the reply
            ok, detail = False, f"environment raised {type(exc).__name__}: {exc}"
        cause = "" if ok else reply_cause(reply.message.content, bool(reply.message.tool_calls))
        result = ProbeResult(model=model, probe=name, ok=ok, detail=detail, latency_s=latency,
                             reply=_short(reply.message), cause=cause)
    if on_result is not None:
        on_result(result)
    return result


def _benchmark_probes(bench: Benchmark, settings: list[str], max_settings: int) -> list[tuple[str, Any]]:
    """(probe name, environment factory) for the first task of each setting checked."""
    out = []
    chosen = settings if len(settings) <= max_settings else [settings[round(i * (len(settings) - 1) / (max_settings - 1))] for i in range(max_settings)] if max_settings > 1 else settings[:1]
    for setting in dict.fromkeys(chosen):
        tasks = bench.tasks(setting)
        if tasks:
            out.append((f"{bench.name}/{setting}", (lambda s=setting, t=tasks[0]: bench.make_env(t, s, 0))))
    return out


async def _run_model(model: Any, endpoint: Any, benchmarks: list[tuple[Benchmark, list[str]]], sampling: Sampling,
                     max_settings: int, timeout_s: float = 120.0, on_result: Any = None) -> list[ProbeResult]:
    client = client_for(_probe_endpoint(endpoint, timeout_s))
    system_prompt = getattr(model, "system_prompt", None)

    def policy() -> LLMPolicy:
        return LLMPolicy(client, sampling, seed=0, session=f"preflight-{model.name}", system_prompt=system_prompt)

    def native(message: Message) -> tuple[bool, str]:
        ok, detail = check_native(message, [WEATHER_TOOL])
        if ok and "paris" not in message.tool_calls[0].function.arguments.lower():  # type: ignore[index]
            return False, f"tool call without the asked city: {message.tool_calls[0].function.arguments[:80]}"  # type: ignore[index]
        return ok, detail

    def json_action(message: Message) -> tuple[bool, str]:
        obj = find_json_object(message.text())
        if obj is None:
            return False, "no JSON object in the reply"
        if "action" not in obj:
            return False, f"JSON object without an 'action' key: {json.dumps(obj)[:80]}"
        return True, f"JSON action {obj.get('action')!r}"

    jobs = [
        _probe(model.name, "native_tool_call", policy(), NATIVE_PROMPT, [WEATHER_TOOL], native, timeout_s, on_result),
        _probe(model.name, "json_action", policy(), JSON_PROMPT, [], json_action, timeout_s, on_result),
    ]
    for bench, settings in benchmarks:
        for name, make_env in _benchmark_probes(bench, settings, max_settings):
            env = await asyncio.to_thread(make_env)
            obs = await asyncio.to_thread(env.reset)

            def judge(message: Message, env=env, tools=obs.tools) -> tuple[bool, str]:
                if tools:  # a first reply in prose where tools are offered is a parser that does not work
                    ok, detail = check_native(message, tools, required=True)
                    if not ok:
                        return ok, detail
                before = _format_errors(env)
                return env_verdict(env.step(message), before, env)

            jobs.append(_probe(model.name, name, policy(), list(obs.messages), obs.tools, judge, timeout_s, on_result))
    try:
        return list(await asyncio.gather(*jobs))
    finally:
        closer = getattr(client, "aclose", None)
        if closer is not None:
            await closer()  # this event loop's connections: the loop ends with the preflight


def run_preflight(
    models: list[Any],
    benchmarks: list[Any],
    endpoints: dict[str, Any] | None = None,
    *,
    sampling: Sampling | None = None,
    max_settings: int = 3,
    probe_timeout_s: float = 120.0,
    on_result: Any = None,
) -> PreflightReport:
    """Probe every LLM model (scripted ones need no check).

    `benchmarks`: Benchmark instances, names, or (name or instance, settings) pairs, or config
    entries with `name`, `options` and `settings`. `endpoints`: from a running `ModelRuntime`;
    without them, a runtime is started for the vLLM models and stopped afterwards. Each probe has
    `probe_timeout_s` (the probes of all models run at once, so the whole preflight takes about one probe
    timeout more than the slowest probe); `on_result` is called with each probe's result as it finishes.
    """
    from toolsweep.evaluator.registry import get_benchmark

    resolved: list[tuple[Benchmark, list[str]]] = []
    for entry in benchmarks:
        settings: Any = "all"
        if isinstance(entry, tuple):
            entry, settings = entry
        if not isinstance(entry, Benchmark):
            if isinstance(entry, str):
                entry = get_benchmark(entry)
            else:
                settings = getattr(entry, "settings", "all")
                entry = get_benchmark(entry.name, getattr(entry, "options", {}) or {})
        names = list(entry.settings()) if settings == "all" else list(settings)
        resolved.append((entry, names))

    llms = [m for m in models if not isinstance(m, ScriptedModelConfig)]
    runtime = None
    if endpoints is None:
        endpoints = {}
        needs_runtime = [m for m in llms if static_endpoint(m) is None]
        if needs_runtime:
            from toolsweep.cluster.models_runtime import ModelRuntime

            runtime = ModelRuntime(needs_runtime)
            endpoints = runtime.start()
    sampling = sampling or Sampling(temperature=0.0, max_tokens=256)
    try:
        async def main() -> list[ProbeResult]:
            groups = await asyncio.gather(*(
                _run_model(m, endpoints.get(m.name) or static_endpoint(m), resolved, sampling, max_settings,
                           probe_timeout_s, on_result) for m in llms
            ))
            return [r for g in groups for r in g]

        bound = 2 * probe_timeout_s + 30  # the probes run concurrently; this bounds a stuck environment too

        async def bounded() -> list[ProbeResult]:
            return await asyncio.wait_for(main(), bound)

        try:
            return PreflightReport(results=asyncio.run(bounded()))
        except TimeoutError:
            raise PreflightFailed(f"the preflight did not finish within {bound:.0f} s (a probe's environment or "
                                  "model is stuck); raise --probe-timeout, or skip it with --skip-preflight") from None
    finally:
        if runtime is not None:
            runtime.stop()


class PreflightFailed(RuntimeError):
    """The sweep would measure something broken, so it does not start: a model whose replies do not
    parse into actions (`report` says which probes failed), or a helper that does not answer."""

    def __init__(self, message: str, report: PreflightReport | None = None) -> None:
        super().__init__(message)
        self.report = report


class HelpersUnreachable(PreflightFailed):
    """A helper model (a judge, a critic) does not answer: every unit that consults it would fail."""

    def __init__(self, failures: dict[str, str]) -> None:
        super().__init__("\n".join(
            [f"helper {name!r} did not answer a one-line probe: {why}" for name, why in failures.items()]
            + ["start its server or fix its base_url (a helper is consulted by every episode that needs it)"]))
        self.failures = failures


def check_helpers(helpers: list[Any], endpoints: dict[str, Any], probe_timeout_s: float = 120.0) -> dict[str, str]:
    """Send each served helper one short prompt; returns {name: why} for those that fail. Helpers
    answer in text, so this checks reachability, not tool-call parsing. In-process (hf) helpers
    are not probed: loading them in the driver would cost more than it tells."""
    probe = [Message(role="user", content="Reply with the word OK.")]

    async def one(model: Any) -> tuple[str, str | None]:
        endpoint = _probe_endpoint(endpoints.get(model.name) or static_endpoint(model), probe_timeout_s)
        policy = LLMPolicy(client_for(endpoint), Sampling(temperature=0.0, max_tokens=8), seed=0,
                           session=f"preflight-{model.name}")
        try:
            await asyncio.wait_for(policy.act(probe, []), probe_timeout_s)
        except Exception as exc:  # noqa: BLE001 - any failure is the answer to "does it answer?"
            cause = failure_cause(exc)
            return model.name, f"{cause.replace('_', ' ')}: {type(exc).__name__}: {exc}; fix: {FIXES[cause]}"
        return model.name, None

    async def main() -> list[tuple[str, str | None]]:
        return await asyncio.gather(*(one(m) for m in helpers if getattr(m, "kind", "") in ("openai", "vllm")))

    return {name: why for name, why in asyncio.run(main()) if why is not None}


def require_preflight(models: list[Any], benchmarks: list[Any], endpoints: dict[str, Any], **kw: Any) -> PreflightReport:
    """What `toolsweep run` calls after the model servers are up and before the first unit:
    raises `PreflightFailed` when a model fails."""
    report = run_preflight(models, benchmarks, endpoints, **kw)
    if report.failed_models():
        raise PreflightFailed(
            report.text() + "\n\nfix the model config, or run anyway with the preflight disabled "
            "(its episodes will likely all end as agent_format_error)", report)
    return report


def _start_ray(address: str | None, timeout_s: float) -> str | None:
    """Ray for the vLLM models' servers (embedded unless `address`); returns why it could not start, or None."""
    import ray

    from toolsweep.cluster.ray_start import RayStartFailed, start_embedded_ray

    if ray.is_initialized():
        return None
    if address:
        try:
            ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        except Exception as exc:  # noqa: BLE001 - unreachable, refused, another version
            return (f"cannot reach a Ray cluster at {address!r} ({type(exc).__name__}: {str(exc)[:300]}); start one "
                    "with `ray start --head`, or leave out --address to use an embedded Ray")
        return None
    from toolsweep.cluster.session_guard import start_guard

    start_guard()  # the embedded Ray's processes end with this one, even when it is killed
    try:
        start_embedded_ray(timeout_s, lambda msg: print(msg, file=sys.stderr, flush=True))
    except RayStartFailed as exc:
        return str(exc)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="toolsweep preflight",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Send each model of a sweep config canned prompts with the benchmarks' tool schemas and "
        "report whether the replies parse into valid actions (native tool calls and JSON actions).\n\n"
        "example:\n  toolsweep preflight configs/sweeps/smollm2_cpu.yaml\n"
        "  toolsweep preflight configs/sweeps/smollm2_cpu.yaml --models smollm2-vllm --json",
        epilog="exit codes: 0 every model passed; 1 a model failed; 2 bad config (e.g. a path that holds no "
        "model); 3 the model servers did not start; 5 Ray could not be started",
    )
    parser.add_argument("config", help="sweep YAML")
    parser.add_argument("--models", help="comma-separated model names to check (default: all)")
    parser.add_argument("--max-settings", type=int, default=3, help="settings probed per benchmark (default 3)")
    parser.add_argument("--address", help="Ray cluster address for vLLM models (default: embedded Ray)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--ray-start-timeout", type=float, default=None, metavar="SECONDS",
                        help="an embedded Ray that fails to start is started again once, and again while SECONDS "
                             "have not passed since the first try (default: the config's ray_start_timeout_s, "
                             "0 = one retry)")
    parser.add_argument("--probe-timeout", type=float, default=120.0,
                        help="seconds each probe may take (default 120); the whole check takes at most about twice that")
    args = parser.parse_args(argv)

    from toolsweep.cluster.config import ConfigError, check_models, load_config

    try:
        config = load_config(args.config)
    except (ConfigError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    models = list(config.models)
    if args.models:
        wanted = set(args.models.split(","))
        unknown = wanted - {m.name for m in models}
        if unknown:
            print(f"error: --models names unknown model(s) {sorted(unknown)}; the config has {[m.name for m in models]}", file=sys.stderr)
            return 2
        models = [m for m in models if m.name in wanted]
    try:
        check_models(config.model_copy(update={"models": models, "helpers": []}))
    except ConfigError as exc:  # a path that holds no model, an unset key: nothing is started
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if any(getattr(m, "kind", "") == "vllm" for m in models):
        timeout_s = config.ray_start_timeout_s if args.ray_start_timeout is None else args.ray_start_timeout
        failed = _start_ray(args.address, timeout_s)
        if failed is not None:
            print(f"error: {failed}", file=sys.stderr)
            return 5
    def line(r: ProbeResult) -> None:
        if not args.json:
            print(r.line(), file=sys.stderr, flush=True)

    print(f"preflight: probing {len(models)} model(s), {args.probe_timeout:.0f} s per probe", file=sys.stderr)
    try:
        report = run_preflight(models, list(config.benchmarks), max_settings=args.max_settings,
                               sampling=Sampling(temperature=0.0, max_tokens=min(config.sampling.max_tokens, 512)),
                               probe_timeout_s=args.probe_timeout, on_result=line)
    except PreflightFailed as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except Exception as err:  # noqa: BLE001 - a model server that does not start: its cause, not a traceback
        print(f"error: the models could not be started for the preflight ({type(err).__name__}: {str(err)[:600]}); "
              "nothing was probed. Check the model's path, engine_args and the server log named above", file=sys.stderr)
        return 3
    print(report.model_dump_json(indent=2) if args.json else report.text())
    return 1 if report.failed_models() else 0


if __name__ == "__main__":
    raise SystemExit(main())
