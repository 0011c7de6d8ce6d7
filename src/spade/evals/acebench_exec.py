"""ACEBench's agent execution and scoring: the model's calls run on a stateful scenario, then its end state
and call path are compared with the answer (``multi_step_utils.py``, ``execution_role*.py``, ``eval_main.py``).

Decoding is ACEBench's ``decode_function_list``: a leading space dropped, ``[``/``]`` added where missing,
then ``strip("[]'")`` and a Python parse of calls with keyword arguments (positional ones are dropped, as
ACEBench drops them). A reply that does not decode is no call. A decoded call runs on every involved scenario
instance that has a public method of its name, in ``involved_classes`` order (ACEBench's name mapping: the
result is the last instance's); an unknown name is an error. Results are written as ACEBench writes them
(``json.dumps`` for a dict, ``str`` otherwise) and read back with ``json.loads`` where that parses.

Nothing is ``eval``-ed. Where ACEBench's ``eval`` would run code, this port stays within literals: an
arithmetic argument (``BinOp`` of ``+ - * / // %``) is computed when its operands are numbers or strings
and is otherwise a decoding failure (``**`` too, and a string repeated past 100,000 characters; ACEBench's
``eval`` would raise too, except for names its module happens to define); a dict argument is, as in
ACEBench, re-written as a nested call ``key(...)``, which fails here with ACEBench's ``NameError`` text
(ACEBench would run a builtin of that name, such as ``dict``).

Scoring is ``agent_eval`` and ``agent_eval_process``: the end state (per class, ``SAVED``'s attributes, after
the JSON round trip ACEBench's result file gives it, so integer keys become strings) must match
``ground_truth`` class by class; a class whose name matches no end-state class keeps the previous class's
verdict, as ACEBench's loop does (so ``ReminderAPI`` in a few answers is never compared). The process score is
1 for a right end state, else the share of ``mile_stone`` calls found in order among the calls sent (the best
of several milestone lists), rounded to 3 places.
"""

from __future__ import annotations

import ast
import copy
import inspect
import json
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from spade.evals.acebench_check import dotted_name
from spade.evals.acebench_scenarios import BaseApi, FoodPlatform, MessageApi, ReminderApi
from spade.evals.acebench_travel import Travel

CLASSES: dict[str, Callable[[], Any]] = {
    "BaseApi": BaseApi,
    "MessageApi": MessageApi,
    "ReminderApi": ReminderApi,
    "FoodPlatform": FoodPlatform,
    "Travel": Travel,
}
"""ACEBench's ``CLASS_FILE_PATH_MAPPING_EN``."""
SAVED: dict[str, tuple[str, ...]] = {
    "BaseApi": ("wifi", "logged_in"),
    "MessageApi": ("inbox",),
    "ReminderApi": ("reminder_list",),
    "FoodPlatform": ("users", "logged_in_users", "orders"),
    "Travel": ("users", "reservations"),
}
"""ACEBench's ``SAVED_CLASS``: the attributes of the end state."""
UNBOUND = "cannot access local variable 'func_call_result' where it is not associated with a value"
"""What ACEBench's executor reports for an unknown function name (its loop never assigns the result)."""
_OPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}


class DecodeError(ValueError):
    """The reply is not a list of calls ACEBench's decoder accepts."""


@dataclass(frozen=True, slots=True)
class NestedCall:
    """A dict argument, which ACEBench writes back as the call ``name(...)`` and so cannot run here."""

    name: str


Call = tuple[str, dict[str, Any]]


def decode(reply: str) -> list[Call]:
    """ACEBench's ``decode_function_list`` (DecodeError where it raises)."""
    if not reply:
        raise DecodeError("empty reply")
    text = reply[1:] if reply[0] == " " else reply
    text = text if text.startswith("[") else "[" + text
    text = text if text.endswith("]") else text + "]"
    try:
        body = ast.parse(text.strip("[]'"), mode="eval").body
    except (SyntaxError, ValueError) as exc:
        raise DecodeError(str(exc)) from None
    if isinstance(body, ast.Call):
        return [_call(body)]
    if isinstance(body, ast.List | ast.Tuple):
        if not all(isinstance(e, ast.Call) for e in body.elts):
            raise DecodeError("an element is not a function call")
        return [_call(e) for e in body.elts if isinstance(e, ast.Call)]
    return []


