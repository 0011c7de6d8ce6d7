"""Statistics of the experiment: mode scores and paired differences aggregated over seeds.

A mode's score on a suite is the mean over its seeds of each seed's mean item score. Its 95% interval is a
three-level percentile bootstrap: items (shared by every policy, so comparisons stay paired), then seeds of
each mode independently, then episodes within each (seed, item). A paired difference ``b − a`` resamples
the same items for both modes in each resample. The starting model is a "mode" with one seed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

RESAMPLES = 2000
BOOTSTRAP_SEED = 0

Items = Mapping[str, Sequence[float]]
"""One evaluation of one suite: item id -> episode scores."""

Verdict = Literal["better", "worse", "no significant difference"]


@dataclass(frozen=True, slots=True)
class Estimate:
    """A mean with its 95% bootstrap interval, over ``items`` items and ``seeds`` seeds."""

    mean: float
    lo: float
    hi: float
    items: int
    seeds: int

    @property
    def verdict(self) -> Verdict:
        """For a difference: 'better' when the interval lies above 0, 'worse' below, else no difference."""
        if self.lo > 0:
            return "better"
        if self.hi < 0:
            return "worse"
        return "no significant difference"


def _table(runs: Sequence[Items], ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Episode scores padded to ``(seeds, items, episodes)`` and their counts ``(seeds, items)``."""
    width = max((len(r[i]) for r in runs for i in ids), default=1) or 1
    scores = np.zeros((len(runs), len(ids), width))
    counts = np.ones((len(runs), len(ids)), dtype=np.int64)
    for s, run in enumerate(runs):
        for n, item in enumerate(ids):
            values = list(run[item])
            scores[s, n, : len(values)] = values
            counts[s, n] = max(len(values), 1)
    return scores, counts


def _resampled_means(
    scores: np.ndarray, counts: np.ndarray, items_RN: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Per resample: the mean over resampled seeds and the given items of resampled episode means."""
    r = items_RN.shape[0]
    seeds_RS = rng.integers(0, scores.shape[0], size=(r, scores.shape[0]))
    s_idx, i_idx = seeds_RS[:, :, None], items_RN[:, None, :]
    c = counts[s_idx, i_idx]  # (R, S, N)
    picks = (rng.random((*c.shape, scores.shape[2])) * c[..., None]).astype(np.int64)
    values = scores[s_idx[..., None], i_idx[..., None], picks]
    mask = np.arange(scores.shape[2]) < c[..., None]
    means: np.ndarray = ((values * mask).sum(axis=-1) / c).mean(axis=(1, 2))
    return means


def _point(runs: Sequence[Items], ids: Sequence[str]) -> float:
    return float(np.mean([np.mean([np.mean(r[i]) if len(r[i]) else 0.0 for i in ids]) for r in runs]))


def _interval(
    b: Sequence[Items], a: Sequence[Items] | None, ids: Sequence[str], resamples: int, seed: int
) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    tb = _table(b, ids)
    ta = _table(a, ids) if a is not None else None
    stats = []
    for start in range(0, resamples, 250):  # chunks bound memory
        items_RN = rng.integers(0, len(ids), size=(min(250, resamples - start), len(ids)))
        values = _resampled_means(*tb, items_RN, rng)
        if ta is not None:
            values = values - _resampled_means(*ta, items_RN, rng)
        stats.append(values)
    lo, hi = np.percentile(np.concatenate(stats), [2.5, 97.5])
    return float(lo), float(hi)


def common_items(*groups: Sequence[Items]) -> list[str]:
    """Item ids every evaluation in every group scored (sorted)."""
    sets = [set(run) for group in groups for run in group]
    return sorted(set.intersection(*sets)) if sets else []


def mode_score(runs: Sequence[Items], resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> Estimate:
    """The mean over seeds (``runs``, one evaluation per seed) of the mean item score, with its interval."""
    ids = common_items(runs)
    if not ids:
        return Estimate(0.0, 0.0, 0.0, 0, len(runs))
    lo, hi = _interval(runs, None, ids, resamples, seed)
    return Estimate(_point(runs, ids), lo, hi, len(ids), len(runs))


def paired_difference(
    a: Sequence[Items], b: Sequence[Items], resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> Estimate:
    """Mode ``b`` minus mode ``a`` on the items all their evaluations share, with its paired interval."""
    ids = common_items(a, b)
    if not ids:
        return Estimate(0.0, 0.0, 0.0, 0, min(len(a), len(b)))
    lo, hi = _interval(b, a, ids, resamples, seed)
    return Estimate(_point(b, ids) - _point(a, ids), lo, hi, len(ids), min(len(a), len(b)))
