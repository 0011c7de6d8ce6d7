"""What an evaluation costs, said as it runs: the count up front, an estimate after the first episode, then
plain progress lines (for a log; on a terminal the CLI's bar shows the count instead).

The estimate is measured, not guessed: the first finished episode's wall time times the rounds the episodes
run in (``ceil(total / in_flight)``, ``in_flight`` episodes at a time). With a batching engine every episode
of a round finishes at about the same time, so the first one times a round; after the first round the
estimate is the mean time per finished episode so far. Library code: lines go to the ``write`` callable the
caller gives; nothing here prints.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from spade.evals.base import Workload, plural

EVERY_S = 30.0
"""A progress line at least this often (seconds) while a suite runs, even when nothing finished."""
EVERY_FRACTION = 0.1
"""And one each time this fraction of the episodes has finished."""


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
    """

    def __init__(
        self,
        name: str,
        workload: Workload,
        write: Callable[[str], None],
        *,
        periodic: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name, self.workload, self.write, self.periodic, self.clock = (
            name,
            workload,
            write,
            periodic,
            clock,
        )
        self.started = self.last_line = clock()
        self.first_s: float | None = None
        self.next_mark = self._step()
        write(header(name, workload))

    def __call__(self, done: int, total: int) -> None:
        """Record that ``done`` of ``total`` episodes have finished; write a line when one is due."""
        now = self.clock()
        elapsed = now - self.started
        if done >= 1 and self.first_s is None:
            self.first_s = elapsed
            self._line(now, self._first_line(elapsed))
        elif done >= total > 0:
            self._line(now, f"{self.name}: {done}/{total} episodes done in {duration(elapsed)}")
        elif self.periodic and (done >= self.next_mark or now - self.last_line >= EVERY_S):
            self._line(now, self._progress_line(done, total, elapsed))
        while self.next_mark <= done:
            self.next_mark += self._step()

    def estimate_s(self, done: int, elapsed: float) -> float | None:
        """Estimated wall time of the whole suite (None before the first episode finished)."""
        if self.first_s is None:
            return None
        if done < self.workload.in_flight:  # still in the first round: it took about first_s
            return self.first_s * self._rounds()
        return elapsed / done * self.workload.total

    def _first_line(self, elapsed: float) -> str:
        rounds, total = self._rounds(), self.workload.total
        estimate = self.estimate_s(1, elapsed) or 0.0
        how = (
            f"{plural(rounds, 'round')} of up to {self.workload.in_flight} episodes at a time"
            if self.workload.in_flight > 1
            else plural(total, "episode")
        )
        return (
            f"{self.name}: first episode done after {duration(elapsed)}; estimate ~{duration(estimate)} in all "
            f"({how}, each about as long as the first)"
        )

    def _progress_line(self, done: int, total: int, elapsed: float) -> str:
        line = (
            f"{self.name}: {done}/{total} episodes ({done / max(1, total):.0%}), {duration(elapsed)} elapsed"
        )
        estimate = self.estimate_s(done, elapsed)
        if estimate is None:
            return f"{line}, no episode finished yet"
        return f"{line}, ~{duration(max(0.0, estimate - elapsed))} left"

    def _line(self, now: float, text: str) -> None:
        self.last_line = now
        self.write(text)

    def _rounds(self) -> int:
        return math.ceil(self.workload.total / self.workload.in_flight)

    def _step(self) -> int:
        return max(1, math.ceil(self.workload.total * EVERY_FRACTION))
