"""How the agent plays one environment, and when it has won."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from spade.config.errors import require
from spade.config.types import ActionMode, AgentPrompt


@dataclass(frozen=True, slots=True)
class WinRule:
    """The level an episode is played at and when it is won, defined once: play inherits it (``PlayConfig``)
    and the checker is built with it (``Checker(cfg.checker, cfg.play)``), so the checker judges the game
    the agent plays."""

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
    """Token budget of a whole episode's conversation (the prompt of a turn plus its reply); the episode
    ends, as ``context_budget``, when the next turn does not fit (see ``stop_margin_tokens``)."""
    turn_tokens: int = 8192
    """Per-turn generation budget."""
    stop_margin_tokens: int | None = None
    """When the context ends an episode. None: before a turn whose prompt plus a whole ``turn_tokens`` reply
    would not fit (no reply is ever cut by the context). N: play on while more than N tokens of
    ``context_tokens`` remain after the prompt, each reply capped at what remains beyond those N, so the
    episode stops once N or fewer remain (released: 64)."""
    mask_malformed_tool_calls: bool = False
    """A tool-use reply with a ``<tool_call>`` block that parses to no call is not trained on (its tokens get
    no loss) and the next observation starts with a reminder of the call format, as the released tool-use
    launchers do (``SPADE_MASK_MALFORMED_TOOLCALL``). False: it is trained like any reply."""
    agent_prompt: AgentPrompt = "compact"
    """How the agent is asked to play: 'compact', a short system prompt for small models; 'released', the
    authors' prompt (no system prompt, "reason step by step", the answer in \\boxed{}; see
    spade.play.prompts)."""
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
            self.stop_margin_tokens is None or 0 <= self.stop_margin_tokens < self.context_tokens,
            f"play.stop_margin_tokens must be unset or in [0, play.context_tokens) (got {self.stop_margin_tokens})",
        )
        require(
            self.turn_tokens <= self.context_tokens, "play.turn_tokens must not exceed play.context_tokens"
        )
