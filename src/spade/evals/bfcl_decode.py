"""BFCL's prompts and decoders, ported from ``bfcl_eval.model_handler.utils`` (which cannot be imported here).

``bfcl_eval.model_handler.utils`` imports the tree-sitter Java/JavaScript parsers and ``tenacity`` (optional
dependencies of ``bfcl-eval`` that we do not install), so the pieces a Python-language evaluation needs are
ported here, line for line except where noted; the prompt texts themselves are read from the package
(``bfcl_eval.constants.default_prompts``).

- :func:`system_prompt`: ``formulate_system_prompt`` at BFCL's default prompt configuration
  (``ret_fmt=python&tool_call_tag=False&func_doc_fmt=json&prompt_fmt=plaintext&style=classic``).
- :func:`decode_ast_prompting` / :func:`decode_execute_prompting`: ``default_decode_ast_prompting`` /
  ``default_decode_execute_prompting`` (Python return format).
- :func:`to_tools` / :func:`convert_to_function_call`: ``convert_to_tool`` (open-model style: ``.`` in
  names becomes ``_``, BFCL types become JSON-schema types) and ``convert_to_function_call`` for native
  tool calls.

One deliberate difference: BFCL's ``resolve_ast_by_type`` calls ``eval`` on arithmetic (``ast.BinOp``) and
lambda arguments in the model's text. Here arithmetic is evaluated only over numeric (and, for ``+``, string)
constants by :func:`_arith`, and a lambda argument is a decode failure (BFCL's own lambda branch raises on
every input too), so no model text is ever evaluated in the evaluating process.
"""

from __future__ import annotations

import ast
import copy
import json
import operator
import re
from collections.abc import Callable, Sequence
from typing import Any

from spade.errors import SpadeError
from spade.evals.bfcl_data import package
from spade.pyast import parse_expression
from spade.types import ToolCall, ToolSchema


class DecodeError(SpadeError, ValueError):
    """A reply that does not decode to function calls (BFCL: 'Failed to decode AST')."""


def _prompts() -> Any:
    return package("bfcl_eval.constants.default_prompts")


def system_prompt(functions: Sequence[dict[str, Any]]) -> str:
    """BFCL's default system prompt for a prompting (non-native function calling) model."""
    p = _prompts()
    style = p.PROMPT_STYLE_TEMPLATES["classic"]
    tool_call_format = style["tool_call_no_tag"].format(
        output_format=p.OUTPUT_FORMAT_MAPPING["python"], param_types=p.PARAM_TYPE_MAPPING["python"]
    )
    available = style["available_tools"].format(
        format="json", functions=json.dumps(list(functions), indent=4)
    )
    return str(
        p.PROMPT_TEMPLATE_MAPPING["plaintext"].format(
            persona=style["persona"],
            task=style["task"],
            tool_call_format=tool_call_format,
            multiturn_behavior=style["multiturn_behavior"],
            available_tools=available,
        )
    )


def with_system_prompt(messages: Sequence[dict[str, Any]], functions: Sequence[dict[str, Any]]) -> list[Any]:
    """``system_prompt_pre_processing_chat_model``: prepend the prompt to a system message, or insert one."""
    out = [dict(m) for m in messages]
    prompt = system_prompt(functions)
    if out and out[0]["role"] == "system":
        out[0]["content"] = prompt + "\n\n" + out[0]["content"]
    else:
        out.insert(0, {"role": "system", "content": prompt})
    return out


def additional_functions_prompt(functions: Sequence[dict[str, Any]]) -> str:
    """The user message of a miss-function turn that hands the held-out functions to the model."""
    return str(
        _prompts().DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING.format(functions=list(functions))
    )


# -- decoding a prompting model's text ------------------------------------------------------------------------


def decode_ast_prompting(text: str) -> list[dict[str, dict[str, Any]]]:
    """``[{name: {arg: value}}]`` from ``[f(a=1), g(b=2)]``-style text; DecodeError when it is not that."""
    text = text.strip("`\n ")
    if not text.startswith("["):
        text = "[" + text
    if not text.endswith("]"):
        text = text + "]"
    try:
        body = parse_expression(text.strip().strip("'"))
        if isinstance(body, ast.Call):
            return [_call(body)]
        elements = body.elts if isinstance(body, ast.List | ast.Tuple | ast.Set) else None
        if elements is None or not all(isinstance(e, ast.Call) for e in elements):
            raise DecodeError("the reply is not a list of function calls")
        return [_call(e) for e in elements if isinstance(e, ast.Call)]
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError, ZeroDivisionError) as exc:
        raise DecodeError(f"{type(exc).__name__}: {exc}") from None


def decode_execute_prompting(text: str) -> list[str]:
    """Executable call strings (``f(a=1)``) from prompting-format text (``default_decode_execute_prompting``)."""
    return execution_list(decode_ast_prompting(text))


def _call(node: ast.Call) -> dict[str, dict[str, Any]]:
    """``resolve_ast_call``: dotted function name and keyword arguments (positional arguments are dropped)."""
    parts: list[str] = []
    func: ast.expr = node.func
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return {".".join(reversed(parts)): {kw.arg: _value(kw.value) for kw in node.keywords if kw.arg}}


