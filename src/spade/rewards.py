"""Reward and advantage math (SPEC §8): pure functions, no state beyond what is passed in and returned.

- Episode returns: ``final`` (the released recipe: last step's reward if terminated, else 0) or ``sum``.
- Hint-based regret over *paired* seeds: the hinted and unhinted arms play the same instances.
- Designer reward variants in a small read-only registry selected by ``RewardConfig.variant``.
- Per-role advantages: agent group z-scores, designer per-skill centring with a fixed scale.
- Delayed designer credit: a JSON-serialisable buffer and the function that releases entries when due.
"""

from __future__ import annotations

import math
import types
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from spade.config import RewardConfig

ReturnMode = Literal["final", "sum"]
ZERO_STD = 1e-9
"""A group whose returns have a population std at or below this is treated as constant."""


def _clip(x: float, lo: float, hi: float) -> float:
    return min(hi, max(lo, x))


# -- episodes ----------------------------------------------------------------------------------------------


def episode_return(rewards: Sequence[float], terminated: bool, mode: ReturnMode = "final") -> float:
    """The return of one episode, always in [-1, 1].

    Args:
        rewards: The per-step rewards in order.
        terminated: Whether the environment ended the episode (as opposed to a budget running out).
        mode: ``final``: the last reward if terminated, else 0 (outcome only); ``sum``: the clipped sum.
    """
    if mode == "final":
        return _clip(float(rewards[-1]), -1.0, 1.0) if terminated and rewards else 0.0
    if mode == "sum":
        return _clip(float(sum(rewards)), -1.0, 1.0)
    raise ValueError(f"unknown return mode {mode!r}; use 'final' or 'sum'")


def is_success(episode_return_: float, terminated: bool, threshold: float = 1.0) -> bool:
    """An episode is won when the environment ended it and the return reaches ``threshold``."""
    return terminated and episode_return_ >= threshold


def with_format_reward(episode_return_: float, well_formed: float, bonus: float) -> float:
    """Add ``bonus`` times the fraction of well-formed replies (0 disables it); success uses the plain return.

    A fraction rather than all-or-nothing gives a small model a graded signal before its first win.
    """
    return episode_return_ + bonus * well_formed


def win_rate(successes: Sequence[bool]) -> float:
    """Fraction of successful episodes (not the mean raw reward, which crashes at -1 would drag down)."""
    if not successes:
        raise ValueError("win_rate of no episodes is undefined; exclude environments with no finished plays")
    return sum(1 for s in successes if s) / len(successes)


# -- regret ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RegretEstimate:
    """Paired hint-based regret of one environment."""

    regret: float
    """Mean over shared seeds of R_hint(seed) - R_nohint(seed); 0 when there is no pair."""
    pairs: int
    """Seeds played in both arms; 0 means the regret carries no information."""
    hint_return: float
    nohint_return: float


def _per_seed_mean(plays: Sequence[tuple[int, float]]) -> dict[int, float]:
    by_seed: dict[int, list[float]] = defaultdict(list)
    for seed, ret in plays:
        by_seed[seed].append(ret)
    return {seed: sum(rets) / len(rets) for seed, rets in by_seed.items()}


def paired_regret(
    hinted: Sequence[tuple[int, float]], unhinted: Sequence[tuple[int, float]]
) -> RegretEstimate:
    """Hint-based regret over seed pairs, so both arms are compared on the same instances.

    Args:
        hinted: ``(seed, return)`` of each finished hinted play (failed plays left out).
        unhinted: ``(seed, return)`` of each finished unhinted play; several plays of one seed are averaged.
    """
    h, u = _per_seed_mean(hinted), _per_seed_mean(unhinted)
    shared = sorted(h.keys() & u.keys())
    if not shared:
        return RegretEstimate(regret=0.0, pairs=0, hint_return=0.0, nohint_return=0.0)
    mean_h = sum(h[s] for s in shared) / len(shared)
    mean_u = sum(u[s] for s in shared) / len(shared)
    regret = sum(h[s] - u[s] for s in shared) / len(shared)
    return RegretEstimate(regret=regret, pairs=len(shared), hint_return=mean_h, nohint_return=mean_u)


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
    """Fraction of unhinted plays won (at creation, matched in time with the hinted arm)."""
    regret: float
    """Paired hint-based regret (0 when no pair was played)."""
    lp_baseline: float = 0.0
    """learning_potential only: the skill's slow EMA of win rates before this regeneration."""


DesignerRewardFn = Callable[[DesignInputs, "RewardConfig"], float]


