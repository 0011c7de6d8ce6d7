r"""Hint-based regret of one environment from every play of both arms, with its standard error.

Setting. Each seed is an independent draw of an instance of the environment. The hinted arm plays the
seeds ``H``, the unhinted arm the seeds ``U`` (the loop plays both on one seed list, so one set contains
the other). ``S = H ∩ U`` are the ``n`` shared seeds, ``H' = H \ S`` the ``m_h`` hinted-only seeds and
``U' = U \ S`` the ``m_u`` unhinted-only seeds; ``h_i``, ``u_i`` are seed ``i``'s returns (several plays of
one seed in one arm are averaged). The target is ``θ = E[h] − E[u]``.

Every estimator here is, with one weight pair ``(x_i, y_i)`` in ``[0, 1]`` per shared seed::

    θ̂ = (1/n) Σ_{i∈S} [x_i·h_i + (1 − x_i)·mean_H'(h) − y_i·u_i − (1 − y_i)·mean_U'(u)]

(``θ̂ = mean_H'(h) − mean_U'(u)`` when no seed is shared). It is exactly unbiased whenever ``(x_i, y_i)``
does not depend on seed ``i`` or on the single-arm seeds: then ``E[x_i h_i + (1 − x_i) mean_H'(h)] = E[h]``.
For constant weights ``x, y``, as ``S``, ``H'`` and ``U'`` are independent samples::

    Var θ̂ = (x²σ_h² − 2xy·σ_hu + y²σ_u²) / n + (1 − x)²σ_h² / m_h + (1 − y)²σ_u² / m_u

- ``paired`` (``x = y = 1``): the shared seeds only, ``Var = Var(h − u) / n``; the other plays are wasted.
- ``difference_of_means`` (``x = n/(n + m_h)``, ``y = n/(n + m_u)``): the mean of every hinted play minus
  the mean of every unhinted play, as released. Pairing still helps it: ``−2xy·σ_hu/n`` in the variance.
- ``control_variate`` (the default): the weights minimising the variance (a control-variate / double-
  sampling regression estimator; with ``m_u = 0``, ``1 − x = m_h/(n + m_h)·(1 − β)`` with
  ``β = σ_hu/σ_h²``: the hinted-only plays correct the estimate through the correlation of the two arms on
  one instance). Weights from sample moments of all seeds would make it biased by ``O(1/n)``, so seed
  ``i``'s weights use the moments of the *other* shared seeds only (leave-one-out cross-fitting): the
  estimate is exactly unbiased, and every hinted play moves it unless ``β = 1`` (when the hinted-only
  plays carry no information). Its variance is that of the better of the other two when the arms are
  strongly correlated (instance difficulty dominates) and a few percent above ``difference_of_means``
  when they are independent (the price of estimating ``β`` from ``n − 1`` seeds).

The reported standard error is the square root of the variance formula at the mean weights and the sample
moments (``σ_h²`` over every hinted seed, ``σ_u²`` over every unhinted seed, ``σ_hu`` over the shared ones,
``ddof = 1``; a moment that needs two seeds and has fewer is 0).
"""

from __future__ import annotations

import math
import types
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from spade.config.types import RegretMethod

FloatArray = npt.NDArray[np.float64]
_TINY = 1e-12


@dataclass(frozen=True, slots=True)
class RegretEstimate:
    """Hint-based regret of one environment and how well it is known."""

    regret: float
    """Estimated ``E[R_hint] − E[R_nohint]``; 0 when there is no estimate (``se`` is None)."""
    se: float | None
    """Standard error of ``regret``; None when the plays allow no estimate (an arm without plays, or no
    shared seed for ``paired``)."""
    pairs: int
    """Seeds played in both arms."""
    hinted: int
    """Seeds played with the hint."""
    unhinted: int
    """Seeds played without the hint."""
    hint_return: float
    """Mean return over every hinted seed (0 without any)."""
    nohint_return: float
    """Mean return over every unhinted seed (0 without any)."""


@dataclass(frozen=True, slots=True)
class Split:
    """Per-seed returns of both arms: shared seeds (paired, sorted by seed) and single-arm seeds."""

    h_shared: FloatArray
    u_shared: FloatArray
    h_only: FloatArray
    u_only: FloatArray


