"""Harness-side validation of values returned by environments."""

from __future__ import annotations

import pickle
from collections.abc import Callable

import pytest

from spade.sandbox import Limits
from spade.sandbox import validate as v

LIM = Limits(reward_min=-2.0, reward_max=2.0, max_observation_chars=10, max_info_bytes=20, max_tools=1)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (float("nan"), "nan"),
        (float("inf"), "nan"),
        (2.5, "range"),
        (True, "type"),
        ("1", "type"),
        (None, "type"),
    ],
)
def test_bad_rewards(value: object, problem: str) -> None:
    with pytest.raises(v.InvalidValueError) as caught:
        v.reward(value, LIM)
    assert (caught.value.field, caught.value.problem, caught.value.kind) == (
        "reward",
        problem,
        "invalid_value",
    )


def test_good_values_pass_and_become_plain() -> None:
    assert v.reward(1, LIM) == 1.0
    assert type(v.reward(1, LIM)) is float
    assert v.step_result(("ok", 0, False, True, {"a": 1}), LIM) == ("ok", 0.0, False, True, {"a": 1})
    assert v.reset_result(["hi", {}], LIM) == ("hi", {})
    assert v.solution(("a", "b"), LIM) == ["a", "b"]
    assert v.solution("text", LIM) == "text"


@pytest.mark.parametrize(
    ("call", "field", "problem"),
    [
        (lambda: v.flag(1, "terminated"), "terminated", "type"),
        (lambda: v.observation("x" * 11, LIM, op="step"), "observation", "size"),
        (lambda: v.info({"k": "x" * 30}, LIM, op="step"), "info", "size"),
        (lambda: v.info({"k": float("nan")}, LIM, op="step"), "info", "json"),
        (lambda: v.info({1: object()}, LIM, op="step"), "info", "json"),
        (lambda: v.reset_result("hello", LIM), "result", "type"),
        (lambda: v.step_result(("o", 0.0, False, {}), LIM), "result", "type"),
        (lambda: v.tool_schemas([{}, {}], LIM), "tools", "size"),
        (lambda: v.tool_output(3, LIM), "tool_output", "type"),
        (lambda: v.solution([1, 2], LIM), "solution", "type"),
    ],
)
def test_each_defect_is_named(call: Callable[[], object], field: str, problem: str) -> None:
    with pytest.raises(v.InvalidValueError) as caught:
        call()
    assert (caught.value.field, caught.value.problem) == (field, problem)


def test_errors_survive_pickling_with_their_detail() -> None:
    error = v.InvalidValueError("reward", "nan", "reward must be finite", op="step")
    again = pickle.loads(pickle.dumps(error))
    assert (again.field, again.problem, again.op, again.kind) == ("reward", "nan", "step", "invalid_value")