def regret_reward(x: DesignInputs, cfg: RewardConfig) -> float:
    """The paper's reward: regret floored at 0, scaled, clipped to ``[0, regret_clip]``."""
    return _clip(max(0.0, x.regret) * cfg.regret_scale, 0.0, cfg.regret_clip)


def _plateau_of(x: DesignInputs, cfg: RewardConfig) -> float:
    return plateau(x.win_rate, cfg.plateau_low, cfg.plateau_high, cfg.plateau_ramp)


def blend_reward(x: DesignInputs, cfg: RewardConfig) -> float:
    """The released recipe: ``w * plateau(win rate) + (1 - w) * clip(regret / norm, 0, 1)``, in [0, 1]."""
    w = cfg.blend_plateau_weight
    return w * _plateau_of(x, cfg) + (1.0 - w) * _clip(x.regret / cfg.blend_regret_norm, 0.0, 1.0)


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


def invalid_env_reward(cfg: RewardConfig) -> float:
    """The raw reward of a designer sample whose environment was rejected (``cfg.invalid_penalty``)."""
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


# -- delayed designer credit -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PendingCredit:
    """A designer sample waiting for its reward (JSON round trip via ``to_dict`` / ``from_dict``)."""

    sample_ref: str
    """Key of the stored designer sample (tokens and sampling logprobs live with the caller)."""
    env_id: str
    skill: str
    created_step: int
    valid: bool
    """False: the environment was rejected and the sample earns ``invalid_penalty``."""
    win_rate: float = 0.0
    """Unhinted win rate at creation (matched in time with ``regret``)."""
    regret: float = 0.0
    """Paired regret measured at creation."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PendingCredit:
        """Rebuild an entry written by ``to_dict``."""
        return cls(
            sample_ref=str(data["sample_ref"]),
            env_id=str(data["env_id"]),
            skill=str(data["skill"]),
            created_step=int(data["created_step"]),
            valid=bool(data["valid"]),
            win_rate=float(data.get("win_rate", 0.0)),
            regret=float(data.get("regret", 0.0)),
        )


@dataclass(frozen=True, slots=True)
class DueCredit:
    """A buffer entry released for training, with how many updates old its sample is."""

    entry: PendingCredit
    staleness: int


def release_due(
    buffer: Sequence[PendingCredit], step: int, delay: int
) -> tuple[tuple[DueCredit, ...], tuple[PendingCredit, ...]]:
    """Split the buffer into entries due at ``step`` (created at least ``delay`` steps ago) and the rest.

    Order is preserved in both parts; ``staleness = step - created_step`` for each due entry.
    """
    if delay < 0:
        raise ValueError(f"delay must be >= 0 (got {delay})")
    due = tuple(DueCredit(e, step - e.created_step) for e in buffer if step - e.created_step >= delay)
    rest = tuple(e for e in buffer if step - e.created_step < delay)
    return due, rest


def buffer_to_json(buffer: Sequence[PendingCredit]) -> list[dict[str, Any]]:
    """The buffer as a JSON-safe list (for checkpoints)."""
    return [e.to_dict() for e in buffer]


def buffer_from_json(data: Sequence[Mapping[str, Any]]) -> tuple[PendingCredit, ...]:
    """Rebuild a buffer written by :func:`buffer_to_json`."""
    return tuple(PendingCredit.from_dict(d) for d in data)


def credit_rewards(
    due: Sequence[DueCredit], cfg: RewardConfig, lp_ema: Mapping[str, float]
) -> tuple[tuple[float, ...], dict[str, float]]:
    """Raw rewards of released designer samples and the updated per-skill learning-potential EMAs.

    Rejected environments earn ``invalid_penalty``. Under ``learning_potential`` each valid environment is
    scored against its skill's EMA *before* this batch (absent: 0), then each skill's EMA moves toward the
    batch's mean win rate at rate ``cfg.lp_ema``. Other variants return ``lp_ema`` unchanged.
    """
    rewards = []
    for d in due:
        e = d.entry
        if not e.valid:
            rewards.append(invalid_env_reward(cfg))
            continue
        x = DesignInputs(win_rate=e.win_rate, regret=e.regret, lp_baseline=lp_ema.get(e.skill, 0.0))
        rewards.append(designer_reward(x, cfg))
    new_ema = dict(lp_ema)
    if cfg.variant == "learning_potential":
        for skill, idx in _groups([d.entry.skill for d in due]).items():
            rates = [due[i].entry.win_rate for i in idx if due[i].entry.valid]
            if rates:
                new_ema[skill] = ema_update(lp_ema.get(skill, 0.0), math.fsum(rates) / len(rates), cfg.lp_ema)
    return tuple(rewards), new_ema
