"""Counting a request's prompt tokens as the server will: the model's chat template renders the
messages and the tool schemas, the model's tokenizer counts the result.

vLLM applies the chat template to the conversation (tool-call arguments parsed from their JSON
strings into objects first, as its chat utilities do) and tokenizes the rendered text; counting the
raw texts instead misses the template's role markers and its own rendering of the tool list (ToolMaze
C1-P0: 810 counted raw, 939 served). Rendering uses Jinja2's sandbox with the helpers chat templates
expect (`raise_exception`, `tojson`, `strftime_now`), as transformers does. Heavy imports stay inside
functions."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from toolsweep.evaluator.types import Message


def find_chat_template(model_dir: Path, override: str | None = None) -> str | None:
    """The template a server would use: the configured file, else the model directory's
    chat_template.jinja, else tokenizer_config.json's `chat_template`."""
    if override:
        return Path(override).read_text()
    jinja = model_dir / "chat_template.jinja"
    if jinja.exists():
        return jinja.read_text()
    config = model_dir / "tokenizer_config.json"
    if config.exists():
        template = json.loads(config.read_text()).get("chat_template")
        if isinstance(template, list):  # named templates: the default one
            template = next((t["template"] for t in template if t.get("name") == "default"), None)
        if isinstance(template, str):
            return template
    return None


def template_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Messages as a chat template receives them from vLLM: tool-call arguments as objects."""
    out = []
    for m in messages:
        d = m.to_openai()
        for call in d.get("tool_calls") or []:
            fn = call.get("function", {})
            if isinstance(fn.get("arguments"), str):
                try:
                    fn["arguments"] = json.loads(fn["arguments"])
                except ValueError:
                    pass  # left as text, as the server leaves it
        out.append(d)
    return out


def compile_template(source: str) -> Any:
    from jinja2.exceptions import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    def tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
               sort_keys: bool = False) -> str:
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(source)


def template_counter(model_dir: Path, chat_template: str | None = None) -> Callable[[list[Message], list[dict[str, Any]]], int] | None:
    """A request counter from the model's own tokenizer and chat template, or None when the directory
    lacks either (or the `tokenizers` package is missing)."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return None
    tokenizer_file = model_dir / "tokenizer.json"
    source = find_chat_template(model_dir, chat_template)
    if not tokenizer_file.exists() or source is None:
        return None
    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    template = compile_template(source)
    special = _special_tokens(model_dir)

    def count(messages: list[Message], tools: list[dict[str, Any]]) -> int:
        text = template.render(messages=template_messages(messages), tools=tools or None,
                               add_generation_prompt=True, **special)
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    return count


def _special_tokens(model_dir: Path) -> dict[str, str]:
    """bos_token / eos_token, which templates print literally."""
    config = model_dir / "tokenizer_config.json"
    if not config.exists():
        return {}
    raw = json.loads(config.read_text())
    out = {}
    for key in ("bos_token", "eos_token", "pad_token", "unk_token"):
        value = raw.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str):
            out[key] = value
    return out
