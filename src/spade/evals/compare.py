"""Compare evaluation results item by item: paired differences with bootstrap intervals.

Results pair up on ``(suite, item_id)``; item ids encode the instance (task configuration, environment
source hash), so only identical items are compared. Every further input is compared with the first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spade.evals.base import EvalError
from spade.evals.results import StoredResults, resolve_results
from spade.evals.stats import PairedDiff, paired_diff


@dataclass(frozen=True, slots=True)
class Comparison:
    """One suite of result ``b`` against the baseline ``a``, overall and per category."""

    suite: str
    a: str
    b: str
    total: PairedDiff
    by_category: dict[str, PairedDiff]

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` object (``a``/``b`` are the mean scores; ``a_results``/``b_results`` the inputs)."""
        return {
            "suite": self.suite,
            "a_results": self.a,
            "b_results": self.b,
            **self.total.to_dict(),
            "by_category": {k: v.to_dict() for k, v in self.by_category.items()},
        }


def compare_results(a: StoredResults, b: StoredResults) -> list[Comparison]:
    """Every suite the two results share, compared item by item."""
    out = []
    for suite in sorted(set(a.items) & set(b.items)):
        ia, ib = a.items[suite], b.items[suite]
        common = set(ia) & set(ib)
        cats = sorted({ia[k].category for k in common})
        by_cat = {
            c: paired_diff(
                {k: r.scores for k, r in ia.items() if r.category == c},
                {k: r.scores for k, r in ib.items() if r.category == c},
            )
            for c in cats
        }
        total = paired_diff({k: r.scores for k, r in ia.items()}, {k: r.scores for k, r in ib.items()})
        out.append(Comparison(suite, str(a.folder), str(b.folder), total, by_cat))
    return out


def compare_paths(paths: Sequence[Path]) -> list[Comparison]:
    """Compare results folders or run directories (each with the first).

    Raises:
        EvalError: fewer than two inputs, an unreadable input, or no shared suite or item.
    """
    if len(paths) < 2:
        raise EvalError("give at least two runs or results folders to compare")
    loaded = [resolve_results(p) for p in paths]
    comparisons = [c for other in loaded[1:] for c in compare_results(loaded[0], other)]
    if not comparisons or all(c.total.paired == 0 for c in comparisons):
        raise EvalError(
            "the inputs share no evaluated item: evaluate them on the same suites, tasks, parameters and "
            "--seed (item ids encode the instance)"
        )
    return comparisons