@dataclass(frozen=True, slots=True)
class Moments:
    """Sample moments and sizes that the weights and the variance formula need."""

    var_h: float
    var_u: float
    cov_hu: float
    n: int
    m_h: int
    m_u: int


def split_by_seed(hinted: Sequence[tuple[int, float]], unhinted: Sequence[tuple[int, float]]) -> Split:
    """Average each arm's plays per seed and split the seeds into shared and single-arm ones."""
    h, u = _per_seed_mean(hinted), _per_seed_mean(unhinted)
    shared = sorted(h.keys() & u.keys())

    def arr(d: Mapping[int, float], seeds: Sequence[int]) -> FloatArray:
        return np.asarray([d[s] for s in seeds], dtype=np.float64)

    h_only, u_only = sorted(h.keys() - u.keys()), sorted(u.keys() - h.keys())
    return Split(arr(h, shared), arr(u, shared), arr(h, h_only), arr(u, u_only))


def _per_seed_mean(plays: Sequence[tuple[int, float]]) -> dict[int, float]:
    by_seed: dict[int, list[float]] = defaultdict(list)
    for seed, ret in plays:
        by_seed[seed].append(ret)
    return {seed: math.fsum(rets) / len(rets) for seed, rets in by_seed.items()}


def _var(x: FloatArray) -> float:
    return float(np.var(x, ddof=1)) if len(x) >= 2 else 0.0


def _mean(x: FloatArray) -> float:
    return float(np.mean(x)) if len(x) else 0.0


def moments(
    h: FloatArray, u: FloatArray, h_pool: FloatArray, u_pool: FloatArray, *, m_h: int, m_u: int
) -> Moments:
    """Moments from the pairs ``(h, u)``: variances over ``h_pool`` / ``u_pool``, covariance over the pairs.

    The covariance is bounded by Cauchy-Schwarz with the variances (pooled variances may be the smaller).
    """
    a, b = _var(h_pool), _var(u_pool)
    c = float(np.dot(h - h.mean(), u - u.mean())) / (len(h) - 1) if len(h) >= 2 else 0.0
    bound = math.sqrt(a * b)
    return Moments(a, b, min(bound, max(-bound, c)), len(h), m_h, m_u)


def variance(m: Moments, x: float, y: float) -> float:
    """Variance of the estimator with constant weights ``x, y`` (module doc); terms of empty parts vanish."""
    a, b, c = m.var_h, m.var_u, m.cov_hu
    total = (x * x * a - 2 * x * y * c + y * y * b) / m.n if m.n else 0.0
    total += (1 - x) ** 2 * a / m.m_h if m.m_h else 0.0
    total += (1 - y) ** 2 * b / m.m_u if m.m_u else 0.0
    return max(0.0, total)


# -- weights of the three estimators -----------------------------------------------------------------------


def mean_weights(m: Moments) -> tuple[float, float]:
    """Every play of an arm weighted equally: ``x = n/(n + m_h)``, ``y = n/(n + m_u)``."""
    return m.n / (m.n + m.m_h), m.n / (m.n + m.m_u)


def optimal_weights(m: Moments) -> tuple[float, float]:
    """The constant weights minimising :func:`variance` at ``m``, clipped to ``[0, 1]``.

    The zero gradient gives one linear equation per arm with single-arm seeds (``x·a(1/n + 1/m_h) −
    y·c/n = a/m_h`` and ``y·b(1/n + 1/m_u) − x·c/n = b/m_u``); an arm without them keeps weight 1. Where
    the system is singular (an arm's returns all equal, so its weight does not matter) the equal-weight
    mean is used.
    """
    n, a, b, c = m.n, m.var_h, m.var_u, m.cov_hu
    fallback = mean_weights(m)
    ax = a * (1 / n + 1 / m.m_h) if m.m_h else 0.0
    by = b * (1 / n + 1 / m.m_u) if m.m_u else 0.0
    if m.m_h and m.m_u:
        det = ax * by - (c / n) ** 2
        if det <= _TINY:
            return fallback
        x = (a / m.m_h * by + c / n * b / m.m_u) / det
        y = (b / m.m_u * ax + c / n * a / m.m_h) / det
    elif m.m_h:
        x, y = ((a / m.m_h + c / n) / ax if ax > _TINY else fallback[0]), 1.0
    elif m.m_u:
        x, y = 1.0, ((b / m.m_u + c / n) / by if by > _TINY else fallback[1])
    else:
        x, y = 1.0, 1.0
    return min(1.0, max(0.0, x)), min(1.0, max(0.0, y))


