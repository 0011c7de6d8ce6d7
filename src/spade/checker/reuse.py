"""The reuse rung as a plan and a pure verdict: episodes played one after the other on one instance, each
after ``reset(seed)``, must be the episodes that fresh instances of those seeds play.

Exported servers (OpenEnv, verifiers) and users' own trainers keep one instance across episodes, so state
that ``reset`` forgets to rebuild (a progress counter, a board, a history) makes the next episode start
half played there, while every other rung, which plays each episode on a fresh instance, never sees it.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from spade.checker.dynamic import difference
from spade.checker.episodes import Episode, Job
from spade.checker.feasibility import solution_actions
from spade.checker.findings import Finding, FindingCode, finding
from spade.checker.probes import RandomActions


@dataclass(frozen=True, slots=True)
class Plan:
    """``series`` plays seeds a, b, a on one instance; ``fresh`` plays b on a fresh one (the series' first
    episode is a fresh instance's episode of a)."""

    series: tuple[Job, ...]
    fresh: tuple[Job, ...]


def _solve(solution: list[str] | str) -> list[str]:
    return solution_actions(solution)[0]


def plan(
    solved: Sequence[Episode],
    draw_seed: Callable[[], int],
    *,
    tool_names: Sequence[str],
    script_cap: int,
    random_cap: int,
) -> Plan:
    """The solution's play on two seeds the feasibility rung played (``solved``), or, with no playable
    solution, seeded random play (the same actions on every episode) on two new seeds from ``draw_seed``."""
    played = [e.seed for e in solved if e.steps and e.solution is not None and e.failure is None]
    seeds = (played * 2)[:2] if played else [draw_seed(), draw_seed()]
    if played:

        def job(seed: int) -> Job:
            return Job("reuse", seed, None, script_cap, _solve)

    else:
        actions = draw_seed()

        def job(seed: int) -> Job:
            policy = RandomActions(random.Random(actions), list(tool_names))
            return Job("reuse", seed, policy, random_cap, peek_solution=True)

    a, b = seeds
    return Plan((job(a), job(b), job(a)), (job(b),))


def reuse_findings(series: Sequence[Episode], fresh: Sequence[Episode]) -> list[Finding]:
    """STALE_RESET when an episode of the series differs from a fresh instance's episode of its seed.

    ``series`` is what :meth:`~spade.checker.episodes.Prober.play_series` played for ``Plan.series`` (it
    stops at a failure), ``fresh`` the episodes of ``Plan.fresh``. A failed fresh episode is no reference
    (the earlier rungs judged those).
    """
    if not series or series[0].failure is not None:
        return []
    reference = {series[0].seed: series[0]} | {e.seed: e for e in fresh if e.failure is None}
    for before, reused in itertools.pairwise(series):
        fresh_ep = reference.get(reused.seed)
        if fresh_ep is None or fresh_ep.trace() == reused.trace():
            continue
        what = difference(fresh_ep, reused)
        if reused.failure is not None:
            what = f"it failed ({reused.failure.kind} in {reused.failure.op}: {reused.failure.message[:160]})"
        msg = (
            f"reset(seed={reused.seed}) on an instance that had just played seed {before.seed} is not a fresh "
            f"start: against a fresh instance of that seed, {what}. Likely cause: episode state (a counter, a "
            "board, a history) set in __init__ and not rebuilt in reset. Fix: build every piece of episode "
            "state in reset (_reset for a TextEnv); exported servers and trainers reuse one instance across "
            "episodes."
        )
        return [finding(FindingCode.STALE_RESET, "reuse", msg)]
    return []
