"""An episode's return and its win: what one play of an environment earns (SPEC §8), pure functions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

ReturnMode = Literal["final", "sum"]


def clip(x: float, lo: float, hi: float) -> float:
    """``x`` limited to ``[lo, hi]``."""
    return min(hi, max(lo, x))


def episode_return(rewards: Sequence[float], terminated: bool, mode: ReturnMode = "final") -> float:
    """The return of one episode, always in [-1, 1].

    Args:
        rewards: The per-step rewards in order.
        terminated: Whether the environment ended the episode (as opposed to a budget running out).
        mode: ``final``: the last reward if terminated, else 0 (outcome only); ``sum``: the clipped sum.
    """
    if mode == "final":
        return clip(float(rewards[-1]), -1.0, 1.0) if terminated and rewards else 0.0
    if mode == "sum":
        return clip(float(sum(rewards)), -1.0, 1.0)
    raise ValueError(f"unknown return mode {mode!r}; use 'final' or 'sum'")


def is_success(episode_return_: float, terminated: bool, threshold: float = 1.0) -> bool:
    """An episode is won when the environment ended it and the return reaches ``threshold``."""
    return terminated and episode_return_ >= threshold


def with_format_reward(episode_return_: float, well_formed: float, bonus: float) -> float:
    """Add ``bonus`` times the fraction of well-formed replies (0 disables it); success uses the plain return.

    A fraction rather than all-or-nothing gives a small model a graded signal before its first win.
    """
    return episode_return_ + bonus * well_formed
