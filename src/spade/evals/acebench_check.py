"""ACEBench's rules for its normal and special categories, as its ``eval_main.py`` and ``model_eval`` apply them.

Normal items: the reply, with every whitespace character removed (ACEBench does this before parsing), must
parse as a Python list of calls ``[Api(key=value, ...), ...]``; it is right when, for one of the item's
possible answers, ACEBench's ``normal_checker`` accepts it: the same functions as often as the answer (a
``_N`` suffix on an answer's key is dropped), every required parameter present, no parameter outside the
function's schema or the answer, each value of its schema type, then compared by type: strings after
ACEBench's ``standardize_string`` (spaces and ``,./-_*^`` removed, lower case, ``'`` as ``"``) with the
answer contained in the reply's value, lists element by element, objects key by key (a nested value matches
when the answer's text is contained in the reply's, as ACEBench compares them). A value whose answer is of
another type than the schema's (ACEBench's "variable" answers) passes once its type matches the answer's.

Special items (the reply as it is): ``incomplete`` needs "Missing necessary parameters" and the API's name
and every missing parameter in the reply; ``error_param`` needs "There is incorrect value" and every wrong
value; ``irrelevant`` needs "the limitations of the function".

Departures, each where ACEBench's code would raise instead of scoring: an argument written as arithmetic,
a lambda or a name is kept as its source text (ACEBench ``eval``s arithmetic and lambdas); a schema type
ACEBench's table does not know, or an answer naming a function the item does not offer, scores 0; an
``objectArray`` parameter compares its objects pairwise with the object rule.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from typing import Any

TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
    "list": list,
    "object": dict,
    "objectArray": list,
    "list(string)": list,
    "list(enum)": list,
    "int": int,
    "enum": enumerate,
    "number": int,
}
"""ACEBench's ``PYTHON_TYPE_MAPPING`` (``number`` is ``int`` and ``enum`` is ``enumerate`` there too)."""
NESTED = ("array", "tuple", "list(string)", "list(enum)", "object", "objectArray")

Result = tuple[bool, str]
OK: Result = (True, "")


def standardize(text: str) -> str:
    """ACEBench's ``standardize_string``."""
    return re.sub(r"[ \,\.\/\-\_\*\^]", "", text).lower().replace("'", '"')


def decode_calls(reply: str) -> list[dict[str, dict[str, Any]]] | None:
    """The calls in a reply (whitespace removed, then a Python list of calls); None when it is not one."""
    try:
        tree = ast.parse("".join(reply.split()), mode="eval")
    except (SyntaxError, ValueError):
        return None
    if not isinstance(tree.body, ast.List | ast.Tuple):
        return None
    calls = [_value(e) for e in tree.body.elts if isinstance(e, ast.Call)]
    if len(calls) != len(tree.body.elts):
        return None
    return calls


def dotted_name(node: ast.expr) -> str:
    """``a.b.c`` of an attribute chain (a name: itself)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _value(node: ast.expr) -> Any:
    """ACEBench's ``resolve_ast_by_type`` without ``eval`` (see the module docstring)."""
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
        operand = node.operand.value
        return (
            -operand if isinstance(operand, int | float) else ast.unparse(node)
        )  # ACEBench negates any sign
    if isinstance(node, ast.List):
        return [_value(v) for v in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_value(v) for v in node.elts)
    if isinstance(node, ast.Dict):
        return {
            _value(k) if k is not None else None: _value(v)
            for k, v in zip(node.keys, node.values, strict=True)
        }
    if isinstance(node, ast.Call):
        return {dotted_name(node.func): {str(k.arg): _value(k.value) for k in node.keywords}}
    if isinstance(node, ast.Name):
        return node.id
    return ast.unparse(node)


