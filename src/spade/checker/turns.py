"""Whether a game is multi-turn: the turns its winning play needs, and whether a wrong first reply ends it.

The method's environments are multi-turn: the agent acts, reads feedback and acts again. A game whose
solution wins with one reply is still multi-turn when a wrong reply gets feedback and the episode goes on
(guess a number, told higher or lower). It is a *one-reply game* when a wrong first reply ends the episode
too: the agent never acts on anything the environment said. The wrong replies tried are other seeds'
winning replies, played on an instance they do not win (well-formed, so the answer is judged, not the
format); without such a reply, the probe episodes (random and do-nothing play) stand in.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from spade.checker import probes
from spade.checker.episodes import Episode, Job
from spade.checker.findings import Finding, FindingCode, Severity, finding

_CROSS_PAIRS = 4
"""Most (winner, other seed) pairs whose first replies are swapped."""


def min_turns(winners: Sequence[Episode]) -> int | None:
    """The fewest replies a won episode took (None: nothing won)."""
    return min((len(e.steps) for e in winners), default=None)


def turn_stats(winners: Sequence[Episode]) -> dict[str, float]:
    """``min_turns`` of the won episodes (none when nothing won)."""
    turns = min_turns(winners)
    return {} if turns is None else {"min_turns": float(turns)}


def cross_jobs(winners: Sequence[Episode]) -> list[Job]:
    """Each winner's first reply sent twice on another winner's instance that a different reply won: a
    well-formed reply that is wrong there (the second shows whether the episode went on)."""
    jobs: list[Job] = []
    for a, b in itertools.permutations(winners, 2):
        reply, other = a.steps[0].action, b.steps[0].action
        if reply != other and len(jobs) < _CROSS_PAIRS:
            jobs.append(Job(f"cross {a.seed}", b.seed, probes.scripted([reply, reply]), 2))
    return jobs


def turn_findings(
    winners: Sequence[Episode],
    crossed: Sequence[Episode],
    probed: Sequence[Episode],
    won: Callable[[Episode], bool],
    *,
    reject: bool,
) -> list[Finding]:
    """ONE_REPLY_GAME (fatal when ``reject``) when one reply wins and every wrong first reply ended the
    episode.

    Args:
        winners: won episodes of the scripted solution (or of the hint-following policy).
        crossed: the episodes of :func:`cross_jobs`.
        probed: random and do-nothing probe episodes, used when no crossed reply was wrong.
        won: the run's win rule.
        reject: make a one-reply game fatal (``CheckerConfig.reject_one_reply``).
    """
    if min_turns(winners) != 1:
        return []
    wrong = [e for e in crossed if e.steps and e.failure is None and not won(e)]
    evidence = wrong or [e for e in probed if e.steps and e.failure is None]
    if not evidence or any(len(e.steps) > 1 for e in evidence):
        return []
    example, one = evidence[0], next(e for e in winners if len(e.steps) == 1)
    what = "another seed's winning reply" if wrong else "every probe reply"
    msg = (
        f"a one-reply game: solution() wins with one reply (seed {one.seed}), and a wrong first reply "
        f"ends the episode ({what}, e.g. {example.steps[0].action[:40]!r} on seed {example.seed}), so the "
        "agent never acts on feedback; the method's environments are multi-turn. Fix: answer a wrong move "
        "with feedback (a clue, a changed state) and let the episode go on, or make winning take several moves."
    )
    severity: Severity = "fatal" if reject else "warning"
    return [finding(FindingCode.ONE_REPLY_GAME, "turns", msg, severity)]
