"""Parsing of OpenAI-compatible server answers into completions and tool calls (pure functions)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from spade.errors import SpadeError
from spade.replies import extract_tool_calls
from spade.types import Completion, FinishReason, ToolCall, ToolSchema

_FINISH: dict[str, FinishReason] = {"stop": "stop", "length": "length", "tool_calls": "stop", "eos": "stop"}


class RequestFailedError(SpadeError, RuntimeError):
    """A server request that failed for good (after retries where they apply); the message says why."""


@dataclass(frozen=True, slots=True)
class ChatReply:
    """One chat completion with its tool calls."""

    completion: Completion
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_errors: tuple[str, ...] = ()
    """One message per tool call that could not be read (malformed text or arguments)."""
    content: str = ""
    """The reply text without tool-call blocks."""


def json_answer(response: httpx.Response, path: str) -> dict[str, Any]:
    if response.status_code >= 400:
        raise RequestFailedError(f"{path}: HTTP {response.status_code}: {server_message(response)}")
    try:
        data = response.json()
    except ValueError:
        raise RequestFailedError(
            f"{path}: the server answered with non-JSON: {response.text[:200]!r}"
        ) from None
    if not isinstance(data, dict):
        raise RequestFailedError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def server_message(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:300] or response.reason_phrase
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    if isinstance(data, dict) and data.get("detail"):
        return str(data["detail"])
    return json.dumps(data)[:300]


def first_choice(data: dict[str, Any]) -> dict[str, Any]:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise RequestFailedError(f"the server's answer has no choices: {json.dumps(data)[:200]}")
    return choices[0]


def failed(message: str, prompt_tokens: int) -> Completion:
    return Completion("", (), (), "error", prompt_tokens=prompt_tokens, error=message)


def _finish(choice: dict[str, Any]) -> tuple[FinishReason, str | None]:
    reason = choice.get("finish_reason")
    if isinstance(reason, str) and reason in _FINISH:
        return _FINISH[reason], None
    return "error", f"the server ended the request with finish_reason={reason!r}"


def completion_from_choice(choice: dict[str, Any], prompt_tokens: int) -> Completion:
    logprobs = choice.get("logprobs") or {}
    values = [float(x) if x is not None else 0.0 for x in logprobs.get("token_logprobs") or []]
    ids = _token_ids(choice.get("token_ids"), logprobs.get("tokens"))
    if len(values) != len(ids):
        values = []
    reason, error = _finish(choice)
    return Completion(str(choice.get("text") or ""), ids, tuple(values), reason, prompt_tokens, error)


def _token_ids(token_ids: Any, tokens: Any) -> tuple[int, ...]:
    if isinstance(token_ids, list) and all(isinstance(t, int) for t in token_ids):
        return tuple(token_ids)
    if (
        isinstance(tokens, list)
        and tokens
        and all(isinstance(t, str) and t.startswith("token_id:") for t in tokens)
    ):
        return tuple(int(t.removeprefix("token_id:")) for t in tokens)
    return ()


def chat_reply(choice: dict[str, Any], data: dict[str, Any], tools: Sequence[ToolSchema] | None) -> ChatReply:
    message = choice.get("message") or {}
    text = str(message.get("content") or "")
    content = (choice.get("logprobs") or {}).get("content") or []
    values = [float(item.get("logprob", 0.0)) for item in content if isinstance(item, dict)]
    ids = _token_ids(choice.get("token_ids"), None)
    if len(values) != len(ids):
        values = []
    reason, error = _finish(choice)
    prompt_tokens = int((data.get("usage") or {}).get("prompt_tokens") or 0)
    completion = Completion(text, ids, tuple(values), reason, prompt_tokens, error)
    server_calls = message.get("tool_calls") or []
    if server_calls:
        calls, errors = _server_tool_calls(server_calls)
        return ChatReply(completion, calls, errors, text.strip())
    parsed = extract_tool_calls(text, tools)
    return ChatReply(completion, parsed.calls, parsed.errors, parsed.content)


def _server_tool_calls(raw: list[Any]) -> tuple[tuple[ToolCall, ...], tuple[str, ...]]:
    calls: list[ToolCall] = []
    errors: list[str] = []
    for item in raw:
        fn = item.get("function") if isinstance(item, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            errors.append(f"server tool call without a function name: {json.dumps(item)[:200]}")
            continue
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except json.JSONDecodeError as exc:
            errors.append(f"tool call {fn['name']!r}: arguments are not JSON ({exc.msg})")
            continue
        if not isinstance(args, dict):
            errors.append(f"tool call {fn['name']!r}: arguments must be an object, got {type(args).__name__}")
            continue
        calls.append(ToolCall(fn["name"], args, str(item.get("id") or "")))
    return tuple(calls), tuple(errors)
