"""How many plays each environment gets, and how the designer's samples are rewarded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from spade.config.errors import require
from spade.config.types import LPBaseline, RateMeasure, RegretMethod


@dataclass(frozen=True, slots=True)
class RolloutConfig:
    """How many plays each environment gets."""

    plays_per_env: int = 8
    """Unhinted plays per environment per step (the agent's GRPO group)."""
    hint_plays_per_env: int = 16
    """Hinted plays per new environment; the paired no-hint arm reuses their seeds (``hint_seeds``)."""
    hint_seeds: Literal["shared", "own"] = "shared"
    """'shared': the hinted plays are played on the unhinted plays' seeds, so regret compares the same
    instances (common random numbers); 'own': on seeds of their own, as released, so the two arms' means
    are taken over different instances (``reward.regret_estimator`` then sees no shared seed)."""
    compact_filter: bool = False
    """Train no agent play that did not terminate (truncated, out of turns or context, failed), after the
    group advantages are computed with it: the released tool-use recipe's ``--spade-compact-filter``."""
    fill_batch: bool = True
    """When a regeneration has fewer environments than ``designer.envs_per_regen`` (a fixed pool smaller than
    the batch, or too few valid designs), each gets ``ceil(envs_per_regen * plays_per_env / n)`` unhinted
    plays instead of ``plays_per_env``, so a step plays as many episodes in every mode (as released:
    ``trajectories_per_game = ceil(global_batch_size / n_games)``). False: ``plays_per_env`` each."""
    extra_plays: int = 0
    """Unhinted plays added, once, to an environment whose ``plays_per_env`` plays all returned the same: a
    constant group carries no gradient, and with more plays it may not be constant (a bounded form of
    DAPO's dynamic sampling; the plays' tokens count against ``sampled_token_budget``). 0: off."""
    max_concurrent_plays: int = 128
    """Plays run at once (also capped by sandbox.max_live_instances)."""
    batch_gather_s: float = 0.0
    """Longest wait, while requests keep arriving, before an idle engine takes the queued requests: plays
    that are still stepping their environments then join the same batch instead of the next one (0: send
    what is queued at once)."""

    def validate(self) -> None:
        """Checks of the play counts."""
        require(self.batch_gather_s >= 0.0, "rollout.batch_gather_s must be >= 0")
        require(self.extra_plays >= 0, f"rollout.extra_plays must be >= 0 (got {self.extra_plays})")
        require(
            self.plays_per_env >= 2,
            "rollout.plays_per_env must be >= 2: group-relative advantages need at least two plays",
        )


@dataclass(frozen=True, slots=True)
class RewardConfig:
    """Designer reward and per-role advantages."""

    variant: Literal["regret", "blend", "solve_rate", "learning_potential"] = "blend"
    """Designer reward (see spade.scoring.rewards.DESIGNER_REWARDS)."""
    invalid_penalty: float = -0.5
    """Raw reward of a designer sample whose environment was rejected (centred with the valid ones)."""
    checked_penalty: float | None = None
    """Raw reward of a rejected design whose code was extracted and checked: rejected by a rung of the
    ladder, as changing nothing played, or as a near duplicate. None: ``invalid_penalty`` (one penalty for
    every rejection, as released). Between ``invalid_penalty`` and the valid rewards, it still ranks a
    regeneration whose every design was rejected: code that runs above a reply with no usable code."""
    regret_scale: float = 1.0
    """regret variant: multiplier of the floored regret."""
    regret_clip: float = 1.0
    """regret variant: upper bound of the scaled regret."""
    blend_regret_norm: float = 0.15
    """blend variant: regret that earns full regret credit."""
    blend_plateau_weight: float = 0.6
    """blend variant: weight of the plateau term; the regret term gets the rest."""
    plateau_low: float = 0.4
    """Lower end of the win-rate plateau (see plateau_high)."""
    plateau_high: float = 0.6
    """blend/solve_rate: win rates in [plateau_low, plateau_high] earn full plateau credit."""
    plateau_ramp: float = 0.25
    """blend/solve_rate: width of the linear ramps to zero credit on either side of the plateau."""
    designer_scale_cap: float = 50.0
    """Upper bound of the factor that balances designer against agent samples in the update."""
    drop_constant_groups: bool = True
    """Leave out groups whose rewards are all equal (zero advantage: nothing to learn)."""
    delay: int = 0
    """Steps of agent training on a new environment before its designer sample is credited (0: immediate);
    win-rate terms use every unhinted play over those steps, regret the creation step's plays (as released)."""
    rate_measure: RateMeasure = "wins"
    """Win rate of the credit window: fraction of unhinted plays won, or their mean return (as released)."""
    regret_estimator: RegretMethod = "control_variate"
    """Regret from every play with minimal variance, shared seeds only, or mean hinted minus mean unhinted
    return (as released); see spade.scoring.regret."""
    lp_ema: float = 0.1
    """learning_potential variant: weight of the newest batch in the per-skill slow EMA of win rates,
    ``ema <- (1 - lp_ema) * ema + lp_ema * rate`` (released: 0.85, the ``--spade-gamma2`` of its launchers)."""
    lp_baseline: LPBaseline = "before"
    """learning_potential variant: what each environment is scored against: 'before', its skill's EMA before
    this batch moves it; 'updated', the EMA after this batch's mean window rate moved it (released)."""

    def validate(self) -> None:
        """Checks of the reward shapes and the credit delay."""
        require(self.delay >= 0, "reward.delay must be >= 0")
        require(
            self.checked_penalty is None or self.checked_penalty >= self.invalid_penalty,
            "reward.checked_penalty must be >= reward.invalid_penalty: checked code is not worse than no code",
        )
        require(
            0.0 <= self.plateau_low <= self.plateau_high <= 1.0 and self.plateau_ramp >= 0.0,
            "reward.plateau_low <= reward.plateau_high must lie in [0, 1] and reward.plateau_ramp must be >= 0",
        )
        require(0.0 <= self.blend_plateau_weight <= 1.0, "reward.blend_plateau_weight must be in [0, 1]")
        require(self.blend_regret_norm > 0.0, "reward.blend_regret_norm must be > 0")
        require(0.0 < self.lp_ema <= 1.0, "reward.lp_ema must be in (0, 1]")