def _call(node: ast.Call) -> Call:
    args = {str(k.arg): _value(k.value) for k in node.keywords}
    for key, value in args.items():
        if isinstance(value, dict):  # ACEBench's parse_nested_value re-writes it as a call
            if not value or not isinstance(next(iter(value.values())), dict):
                raise DecodeError(f"the dict argument {key} is not a nested call")
            args[key] = NestedCall(str(next(iter(value))))
    return dotted_name(node.func), args


def _value(node: ast.expr | None) -> Any:  # noqa: PLR0911 - one case per AST node, as ACEBench's resolver
    """ACEBench's ``resolve_ast_by_type`` (DecodeError where it raises; see the module docstring)."""
    if isinstance(node, ast.Constant):
        return "..." if node.value is Ellipsis else node.value
    if isinstance(node, ast.UnaryOp):
        return _negate(node.operand)
    if isinstance(node, ast.List):
        return [_value(v) for v in node.elts]
    if isinstance(node, ast.Tuple):
        return tuple(_value(v) for v in node.elts)
    if isinstance(node, ast.Dict):
        return {_value(k): _value(v) for k, v in zip(node.keys, node.values, strict=True)}
    if isinstance(node, ast.BinOp):
        return _arithmetic(node)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call):
        if not node.keywords:
            return ast.unparse(node)
        name, args = _call(node)
        return {name: args}
    if isinstance(node, ast.Subscript):
        return ast.unparse(node.value) + "[" + ast.unparse(node.slice) + "]"
    raise DecodeError(f"Unsupported AST type: {type(node)}")


def _negate(operand: ast.expr) -> Any:
    value = operand.value if isinstance(operand, ast.Constant) else None
    if not isinstance(value, int | float | complex):  # bool is an int: ACEBench's `-True` is -1
        raise DecodeError("a unary operator on something other than a number")
    return -value


def _arithmetic(node: ast.expr) -> Any:
    """A BinOp of number or string constants, as ``eval`` computes it (DecodeError otherwise)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _arithmetic(node.operand)
        if isinstance(value, str):
            raise DecodeError("bad operand type for unary operator: 'str'")
        return -value if isinstance(node.op, ast.USub) else +value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _arithmetic(node.left), _arithmetic(node.right)
        repeated = isinstance(node.op, ast.Mult) and any(isinstance(v, str) for v in (left, right))
        if (
            repeated
            and abs(left if isinstance(left, int | float) else right) * len(str(left) + str(right)) > 10**5
        ):
            raise DecodeError("a string repeated past 100,000 characters")
        try:
            return _OPS[type(node.op)](left, right)
        except (TypeError, ZeroDivisionError, OverflowError) as exc:
            raise DecodeError(str(exc)) from None
    raise DecodeError(f"cannot compute {ast.unparse(node)} without eval")


class Scenario:
    """The involved classes' instances for one episode, started from ``initial_config`` as ACEBench does."""

    def __init__(self, involved: Sequence[str], initial_config: dict[str, Any]) -> None:
        self.instances: dict[str, Any] = {}
        for name in involved:
            instance = CLASSES[name]()
            instance._load_scenario(copy.deepcopy(initial_config.get(name, {})))
            instance._load_scenario(copy.deepcopy(initial_config.get("BaseApi", {})))
            self.instances[name] = instance
        self.ran = False
        """Whether some execution finished (ACEBench records an end state only then)."""

    def _targets(self, name: str) -> list[Callable[..., Any]]:
        method = name.rsplit(".", 1)[-1]
        found: list[Callable[..., Any]] = [
            m
            for m in (getattr(i, method, None) for i in self.instances.values())
            if inspect.ismethod(m) and method and not method.startswith("_")
        ]
        if found and "." in name:  # ACEBench's rewrite gives `a.<instance>.b(...)`, and `a` is undefined
            raise NameError(f"name '{name.split('.', maxsplit=1)[0]}' is not defined")
        return found

    def run(self, call: Call, previous: Any) -> Any:
        """One call on every instance with that method; the last result (ACEBench's loop)."""
        name, args = call
        methods = self._targets(name)
        if not methods:
            if previous is _NOTHING:
                raise UnboundLocalError(UNBOUND)
            return previous
        for value in args.values():
            if isinstance(value, NestedCall):
                raise NameError(f"name '{value.name}' is not defined")
        result = previous
        for method in methods:
            result = method(**copy.deepcopy(args))
        return result

    def state(self) -> list[dict[str, Any]]:
        """The end state ACEBench writes (``[{class: {attribute: value}}]``), after its JSON round trip."""
        if not self.ran:
            return []
        saved = [
            {name: {k: v for k, v in vars(i).items() if k in SAVED[name]}}
            for name, i in self.instances.items()
        ]
        return list(json.loads(json.dumps(saved, ensure_ascii=False, default=str)))


