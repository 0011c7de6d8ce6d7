"""What an evaluation costs, said as it runs: the count up front, a rough estimate within seconds, a
measured one once a round of episodes is done, then plain progress lines (for a log; on a terminal the CLI's
bar shows the count instead).

Estimates, in the order they come:

- **Rough, up front** (:class:`Estimate`, from the runner's probe of the engine: a batch of ``in_flight``
  short requests timed before the suite runs, :func:`spade.evals.policies.probe_rate`): the rounds the
  episodes run in (``ceil(total / in_flight)``) × the tokens an episode may generate
  (:func:`episode_tokens`: every reply at its budget) ÷ the probed tokens per second. Generation time only:
  replies that end early make the suite faster, while long prompts (a multi-turn episode's growing context)
  and the environments' own time make it slower, so it can be several times off either way; it says so.
- **Measured, after a round**: once ``in_flight`` episodes are done, the mean wall time per finished episode
  so far × the total. A batching engine's first round is not like the rest (its episodes start together,
  the short ones finish first), so the estimate is called rough until :data:`FIRM_ROUNDS` rounds' worth (or
  three quarters of the episodes) are done. A single finished episode is never extrapolated.

Library code: lines go to the ``write`` callable the caller gives; nothing here prints.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from spade.config import EvalOptions
from spade.evals.base import Workload, plural

EVERY_S = 30.0
"""A progress line at least this often (seconds) while a suite runs, even when nothing finished."""
EVERY_FRACTION = 0.1
"""And one each time this fraction of the episodes has finished."""
FIRM_ROUNDS = 3
"""A measured estimate is rough until this many rounds' worth of episodes are done (or three quarters of
them, for a suite of fewer rounds)."""


@dataclass(frozen=True, slots=True)
class Estimate:
    """A rough estimate of a suite's wall time, known before any episode finished."""

    seconds: float
    how: str
    """How it came about, e.g. ``2 rounds × up to 1024 tokens at 410 tokens/s (engine probe, 32 in flight)``."""


def rough_estimate(work: Workload, tokens_per_episode: int, tokens_per_s: float) -> Estimate:
    """The up-front estimate of ``work``: its rounds × ``tokens_per_episode`` at ``tokens_per_s`` (the rate
    of a batch of ``work.in_flight`` sequences)."""
    rounds = math.ceil(work.total / work.in_flight)
    return Estimate(
        rounds * tokens_per_episode / max(tokens_per_s, 1e-9),
        f"{plural(rounds, 'round')} × up to {plural(tokens_per_episode, 'token')} at {tokens_per_s:.0f} "
        f"tokens/s (engine probe, {work.in_flight} in flight)",
    )


def episode_tokens(suite: str, opts: EvalOptions) -> int:
    """The most tokens one episode of ``suite`` generates under ``opts``: every reply at its budget."""
    if suite == "envs":
        from spade.evals.envs import play_config  # noqa: PLC0415 - the envs suite's own reading of its params

        cfg = play_config(opts)
        return min(cfg.max_turns * cfg.turn_tokens, cfg.context_tokens)
    if suite in ("code", "livecodebench"):  # one reply per problem
        return opts.max_tokens
    return max(1, opts.max_turns) * opts.max_tokens


def duration(seconds: float) -> str:
    """``0.4 s``, ``41 s``, ``2 min 5 s``, ``1 h 3 min``."""
    if seconds < 9.95:
        return f"{max(0.0, seconds):.1f} s"
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


def header(name: str, w: Workload) -> str:
    """The count of a suite before it runs, saying how ``--limit`` made it."""
    return (
        f"{name}: {plural(w.items, 'item')} ({w.counted}) × {plural(w.episodes, 'episode')} = "
        f"{plural(w.total, 'episode')}, {w.in_flight} at a time (--concurrency)"
    )


