"""Harness-side validation of every value that leaves an environment (shared by both runners).

The harness, never the environment, decides whether a value is acceptable: observations are strings
within ``Limits.max_observation_chars``, rewards are finite non-bool numbers within ``Limits.reward_range``,
flags are bools, ``info`` is a JSON-safe dict within ``Limits.max_info_bytes``. Failures raise
:class:`InvalidValueError` (a :class:`~spade.sandbox.errors.SandboxError` of kind ``invalid_value``) whose
``field`` and ``problem`` let a caller such as the checker name the exact defect without parsing messages.

Numpy scalars are accepted and converted to Python values (``np.float64`` is a float already; ``np.int64``,
``np.float32`` and ``np.bool_`` go through ``.item()``), so what the harness keeps is plain JSON data.
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal

from spade.config.sandbox import Limits
from spade.env import StepResult
from spade.sandbox.errors import SandboxError

ValueField = Literal[
    "result", "observation", "reward", "terminated", "truncated", "info", "tools", "tool_output", "solution"
]
"""Which returned value failed: ``result`` is the tuple itself (wrong type or arity)."""

ValueProblem = Literal["type", "nan", "range", "size", "json"]
"""How it failed: wrong type, NaN/infinite number, outside the allowed range, too large, not JSON-safe."""


class InvalidValueError(SandboxError):
    """A value returned by an environment failed validation (kind ``invalid_value``)."""

    def __init__(self, field: ValueField, problem: ValueProblem, message: str, *, op: str = "") -> None:
        super().__init__("invalid_value", message, op=op)
        self.field: ValueField = field
        self.problem: ValueProblem = problem

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (self.field, self.problem, self.message, self.op))


def _rebuild(field: ValueField, problem: ValueProblem, message: str, op: str) -> InvalidValueError:
    return InvalidValueError(field, problem, message, op=op)


def _plain(value: Any) -> Any:
    """Numpy scalars become the Python value they hold; anything else is returned unchanged."""
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        return value.item()
    return value


def observation(value: Any, limits: Limits, *, op: str, field: ValueField = "observation") -> str:
    """A text observation (or tool output) no longer than ``limits.max_observation_chars``."""
    if not isinstance(value, str):
        raise InvalidValueError(
            field, "type", f"{field} must be a str, got {type(value).__name__}: return text", op=op
        )
    if len(value) > limits.max_observation_chars:
        raise InvalidValueError(
            field,
            "size",
            f"{field} has {len(value)} chars, over the limit of {limits.max_observation_chars}: "
            "show only what the agent needs",
            op=op,
        )
    return value


def reward(value: Any, limits: Limits, *, op: str = "step") -> float:
    """A finite, non-bool number within ``limits.reward_range``, as a float."""
    value = _plain(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidValueError(
            "reward", "type", f"reward must be an int or float (not bool), got {type(value).__name__}", op=op
        )
    number = float(value)
    if not math.isfinite(number):
        raise InvalidValueError("reward", "nan", f"reward must be finite, got {number!r}", op=op)
    low, high = limits.reward_range
    if not low <= number <= high:
        raise InvalidValueError("reward", "range", f"reward {number!r} is outside [{low}, {high}]", op=op)
    return number


def flag(value: Any, field: Literal["terminated", "truncated"], *, op: str = "step") -> bool:
    """A bool (``terminated`` / ``truncated``); ints such as 0/1 are refused, as Gymnasium does."""
    value = _plain(value)
    if not isinstance(value, bool):
        raise InvalidValueError(field, "type", f"{field} must be a bool, got {type(value).__name__}", op=op)
    return value


def info(value: Any, limits: Limits, *, op: str) -> dict[str, Any]:
    """A dict with string keys that serialises to compact JSON within ``limits.max_info_bytes``."""
    if not isinstance(value, dict):
        raise InvalidValueError("info", "type", f"info must be a dict, got {type(value).__name__}", op=op)
    try:
        text = json.dumps(value, allow_nan=False, separators=(",", ":"), default=_json_default)
    except (TypeError, ValueError) as exc:
        raise InvalidValueError(
            "info", "json", f"info must be JSON-safe (str keys, plain values, no NaN): {exc}", op=op
        ) from exc
    if len(text.encode()) > limits.max_info_bytes:
        raise InvalidValueError(
            "info", "size", f"info is {len(text)} bytes as JSON, over {limits.max_info_bytes}", op=op
        )
    data: dict[str, Any] = json.loads(text)
    return data


def _json_default(value: Any) -> Any:
    plain = _plain(value)
    if plain is value:
        raise TypeError(f"{type(value).__name__} is not JSON-safe")
    return plain


def reset_result(value: Any, limits: Limits) -> tuple[str, dict[str, Any]]:
    """``reset``'s ``(observation, info)``."""
    if not isinstance(value, tuple | list) or len(value) != 2:
        raise InvalidValueError(
            "result",
            "type",
            f"reset must return (observation: str, info: dict), got {_shape(value)}",
            op="reset",
        )
    return observation(value[0], limits, op="reset"), info(value[1], limits, op="reset")


def step_result(value: Any, limits: Limits) -> StepResult:
    """``step``'s ``(observation, reward, terminated, truncated, info)``."""
    if not isinstance(value, tuple | list) or len(value) != 5:
        raise InvalidValueError(
            "result",
            "type",
            "step must return (observation: str, reward: float, terminated: bool, truncated: bool, "
            f"info: dict), got {_shape(value)}",
            op="step",
        )
    obs, rew, term, trunc, inf = value
    return (
        observation(obs, limits, op="step"),
        reward(rew, limits),
        flag(term, "terminated"),
        flag(trunc, "truncated"),
        info(inf, limits, op="step"),
    )


def tool_schemas(value: Any, limits: Limits) -> list[dict[str, Any]]:
    """A JSON-safe list of at most ``limits.max_tools`` dicts (their content is the checker's business)."""
    if not isinstance(value, list | tuple) or not all(isinstance(t, dict) for t in value):
        raise InvalidValueError("tools", "type", "tools must be a list of dict schemas", op="tools")
    if len(value) > limits.max_tools:
        raise InvalidValueError(
            "tools", "size", f"{len(value)} tools, over the limit of {limits.max_tools}", op="tools"
        )
    try:
        data: list[dict[str, Any]] = json.loads(json.dumps(list(value), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidValueError(
            "tools", "json", f"tool schemas must be JSON-safe: {exc}", op="tools"
        ) from exc
    return data


def tool_output(value: Any, limits: Limits) -> str:
    """The text a tool call returns."""
    return observation(value, limits, op="call_tool", field="tool_output")


def solution(value: Any, limits: Limits) -> list[str] | str:
    """A scripted action list (at most ``limits.max_solution_steps`` strings) or a single string."""
    if isinstance(value, str):
        return observation(value, limits, op="solution", field="solution")
    if not isinstance(value, list | tuple) or not all(isinstance(a, str) for a in value):
        raise InvalidValueError(
            "solution", "type", f"solution must return list[str] or str, got {_shape(value)}", op="solution"
        )
    if len(value) > limits.max_solution_steps:
        raise InvalidValueError(
            "solution",
            "size",
            f"solution has {len(value)} steps, over {limits.max_solution_steps}",
            op="solution",
        )
    return [observation(a, limits, op="solution", field="solution") for a in value]


def _shape(value: Any) -> str:
    if isinstance(value, tuple | list):
        inner = ", ".join(type(v).__name__ for v in value[:6])
        return f"{type(value).__name__} of {len(value)} ({inner})"
    return type(value).__name__
