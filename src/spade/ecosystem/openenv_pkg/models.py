"""The wire types: one text action in, one text observation (with the step's reward and end flags) out."""

from __future__ import annotations

from typing import Any

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field


class SpadeAction(Action):
    """The agent's turn: free text (a boxed answer, ``<tool_call>{json}</tool_call>`` or ``<answer>``)."""

    message: str = Field(..., description="The agent's reply for this turn")


class SpadeObservation(Observation):
    """What the environment shows after ``reset`` or a step; ``reward`` and ``done`` are OpenEnv's fields."""

    text: str = Field(default="", description="The observation text")
    env_id: str = Field(default="", description="Which environment of the package is being played")
    skill: str = Field(default="", description="The environment's target skill")
    tools: list[dict[str, Any]] = Field(
        default_factory=list, description="OpenAI function schemas (tool use)"
    )
    terminated: bool = Field(default=False, description="The episode ended on its own terms")
    truncated: bool = Field(default=False, description="The turn budget ran out")
    error: str = Field(default="", description="Why the sandboxed instance failed (the episode is over)")


class SpadeState(State):
    """The session's episode: which environment, which seed, how many steps."""

    env_id: str = Field(default="", description="The environment being played")
    seed: int | None = Field(default=None, description="The episode's seed")