def _value(node: ast.expr) -> Any:  # noqa: PLR0911 - one branch per node type, as in BFCL
    """``resolve_ast_by_type`` without ``eval`` (see module docstring)."""
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp):
        if not isinstance(node.operand, ast.Constant) or not isinstance(node.operand.value, int | float):
            raise DecodeError(f"unsupported unary expression: {ast.unparse(node)}")
        return -node.operand.value  # as BFCL: every unary operator on a constant negates it
    if isinstance(node, ast.List):
        return [_value(v) for v in node.elts]
    if isinstance(node, ast.Dict):
        return {
            _value(k) if k is not None else None: _value(v)
            for k, v in zip(node.keys, node.values, strict=True)
        }
    if isinstance(node, ast.BinOp):
        return _arith(node)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        return ast.unparse(node) if not node.keywords else _call(node)
    if isinstance(node, ast.Tuple):
        return tuple(_value(v) for v in node.elts)
    if isinstance(node, ast.Subscript):
        return ast.unparse(node.value) + "[" + ast.unparse(node.slice) + "]"
    raise DecodeError(f"unsupported argument expression {type(node).__name__}: {ast.unparse(node)[:80]}")


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}


def _arith(node: ast.expr) -> Any:
    """Arithmetic over numeric constants (and ``+`` over strings); anything else is a decode failure."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _arith(node.operand)
        if isinstance(value, int | float):
            return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _arith(node.left), _arith(node.right)
        numbers = isinstance(left, int | float) and isinstance(right, int | float)
        strings = isinstance(node.op, ast.Add) and isinstance(left, str) and isinstance(right, str)
        small = not isinstance(node.op, ast.Pow) or (abs(right) <= 64 and abs(left) <= 1e6)
        if (numbers and small) or strings:
            return _BINARY[type(node.op)](left, right)
    raise DecodeError(f"unsupported expression in an argument: {ast.unparse(node)[:80]}")


def _nested(value: Any) -> str:
    """``parse_nested_value``: the source text of a decoded argument value."""
    if isinstance(value, dict):
        if value and all(isinstance(v, dict) for v in value.values()):
            name = next(iter(value))
            args = ", ".join(f"{k}={_nested(v)}" for k, v in value[name].items())
            return f"{name}({args})"
        return "{" + ", ".join(f"'{k}': {_nested(v)}" for k, v in value.items()) + "}"
    return repr(value)


def execution_list(decoded: Sequence[dict[str, dict[str, Any]]]) -> list[str]:
    """``decoded_output_to_execution_list``: ``[{f: {a: 1}}]`` becomes ``["f(a=1)"]``."""
    return [
        f"{name}({', '.join(f'{k}={_nested(v)}' for k, v in args.items())})"
        for call in decoded
        for name, args in call.items()
    ]


# -- native tool calls ----------------------------------------------------------------------------------------


def decode_ast_fc(calls: Sequence[ToolCall]) -> list[dict[str, dict[str, Any]]]:
    """An open model's native tool calls as ``[{name: arguments}]``; DecodeError when there are none."""
    if not calls:
        raise DecodeError("the reply holds no tool call")
    return [{c.name: dict(c.arguments)} for c in calls]


def convert_to_function_call(decoded: Sequence[dict[str, dict[str, Any]]]) -> list[str]:
    """``convert_to_function_call``: ``[{f: {a: 1}}]`` becomes ``["f(a=1)"]`` (arguments by ``repr``)."""
    return [
        f"{name}({','.join(f'{k}={v!r}' for k, v in args.items())})"
        for call in decoded
        for name, args in call.items()
    ]


def to_tools(functions: Sequence[dict[str, Any]]) -> list[ToolSchema]:
    """BFCL function docs as OpenAI tool schemas (``convert_to_tool``, open-model style)."""
    types_map: dict[str, str] = package("bfcl_eval.constants.type_mappings").GORILLA_TO_OPENAPI
    tools: list[ToolSchema] = []
    for item in copy.deepcopy(list(functions)):
        item["name"] = re.sub(r"\.", "_", item["name"])
        item["parameters"]["type"] = "object"
        item["parameters"]["properties"] = _cast_types(item["parameters"].get("properties", {}), types_map)
        tools.append({"type": "function", "function": item})
    return tools


def _cast_types(properties: dict[str, Any], mapping: dict[str, str]) -> dict[str, Any]:
    """``_cast_to_openai_type`` (an unknown nested item type becomes ``string`` instead of a KeyError)."""
    for value in properties.values():
        var_type = value.get("type")
        if var_type is None:
            value["type"] = "string"
        else:
            if var_type == "float":
                value["format"] = "float"
                value["description"] = value.get("description", "") + " This is a float type value."
            value["type"] = mapping.get(var_type, "string")
        if value["type"] in ("array", "object"):
            if "properties" in value:
                value["properties"] = _cast_types(value["properties"], mapping)
            elif "items" in value:
                items = value["items"]
                items["type"] = mapping.get(items.get("type", ""), "string")
                if items["type"] == "array" and "items" in items:
                    items["items"]["type"] = mapping.get(items["items"].get("type", ""), "string")
                elif items["type"] == "object" and "properties" in items:
                    items["properties"] = _cast_types(items["properties"], mapping)
    return properties
