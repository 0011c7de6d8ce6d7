"""Rungs 4–6 as pure functions of recorded episodes: determinism, step values, termination."""

from __future__ import annotations

from collections.abc import Sequence

from spade.checker.episodes import Episode
from spade.checker.failures import first_failure
from spade.checker.findings import Finding, FindingCode, Stage, finding


def difference(a: Episode, b: Episode) -> str:
    """Where two runs of the same seed and actions first differ."""
    if a.first_obs != b.first_obs:
        return "reset(seed) returned different observations"
    if a.solution != b.solution:
        return "solution() differs after the same reset, so the hidden state does"
    for i, (x, y) in enumerate(zip(a.steps, b.steps, strict=False)):
        if x != y:
            what = [
                name
                for name, u, v in (
                    ("observation", x.observation, y.observation),
                    ("reward", x.reward, y.reward),
                    ("terminated", x.terminated, y.terminated),
                    ("truncated", x.truncated, y.truncated),
                )
                if u != v
            ]
            return f"step {i + 1} (action {x.action[:40]!r}) gave a different {', '.join(what)}"
    if len(a.steps) != len(b.steps):
        return f"one run ended after {len(a.steps)} steps, the other after {len(b.steps)}"
    return "one run failed and the other did not"


def determinism_findings(pairs: Sequence[tuple[Episode, Episode]]) -> list[Finding]:
    """NONDETERMINISTIC when two instances with the same seed and actions diverge."""
    for a, b in pairs:
        if a.trace() != b.trace():
            msg = (
                f"seed {a.seed} played twice with the same actions: {difference(a, b)}. Likely cause: "
                "randomness outside self.rng (the global random module, set iteration order, time, id()) or "
                "state shared between instances. Fix: draw everything from self.rng seeded in reset."
            )
            return [finding(FindingCode.NONDETERMINISTIC, "determinism", msg)]
    return []


def distinct_share(firsts: Sequence[Episode], solved: Sequence[Episode]) -> tuple[float, int, int] | None:
    """The share of tested seeds that gave distinct instances, with the distinct count and the seeds behind
    it; None when neither sample has two seeds.

    Two samples each give a lower bound (different evidence proves different instances, identical evidence
    does not prove the same one): ``firsts``, played with the same actions on each seed, compared whole
    (observations, rewards, ``solution()``), and ``solved``, compared by ``solution()`` (hidden state that
    random play never reveals still shows in solutions). The larger share counts.
    """
    usable = [e.trace() for e in firsts if e.failure is None]
    solutions = [repr(e.solution) for e in solved if e.solution is not None]
    samples = [(len(set(keys)), len(keys)) for keys in (usable, solutions) if len(keys) >= 2]
    if not samples:
        return None
    distinct, seeds = max(samples, key=lambda s: s[0] / s[1])
    return distinct / seeds, distinct, seeds


def seed_findings(
    firsts: Sequence[Episode], solved: Sequence[Episode], min_share: float = 0.0
) -> tuple[list[Finding], dict[str, float]]:
    """SEED_IGNORED when every seed gave the same instance (a warning) or when the share of seeds that gave
    distinct instances (:func:`distinct_share`) is below ``min_share`` (``checker.min_distinct_instances``:
    fatal); the share as ``distinct_instance_share``."""
    measured = distinct_share(firsts, solved)
    if measured is None:
        return [], {}
    share, distinct, seeds = measured
    stats = {"distinct_instance_share": share}
    fatal = share < min_share - 1e-9
    if distinct > 1 and not fatal:
        return [], stats
    verdict = (
        f"below the required {min_share:.0%}" if fatal else f"accepted: the required share is {min_share:.0%}"
    )
    msg = (
        f"{seeds} tested seeds gave {distinct} distinct instance{'s' if distinct > 1 else ''} (a share of "
        f"{share:.0%}, {verdict}): the agent can "
        "memorise one script, so regret measured on it says nothing about reasoning. Likely cause: the "
        "instance is fixed, or built from a global RNG that reset does not seed. Fix: build the instance from "
        "self.rng in reset so each seed gives a different game."
    )
    return [finding(FindingCode.SEED_IGNORED, "exploit", msg, "fatal" if fatal else "warning")], stats


def reward_findings(
    episodes: Sequence[Episode], reward_range: tuple[float, float], stage: Stage
) -> list[Finding]:
    """REWARD_RANGE for a reward outside the checker's range (the sandbox's hard range is wider)."""
    low, high = reward_range
    for ep in episodes:
        for i, s in enumerate(ep.steps):
            if not low <= s.reward <= high:
                msg = (
                    f"step {i + 1} of {ep.policy} play (seed {ep.seed}, action {s.action[:40]!r}) "
                    f"returned reward {s.reward!r}, outside [{low}, {high}]. Fix: give 1.0 for a win, 0.0 "
                    "otherwise, and keep partial rewards inside the range."
                )
                return [finding(FindingCode.REWARD_RANGE, stage, msg)]
    return []


def step_findings(episodes: Sequence[Episode], reward_range: tuple[float, float]) -> list[Finding]:
    """Failures of random play (crash, types, NaN, range), rewards outside the checker's range, empty text."""
    failed = first_failure(list(episodes), "steps") or reward_findings(episodes, reward_range, "steps")
    if failed:
        return failed
    empty = [(ep, i) for ep in episodes for i, s in enumerate(ep.steps) if not s.observation.strip()]
    if not empty:
        return []
    ep, i = empty[0]
    msg = (
        f"step {i + 1} of {ep.policy} play returned an empty observation. Fix: always say what happened "
        "and what the agent can do next."
    )
    return [finding(FindingCode.EMPTY_OBSERVATION, "steps", msg)]


def termination_findings(episodes: Sequence[Episode], cap: int) -> list[Finding]:
    """NO_TERMINATION when an episode that did not fail ran ``cap`` steps without ending."""
    for ep in episodes:
        if ep.failure is None and not ep.ended and len(ep.steps) >= cap:
            msg = (
                f"{ep.policy} play (seed {ep.seed}) ran {len(ep.steps)} steps without terminated or "
                "truncated. Likely cause: no turn counter. Fix: count turns and set truncated=True when "
                "max_turns is reached (TextEnv.end_turn does this)."
            )
            return [finding(FindingCode.NO_TERMINATION, "termination", msg)]
    return []
