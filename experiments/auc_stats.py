"""Statistics of the learning-curve experiment (``curriculum_auc.py``): the area under the held-out curve,
the interquartile mean, and stratified bootstrap intervals over seeds (as rliable computes them).

A run's curve is its held-out score at each sampled-token mark: the mean over the suite's items of the
item's mean episode value (``return``: the environment's own return, or ``win``: 1 for a won episode). Its
**area** is the mean of that curve over the marks (every mark weighs the same; the marks are the same for
every arm). An arm's score is the mean, or the interquartile mean, of its seeds' areas.

Intervals are percentile intervals of a two-level bootstrap: seeds with replacement within each arm (the
strata), then items with replacement, the same items for every arm and mark (items are shared, so a
comparison stays paired). A paired difference ``b - a`` resamples seeds as pairs: within one seed both
arms start from the same warm start and play the same items and evaluation seeds, so the seed's
difference is the unit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

RESAMPLES = 2000
BOOTSTRAP_SEED = 0
Endpoint = Literal["return", "win"]
Record = Mapping[str, Any]
"""One run's record (``<arm>-s<seed>.json``): ``marks`` is a list of ``{mark, sampled_tokens, items}``,
``items`` maps an item id to ``{"return": [...], "win": [...]}``, one value per episode."""


@dataclass(frozen=True, slots=True)
class Estimate:
    """A point estimate with its 95% interval, over ``seeds`` seeds (pairs, for a difference) and ``items``."""

    value: float
    lo: float
    hi: float
    seeds: int
    items: int

    @property
    def half_width(self) -> float:
        """Half the interval's width."""
        return (self.hi - self.lo) / 2

    @property
    def verdict(self) -> str:
        """For a difference: 'better' when the interval lies above 0, 'worse' below, else no difference."""
        return "better" if self.lo > 0 else "worse" if self.hi < 0 else "no significant difference"


def iqm(values: Sequence[float] | np.ndarray, axis: int = -1) -> Any:
    """The interquartile mean: the mean of what is left after cutting ``floor(n / 4)`` values from each end
    (rliable's ``scipy.stats.trim_mean(x, 0.25)``; with fewer than 4 values, the mean)."""
    x = np.sort(np.asarray(values, dtype=float), axis=axis)
    n = x.shape[axis]
    cut = int(0.25 * n)
    return np.take(x, np.arange(cut, n - cut), axis=axis).mean(axis=axis)


def mean(values: Sequence[float] | np.ndarray, axis: int = -1) -> Any:
    """The plain mean (the aggregate beside :func:`iqm`)."""
    return np.asarray(values, dtype=float).mean(axis=axis)


AGGREGATES: dict[str, Callable[..., Any]] = {"mean": mean, "iqm": iqm}


def common_items(records: Sequence[Record]) -> list[str]:
    """Item ids every mark of every record scored (sorted)."""
    sets = [set(m["items"]) for r in records for m in r["marks"]]
    return sorted(set.intersection(*sets)) if sets else []


def item_curves(record: Record, items: Sequence[str], endpoint: Endpoint) -> np.ndarray:
    """``(marks, items)``: each item's mean episode value at each mark of the record."""
    return np.array([[float(np.mean(m["items"][i][endpoint])) for i in items] for m in record["marks"]])


def item_areas(record: Record, items: Sequence[str], endpoint: Endpoint, final: bool = False) -> np.ndarray:
    """``(items,)``: each item's area under the curve (mean over marks), or with ``final`` its last-mark value.
    The run's area is their mean (the mean over marks and the mean over items commute)."""
    curves = item_curves(record, items, endpoint)
    out: np.ndarray = curves[-1] if final else curves.mean(axis=0)
    return out


def area(record: Record, items: Sequence[str], endpoint: Endpoint = "return") -> float:
    """The run's area under its held-out curve: the mean over marks of the mean item score."""
    return float(item_areas(record, items, endpoint).mean())


def _bootstrap(
    tables: Sequence[np.ndarray], stat: Callable[[list[np.ndarray]], np.ndarray], paired: bool, seed: int
) -> tuple[float, float]:
    """Percentile interval of ``stat`` over resamples of ``tables`` (each ``(seeds, items)``): seeds within
    each table (the same seeds for all when ``paired``), then items, the same for all tables."""
    rng = np.random.default_rng(seed)
    n_items = tables[0].shape[1]
    out = []
    for start in range(0, RESAMPLES, 500):  # chunks bound memory
        r = min(500, RESAMPLES - start)
        items_RN = rng.integers(0, n_items, size=(r, n_items))
        shared = rng.integers(0, tables[0].shape[0], size=(r, tables[0].shape[0])) if paired else None
        resampled = []
        for t in tables:
            seeds_RS = shared if shared is not None else rng.integers(0, t.shape[0], size=(r, t.shape[0]))
            runs_RS = np.take_along_axis(t[seeds_RS], items_RN[:, None, :], axis=2).mean(axis=2)
            resampled.append(runs_RS)
        out.append(stat(resampled))
    lo, hi = np.percentile(np.concatenate(out), [2.5, 97.5])
    return float(lo), float(hi)


def arm_estimate(table: np.ndarray, aggregate: str = "mean", seed: int = BOOTSTRAP_SEED) -> Estimate:
    """An arm's score from ``table`` ``(seeds, items)`` of per-item values: the aggregate over seeds of the
    seeds' mean item value, with its stratified bootstrap interval."""
    agg = AGGREGATES[aggregate]
    lo, hi = _bootstrap([table], lambda t: agg(t[0], axis=1), paired=False, seed=seed)
    return Estimate(float(agg(table.mean(axis=1))), lo, hi, table.shape[0], table.shape[1])


def paired_estimate(
    a: np.ndarray, b: np.ndarray, aggregate: str = "mean", seed: int = BOOTSTRAP_SEED
) -> Estimate:
    """``b - a`` from two ``(seeds, items)`` tables whose rows are the same seeds: the aggregate over seeds of
    the seeds' differences, with its paired bootstrap interval."""
    if a.shape != b.shape:
        raise ValueError(f"paired tables must have the same seeds and items (got {a.shape} and {b.shape})")
    agg = AGGREGATES[aggregate]
    lo, hi = _bootstrap([a, b], lambda t: agg(t[1] - t[0], axis=1), paired=True, seed=seed)
    value = float(agg(b.mean(axis=1) - a.mean(axis=1)))
    return Estimate(value, lo, hi, a.shape[0], a.shape[1])


def curve_band(tables: Sequence[np.ndarray], seed: int = BOOTSTRAP_SEED) -> list[Estimate]:
    """Per mark, an arm's mean score with its interval: ``tables`` holds one ``(seeds, items)`` table a mark."""
    return [arm_estimate(t, "mean", seed) for t in tables]