PairWeights = Callable[[Split], tuple[FloatArray, FloatArray]]


def _constant(s: Split, weights: tuple[float, float]) -> tuple[FloatArray, FloatArray]:
    n = len(s.h_shared)
    return np.full(n, weights[0]), np.full(n, weights[1])


def paired_weights(s: Split) -> tuple[FloatArray, FloatArray]:
    """``x_i = y_i = 1``: shared seeds only."""
    return _constant(s, (1.0, 1.0))


def difference_of_means_weights(s: Split) -> tuple[FloatArray, FloatArray]:
    """Equal weight for every play of an arm."""
    m = Moments(0.0, 0.0, 0.0, len(s.h_shared), len(s.h_only), len(s.u_only))
    return _constant(s, mean_weights(m))


def control_variate_weights(s: Split) -> tuple[FloatArray, FloatArray]:
    """Seed ``i``'s weights: :func:`optimal_weights` at the moments of the other shared seeds.

    Moments need two seeds; with fewer than three shared seeds every seed gets the equal-weight mean.
    """
    n, m_h, m_u = len(s.h_shared), len(s.h_only), len(s.u_only)
    xs, ys = np.empty(n), np.empty(n)
    for i in range(n):
        h, u = np.delete(s.h_shared, i), np.delete(s.u_shared, i)
        if n - 1 >= 2:
            # the moments of the other seeds, the sizes of the whole estimator
            xs[i], ys[i] = optimal_weights(replace(moments(h, u, h, u, m_h=m_h, m_u=m_u), n=n))
        else:
            xs[i], ys[i] = mean_weights(Moments(0.0, 0.0, 0.0, n, m_h, m_u))
    return xs, ys


REGRET_METHODS: Mapping[str, PairWeights] = types.MappingProxyType(
    {
        "control_variate": control_variate_weights,
        "paired": paired_weights,
        "difference_of_means": difference_of_means_weights,
    }
)
"""Regret estimators by name (``RewardConfig.regret_estimator``): each gives the weights of every pair."""


def estimate_regret(
    hinted: Sequence[tuple[int, float]],
    unhinted: Sequence[tuple[int, float]],
    method: RegretMethod = "control_variate",
) -> RegretEstimate:
    """Hint-based regret of one environment and its standard error (estimators: see the module doc).

    Args:
        hinted: ``(seed, return)`` of each finished hinted play (failed plays left out).
        unhinted: ``(seed, return)`` of each finished unhinted play.
        method: Which estimator; all are unbiased and differ in variance.
    """
    try:
        weights_of = REGRET_METHODS[method]
    except KeyError:
        raise ValueError(
            f"unknown regret estimator {method!r}; choose one of {sorted(REGRET_METHODS)}"
        ) from None
    s = split_by_seed(hinted, unhinted)
    h_all, u_all = np.concatenate([s.h_shared, s.h_only]), np.concatenate([s.u_shared, s.u_only])
    n = len(s.h_shared)

    def result(regret: float, se: float | None) -> RegretEstimate:
        return RegretEstimate(regret, se, n, len(h_all), len(u_all), _mean(h_all), _mean(u_all))

    if not len(h_all) or not len(u_all) or (n == 0 and method == "paired"):
        return result(0.0, None)
    pooled = moments(s.h_shared, s.u_shared, h_all, u_all, m_h=len(s.h_only), m_u=len(s.u_only))
    if n == 0:
        return result(_mean(s.h_only) - _mean(s.u_only), math.sqrt(variance(pooled, 0.0, 0.0)))
    xs, ys = weights_of(s)
    terms = xs * s.h_shared + (1 - xs) * _mean(s.h_only) - ys * s.u_shared - (1 - ys) * _mean(s.u_only)
    se = math.sqrt(variance(pooled, float(xs.mean()), float(ys.mean())))
    return result(float(terms.mean()), se)