def special_valid(category: str, reply: str, answer: Any) -> Result:
    """ACEBench's ``special_eval`` rule for one reply."""
    if "incomplete" in category:
        for name, values in dict(answer).items():
            if "Missing necessary parameters" not in reply:
                return False, "the reply does not say which parameters are missing"
            if name not in reply or any(v not in reply for v in values):
                return False, f"the reply does not name {name} and its missing parameters {values}"
    elif "error" in category:
        for name, values in dict(answer).items():
            if "There is incorrect value" not in reply:
                return False, "the reply does not point out the incorrect value"
            if any(v not in reply for v in values):
                return False, f"the reply does not name the incorrect values {values} of {name}"
    elif "the limitations of the function" not in reply:
        return False, "the reply does not say the request is beyond the functions"
    return OK


def normal_valid(functions: list[dict[str, Any]], reply: str, answers: Any, category: str) -> Result:
    """Whether the reply's calls match one of ``answers`` (ACEBench's ``normal_single_turn_eval``)."""
    calls = decode_calls(reply)
    if calls is None:
        return False, "wrong output format: not a list of calls [Api(key=value, ...)]"
    first: Result = OK
    for answer in answers if isinstance(answers, list) else [answers]:
        verdict = _normal_checker(functions, calls, dict(answer), category)
        if verdict[0]:
            return OK
        first = first if not first[0] else verdict
    return first


def _normal_checker(
    functions: list[dict[str, Any]], calls: list[dict[str, Any]], answer: dict[str, Any], category: str
) -> Result:
    if len(calls) != len(answer):
        return False, "the number of functions does not match the answer"
    expected = [{re.sub(r"_\d+$", "", k): v} for k, v in answer.items()]
    made = Counter(next(iter(c)) for c in calls)
    wanted = Counter(next(iter(e)) for e in expected)
    if made != wanted:
        return False, f"functions {dict(made)} != expected {dict(wanted)}"
    verdict: Result = OK
    for key, one in zip(answer, expected, strict=True):
        spec = next((f for f in functions if f.get("name", "\0") in key), None)
        if spec is None:
            return False, f"no function of the item matches the answer's {key}"
        for call in calls:
            if next(iter(call)) != next(iter(one)):
                verdict = (False, "wrong function")
                continue
            verdict = _function_checker(spec, call, one, category)
            if verdict[0]:
                break
        if not verdict[0]:
            return verdict
    return verdict


def _function_checker(
    spec: dict[str, Any], call: dict[str, Any], answer: dict[str, Any], category: str
) -> Result:
    """ACEBench's ``simple_function_checker``."""
    expected = next(iter(answer.values()))
    params = spec.get("parameters", {})
    settled = _without_parameters(next(iter(call.values())), params, expected)
    if settled is not None:
        return settled
    name = spec["name"]
    if name not in call:
        return False, f"wrong function: expected {name}"
    args, schema = call[name], params.get("properties", {})
    missing = [p for p in params.get("required", []) if p not in args]
    if missing:
        return False, f"lacks required parameter {missing[0]}"
    verdict: Result = OK
    for param, value in args.items():
        if param not in schema or param not in expected:
            return False, f"additional parameter {param}"
        verdict = _param_checker(param, value, schema[param], expected[param], category)
        if not verdict[0]:
            return verdict
    return verdict


def _without_parameters(given: Any, params: dict[str, Any], expected: Any) -> Result | None:
    """ACEBench's verdicts before any parameter is compared (None: compare them)."""
    if given == {} and params == {}:
        return OK
    if given == {} or params == {}:
        return False, "wrong parameters"
    if expected == params.get("properties"):
        return OK
    if expected == {}:
        return False, "wrong parameters"
    return None


