"""How the agent plays one environment, and when it has won."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from spade.config.errors import require
from spade.config.types import ActionMode


@dataclass(frozen=True, slots=True)
class WinRule:
    """The level an episode is played at and when it is won, defined once: play inherits it (``PlayConfig``)
    and the checker is given it (``check_env(..., win=cfg.play)``), so the checker judges the game the agent
    plays."""

    difficulty: int | None = None
    """Difficulty level passed to environments' reset (None: each environment's default; an environment
    with fewer levels is played at its default)."""
    return_mode: Literal["final", "sum"] = "final"
    """'final': last step's reward if terminated else 0 (the released recipe); 'sum': clipped sum of rewards."""
    success_threshold: float = 1.0
    """An episode is won when it terminates with a return at least this."""


@dataclass(frozen=True, slots=True)
class PlayConfig(WinRule):
    """How the agent plays one environment (and, through :class:`WinRule`, when it has won)."""

    action_mode: ActionMode = "boxed"
    """How an action is read from a reply: 'boxed' (the first \\boxed{...}, the released recipe), 'boxed_last',
    or a more forgiving mode for small models (see spade.actions)."""
    max_turns: int = 25
    """Agent turn budget per episode (the environment's own max_turns may end it sooner)."""
    context_tokens: int = 32768
    """Token budget of a whole episode's conversation; older turns are dropped to stay within it."""
    turn_tokens: int = 8192
    """Per-turn generation budget."""
    on_length: Literal["end", "act"] = "end"
    """A reply cut at ``turn_tokens``: 'end' ends the episode (the released recipe); 'act' plays the action
    parsed from the partial reply and goes on (small models rarely stop within a short budget)."""
    temperature: float = 0.6
    """Agent sampling temperature."""
    top_p: float = 1.0
    """Agent sampling nucleus (1.0: off)."""
    top_k: int = 0
    """Agent sampling: keep only the k most likely tokens (0 disables top-k)."""
    format_reward: float = 0.0
    """Added to the return times the fraction of well-formed replies (0 disables; small models benefit
    from ~0.1)."""
    demos: int = 0
    """Worked demonstrations shown before each game: episodes of the same environment at other seeds
    (never a played one) solved by its scripted solution() (0: none; small models imitate them)."""
    demo_max_actions: int = 8
    """Only solutions of at most this many actions become demonstrations (they cost context)."""

    def validate(self) -> None:
        """Checks of the play budget."""
        require(self.demos >= 0, f"play.demos must be >= 0 (got {self.demos})")
        require(
            self.turn_tokens <= self.context_tokens, "play.turn_tokens must not exceed play.context_tokens"
        )
