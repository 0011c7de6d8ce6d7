"""Regret estimators: hand-worked values, every hinted play counts, unbiasedness and variance by Monte Carlo."""

from __future__ import annotations

import math

import numpy as np
import pytest

from spade.scoring.regret import REGRET_METHODS, estimate_regret

# shared seeds 1-3 as (hinted, unhinted) returns, hinted-only seeds 4-5 (won both)
HINTED = [(1, 1.0), (2, 1.0), (3, 0.0), (4, 1.0), (5, 1.0)]
UNHINTED = [(1, 0.0), (2, 1.0), (3, 0.0)]


def test_paired_uses_the_shared_seeds_only() -> None:
    est = estimate_regret(HINTED, UNHINTED, "paired")
    assert est.regret == pytest.approx(1 / 3)  # (1 - 0) + (1 - 1) + (0 - 0) over 3 pairs
    assert (est.pairs, est.hinted, est.unhinted) == (3, 5, 3)
    # (var_h - 2 cov + var_u) / n with var_h pooled over all 5 hinted seeds (0.2), var_u = 1/3, cov = 1/6
    assert est.se == pytest.approx(math.sqrt((0.2 - 2 / 6 + 1 / 3) / 3))


def test_difference_of_means_uses_every_play_equally() -> None:
    est = estimate_regret(HINTED, UNHINTED, "difference_of_means")
    assert est.regret == pytest.approx(4 / 5 - 1 / 3)
    assert est.hint_return == pytest.approx(4 / 5)
    assert est.nohint_return == pytest.approx(1 / 3)


def test_control_variate_leave_one_out_weights_by_hand() -> None:
    # Seed 1's weight x from pairs 2, 3: a = b = c = 0.5 (beta = 1) -> x = (a/2 + c/3) / (a (1/3 + 1/2)) = 1.
    # Seed 2's from pairs 1, 3: u constant, so c = 0 -> x = (a/2) / (a (1/3 + 1/2)) = 0.6.
    # Seed 3's from pairs 1, 2: h constant, no information -> the equal-weight x = 3/5.
    # Terms x h_i + (1 - x) mean_H'(h) - u_i with mean_H'(h) = 1: 1, 0.6 + 0.4 - 1 = 0, 0.4.
    est = estimate_regret(HINTED, UNHINTED, "control_variate")
    assert est.regret == pytest.approx(1.4 / 3)
    # Pooled moments: var_h = 0.2 (4 wins of 5), var_u = 1/3, cov over the pairs = 1/6; mean x = 2.2 / 3.
    x = 2.2 / 3
    var = (x * x * 0.2 - 2 * x / 6 + 1 / 3) / 3 + (1 - x) ** 2 * 0.2 / 2
    assert est.se == pytest.approx(math.sqrt(var))


def test_no_estimate_without_both_arms() -> None:
    assert estimate_regret([], UNHINTED).se is None
    assert estimate_regret(HINTED, []).regret == 0.0
    no_pairs = estimate_regret([(1, 1.0), (2, 0.0)], [(3, 0.0), (4, 0.0)], "paired")
    assert (no_pairs.regret, no_pairs.se, no_pairs.pairs) == (0.0, None, 0)
    # without shared seeds the other estimators compare the arms' means
    unpaired = estimate_regret([(1, 1.0), (2, 0.0)], [(3, 0.0), (4, 0.0)])
    assert unpaired.regret == pytest.approx(0.5)
    assert unpaired.se == pytest.approx(math.sqrt(0.5 / 2))
    with pytest.raises(ValueError, match="unknown regret estimator 'x'"):
        estimate_regret(HINTED, UNHINTED, "x")  # type: ignore[arg-type]


def _plays(
    rng: np.random.Generator, n_u: int, n_h: int
) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """Instances are easy or hard (half each); P(win): unhinted 0.9 / 0.0, hinted 1.0 / 0.2 -> regret 0.15."""
    n = max(n_u, n_h)
    easy = rng.random(n) < 0.5
    h = (rng.random(n) < np.where(easy, 1.0, 0.2)).astype(float)
    u = (rng.random(n) < np.where(easy, 0.9, 0.0)).astype(float)
    return [(s, float(h[s])) for s in range(n_h)], [(s, float(u[s])) for s in range(n_u)]


def test_every_hinted_play_moves_the_estimate() -> None:
    hinted, unhinted = _plays(np.random.default_rng(3), 8, 16)
    for method in ("control_variate", "difference_of_means"):
        base = estimate_regret(hinted, unhinted, method).regret
        for i, (seed, ret) in enumerate(hinted):
            flipped = [*hinted[:i], (seed, 1.0 - ret), *hinted[i + 1 :]]
            assert estimate_regret(flipped, unhinted, method).regret != pytest.approx(base), (method, seed)
    # the shared-seeds-only estimator ignores the 8 hinted-only plays
    base = estimate_regret(hinted, unhinted, "paired").regret
    extra = [(s, 1.0 - r) if s >= 8 else (s, r) for s, r in hinted]
    assert estimate_regret(extra, unhinted, "paired").regret == base


@pytest.mark.parametrize(("n_u", "n_h"), [(8, 16), (8, 4)])
def test_control_variate_is_unbiased_and_beats_the_difference_of_means(n_u: int, n_h: int) -> None:
    rng = np.random.default_rng(11)
    reps = 1200
    ours, plain, se2 = np.empty(reps), np.empty(reps), np.empty(reps)
    for r in range(reps):
        hinted, unhinted = _plays(rng, n_u, n_h)
        est = estimate_regret(hinted, unhinted)
        ours[r], se2[r] = est.regret, (est.se or 0.0) ** 2
        plain[r] = np.mean([x for _, x in hinted]) - np.mean([x for _, x in unhinted])
    truth = 0.5 * (1.0 - 0.9) + 0.5 * (0.2 - 0.0)
    assert abs(ours.mean() - truth) < 3 * ours.std() / math.sqrt(reps)
    assert ours.var() <= plain.var()
    if n_h > n_u:  # the loop's case; the plug-in standard error is about right (a little small)
        assert 0.7 < se2.mean() / ours.var() < 1.3


def test_registry_is_read_only() -> None:
    assert set(REGRET_METHODS) == {"control_variate", "paired", "difference_of_means"}
    with pytest.raises(TypeError):
        REGRET_METHODS["x"] = REGRET_METHODS["paired"]  # type: ignore[index]
