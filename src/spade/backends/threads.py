"""How many CPU threads torch gets in this process: ``--model.threads``, or the cores that are free now.

torch's default is one thread per core. On a machine where another process already keeps some of the
cores busy, that many OpenMP threads fight it for the same cores, and every parallel region waits for its
slowest thread: with one other torch process on 2 cores, a cpu-tiny warm start of 5 optimiser steps took
884 s where one thread takes about a third of that. So when neither ``--model.threads`` nor
``OMP_NUM_THREADS`` says how many, a process takes the cores it may run on (``sched_getaffinity``), shared
among the ranks a launch starts on this node (``LOCAL_WORLD_SIZE``), less the cores the 1-minute load
average says are busy, and at least one; where the load cannot be read, one. The choice is made once per
process (the engine and the trainer share torch's thread pool) and said on the console
(:meth:`ThreadChoice.line`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

Source = Literal["free cores", "--model.threads", "OMP_NUM_THREADS", "no load reading"]


@dataclass(frozen=True, slots=True)
class ThreadChoice:
    """torch's thread count for this process and what it was chosen from."""

    threads: int
    cores: int
    """CPU cores this process may run on, its share among the ranks of a launch on this node."""
    busy: int
    """Of those, the cores the load average counts as busy (0 where the count was given, not chosen)."""
    source: Source

    def line(self) -> str:
        """The console line, e.g. ``torch threads: 1 (2 cores, 1 busy)``."""
        if self.source == "free cores":
            return f"torch threads: {self.threads} ({self.cores} cores, {self.busy} busy)"
        return f"torch threads: {self.threads} ({self.source})"


def usable_cores() -> int:
    """Cores this process may run on, shared among the ranks of a launch on this node (at least 1)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity call on this platform
        cores = os.cpu_count() or 1
    ranks = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1))
    return max(1, cores // ranks)


def choose(requested: int, *, cores: int, load: float | None, omp: str | None = None) -> ThreadChoice:
    """The thread count for ``requested`` (``--model.threads``; 0: choose), pure.

    Args:
        requested: ``model.threads``; a positive count is taken as it is.
        cores: :func:`usable_cores`.
        load: the 1-minute load average (None: unreadable, which gives one thread).
        omp: ``OMP_NUM_THREADS``; a positive count set there is taken as it is.
    """
    if requested > 0:
        return ThreadChoice(requested, cores, 0, "--model.threads")
    if omp is not None and omp.strip().isdigit() and int(omp) > 0:
        return ThreadChoice(int(omp), cores, 0, "OMP_NUM_THREADS")
    if load is None:
        return ThreadChoice(1, cores, 0, "no load reading")
    busy = min(cores, max(0, round(load)))
    return ThreadChoice(max(1, cores - busy), cores, busy, "free cores")


def load_average() -> float | None:
    """The 1-minute load average of this machine, or None where it cannot be read."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


_CHOSEN: list[ThreadChoice] = []
"""The choice made for ``requested=0`` in this process (at most one element)."""


def set_threads(requested: int) -> ThreadChoice:
    """Give torch ``requested`` threads, or for 0 the free cores' count (chosen once per process); returns
    the choice. Imports torch."""
    import torch  # noqa: PLC0415 - only backends that compute with torch call this

    if requested > 0:
        choice = choose(requested, cores=usable_cores(), load=None)
    else:
        if not _CHOSEN:
            omp = os.environ.get("OMP_NUM_THREADS")
            _CHOSEN.append(choose(0, cores=usable_cores(), load=load_average(), omp=omp))
        choice = _CHOSEN[0]
    if torch.get_num_threads() != choice.threads:
        torch.set_num_threads(choice.threads)
    return choice
