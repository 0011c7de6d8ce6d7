"""Reward and advantage math, checked against values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from spade.config import ConfigError, RewardConfig, TrainConfig
from spade.play.returns import episode_return, is_success, with_format_reward
from spade.scoring.rewards import (
    DESIGNER_REWARDS,
    DesignInputs,
    agent_advantages,
    designer_advantages,
    designer_reward,
    designer_scale,
    ema_update,
    invalid_env_reward,
    plateau,
    win_rate,
)

# -- episodes ----------------------------------------------------------------------------------------------


def test_final_return_is_last_reward_only_when_terminated() -> None:
    assert episode_return([0.0, 0.5, 1.0], terminated=True) == 1.0
    assert episode_return([0.0, 0.5, 1.0], terminated=False) == 0.0
    assert episode_return([], terminated=True) == 0.0
    assert episode_return([0.2, 3.0], terminated=True) == 1.0
    assert episode_return([0.2, -7.0], terminated=True) == -1.0


def test_sum_return_is_clipped_sum() -> None:
    assert episode_return([0.25, 0.25, 0.1], terminated=False, mode="sum") == pytest.approx(0.6)
    assert episode_return([0.5, 0.75], terminated=True, mode="sum") == 1.0
    assert episode_return([-0.5, -0.75], terminated=True, mode="sum") == -1.0
    with pytest.raises(ValueError, match="unknown return mode"):
        episode_return([1.0], terminated=True, mode="mean")  # type: ignore[arg-type]


def test_success_needs_termination_and_threshold() -> None:
    assert is_success(1.0, terminated=True)
    assert not is_success(1.0, terminated=False)
    assert not is_success(0.9, terminated=True)
    assert is_success(0.5, terminated=True, threshold=0.5)


def test_format_reward_only_when_well_formed() -> None:
    assert with_format_reward(0.0, well_formed=1.0, bonus=0.1) == pytest.approx(0.1)
    assert with_format_reward(0.0, well_formed=0.25, bonus=0.1) == pytest.approx(0.025)
    assert with_format_reward(1.0, well_formed=0.0, bonus=0.1) == 1.0


def test_win_rate_counts_successes_not_mean_reward() -> None:
    # Returns [1, -1, -1, 1] would average 0; two of four episodes are won.
    assert win_rate([True, False, False, True]) == 0.5
    with pytest.raises(ValueError, match="no episodes"):
        win_rate([])


# -- designer reward variants ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "expected"),
    [
        (0.3, 0.6),
        (0.4, 1.0),
        (0.5, 1.0),
        (0.6, 1.0),
        (0.75, 0.4),
        (0.15, 0.0),
        (0.85, 0.0),
        (0.0, 0.0),
        (1.0, 0.0),
    ],
)
def test_plateau_matches_the_released_recipe(x: float, expected: float) -> None:
    assert plateau(x) == pytest.approx(expected)


def test_plateau_without_ramp_is_a_box() -> None:
    assert plateau(0.39, ramp=0.0) == 0.0
    assert plateau(0.4, ramp=0.0) == 1.0


def test_regret_variant_floors_scales_and_clips() -> None:
    cfg = RewardConfig(variant="regret", regret_scale=2.0, regret_clip=1.0)
    assert designer_reward(DesignInputs(win_rate=0.5, regret=-0.3), cfg) == 0.0
    assert designer_reward(DesignInputs(win_rate=0.5, regret=0.2), cfg) == pytest.approx(0.4)
    assert designer_reward(DesignInputs(win_rate=0.5, regret=0.8), cfg) == 1.0


def test_blend_variant_worked_example() -> None:
    cfg = RewardConfig(variant="blend")
    # win rate 0.3 -> plateau 0.6; regret 0.06 -> 0.06 / 0.15 = 0.4; 0.6 * 0.6 + 0.4 * 0.4 = 0.52
    assert designer_reward(DesignInputs(win_rate=0.3, regret=0.06), cfg) == pytest.approx(0.52)
    # in band with large regret: 0.6 * 1 + 0.4 * 1 = 1; negative regret contributes 0
    assert designer_reward(DesignInputs(win_rate=0.5, regret=0.9), cfg) == pytest.approx(1.0)
    assert designer_reward(DesignInputs(win_rate=0.9, regret=-0.2), cfg) == 0.0


def test_solve_rate_variant_is_plateau_only() -> None:
    cfg = RewardConfig(variant="solve_rate")
    assert designer_reward(DesignInputs(win_rate=0.75, regret=1.0), cfg) == pytest.approx(0.4)


def test_learning_potential_variant_is_distance_from_baseline() -> None:
    cfg = RewardConfig(variant="learning_potential")
    assert designer_reward(DesignInputs(win_rate=0.7, regret=0.0, lp_baseline=0.4), cfg) == pytest.approx(0.3)
    assert designer_reward(DesignInputs(win_rate=0.1, regret=0.0, lp_baseline=0.4), cfg) == pytest.approx(0.3)


def test_registry_covers_every_configurable_variant_and_rejects_unknown() -> None:
    assert set(DESIGNER_REWARDS) == {"regret", "blend", "solve_rate", "learning_potential"}
    with pytest.raises(TypeError):
        DESIGNER_REWARDS["x"] = DESIGNER_REWARDS["regret"]  # type: ignore[index]
    bad = object.__new__(RewardConfig)
    object.__setattr__(bad, "variant", "nope")
    with pytest.raises(ValueError, match="unknown reward variant 'nope'"):
        designer_reward(DesignInputs(win_rate=0.5, regret=0.0), bad)


def test_invalid_penalty_is_configurable() -> None:
    assert invalid_env_reward(RewardConfig()) == -0.5
    assert invalid_env_reward(RewardConfig(invalid_penalty=-1.0)) == -1.0
    assert (
        invalid_env_reward(RewardConfig(), checked=True) == -0.5
    )  # one penalty unless checked_penalty is set
    graded = RewardConfig(checked_penalty=-0.25)
    assert (invalid_env_reward(graded), invalid_env_reward(graded, checked=True)) == (-0.5, -0.25)
    with pytest.raises(ConfigError, match=r"checked_penalty must be >= reward\.invalid_penalty"):
        TrainConfig(reward=RewardConfig(checked_penalty=-0.75))


def test_ema_update() -> None:
    assert ema_update(0.0, 1.0, 0.1) == pytest.approx(0.1)
    assert ema_update(0.5, 0.0, 0.2) == pytest.approx(0.4)


# -- advantages --------------------------------------------------------------------------------------------


def test_agent_advantages_are_group_z_scores() -> None:
    returns = [1.0, 0.0, 1.0, 0.0, 0.5, 0.5, 0.0, 0.0, 1.0]
    envs = ["a", "a", "a", "a", "b", "b", "c", "c", "c"]
    adv = agent_advantages(returns, envs)
    # group a: mean 0.5, population std 0.5 -> +-1
    np.testing.assert_allclose(adv.advantages_N[:4], [1, -1, 1, -1], atol=1e-6)
    # group b is constant: advantage 0, dropped
    np.testing.assert_array_equal(adv.advantages_N[4:6], [0.0, 0.0])
    # group c: mean 1/3, std sqrt(2/9) -> (-1/3)/0.4714 = -0.7071, (2/3)/0.4714 = 1.4142
    np.testing.assert_allclose(
        adv.advantages_N[6:], [-math.sqrt(0.5), -math.sqrt(0.5), math.sqrt(2)], atol=1e-6
    )
    assert adv.drop_N.tolist() == [False] * 4 + [True, True] + [False] * 3
    assert adv.kept == 7


def test_agent_advantages_length_mismatch() -> None:
    with pytest.raises(ValueError, match="2 returns but 1 environment ids"):
        agent_advantages([1.0, 0.0], ["a"])


def test_designer_scale_matches_the_recipes() -> None:
    assert designer_scale(192, 24, 4) == 32.0
    assert designer_scale(192, 24, 8) == 50.0
    assert designer_scale(8, 2, 3, cap=50.0) == 12.0
    with pytest.raises(ValueError, match="n_designer >= 1"):
        designer_scale(8, 0, 3)


def test_designer_advantages_are_centred_per_skill_and_scaled() -> None:
    rewards = [1.0, 0.0, -0.5, 0.4, 0.4, 0.7]
    skills = ["logic", "logic", "logic", "math", "math", "space"]
    adv = designer_advantages(rewards, skills, scale=32.0)
    # logic mean (1 + 0 - 0.5) / 3 = 1/6: (5/6, -1/6, -2/3) * 32
    np.testing.assert_allclose(adv.advantages_N[:3], [80 / 3, -16 / 3, -64 / 3])
    np.testing.assert_array_equal(adv.advantages_N[3:], [0.0, 0.0, 0.0])
    assert adv.drop_N.tolist() == [False, False, False, True, True, True]
