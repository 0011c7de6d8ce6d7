"""The validation ladder for generated environments."""

from __future__ import annotations

from dataclasses import dataclass

from spade.config.errors import require


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
    exploit_confidence: float = 0.99
    """Confidence of the Wilson score interval around the win rate of random play and of number guessing.
    While the interval holds ``exploit_max_success``, more episodes are played (batches of
    ``guess_episodes``, up to ``exploit_max_episodes``), so that a file's verdict does not depend on the
    check's seed: with the defaults, a file whose true rate is under 17% or over 24% gets the same verdict
    for at least 99 check seeds in 100 (docs/architecture.md, "The validation ladder")."""
    exploit_max_episodes: int = 1024
    """Most episodes random play or number guessing plays while its interval holds the limit; at the cap
    the estimate decides. Only a rate near the limit gets this far (a fair game's guessing is decided by
    the first ``guess_episodes``)."""
    exploit_min_wins: int = 2
    """A probe policy is only an exploit after at least this many wins (one win can be luck)."""
    exploit_confirm_episodes: int = 3
    """Extra episodes replaying a probe policy that won once, to tell an exploit from luck."""
    max_source_chars: int = 60_000
    """Longest environment source accepted, in characters."""
    llm_review: bool = False
    """Last rung: the policy itself reviews each environment that passed every check (fail closed: anything
    but an explicit ACCEPT rejects it, counted as LLM_REVIEW)."""
    review_temperature: float = 0.0
    """Sampling temperature of the review (the release samples at 0.3)."""
    review_max_tokens: int | None = None
    """New tokens of a review (None: ``designer.hint_max_tokens``; the release allows 16,384)."""
    review_fail_open: bool = False
    """Reject only on an explicit verdict other than ACCEPT; a review with no verdict, an empty reply or a
    failed request accepts (as released). False: fail closed."""
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
    min_distinct_instances: float = 0.0
    """Least share of the tested seeds that must give distinct instances, below which SEED_IGNORED is fatal.
    The share is the larger of two lower bounds: distinct plays among the ``determinism_seeds`` seeds
    (the same random actions on each, ``solution()`` read) and distinct ``solution()`` values among the
    ``feasibility_seeds`` seeds. Every seed giving the same instance is always reported (a warning at
    least): an agent can memorise one script, so regret measured on it says nothing about reasoning. 0.0
    by default, so that a hand-written puzzle with one instance can still be checked and played; the paper
    presets set 0.5, which with 3 determinism seeds rejects a game whose every seed gives the same
    instance (a share of 1/3) but not one where two seeds of a small instance space coincide (2/3)."""
    novelty_seeds: int = 2
    """Seeds of the behaviour fingerprint (observations and rewards of the scripted solution and of seeded
    random play) from which a design's novelty against the archive is measured; 0: not measured in training
    (``spade check --against`` plays at least one seed)."""

    def validate(self) -> None:
        """Checks of the thresholds that decide a verdict."""
        require(0.0 <= self.min_distinct_instances <= 1.0, "checker.min_distinct_instances must be in [0, 1]")
        require(
            0.5 <= self.exploit_confidence < 1.0,
            f"checker.exploit_confidence must be in [0.5, 1), e.g. 0.99 (got {self.exploit_confidence})",
        )
        require(
            self.exploit_max_episodes >= self.guess_episodes,
            "checker.exploit_max_episodes must be >= checker.guess_episodes (the first batch)",
        )
