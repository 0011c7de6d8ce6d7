"""The evaluation contract shared by every suite: options in, one result per scored item out.

A suite turns a :class:`~spade.types.Policy` and :class:`~spade.config.EvalOptions` into a list of :class:`ItemResult`
(one per item, each holding the scores of its episodes). Aggregation (means, bootstrap intervals, category
rollups), output files and the CLI live elsewhere and work the same for every suite.

Evaluation seeds never overlap training seeds: training draws episode seeds from ``[0, 2**31)``
(:func:`spade.play.rollout.episode_seeds`), evaluation from ``[2**31, 2**32)`` (:func:`eval_seed`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from spade.config import EvalOptions
from spade.errors import SpadeError
from spade.types import Policy, plural

__all__ = [
    "EVAL_SEED_BASE",
    "EvalError",
    "EvalOptions",
    "ItemResult",
    "Progress",
    "Suite",
    "Workload",
    "eval_seed",
    "plural",
]

EVAL_SEED_BASE = 2**31
"""Every evaluation seed is at least this; every training episode seed is below it."""


class EvalError(SpadeError):
    """A suite cannot run as asked (unknown suite or task, missing optional package, bad option)."""


@dataclass(frozen=True, slots=True)
class ItemResult:
    """The outcome of one item: one score in [0, 1] per episode, and what is needed to read it back."""

    suite: str
    item_id: str
    """Stable across runs with the same options, so two policies' results pair up item by item."""
    category: str
    scores: tuple[float, ...]
    detail: dict[str, Any] = field(default_factory=dict)
    """JSON-safe: the prompt, the replies, the expected answer, an error; written to the per-item JSONL."""

    @property
    def score(self) -> float:
        """Mean over the item's episodes (0 when none was scored)."""
        return sum(self.scores) / len(self.scores) if self.scores else 0.0


Progress = Callable[[int, int], None]
"""Called with (episodes done, episodes total): once before the first episode, after each episode, and (by
:func:`spade.evals.runner.arun`) again with unchanged counts while nothing finishes, as a heartbeat."""


@dataclass(frozen=True, slots=True)
class Workload:
    """What a suite is about to run, known before any model work: the count printed up front."""

    items: int
    episodes: int
    """Scored episodes per item."""
    counted: str
    """How ``items`` comes about, e.g. ``2 per task × 32 tasks`` (``--limit`` counts per task there)."""
    in_flight: int
    """Episodes run at once: ``opts.concurrency``, at most every episode."""

    @classmethod
    def of(cls, items: int, counted: str, opts: EvalOptions) -> Workload:
        """The workload of ``items`` items under ``opts`` (episodes per item, concurrency)."""
        return cls(items, opts.episodes, counted, max(1, min(opts.concurrency, items * opts.episodes)))

    @property
    def total(self) -> int:
        """Episodes in all."""
        return self.items * self.episodes


class Suite(Protocol):
    """A held-out benchmark.

    A suite may also define ``check(self, opts: EvalOptions) -> None`` raising :class:`EvalError` for a bad
    selection (unknown task, rejected parameter); the runner calls it before any model is loaded. Every suite
    here defines ``workload(self, opts: EvalOptions) -> Workload``, the count shown before it runs.
    """

    name: str

    async def run(self, policy: Policy, opts: EvalOptions, progress: Progress) -> list[ItemResult]:
        """Score every selected item; a failed episode scores 0 and says why in ``detail``, never raises."""
        ...


def eval_seed(seed: int, suite: str, item: str | int, episode: int = 0) -> int:
    """A seed in ``[2**31, 2**32)`` for one episode of one item; disjoint from every training seed."""
    digest = hashlib.sha256(f"eval/{seed}/{suite}/{item}/{episode}".encode()).digest()
    return EVAL_SEED_BASE + (int.from_bytes(digest[:4], "big") & 0x7FFFFFFF)