def _param_checker(param: str, value: Any, schema: dict[str, Any], expected: Any, category: str) -> Result:
    kind = schema.get("type")
    if kind not in TYPES:
        return False, f"parameter {param} has the schema type {kind!r}, which ACEBench does not know"
    python, nested = TYPES[kind], None
    if kind in NESTED:
        items = schema.get("items", {}).get("type") if isinstance(schema.get("items"), dict) else None
        nested = TYPES.get(
            items or ("string" if "string" in kind else "enum" if "enum" in kind else "dict"), dict
        )
    if kind == "tuple" and isinstance(value, tuple):
        value = list(value)
    if kind == "float" and type(value) is int:
        value = float(value)
    valid, variable, message = _type_checker(value, expected, python, nested)
    if not valid:
        return False, f"wrong type for parameter {param}: {message}"
    return OK if variable else _value_checker(param, value, expected, (kind, python, nested), category)


def _value_checker(
    param: str, value: Any, expected: Any, types: tuple[str, Any, Any], category: str
) -> Result:
    """The value comparison of a parameter whose answer is not a "variable" (by its schema type)."""
    kind, python, nested = types
    if python is dict:
        return _dict_checker(param, value, expected)
    if python is list and nested is dict:
        if kind == "objectArray" and len(value) != len(expected):
            return False, f"wrong number of objects for parameter {param}"
        return _list_dict_checker(param, value, expected)
    if python is str:
        return _string_checker(param, value, expected, category)
    if python is list:
        return _list_checker(param, value, expected)
    return OK


def _type_checker(value: Any, expected: Any, python: Any, nested: Any) -> tuple[bool, bool, str]:
    """ACEBench's ``type_checker``: (valid, the answer is a "variable", why not)."""
    answer_type = type(expected) if expected != "" else None
    variable = answer_type is not None and answer_type != python
    value = {"true": True, "false": False}.get(value, value) if isinstance(value, str) else value
    valid = True
    if type(value) is python:
        if nested is None:
            return True, variable, ""
        for option in expected if isinstance(expected, list | dict | str | tuple) else ():
            if not isinstance(option, list) or all(_type_checker(v, option, nested, None)[0] for v in value):
                return True, variable, ""
        valid = False
    if answer_type is not None and (type(value) is answer_type or expected == value):
        return valid, True, "" if valid else "nested type"
    return False, variable, f"expected {getattr(python, '__name__', python)}, got {type(value).__name__}"


def _string_checker(param: str, value: str, expected: Any, category: str) -> Result:
    got, want = standardize(value), standardize(str(expected))
    if (want != got) if "agent" in category else (want not in got):
        return False, f"wrong value for parameter {param}: expected {expected!r}, got {value!r}"
    return OK


def _list_checker(param: str, value: list[Any], expected: list[Any]) -> Result:
    got = [standardize(v) if isinstance(v, str) else v for v in value]
    want = [standardize(v) if isinstance(v, str) else v for v in expected]
    return (
        OK
        if got == want
        else (False, f"wrong value for parameter {param}: expected {expected!r}, got {value!r}")
    )


def _dict_checker(param: str, value: Any, expected: dict[str, Any]) -> Result:
    wrong = (False, f"wrong value for parameter {param}: expected {expected!r}, got {value!r}")
    if not isinstance(value, dict) or not isinstance(expected, dict) or len(value) != len(expected):
        return wrong
    for key, raw in value.items():
        item = {"true": True, "false": False}.get(raw, raw) if isinstance(raw, str) else raw
        if key not in expected:
            return wrong
        want = expected[key]
        if isinstance(want, dict):
            verdict = _dict_checker(param, item, want)
            if not verdict[0]:
                return verdict
            continue
        got = standardize(item) if isinstance(item, str) else item
        want = standardize(want) if isinstance(want, str) else want
        if str(want) not in str(got):
            return wrong
    return OK


def _list_dict_checker(param: str, value: list[Any], expected: list[Any]) -> Result:
    if len(value) != len(expected):
        return False, f"wrong number of objects for parameter {param}"
    for got, want in zip(value, expected, strict=True):
        verdict = _dict_checker(param, got, want)
        if not verdict[0]:
            return verdict
    return OK
