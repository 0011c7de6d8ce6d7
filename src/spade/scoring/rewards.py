"""Reward and advantage math (SPEC §8): pure functions, no state beyond what is passed in and returned.

- Episode returns and wins: :mod:`spade.play.returns`.
- Hint-based regret: :mod:`spade.scoring.regret`; delayed designer credit: :mod:`spade.scoring.credit`.
- Designer reward variants in a small read-only registry selected by ``RewardConfig.variant``.
- Per-role advantages: agent group z-scores, designer per-skill centring with a fixed scale.
"""

from __future__ import annotations

import types
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from spade.play.returns import clip

if TYPE_CHECKING:
    from spade.config import RewardConfig

ZERO_STD = 1e-9
"""A group whose returns have a population std at or below this is treated as constant."""


def win_rate(successes: Sequence[bool]) -> float:
    """Fraction of successful episodes (not the mean raw reward, which crashes at -1 would drag down)."""
    if not successes:
        raise ValueError("win_rate of no episodes is undefined; exclude environments with no finished plays")
    return sum(1 for s in successes if s) / len(successes)


# -- designer reward variants ------------------------------------------------------------------------------


def plateau(x: float, low: float = 0.4, high: float = 0.6, ramp: float = 0.25) -> float:
    """1 on ``[low, high]``, 0 at or beyond ``ramp`` outside it, linear in between."""
    if low <= x <= high:
        return 1.0
    distance = low - x if x < low else x - high
    return max(0.0, 1.0 - distance / ramp) if ramp > 0 else 0.0


def ema_update(ema: float, value: float, rate: float) -> float:
    """One exponential-moving-average step: ``(1 - rate) * ema + rate * value``."""
    return (1.0 - rate) * ema + rate * value


@dataclass(frozen=True, slots=True)
class DesignInputs:
    """What the designer reward of one valid environment is computed from."""

    win_rate: float
    """Win rate of the unhinted plays over the credit window (``RewardConfig.rate_measure``)."""
    regret: float
    """Hint-based regret measured at creation, matched in time with the hinted arm (0 without one)."""
    lp_baseline: float = 0.0
    """learning_potential only: the skill's slow EMA of win rates before this regeneration."""


DesignerRewardFn = Callable[[DesignInputs, "RewardConfig"], float]


def regret_reward(x: DesignInputs, cfg: RewardConfig) -> float:
    """The paper's reward: regret floored at 0, scaled, clipped to ``[0, regret_clip]``."""
    return clip(max(0.0, x.regret) * cfg.regret_scale, 0.0, cfg.regret_clip)


def _plateau_of(x: DesignInputs, cfg: RewardConfig) -> float:
    return plateau(x.win_rate, cfg.plateau_low, cfg.plateau_high, cfg.plateau_ramp)


def blend_reward(x: DesignInputs, cfg: RewardConfig) -> float:
    """The released recipe: ``w * plateau(win rate) + (1 - w) * clip(regret / norm, 0, 1)``, in [0, 1]."""
    w = cfg.blend_plateau_weight
    return w * _plateau_of(x, cfg) + (1.0 - w) * clip(x.regret / cfg.blend_regret_norm, 0.0, 1.0)


def solve_rate_reward(x: DesignInputs, cfg: RewardConfig) -> float:
    """The solve-rate ablation: the plateau term alone."""
    return _plateau_of(x, cfg)


def learning_potential_reward(x: DesignInputs, cfg: RewardConfig) -> float:
    """The learning-potential ablation: distance of the win rate from the skill's slow EMA baseline."""
    del cfg
    return abs(x.win_rate - x.lp_baseline)


DESIGNER_REWARDS: Mapping[str, DesignerRewardFn] = types.MappingProxyType(
    {
        "regret": regret_reward,
        "blend": blend_reward,
        "solve_rate": solve_rate_reward,
        "learning_potential": learning_potential_reward,
    }
)
"""Designer reward variants by name (read-only)."""


def designer_reward(x: DesignInputs, cfg: RewardConfig) -> float:
    """The raw reward of one valid environment under ``cfg.variant``."""
    try:
        fn = DESIGNER_REWARDS[cfg.variant]
    except KeyError:
        raise ValueError(
            f"unknown reward variant {cfg.variant!r}; choose one of {sorted(DESIGNER_REWARDS)}"
        ) from None
    return fn(x, cfg)


def invalid_env_reward(cfg: RewardConfig, checked: bool = False) -> float:
    """The raw reward of a designer sample whose environment was rejected: ``cfg.invalid_penalty``, or for
    code that was extracted and checked, ``cfg.checked_penalty`` when set."""
    if checked and cfg.checked_penalty is not None:
        return cfg.checked_penalty
    return cfg.invalid_penalty


# -- advantages --------------------------------------------------------------------------------------------

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class Advantages:
    """Advantages of N samples and which to drop (members of constant groups)."""

    advantages_N: FloatArray
    drop_N: BoolArray

    @property
    def kept(self) -> int:
        """How many samples survive dropping."""
        return int((~self.drop_N).sum())


def _groups(keys: Sequence[str]) -> dict[str, list[int]]:
    index: dict[str, list[int]] = defaultdict(list)
    for i, key in enumerate(keys):
        index[key].append(i)
    return index


def agent_advantages(returns_N: Sequence[float], env_ids_N: Sequence[str], eps: float = 1e-8) -> Advantages:
    """GRPO z-scores per environment group: ``(r - mean) / (std + eps)`` with the population std.

    A group whose returns are all equal gets advantage 0 and is flagged for dropping (no signal).
    """
    if len(returns_N) != len(env_ids_N):
        raise ValueError(f"{len(returns_N)} returns but {len(env_ids_N)} environment ids")
    r = np.asarray(returns_N, dtype=np.float64)
    adv, drop = np.zeros_like(r), np.zeros(r.shape, dtype=np.bool_)
    for idx in _groups(env_ids_N).values():
        g = r[idx]
        std = float(g.std())
        if std <= ZERO_STD:
            drop[idx] = True
        else:
            adv[idx] = (g - g.mean()) / (std + eps)
    return Advantages(adv, drop)


def designer_scale(n_agent: int, n_designer: int, regen_interval: int, cap: float = 50.0) -> float:
    """``min(n_agent / n_designer * regen_interval, cap)``: offsets the designer's small share of samples.

    Args:
        n_agent: Agent samples per step.
        n_designer: Designer samples per regeneration.
        regen_interval: Steps between regenerations.
        cap: Upper bound of the scale.
    """
    if n_designer <= 0:
        raise ValueError(f"designer_scale needs n_designer >= 1 (got {n_designer})")
    return min(n_agent / n_designer * regen_interval, cap)


def designer_advantages(rewards_N: Sequence[float], skills_N: Sequence[str], scale: float) -> Advantages:
    """Per-skill mean-centred rewards times ``scale``, without std division (avoids small-batch blow-up).

    A skill whose rewards are all equal (one sample included) gives 0 and is flagged for dropping.
    """
    if len(rewards_N) != len(skills_N):
        raise ValueError(f"{len(rewards_N)} rewards but {len(skills_N)} skills")
    r = np.asarray(rewards_N, dtype=np.float64)
    adv, drop = np.zeros_like(r), np.zeros(r.shape, dtype=np.bool_)
    for idx in _groups(skills_N).values():
        g = r[idx]
        if float(g.std()) <= ZERO_STD:
            drop[idx] = True
        else:
            adv[idx] = (g - g.mean()) * scale
    return Advantages(adv, drop)