_NOTHING = object()


def _written(result: Any) -> Any:
    """A result as ACEBench serialises it and its execution role reads it back."""
    if isinstance(result, dict):
        try:
            text = json.dumps(result)
        except (TypeError, ValueError):
            text = str(result)
    else:
        text = str(result)
    try:
        return json.loads(text)
    except ValueError:
        return text


def execute_step(scenario: Scenario, calls: list[Call]) -> list[Any]:
    """Multi-step execution: every call runs; a failing one gives its error text (``multi_step_utils``)."""
    results: list[Any] = []
    previous: Any = _NOTHING
    for call in calls:
        try:
            previous = scenario.run(call, previous)
            results.append(previous)
        except Exception as exc:  # the model's call failing is data: ACEBench reports its text
            results.append(f"Error during execution: {exc}")
    scenario.ran = True
    return [_written(r) for r in results]


def execute_turn(scenario: Scenario, calls: list[Call]) -> list[Any]:
    """Multi-turn execution: the first failing call ends it with ACEBench's unformatted error text, which
    its execution role splits into characters (``multi_turn_utils``); no end state is recorded then."""
    results: list[Any] = []
    previous: Any = _NOTHING
    for call in calls:
        try:
            previous = scenario.run(call, previous)
        except Exception:  # the model's call failing is data: ACEBench reports it
            return list("Error during execution: {str(e)}")
        results.append(previous)
    scenario.ran = True
    return [_written(r) for r in results]


def end_state_valid(state: list[dict[str, Any]], truth: Any) -> tuple[bool, list[str]]:
    """ACEBench's ``agent_eval`` verdict on one end state, with its errors."""
    answers = truth if isinstance(truth, list) else [truth]
    if len(answers) != len(state):
        return False, ["wrong number of class"]
    errors: list[str] = []
    verdict: tuple[bool, list[str]] = (True, [])
    for answer in answers:
        matched = next((s for s in state if set(s) == set(answer)), None)
        if matched is not None:
            verdict = _class_checker(matched, answer)
        if not verdict[0]:
            errors += verdict[1]
    return not errors, errors


def _class_checker(model: dict[str, Any], answer: dict[str, Any]) -> tuple[bool, list[str]]:
    """ACEBench's ``agent_checker``: each end-state attribute against the answer's."""
    name = next(iter(answer))
    want, got = answer[name], next(iter(model.values()))
    errors = []
    for param, value in got.items():
        if param not in want:
            errors.append(f"class({name}) attributes({param}) missing in possible_answer.")
        elif isinstance(want[param], dict):
            for key, expected in want[param].items():
                if not isinstance(value, dict) or key not in value:
                    errors.append(
                        f"class({name}) attributes({param}) wrong, [expected: {want[param]}, real: {value}]"
                    )
                elif expected != value[key]:
                    errors.append(
                        f"class({name}) attributes({param}.{key}) wrong, [expected: {expected}, real: {value[key]}]"
                    )
        elif want[param] != value:
            errors.append(
                f"class({name}) attributes({param}) wrong, [expected: {want[param]}, real: {value}]"
            )
    return not errors, errors


def process_score(sent: Sequence[str], mile_stone: Sequence[Any]) -> float:
    """ACEBench's ``agent_eval_process`` for a wrong end state: milestones found in order, best list."""
    lists = mile_stone if mile_stone and isinstance(mile_stone[0], list) else [mile_stone]
    return max(round(_in_order(sent, stones), 3) for stones in lists)


def _in_order(sent: Sequence[str], stones: Sequence[str]) -> float:
    if not stones:
        return 1.0
    found, at = 0, 0
    for stone in stones:
        while at < len(sent):
            at += 1
            if sent[at - 1].strip() == stone.strip():
                found += 1
                break
    return found / len(stones)


FINISH = "finish conversation"
CALL_PATTERN = re.compile(r"\[.*\]")
"""The multi-turn agent's test for a call (``re.search``, no DOTALL)."""
