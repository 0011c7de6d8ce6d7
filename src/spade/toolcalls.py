"""Tool calls written as text: ``<tool_call>`` blocks in the JSON (Hermes / Qwen2.5) and XML (Qwen3.5) forms.

JSON form::

    <tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>

``arguments`` may also be a JSON-encoded string or be called ``parameters``; one block may hold a list of
such objects. XML form (the Qwen3-Coder / Qwen3.5 chat templates)::

    <tool_call>
    <function=get_weather>
    <parameter=city>
    Oslo
    </parameter>
    </function>
    </tool_call>

XML parameter values are text. With the tool schemas at hand a value is converted by its declared type
(``string`` stays text; other types are decoded as JSON when they parse); without schemas a value is decoded
as JSON when it parses and kept as text otherwise. One newline right after the opening tag and right before
the closing tag is layout and is dropped.

:func:`decode_block` reads the body of one block; :func:`spade.replies.extract_tool_calls` finds the blocks of a
reply. Malformed blocks never raise: each gives one message (invalid JSON, missing name, unknown tool, ...),
so a caller can show the model what was wrong.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from spade.types import ToolCall, ToolSchema

OPEN = "<tool_call>"
CLOSE = "</tool_call>"
_FUNCTION = re.compile(r"<function=([^>\n]*)>(.*?)(</function>|$)", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([^>\n]*)>(.*?)(</parameter>|(?=<parameter=)|$)", re.DOTALL)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


def schemas_by_name(tools: Sequence[ToolSchema] | None) -> dict[str, dict[str, Any]] | None:
    """Each offered tool's parameter schema by name (None: no tools given, so any name is accepted)."""
    if tools is None:
        return None
    out: dict[str, dict[str, Any]] = {}
    for tool in tools:
        fn = tool.get("function", tool)
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            params = fn.get("parameters")
            out[fn["name"]] = params if isinstance(params, dict) else {}
    return out


def decode_block(body: str, schemas: dict[str, dict[str, Any]] | None) -> tuple[list[ToolCall], list[str]]:
    """The calls in the body of one ``<tool_call>`` block (JSON or XML form), and one message per problem."""
    stripped = body.strip()
    if not stripped:
        return [], [f'empty tool call: write {OPEN}{{"name": ..., "arguments": {{...}}}}{CLOSE}']
    if stripped.startswith("<function="):
        return _parse_xml(stripped, schemas)
    return _parse_json(stripped, schemas)


def _parse_json(body: str, schemas: dict[str, dict[str, Any]] | None) -> tuple[list[ToolCall], list[str]]:
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        snippet = body if len(body) <= 80 else body[:77] + "..."
        return [], [
            f"tool call is not valid JSON ({exc.msg} at char {exc.pos}): {snippet!r}; "
            'expected {"name": "<tool>", "arguments": {...}}'
        ]
    items = data if isinstance(data, list) else [data]
    calls: list[ToolCall] = []
    errors: list[str] = []
    for item in items:
        call, error = _json_call(item, schemas)
        if call is not None:
            calls.append(call)
        if error:
            errors.append(error)
    return calls, errors


def _json_call(item: Any, schemas: dict[str, dict[str, Any]] | None) -> tuple[ToolCall | None, str | None]:
    if not isinstance(item, dict):
        kind = type(item).__name__
        return None, f'tool call must be a JSON object {{"name": ..., "arguments": {{...}}}}, got {kind}'
    name = item.get("name")
    if not isinstance(name, str) or not name.strip():
        return None, 'tool call has no "name": expected {"name": "<tool>", "arguments": {...}}'
    name = name.strip()
    args: Any = item.get("arguments", item.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            return None, f'tool call {name!r}: "arguments" is a string that is not JSON; pass an object'
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return None, f'tool call {name!r}: "arguments" must be an object, got {type(args).__name__}'
    problem = _unknown(name, schemas)
    if problem:
        return None, problem
    call_id = item.get("id")
    return ToolCall(name=name, arguments=args, id=call_id if isinstance(call_id, str) else ""), None


def _parse_xml(body: str, schemas: dict[str, dict[str, Any]] | None) -> tuple[list[ToolCall], list[str]]:
    calls: list[ToolCall] = []
    errors: list[str] = []
    for match in _FUNCTION.finditer(body):
        name, inner, closing = match.group(1).strip(), match.group(2), match.group(3)
        if not closing:
            errors.append(f"tool call <function={name}> has no </function>; close it before {CLOSE}")
            continue
        if not name:
            errors.append("tool call <function=> has no name; write <function=tool_name>")
            continue
        problem = _unknown(name, schemas)
        if problem:
            errors.append(problem)
            continue
        args, arg_errors = _xml_arguments(name, inner, (schemas or {}).get(name))
        if arg_errors:
            errors.extend(arg_errors)
            continue
        calls.append(ToolCall(name=name, arguments=args))
    return calls, errors


def _xml_arguments(name: str, inner: str, schema: dict[str, Any] | None) -> tuple[dict[str, Any], list[str]]:
    args: dict[str, Any] = {}
    errors: list[str] = []
    properties = schema.get("properties", {}) if schema else {}
    for match in _PARAMETER.finditer(inner):
        key, raw, closing = match.group(1).strip(), match.group(2), match.group(3)
        if not closing:
            errors.append(f"tool call {name!r}: <parameter={key}> has no </parameter>")
            continue
        if not key:
            errors.append(f"tool call {name!r}: <parameter=> has no name; write <parameter=arg_name>")
            continue
        if key in args:
            errors.append(f"tool call {name!r}: parameter {key!r} given twice")
            continue
        declared = properties.get(key, {}).get("type") if isinstance(properties.get(key), dict) else None
        args[key] = _xml_value(_trim_layout(raw), declared)
    return args, errors


def _trim_layout(raw: str) -> str:
    if raw.startswith("\n"):
        raw = raw[1:]
    if raw.endswith("\n"):
        raw = raw[:-1]
    return raw


def _xml_value(raw: str, declared: Any) -> Any:
    if declared == "string":
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _unknown(name: str, schemas: dict[str, dict[str, Any]] | None) -> str | None:
    if schemas is None or name in schemas:
        return None
    known = ", ".join(sorted(schemas)) or "(none)"
    return f"unknown tool {name!r}; available tools: {known}"