class ProgressLog:
    """A :data:`~spade.evals.base.Progress` callback that writes lines about one suite.

    Args:
        name: the suite.
        workload: what it runs (its header is written at once).
        write: receives each line.
        periodic: also write a line every :data:`EVERY_FRACTION` of the episodes or :data:`EVERY_S` seconds
            (for a log; off under a progress bar, which shows the count).
        clock: seconds, monotonic (tests pass a fake one).
        prior: the rough estimate written after the header, and used until a round's worth of episodes is
            done (None: no estimate before then).
    """

    def __init__(
        self,
        name: str,
        workload: Workload,
        write: Callable[[str], None],
        *,
        periodic: bool = True,
        clock: Callable[[], float] = time.monotonic,
        prior: Estimate | None = None,
    ) -> None:
        self.name, self.workload, self.write, self.periodic, self.clock = (
            name,
            workload,
            write,
            periodic,
            clock,
        )
        self.prior = prior
        self.started = self.last_line = clock()
        self.first_s: float | None = None
        self.measured = False  # the line of the first measured estimate is written
        self.next_mark = self._step()
        write(header(name, workload))
        if prior is not None:
            write(
                f"{name}: rough estimate ~{duration(prior.seconds)} in all ({prior.how}: generation only, "
                f"long prompts add to it, short replies take less); measured once "
                f"{plural(self._round(), 'episode')} are done"
            )

    def __call__(self, done: int, total: int) -> None:
        """Record that ``done`` of ``total`` episodes have finished; write a line when one is due."""
        now = self.clock()
        elapsed = now - self.started
        if done >= total > 0:
            self._line(now, f"{self.name}: {done}/{total} episodes done in {duration(elapsed)}")
        elif done >= self._round() and not self.measured:
            self.measured = True
            self._line(now, self._measured_line(done, elapsed))
        elif done >= 1 and self.first_s is None:
            self._line(now, self._first_line(elapsed))
        elif self.periodic and (done >= self.next_mark or now - self.last_line >= EVERY_S):
            self._line(now, self._progress_line(done, total, elapsed))
        if done >= 1 and self.first_s is None:
            self.first_s = elapsed
        while self.next_mark <= done:
            self.next_mark += self._step()

    def estimate_s(self, done: int, elapsed: float) -> float | None:
        """Estimated wall time of the whole suite: measured once a round's worth of episodes is done, else the
        rough up-front estimate (None without one)."""
        if done >= self._round():
            return elapsed / done * self.workload.total
        return self.prior.seconds if self.prior is not None else None

    def firm(self, done: int) -> bool:
        """Whether the estimate is no longer rough: :data:`FIRM_ROUNDS` rounds' worth or three quarters of the
        episodes are done."""
        return done >= self._firm_count()

    def _first_line(self, elapsed: float) -> str:
        return (
            f"{self.name}: first episode done after {duration(elapsed)}; a measured estimate follows once "
            f"{plural(self._round(), 'episode')} are done"
        )

    def _measured_line(self, done: int, elapsed: float) -> str:
        estimate = self.estimate_s(done, elapsed) or 0.0
        rough = "" if self.firm(done) else f"; rough until {self._firm_count()} are done"
        return (
            f"{self.name}: {done}/{self.workload.total} episodes done after {duration(elapsed)}; estimate "
            f"~{duration(estimate)} in all (measured: the time per episode so far{rough})"
        )

    def _progress_line(self, done: int, total: int, elapsed: float) -> str:
        line = (
            f"{self.name}: {done}/{total} episodes ({done / max(1, total):.0%}), {duration(elapsed)} elapsed"
        )
        estimate = self.estimate_s(done, elapsed)
        if estimate is None:
            return f"{line}, {'no episode finished yet' if done == 0 else 'no estimate yet'}"
        rough = "" if self.firm(done) else " (rough)"
        return f"{line}, ~{duration(max(0.0, estimate - elapsed))} left{rough}"

    def _line(self, now: float, text: str) -> None:
        self.last_line = now
        self.write(text)

    def _round(self) -> int:
        """Episodes in a round: the first measured estimate waits for this many."""
        return min(self.workload.in_flight, self.workload.total)

    def _firm_count(self) -> int:
        return min(FIRM_ROUNDS * self.workload.in_flight, math.ceil(self.workload.total * 3 / 4))

    def _step(self) -> int:
        return max(1, math.ceil(self.workload.total * EVERY_FRACTION))
