"""What the agent is told before it plays: the opening messages of an episode (``play.agent_prompt``).

``compact`` (the default, for small models): a short system prompt asking for a brief thought and the action
in ``\\boxed{}`` (games) or for tool calls and an ``<answer>`` (tool use), then the first observation.
``released`` (the paper presets): the authors' prompt. There is no system prompt; a game's first user message
wraps the observation in :data:`RELEASED_GAME_INTRO` and :data:`RELEASED_GAME_ASK`, and a tool-use
environment's first user message is its observation as it is (the tools reach the model through the chat
template). Later observations are plain user messages under both.
"""

from __future__ import annotations

from collections.abc import Sequence

from spade.config.types import AgentPrompt
from spade.play.demos import Demo, demo_messages, next_game_intro
from spade.types import Message

GAME_SYSTEM = (
    "You are playing a text game. Each turn, read the observation, think briefly, and give your action "
    "inside \\boxed{...}, for example \\boxed{3}."
)
TOOL_SYSTEM = (
    "You are an assistant that completes the user's task by calling the available tools. Call tools with "
    '<tool_call>{"name": "...", "arguments": {...}}</tool_call>; when the task is complete, reply with the '
    "final answer inside <answer>...</answer>."
)
HINT_TEMPLATE = "{observation}\n\nHINT: {hint}"
"""A hinted play's first observation (as released)."""
RELEASED_GAME_INTRO = "You are playing a language game. Make valid actions to win.\nObservation: "
RELEASED_GAME_ASK = "\nPlease reason step by step, and put your final answer within \\boxed{}."


def released_game_message(observation: str) -> str:
    """The released first user message of a game around its first observation."""
    return f"{RELEASED_GAME_INTRO}{observation}{RELEASED_GAME_ASK}"


def opening_messages(
    style: AgentPrompt, observation: str, *, is_tool_env: bool, demos: Sequence[Demo] = ()
) -> list[Message]:
    """The messages before the agent's first reply: the ``style``'s prompt, any demonstrations (games), then
    the first observation (already carrying a hint, if any)."""
    if style == "released":
        first = observation if is_tool_env else released_game_message(observation)
        return [*demo_messages(demos), {"role": "user", "content": next_game_intro(demos, first)}]
    if style != "compact":
        raise ValueError(f"unknown agent prompt {style!r}: use 'compact' or 'released'")
    return [
        {"role": "system", "content": TOOL_SYSTEM if is_tool_env else GAME_SYSTEM},
        *demo_messages(demos),
        {"role": "user", "content": next_game_intro(demos, observation)},
    ]
