"""The environment contract's helpers: turn accounting, seeding, difficulty, tool dispatch, action text."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest

from spade.env import TextEnv, ToolEnv, answer_action, function_schema, tool_call_action


class Counter(TextEnv):
    """A tiny game: say "win" to win; anything else counts a turn."""

    skill = "logical_deduction"
    difficulty_levels = 3
    default_difficulty = 1
    max_turns = 3

    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self.secret = self.rng.randint(0, 10**9)
        return f"secret {self.secret}", {"difficulty": self.difficulty, "options": options}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if action == "win":
            return self.end_turn("won", 1, terminated=True, info={"why": "win"})
        return self.end_turn("again")


class Shop(ToolEnv):
    """A tool env with one good tool, one that raises, one declared but missing."""

    skill = "tool_selection"
    tools: ClassVar[list[dict[str, Any]]] = [
        function_schema("price", "Price of an item.", item=("string", "Item name")),
        function_schema("broken", "Always fails.", key=("string", "A key")),
        function_schema("ghost", "Declared, not implemented."),
    ]

    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self.prices = {"tea": 3}
        return "shop", {}

    def tool_price(self, item: str) -> str:
        return str(self.prices[item])

    def tool_broken(self, key: str) -> str:
        raise ValueError(f"no such key {key}")

    def check_answer(self, answer: str) -> bool:
        return answer == "3"


# -- TextEnv --------------------------------------------------------------------------------------------
def test_end_turn_counts_and_truncates_exactly_at_the_budget() -> None:
    env = Counter()
    env.reset(seed=0)
    assert env.turns_left == 3
    first = env.step("x")
    assert first == ("again", 0.0, False, False, {})
    assert env.turn == 1
    assert env.turns_left == 2
    env.step("x")
    obs, reward, terminated, truncated, _ = env.step("x")
    assert reward == 0.0
    assert (terminated, truncated) == (False, True)
    assert "Out of turns (3)" in obs
    assert env.turns_left == 0


def test_terminating_on_the_last_turn_is_not_truncation() -> None:
    env = Counter()
    env.reset(seed=0)
    env.step("x")
    env.step("x")
    obs, reward, terminated, truncated, info = env.step("win")
    assert (obs, terminated, truncated, info) == ("won", True, False, {"why": "win"})
    assert type(reward) is float
    assert reward == 1.0


def test_end_turn_copies_info() -> None:
    env = Counter()
    env.reset(seed=0)
    info = {"k": 1}
    *_, returned = env.end_turn("obs", info=info)
    returned["k"] = 2
    assert info == {"k": 1}


def test_reset_is_deterministic_and_restarts_the_turn_count() -> None:
    env = Counter()
    obs, _ = env.reset(seed=42)
    env.step("x")
    assert env.reset(seed=42)[0] == obs
    assert env.turn == 0
    assert Counter().reset(seed=42)[0] == obs
    assert env.reset(seed=43)[0] != obs


def test_reset_without_seed_draws_a_fresh_one() -> None:
    env = Counter()
    seen = {env.reset()[0] for _ in range(5)}
    assert len(seen) > 1


def test_reset_difficulty_default_override_and_range() -> None:
    env = Counter()
    assert env.reset(seed=0)[1]["difficulty"] == 1
    assert env.reset(seed=0, options={"difficulty": 2})[1]["difficulty"] == 2
    assert env.difficulty == 2
    for bad in (-1, 3):
        with pytest.raises(ValueError, match=r"difficulty must be in \[0, 3\)"):
            env.reset(seed=0, options={"difficulty": bad})


def test_reset_does_not_mutate_options() -> None:
    options = {"difficulty": 0, "extra": [1]}
    env = Counter()
    _, info = env.reset(seed=0, options=options)
    info["options"]["difficulty"] = 9
    assert options == {"difficulty": 0, "extra": [1]}


def test_max_turns_override_and_validation() -> None:
    assert Counter(max_turns=7).max_turns == 7
    assert Counter().max_turns == 3
    with pytest.raises(ValueError, match="max_turns must be >= 1"):
        Counter(max_turns=0)


def test_np_random_is_seeded_per_episode() -> None:
    pytest.importorskip("numpy")
    env = Counter()
    env.reset(seed=5)
    first = env.np_random.integers(0, 10**9, size=3).tolist()
    env.reset(seed=5)
    assert env.np_random.integers(0, 10**9, size=3).tolist() == first
    env.reset(seed=6)
    assert env.np_random.integers(0, 10**9, size=3).tolist() != first


def test_base_methods_say_they_are_not_implemented() -> None:
    env = TextEnv()
    with pytest.raises(NotImplementedError):
        env.reset(seed=0)
    with pytest.raises(NotImplementedError):
        env.step("x")
    with pytest.raises(NotImplementedError):
        env.solution()
    env.close()


# -- action text and schemas ----------------------------------------------------------------------------
def test_tool_call_and_answer_text() -> None:
    text = tool_call_action("price", item='tea "green"', qty=2)
    assert text.startswith("<tool_call>")
    assert text.endswith("</tool_call>")
    payload = json.loads(text[len("<tool_call>") : -len("</tool_call>")])
    assert payload == {"name": "price", "arguments": {"item": 'tea "green"', "qty": 2}}
    assert answer_action("42") == "<answer>42</answer>"


def test_function_schema_shape() -> None:
    schema = function_schema("f", "Does f.", a=("string", "first"), b=("integer", "second"))
    assert schema == {
        "type": "function",
        "function": {
            "name": "f",
            "description": "Does f.",
            "parameters": {
                "type": "object",
                "properties": {
                    "a": {"type": "string", "description": "first"},
                    "b": {"type": "integer", "description": "second"},
                },
                "required": ["a", "b"],
            },
        },
    }
    assert function_schema("g", "No args.")["function"]["parameters"]["required"] == []


# -- ToolEnv --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("price", {"item": "tea"}, "3"),
        ("nope", {}, "Error: unknown tool 'nope'. Available tools: price, broken, ghost."),
        ("price", ["tea"], "Error: arguments of price must be a JSON object."),
        ("ghost", {}, "Error: tool 'ghost' is declared but not implemented."),
        ("price", {"colour": "red"}, "Error: bad arguments for price"),
        ("price", {"item": "coffee"}, "Error: price failed: 'coffee'"),
        ("broken", {"key": "k"}, "Error: broken failed: no such key k"),
    ],
)
def test_call_tool_turns_failures_into_text(name: str, arguments: Any, expected: str) -> None:
    env = Shop()
    env.reset(seed=0)
    assert env.call_tool(name, arguments).startswith(expected)


def test_tool_names_follow_the_schemas() -> None:
    assert Shop().tool_names() == ["price", "broken", "ghost"]


def test_tool_step_runs_every_call_in_order() -> None:
    env = Shop()
    env.reset(seed=0)
    action = tool_call_action("price", item="tea") + " and " + tool_call_action("nope")
    obs, reward, terminated, truncated, _ = env.step(action)
    assert obs.splitlines() == ["3", "Error: unknown tool 'nope'. Available tools: price, broken, ghost."]
    assert (reward, terminated, truncated) == (0.0, False, False)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("<tool_call>{not json}</tool_call>", "Error: tool call is not valid JSON."),
        ('<tool_call>["price"]</tool_call>', 'Error: a tool call needs {"name": str, "arguments": {...}}.'),
        (
            '<tool_call>{"arguments": {}}</tool_call>',
            'Error: a tool call needs {"name": str, "arguments": {...}}.',
        ),
        ('<tool_call>{"name": "price", "arguments": null}</tool_call>', "Error: bad arguments for price"),
    ],
)
def test_malformed_tool_calls(raw: str, expected: str) -> None:
    env = Shop()
    env.reset(seed=0)
    assert env.step(raw)[0].startswith(expected)


@pytest.mark.parametrize(
    ("action", "won"),
    [
        ("<answer> 3 </answer>", True),
        ("<ANSWER>3</ANSWER>", True),
        ("<answer>4</answer>", False),
        ("<answer>4</answer> no, <answer>3</answer>", True),
        (tool_call_action("price", item="tea") + "<answer>3</answer>", True),
    ],
)
def test_answer_ends_the_episode(action: str, won: bool) -> None:
    env = Shop()
    env.reset(seed=0)
    obs, reward, terminated, truncated, _ = env.step(action)
    assert terminated
    assert not truncated
    assert reward == (1.0 if won else 0.0)
    assert obs == ("Correct!" if won else "Incorrect.")


def test_text_without_call_or_answer_costs_a_turn() -> None:
    env = Shop(max_turns=2)
    env.reset(seed=0)
    obs, reward, terminated, truncated, _ = env.step("what should I do?")
    assert "No tool call or answer found" in obs
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert env.step("still nothing")[3] is True
