"""Tool-call text parsing: both forms, schema-typed values, and every malformed shape yields a message."""

from __future__ import annotations

import pytest

from spade.replies import extract_tool_calls, parse_tool_calls
from spade.types import ToolCall

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            },
        },
    },
    {"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}},
]


def test_json_form_with_surrounding_text() -> None:
    call = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'
    text = f"Let me check.\n<tool_call>\n{call}\n</tool_call>\nDone"
    parsed = extract_tool_calls(text)
    assert parsed.calls == (ToolCall("get_weather", {"city": "Oslo"}),)
    assert parsed.errors == ()
    assert parsed.content == "Let me check.\n\nDone"


def test_json_form_variants() -> None:
    text = (
        '<tool_call>{"name": "a", "arguments": "{\\"x\\": 1}"}</tool_call>'
        '<tool_call>{"name": "b", "parameters": {"y": [1, 2]}}</tool_call>'
        '<tool_call>```json\n{"name": "c"}\n```</tool_call>'
        '<tool_call>[{"name": "d", "arguments": {}},'
        ' {"name": "e", "arguments": null, "id": "call_9"}]</tool_call>'
    )
    assert parse_tool_calls(text) == [
        ToolCall("a", {"x": 1}),
        ToolCall("b", {"y": [1, 2]}),
        ToolCall("c", {}),
        ToolCall("d", {}),
        ToolCall("e", {}, id="call_9"),
    ]


def test_xml_form_converts_by_schema() -> None:
    text = (
        "<tool_call>\n<function=get_weather>\n<parameter=city>\n42\n</parameter>\n"
        "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"
    )
    assert parse_tool_calls(text, TOOLS) == [ToolCall("get_weather", {"city": "42", "days": 3})]
    # Without schemas, values that parse as JSON are decoded and the rest stay text.
    assert parse_tool_calls(text) == [ToolCall("get_weather", {"city": 42, "days": 3})]


def test_xml_form_keeps_inner_newlines_and_json_objects() -> None:
    text = (
        "<tool_call><function=f><parameter=body>\nline 1\nline 2\n</parameter>"
        '<parameter=opts>{"a": true}</parameter><parameter=name>Oslo</parameter></function></tool_call>'
    )
    assert parse_tool_calls(text) == [
        ToolCall("f", {"body": "line 1\nline 2", "opts": {"a": True}, "name": "Oslo"})
    ]


def test_several_calls_in_order_and_mixed_forms() -> None:
    text = (
        '<tool_call>{"name": "ping", "arguments": {}}</tool_call> then '
        "<tool_call><function=get_weather><parameter=city>Rome</parameter></function></tool_call>"
    )
    assert [c.name for c in parse_tool_calls(text, TOOLS)] == ["ping", "get_weather"]


def test_no_tool_call() -> None:
    parsed = extract_tool_calls("The answer is <answer>4</answer>.")
    assert parsed.calls == ()
    assert parsed.errors == ()
    assert parsed.content == "The answer is <answer>4</answer>."


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('<tool_call>{"name": "ping", "arguments": {}}', "unterminated"),
        ("<tool_call></tool_call>", "empty tool call"),
        ('<tool_call>{"name": "ping", "arguments": {</tool_call>', "not valid JSON"),
        ("<tool_call>{'name': 'ping'}</tool_call>", "not valid JSON"),
        ('<tool_call>"ping"</tool_call>', "must be a JSON object"),
        ('<tool_call>{"arguments": {}}</tool_call>', 'no "name"'),
        ('<tool_call>{"name": "  ", "arguments": {}}</tool_call>', 'no "name"'),
        ('<tool_call>{"name": "ping", "arguments": [1]}</tool_call>', "must be an object"),
        ('<tool_call>{"name": "ping", "arguments": "x=1"}</tool_call>', "string that is not JSON"),
        ('<tool_call>{"name": "launch", "arguments": {}}</tool_call>', "unknown tool 'launch'"),
        ("<tool_call><function=ping></tool_call>", "has no </function>"),
        ("<tool_call><function=>x</function></tool_call>", "has no name"),
        ("<tool_call><function=launch></function></tool_call>", "unknown tool"),
        ("<tool_call><function=get_weather><parameter=city>Oslo</function></tool_call>", "no </parameter>"),
        (
            "<tool_call><function=get_weather><parameter=city>a<parameter=days>1</parameter></function></tool_call>",
            "no </parameter>",
        ),
        (
            "<tool_call><function=get_weather><parameter=city>a</parameter><parameter=city>b</parameter>"
            "</function></tool_call>",
            "given twice",
        ),
        ("<tool_call><function=get_weather><parameter=>1</parameter></function></tool_call>", "no name"),
    ],
)
def test_malformed_blocks_give_messages_not_calls(text: str, needle: str) -> None:
    parsed = extract_tool_calls(text, TOOLS)
    assert parsed.calls == ()
    assert len(parsed.errors) == 1
    assert needle in parsed.errors[0]


def test_malformed_block_does_not_hide_good_ones() -> None:
    text = (
        '<tool_call>{"name": "ping"</tool_call>'
        '<tool_call>{"name": "ping", "arguments": {}}</tool_call>'
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}'
    )
    parsed = extract_tool_calls(text, TOOLS)
    assert parsed.calls == (ToolCall("ping", {}),)
    assert len(parsed.errors) == 2
    assert "not valid JSON" in parsed.errors[0]
    assert "unterminated" in parsed.errors[1]
    assert parsed.content == ""


def test_list_with_one_bad_item_keeps_the_good_one() -> None:
    parsed = extract_tool_calls('<tool_call>[{"name": "ping"}, 3]</tool_call>')
    assert parsed.calls == (ToolCall("ping", {}),)
    assert parsed.errors == ('tool call must be a JSON object {"name": ..., "arguments": {...}}, got int',)


def test_long_invalid_json_is_abbreviated() -> None:
    parsed = extract_tool_calls("<tool_call>" + "x" * 500 + "</tool_call>")
    assert len(parsed.errors[0]) < 250
