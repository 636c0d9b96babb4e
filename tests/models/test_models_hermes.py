"""Reading Hermes tool calls from generated text (the hf backend's tool parser), no torch needed."""

from __future__ import annotations

import json

from toolsweep.models.hf import parse_hermes


def test_single_and_multiple_tool_calls():
    content, calls = parse_hermes('<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>')
    assert content is None and [c.function.name for c in calls] == ["add"]
    assert json.loads(calls[0].function.arguments) == {"a": 1, "b": 2}
    text = 'Let me check.\n<tool_call>{"name": "a", "arguments": {}}</tool_call>\n<tool_call>{"name": "b", "arguments": "{\\"x\\": 1}"}</tool_call>'
    content, calls = parse_hermes(text)
    assert content == "Let me check." and [c.function.name for c in calls] == ["a", "b"]
    assert calls[1].function.arguments == '{"x": 1}'
    assert calls[0].id != calls[1].id


def test_truncated_call_at_the_end_still_parses():
    content, calls = parse_hermes('<tool_call>\n{"name": "add", "arguments": {"a": 1}}')
    assert [c.function.name for c in calls] == ["add"]


def test_malformed_calls_stay_text_for_the_environment_to_judge():
    for text in ('<tool_call>{"name": "add", "arguments": {"a": 1</tool_call>', "<tool_call>[1, 2]</tool_call>", '<tool_call>{"arguments": {}}</tool_call>'):
        content, calls = parse_hermes(text)
        assert content == text and calls == []
    assert parse_hermes("The answer is 5.") == ("The answer is 5.", [])
