"""derive_seed: one pure function for every seed of a run."""

from __future__ import annotations

from spade.play.rollout import episode_seeds
from spade.seeds import SEED_BITS, derive_rng, derive_seed


def test_seeds_are_pure_in_range_and_separate_purposes() -> None:
    seeds = {derive_seed(0, "episode", step, "env", i) for step in range(20) for i in range(20)}
    assert len(seeds) == 400
    assert all(0 <= s < 2**SEED_BITS for s in seeds)
    assert derive_seed(3, "design", 4) == derive_seed(3, "design", 4)
    assert derive_seed(3, "design", 4) != derive_seed(4, "design", 4)
    assert derive_seed(3, "design", 4) != derive_seed(3, "check", 4)
    assert derive_seed(3, "x", 1) != derive_seed(3, "x", "1")  # types are part of the path
    assert derive_seed(3, "a/b") != derive_seed(3, "a", "b")  # no separator to collide on


def test_a_changed_derivation_is_caught() -> None:
    # Every run's choices hang on this function: changing it silently changes every run's results.
    assert derive_seed(0, "episode", 0, "seed:guess", 0) == 742132315


def test_generators_and_episode_seeds_come_from_derive_seed() -> None:
    assert derive_rng(5, "fill", 2).random() == derive_rng(5, "fill", 2).random()
    assert episode_seeds(5, 2, "e", 3) == [derive_seed(5, "episode", 2, "e", i) for i in range(3)]
