"""Rungs 7–8 as pure functions of recorded episodes: feasibility, anti-exploit probes, answer leaks."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from spade.checker.dynamic import reward_findings
from spade.checker.episodes import Episode, rate
from spade.checker.failures import first_failure
from spade.checker.findings import Finding, FindingCode, finding
from spade.checker.probes import Policy
from spade.checker.rates import interval_text, undecided
from spade.envs.official import PLAN_MARKER
from spade.replies import all_boxed, normalised_answer, prose_actions, tagged_actions

Won = Callable[[Episode], bool]
"""Whether an episode was won (the run's win rule, :class:`spade.config.WinRule`)."""

DEGENERATE_KINDS = ("empty", "enumerate", "long", "format")
"""Degenerate probe policies (see :mod:`spade.checker.probes`)."""
_DEGENERATE_WHAT = {
    "empty": "empty actions",
    "enumerate": "actions listing many candidate answers at once",
    "long": "very long actions",
    "format": "malformed actions (broken markup, special numbers, control characters)",
}
_LEAK_WORDS = re.compile(
    r"(answer|solution|secret|hidden|correct|target word|code)\W{0,4}(is|was|=|:)?\W{0,3}$", re.I
)


def solution_actions(solution: list[str] | str) -> tuple[list[str], bool]:
    """The actions to play for ``solution()``'s value, and whether they are an explicit script.

    A list is a script. A string is a script when it holds ``<tool_call>``/``<answer>`` tags or
    ``\\boxed{}`` actions (each one is played in order); a short single line is played as one action but
    counts as a description (it may be prose); longer text is a description and is not played. Prose that
    an official tool environment bound to its instance (after :data:`~spade.envs.official.PLAN_MARKER`) is
    played as that plan, still as a description: evidence of feasibility, not the author's script.
    """
    if isinstance(solution, list):
        return list(solution), True
    if PLAN_MARKER in solution:
        return tagged_actions(solution.split(PLAN_MARKER, 1)[1]), False
    tagged = tagged_actions(solution)
    if tagged:
        return tagged, True
    boxed = all_boxed(solution)
    if boxed:
        return boxed, True
    return prose_actions(solution), False


def feasibility_findings(
    solved: Sequence[Episode],
    explicit: bool,
    hinted: Sequence[Episode],
    *,
    won: Won,
    min_rate: float,
    reward_range: tuple[float, float],
    return_mode: str = "final",
) -> tuple[list[Finding], dict[str, float]]:
    """SOLUTION_FAILS / SOLUTION_PARTIAL for scripts, INFEASIBLE for hinted play, NO_SOLUTION when neither.

    An explicit script that loses some seeds is rejected when it wins less than ``min_rate`` of them
    (``checker.min_solution_win_rate``; a warning otherwise); a prose plan is not held to the rate. ``won``
    judges an episode (the run's win rule), ``return_mode`` says how a losing script's return is shown.
    """
    failed = first_failure([*solved, *hinted], "feasibility")
    failed = failed or reward_findings([*solved, *hinted], reward_range, "feasibility")
    if failed:
        return failed, {}
    played = [e for e in solved if e.steps]
    wins = [won(e) for e in played]
    stats: dict[str, float] = {}
    if played:
        stats["solution_win_rate"] = rate(wins)
    if hinted:
        stats["policy_win_rate"] = rate([won(e) for e in hinted])
    if played and explicit:
        if not any(wins):
            return [_solution_fails(played, return_mode)], stats
        if not all(wins):
            return [_partial(played, wins, min_rate)], stats
        return [], stats
    if played and any(wins):
        return [_prose(played, "playing the plan read from it won")], stats
    if hinted:
        if stats["policy_win_rate"] > 0:
            return ([_prose(played, "the hint-following policy won")] if played else []), stats
        msg = (
            f"the hint-following policy won none of {len(hinted)} episodes. Likely cause: the goal is "
            "unreachable or the action format is unclear. Fix: check that a winning sequence exists and that "
            "the observation explains the action format."
        )
        return [finding(FindingCode.INFEASIBLE, "feasibility", msg)], stats
    why = "solution() returns prose that does not win when played" if played else "there is no solution()"
    msg = f"feasibility unverified: {why}. Fix: make solution() return the list of winning actions."
    return [finding(FindingCode.NO_SOLUTION, "feasibility", msg)], stats


def _partial(played: Sequence[Episode], wins: Sequence[bool], least: float) -> Finding:
    """SOLUTION_PARTIAL: fatal below ``least`` (``CheckerConfig.min_solution_win_rate``), else a warning."""
    won = rate(wins)
    lost = [e.seed for e, w in zip(played, wins, strict=True) if not w]
    fatal = won < least - 1e-9
    verdict = "below" if fatal else "at least"
    msg = (
        f"solution() won {sum(wins)} of {len(wins)} tested seeds ({won:.0%}, {verdict} the required "
        f"{least:.0%}; lost on seeds {lost}). Regret measured on an instance nobody can win is noise. Likely "
        "cause: the generator draws instances without a solution, or solution() misses a case. Fix: build "
        "each instance from a solution (or redraw until one exists) and make solution() find it."
    )
    return finding(FindingCode.SOLUTION_PARTIAL, "feasibility", msg, "fatal" if fatal else "warning")


def _prose(played: Sequence[Episode], evidence: str) -> Finding:
    interpreted = any(isinstance(e.solution, str) and PLAN_MARKER in e.solution for e in played)
    how = " (names bound from the instance)" if interpreted else ""
    msg = (
        f"solution() is prose that cannot be played as written; feasibility rests on other evidence: "
        f"{evidence}{how}. Fix: return the list of winning actions (<tool_call>/<answer> strings)."
    )
    return finding(FindingCode.SOLUTION_PROSE, "feasibility", msg)


def _solution_fails(played: Sequence[Episode], return_mode: str) -> Finding:
    ep = played[0]
    end = (
        "the script ran out before the episode ended"
        if not ep.ended
        else f"it ended with return {ep.episode_return(return_mode):g}"
        + (" (truncated)" if not ep.terminated else "")
    )
    last = ep.steps[-1].observation[:160] if ep.steps else ""
    msg = (
        f"playing solution() did not win on any of {len(played)} seeds: on seed {ep.seed}, {end}; last "
        f"observation: {last!r}. Likely cause: the solution and the win check disagree (action format, "
        "off-by-one, stale state). Fix: make solution() return actions that step() accepts and that win."
    )
    return finding(FindingCode.SOLUTION_FAILS, "feasibility", msg)


@dataclass(frozen=True, slots=True)
class LeakSlot:
    """Where a winning answer sits in the first observation: right after ``prefix``."""

    prefix: str
    words: int
    """How many whitespace-separated words the answer has."""
    wrapper: tuple[str, str]
    """Text the winning action put before and after the answer (tags, ``\\boxed{``)."""
    seed: int
    answer: str


def leak_slot(won: Sequence[Episode]) -> LeakSlot | None:
    """A template slot that held the winning answer: the same 12 characters precede it on every won seed
    (at least two, with different answers), or a word such as 'answer' or 'secret' precedes it."""
    answers = [(e, e.steps[-1].action, normalised_answer(e.steps[-1].action)) for e in won if e.steps]
    answers = [(e, a, n) for e, a, n in answers if n]
    contexts: list[set[str]] = []
    for ep, _, answer in answers:
        pattern = re.compile(r"(?<![\w.])" + re.escape(answer) + r"(?!\w)")
        contexts.append(
            {ep.first_obs[max(0, m.start() - 12) : m.start()] for m in pattern.finditer(ep.first_obs)}
        )
    prefix: str | None = None
    if len(answers) >= 2 and len({n for _, _, n in answers}) >= 2 and all(contexts):
        common = sorted(set.intersection(*contexts), key=len, reverse=True)
        prefix = common[0] if common and common[0].strip() else None
    if prefix is None:
        keyed = [c for ctx in contexts for c in sorted(ctx) if _LEAK_WORDS.search(c)]
        prefix = keyed[0] if keyed else None
    if prefix is None:
        return None
    ep, action, answer = next(
        (a for a, ctx in zip(answers, contexts, strict=True) if prefix in ctx), answers[0]
    )
    before, _, after = action.partition(answer)
    return LeakSlot(prefix, len(answer.split()), (before, after), ep.seed, answer)


def copy_policy(slot: LeakSlot) -> Policy:
    """Answer with whatever the first observation shows in ``slot`` (None when it shows no such slot)."""
    copied: list[str] = []

    def act(observation: str, turn: int) -> str | None:
        if turn == 0:
            at = observation.find(slot.prefix)
            if at < 0:
                return None
            words = observation[at + len(slot.prefix) :].split()[: slot.words]
            copied.append(" ".join(words).rstrip(".,;:!?)]}\"'"))
        return slot.wrapper[0] + copied[0] + slot.wrapper[1] if copied else None

    return act


def leak_findings(slot: LeakSlot, copied: Episode, won: Won) -> list[Finding]:
    """ANSWER_LEAK when copying the slot's text won an unseen instance."""
    if not won(copied):
        return []
    msg = (
        f"the first observation prints the winning answer: on seed {slot.seed} the answer {slot.answer!r} "
        f"follows {slot.prefix!r}, and copying what follows it won seed {copied.seed} too. Fix: keep the "
        "answer in the hidden state and show only what the agent must reason from."
    )
    return [finding(FindingCode.ANSWER_LEAK, "exploit", msg)]


def unconfirmed(
    groups: dict[str, list[Episode]], *, won: Won, max_success: float, min_wins: int
) -> list[tuple[str, Episode]]:
    """Probe groups over the win-rate limit (``max_success``) on fewer than ``min_wins`` wins, each with a
    winning episode: one lucky win among a few episodes is not yet evidence, so the caller replays that
    policy."""
    out = []
    for group in ("constant", *DEGENERATE_KINDS):
        episodes = [e for e in groups.get(group, []) if e.failure is None]
        wins = [e for e in episodes if won(e)]
        if wins and len(wins) / len(episodes) > max_success and len(wins) < min_wins:
            out.append((group, wins[0]))
    return out


_EXPLOIT_CHECKS = (
    ("constant", FindingCode.EXPLOITABLE_CONSTANT, "sending one fixed string every turn"),
    *((k, FindingCode.EXPLOITABLE_DEGENERATE, _DEGENERATE_WHAT[k]) for k in DEGENERATE_KINDS),
    ("random", FindingCode.EXPLOITABLE_RANDOM, "random actions"),
    ("guess", FindingCode.EXPLOITABLE_RANDOM, "guessing numbers in the range shown, ignoring the feedback,"),
)
"""(probe group, finding, what the probe did): the groups judged on their own win rate, in order."""


def exploit_findings(
    groups: dict[str, list[Episode]], *, won: Won, max_success: float, min_wins: int, confidence: float = 0.99
) -> tuple[list[Finding], dict[str, float]]:
    """EXPLOITABLE_* when one probe policy wins more than ``max_success`` of its episodes, and at least
    ``min_wins`` of them (``checker.exploit_max_success``, ``checker.exploit_min_wins``); the message gives
    the estimate and its ``confidence`` Wilson interval (``checker.exploit_confidence``). The ladder has
    played random play and number guessing on until their interval cleared the limit or reached the cap
    (:func:`spade.checker.rates.top_up`), so the estimate decides only near the limit.

    ``groups`` maps a policy to its episodes: ``constant``, the degenerate kinds (``empty``, ``enumerate``,
    ``long``, ``format``), ``random``, ``guess`` (random numbers in the range the first observation shows)
    and ``replay``. Each degenerate kind is judged on its own, so one kind that always wins is not diluted
    by the others.
    """
    win = {k: [won(e) for e in v if e.failure is None] for k, v in groups.items()}
    degenerate = [w for k in DEGENERATE_KINDS for w in win.get(k, [])]
    stats = {f"{k}_win_rate": rate(v) for k, v in win.items() if v and k not in DEGENERATE_KINDS}
    if degenerate:
        stats["degenerate_win_rate"] = rate(degenerate)
    limit = max_success
    for group, code, what in _EXPLOIT_CHECKS:
        if win.get(group) and rate(win[group]) > limit and sum(win[group]) >= min_wins:
            winner = next(e for e in groups[group] if won(e))
            wins, played = sum(win[group]), len(win[group])
            close = " (the interval holds the limit: the estimate decided)" if undecided(
                wins, played, limit, confidence) else ""  # fmt: skip
            msg = (
                f"{what} won {wins} of {played} episodes ({interval_text(wins, played, confidence)}; limit "
                f"{limit:.0%}){close}; e.g. {winner.policy} play on seed {winner.seed} won with "
                f"{winner.steps[-1].action[:60]!r}. "
                "Likely cause: the win check accepts answers it should not (substring tests, empty input, "
                "default values) or the answer space is tiny. Fix: compare the parsed answer exactly with "
                "the hidden one and make guessing unlikely to win."
            )
            return [finding(code, "exploit", msg)], stats
    if len(win.get("replay", [])) >= 2 and all(win["replay"]):
        return [_fixed_solution(groups["replay"])], stats
    return [], stats


def _fixed_solution(replays: list[Episode]) -> Finding:
    seeds = ", ".join(str(e.seed) for e in replays)
    msg = (
        f"the winning action sequence of one seed also wins seeds {seeds}: the agent can memorise one "
        "script instead of reasoning. Fix: make the instance (and so the solution) depend on the seed."
    )
    return finding(FindingCode.FIXED_SOLUTION, "exploit", msg)
