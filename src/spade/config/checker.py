"""The validation ladder for generated environments."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CheckerConfig:
    """The validation ladder for generated environments."""

    determinism_seeds: int = 3
    """Seeds on which two instances must produce identical episodes (the determinism check)."""
    probe_episodes: int = 4
    """Random-policy episodes for the step-type and termination checks."""
    feasibility_seeds: int = 3
    """Seeds on which the environment's solution() must win (the feasibility check)."""
    exploit_episodes: int = 8
    """Episodes each degenerate probe policy (empty, repeated, very long actions...) plays."""
    guess_episodes: int = 32
    """Episodes of guessing whole numbers at random in the range the first observation shows, ignoring the
    feedback (games only; judged by ``exploit_max_success``): catches answer spaces too small for the turn
    budget, such as a one-dial lock of 11 numbers with 11 turns. Many episodes, as a fair game's guessing
    win rate can sit a few points under the limit."""
    exploit_max_success: float = 0.2
    """Degenerate policies may win at most this fraction of episodes."""
    exploit_min_wins: int = 2
    """A probe policy is only an exploit after at least this many wins (one win can be luck)."""
    exploit_confirm_episodes: int = 3
    """Extra episodes replaying a probe policy that won once, to tell an exploit from luck."""
    max_source_chars: int = 60_000
    """Longest environment source accepted, in characters."""
    llm_review: bool = False
    """Last rung: the policy itself reviews each environment that passed every check (fail closed: anything
    but an explicit ACCEPT rejects it, counted as LLM_REVIEW)."""
    reward_min: float = -1.0
    """Smallest per-step reward accepted (the sandbox's hard limit, ``sandbox.reward_min``, is wider)."""
    reward_max: float = 1.0
    """Largest per-step reward accepted."""
    termination_turns: int = 100
    """Random and do-nothing play must end (terminated or truncated) within this many steps."""
    long_action_chars: int = 10_000
    """Length of the very long actions sent by the anti-exploit probes."""
    strict_rng: bool = True
    """Reject native environments that use the module-level RNG even when they seed it (official-format
    files that seed it in reset only get a warning; an unseeded global RNG is rejected in either format)."""
    allowed_imports: tuple[str, ...] = (
        "__future__", "abc", "array", "bisect", "calendar", "cmath", "collections", "copy", "dataclasses",
        "datetime", "decimal", "enum", "fractions", "functools", "hashlib", "heapq", "itertools", "json",
        "math", "numbers", "numpy", "operator", "random", "re", "spade.env", "spade.envs.official",
        "statistics", "string", "textwrap", "tool_use_base_env", "typing", "unicodedata",
    )  # fmt: skip
    """Modules an environment may import (a name also allows its submodules)."""
    parallel_episodes: int = 4
    """Probe episodes played at once when the runner isolates instances in processes (in-process: one)."""
    min_solution_win_rate: float = 1.0
    """Least fraction of the ``feasibility_seeds`` tested seeds an explicit ``solution()`` script must win;
    below it the environment is rejected (SOLUTION_PARTIAL), at or above it a loss is a warning. Regret on an
    instance nobody can win is noise, and ``solution()`` claims every instance winnable: 1.0 rejects any
    lost seed; 0.0 accepts one win (the earlier rule). Prose solutions are not held to it."""
    reject_one_reply: bool = False
    """Reject a one-reply game (ONE_REPLY_GAME: the solution wins with one reply and a wrong first reply ends
    the episode, so the agent never acts on feedback) instead of warning about it. The method's
    environments are multi-turn."""
    novelty_seeds: int = 2
    """Seeds of the behaviour fingerprint (observations and rewards of the scripted solution and of seeded
    random play) from which a design's novelty against the archive is measured; 0: not measured in training
    (``spade check --against`` plays at least one seed)."""
