"""Pure statistics of evaluation results: means, bootstrap intervals over items, category rollups, pairing.

Every interval is a percentile bootstrap over *items*, drawn from a generator with a fixed seed, so the
same results always give the same interval. When items have several episodes the bootstrap is two-level
(resample items, then each drawn item's episodes), so the interval also carries the sampling noise of the
episodes; with one episode per item it is the plain item bootstrap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from spade.evals.base import ItemResult

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
MEASURES = ("process",)
"""Secondary per-episode scores a suite may keep in an item's ``detail`` (a list, one value per episode;
ACEBench's process accuracy): summarised beside the primary score as ``measures``."""


@dataclass(frozen=True, slots=True)
class Score:
    """A mean over items with its 95% bootstrap interval."""

    n: int
    """Scored episodes (items × episodes)."""
    items: int
    score: float
    ci95: tuple[float, float]

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe fields."""
        return {"n": self.n, "items": self.items, "score": self.score, "ci95": list(self.ci95)}


@dataclass(frozen=True, slots=True)
class SuiteSummary:
    """One suite's figures: overall, per category and per task (when items name one)."""

    suite: str
    total: Score
    by_category: dict[str, Score]
    by_task: dict[str, Score] = field(default_factory=dict)
    errors: int = 0
    """Episodes that failed (environment, model or harness error); they score 0 and stay in ``n``."""
    measures: dict[str, Score] = field(default_factory=dict)
    """Secondary scores (:data:`MEASURES`) over the items that carry them, e.g. ``process``."""

    @property
    def measures_nothing(self) -> bool:
        """True when every item scored 0: the suite cannot tell this policy from a worse one."""
        return self.total.items > 0 and self.total.score == 0.0

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` object: ``suite``, ``n``, ``score``, ``ci95``, ``by_category`` (+ extras)."""
        return {
            "suite": self.suite,
            **self.total.to_dict(),
            "errors": self.errors,
            "by_category": {k: v.to_dict() for k, v in self.by_category.items()},
            "by_task": {k: v.to_dict() for k, v in self.by_task.items()},
            "measures": {k: v.to_dict() for k, v in self.measures.items()},
        }


def bootstrap_ci(
    values: Sequence[float], resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float]:
    """Percentile 95% interval of the mean of ``values`` (each value one item); a point for < 2 values."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return (0.0, 0.0)
    if x.size == 1 or np.all(x == x[0]):
        return (float(x[0]), float(x[0]))
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(resamples, x.size))].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return (float(lo), float(hi))


def score_items(items: Sequence[ItemResult]) -> Score:
    """Mean of item scores with its bootstrap interval."""
    per_item = [r.score for r in items]
    mean = float(np.mean(per_item)) if per_item else 0.0
    ci = item_bootstrap_ci([r.scores for r in items])
    return Score(sum(len(r.scores) for r in items), len(items), mean, ci)


def _episode_means(
    groups: Sequence[Sequence[float]], idx: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """For item indices ``idx`` (R, n): the mean of a with-replacement resample of each item's episodes."""
    counts = np.array([max(len(g), 1) for g in groups])
    width = int(counts.max())
    table = np.zeros((len(groups), width))
    for i, g in enumerate(groups):
        table[i, : len(g)] = g
    c = counts[idx]
    picks = (rng.random((*idx.shape, width)) * c[..., None]).astype(np.int64)
    values = table[idx[..., None], picks]
    mask = np.arange(width) < c[..., None]
    means: np.ndarray = (values * mask).sum(axis=-1) / c
    return means


def item_bootstrap_ci(
    groups: Sequence[Sequence[float]],
    minus: Sequence[Sequence[float]] | None = None,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float]:
    """95% interval of the mean item score (two-level bootstrap: items, then episodes within each item).

    With ``minus`` (the same items in the same order), of the mean paired difference ``groups − minus``.
    """
    n = len(groups)
    if n == 0:
        return (0.0, 0.0)
    rng = np.random.default_rng(seed)
    stats = []
    for start in range(0, resamples, 250):  # chunks bound memory for large suites
        idx = rng.integers(0, n, size=(min(250, resamples - start), n))
        values = _episode_means(groups, idx, rng)
        if minus is not None:
            values = values - _episode_means(minus, idx, rng)
        stats.append(values.mean(axis=1))
    lo, hi = np.percentile(np.concatenate(stats), [2.5, 97.5])
    return (float(lo), float(hi))


def _grouped(items: Sequence[ItemResult], key: Any) -> dict[str, Score]:
    groups: dict[str, list[ItemResult]] = {}
    for r in items:
        k = key(r)
        if k:
            groups.setdefault(str(k), []).append(r)
    return {k: score_items(v) for k, v in sorted(groups.items())}


def summarise(suite: str, items: Sequence[ItemResult]) -> SuiteSummary:
    """Overall, per-category and per-task scores of one suite's item results."""
    errors = sum(int(r.detail.get("errors", 0)) for r in items)
    return SuiteSummary(
        suite=suite,
        total=score_items(items),
        by_category=_grouped(items, lambda r: r.category),
        by_task=_grouped(items, lambda r: r.detail.get("task", "")),
        errors=errors,
        measures=_measures(items),
    )


def _measures(items: Sequence[ItemResult]) -> dict[str, Score]:
    """Each :data:`MEASURES` score over the items whose ``detail`` holds it as per-episode values."""
    out = {}
    for name in MEASURES:
        scored = [
            replace(r, scores=tuple(float(v) for v in r.detail[name]))
            for r in items
            if isinstance(r.detail.get(name), list) and r.detail[name]
        ]
        if scored:
            out[name] = score_items(scored)
    return out


@dataclass(frozen=True, slots=True)
class PairedDiff:
    """Per-item differences ``b − a`` over the items both results scored."""

    paired: int
    a: float
    b: float
    diff: float
    ci95: tuple[float, float]

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe fields."""
        return {"paired": self.paired, "a": self.a, "b": self.b, "diff": self.diff, "ci95": list(self.ci95)}


def paired_diff(a: Mapping[str, Sequence[float]], b: Mapping[str, Sequence[float]]) -> PairedDiff:
    """Mean item scores of ``a`` and ``b`` (item id -> episode scores) on their common items, and the
    two-level bootstrap interval of the mean paired difference ``b − a``."""
    common = sorted(set(a) & set(b))
    xa = [_mean(a[k]) for k in common]
    xb = [_mean(b[k]) for k in common]
    d = [y - x for x, y in zip(xa, xb, strict=True)]
    ci = item_bootstrap_ci([b[k] for k in common], minus=[a[k] for k in common])
    return PairedDiff(len(common), _mean(xa), _mean(xb), _mean(d), ci)


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if values else 0.0
