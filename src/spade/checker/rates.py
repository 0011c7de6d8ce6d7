"""Win rates judged against a limit with a confidence bound, so that a verdict does not hang on the check's
seed: a probe policy keeps playing while the Wilson score interval of its win rate holds the limit."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from statistics import NormalDist

from spade.checker.episodes import Episode


def wilson(wins: int, episodes: int, confidence: float) -> tuple[float, float]:
    """The Wilson score interval of a win rate (two-sided, ``confidence`` e.g. 0.99); (0, 1) for no episodes.

    Chosen over the normal approximation because it stays inside [0, 1] and is sound at 0 or all wins, and
    over Clopper-Pearson because it is closed-form and less conservative (fewer episodes to a verdict).
    """
    if episodes <= 0:
        return 0.0, 1.0
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = wins / episodes
    denominator = 1 + z * z / episodes
    centre = (p + z * z / (2 * episodes)) / denominator
    half = z * math.sqrt(p * (1 - p) / episodes + z * z / (4 * episodes * episodes)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def undecided(wins: int, episodes: int, limit: float, confidence: float) -> bool:
    """Whether more episodes are needed before judging the rate against ``limit``: the interval holds the
    limit (its low end at or under it, its high end over it). At 99%, a policy that never won is decided
    after 27 episodes (the interval's high end drops under 20%)."""
    low, high = wilson(wins, episodes, confidence)
    return low <= limit < high


def interval_text(wins: int, episodes: int, confidence: float) -> str:
    """``"27%; 99% interval 21%-34%"``: the estimate and its interval, for finding messages."""
    low, high = wilson(wins, episodes, confidence)
    return f"{wins / max(episodes, 1):.0%}; {confidence:.0%} interval {low:.0%}-{high:.0%}"


def top_up(
    episodes: Sequence[Episode],
    more: Callable[[int], list[Episode]],
    *,
    won: Callable[[Episode], bool],
    limit: float,
    confidence: float,
    cap: int,
    batch: int,
) -> list[Episode]:
    """``episodes`` of one probe policy and, while its win rate is :func:`undecided` and fewer than ``cap``
    episodes were judged, batches of ``batch`` more from ``more(n)`` (none when ``batch`` < 1); stops at a
    failed episode (the caller reports it, and a hung instance costs a full call limit each time)."""
    out = list(episodes)
    while not any(e.failure is not None for e in out[len(episodes) :]):
        judged = [won(e) for e in out if e.failure is None]
        if batch < 1 or len(judged) >= cap or not undecided(sum(judged), len(judged), limit, confidence):
            break
        out += more(min(batch, cap - len(judged)))
    return out
