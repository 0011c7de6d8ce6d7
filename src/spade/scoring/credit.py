"""Delayed designer credit (SPEC §8), as released: a window of plays per pending sample, release, flush.

A designer sample created at step ``t`` is credited at step ``t + delay`` (``delay`` 0: at once). Its regret
term is the one measured at step ``t``, when the hinted arm is played next to the unhinted one ("matched
timing"). Its win-rate terms (the ``blend`` plateau, ``solve_rate`` and ``learning_potential``) use every
unhinted play of its environment at steps ``t`` to ``t + delay`` (the window), so a designer earns credit
for an environment the agent learns on over the window, not for its first impression of it. Samples still
pending at the last step of a run are credited then (flushed), so no designer sample is lost.

Everything is a frozen record or a pure function; the loop keeps the buffer in its checkpointed state.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from spade.config.types import DesignerReward, RateMeasure
from spade.scoring.rewards import DesignInputs, designer_reward, ema_update, invalid_env_reward
from spade.scoring.stats import EnvStats

if TYPE_CHECKING:
    from spade.config import RewardConfig


@dataclass(frozen=True, slots=True)
class PendingCredit:
    """A designer sample waiting for its reward, with the plays of its environment seen so far."""

    sample_ref: str
    """Key of the stored designer sample (tokens and sampling logprobs live with the caller)."""
    env_id: str
    skill: str
    created_step: int
    valid: bool
    """False: the environment was rejected and the sample earns ``invalid_penalty``."""
    regret: float | None = None
    """Hint-based regret measured at creation (matched timing); None: not measured (no accepted hint, or no
    hinted play finished), which the reward counts as 0."""
    plays: int = 0
    """Unhinted plays of the environment in the window so far."""
    wins: int = 0
    """Of those, plays won."""
    return_sum: float = 0.0
    """Sum of their episode returns."""
    checked: bool = False
    """Rejected but its code was extracted and checked (``reward.checked_penalty``)."""

    def add_plays(self, stats: EnvStats) -> PendingCredit:
        """This entry with one more step's plays of its environment added to the window."""
        return replace(
            self,
            plays=self.plays + stats.plays,
            wins=self.wins + stats.wins,
            return_sum=self.return_sum + stats.return_sum,
        )

    def rate(self, measure: RateMeasure) -> float:
        """The window's win rate: fraction of plays won, or mean return (0 before any play)."""
        if self.plays == 0:
            return 0.0
        return self.wins / self.plays if measure == "wins" else self.return_sum / self.plays

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
            regret=None if data.get("regret") is None else float(data["regret"]),
            plays=int(data["plays"]),
            wins=int(data["wins"]),
            return_sum=float(data["return_sum"]),
            checked=bool(data.get("checked", False)),  # absent in checkpoints of older runs
        )


@dataclass(frozen=True, slots=True)
class DueCredit:
    """A buffer entry released for training, with how many updates old its sample is."""

    entry: PendingCredit
    staleness: int


def add_plays(buffer: Sequence[PendingCredit], per_env: Mapping[str, EnvStats]) -> tuple[PendingCredit, ...]:
    """Add one step's plays to every valid entry whose environment was played; order is preserved."""
    return tuple(e.add_plays(per_env[e.env_id]) if e.valid and e.env_id in per_env else e for e in buffer)


def release_due(
    buffer: Sequence[PendingCredit], step: int, delay: int, *, final: bool = False
) -> tuple[tuple[DueCredit, ...], tuple[PendingCredit, ...]]:
    """Split the buffer into entries due at ``step`` (created at least ``delay`` steps ago) and the rest.

    With ``final`` (the run's last step) every entry is due. Order is preserved in both parts;
    ``staleness = step - created_step`` for each due entry.
    """
    if delay < 0:
        raise ValueError(f"delay must be >= 0 (got {delay})")
    is_due = [final or step - e.created_step >= delay for e in buffer]
    due = tuple(DueCredit(e, step - e.created_step) for e, d in zip(buffer, is_due, strict=True) if d)
    rest = tuple(e for e, d in zip(buffer, is_due, strict=True) if not d)
    return due, rest


def credit_rewards(
    due: Sequence[DueCredit], cfg: RewardConfig, lp_ema: Mapping[str, float]
) -> tuple[tuple[float, ...], dict[str, float]]:
    """Raw rewards of released designer samples and the updated per-skill learning-potential EMAs. Rejected
    environments earn ``invalid_penalty`` (``checked_penalty``, when set, if their code was checked). A valid
    one is scored on its creation regret and its window rate (``cfg.rate_measure``). Under
    ``learning_potential`` each skill's EMA (absent: 0) moves toward the batch's mean window rate at rate
    ``cfg.lp_ema``, and each valid environment is scored against its skill's EMA before that move
    (``cfg.lp_baseline='before'``) or after it (``'updated'``, as released). Other variants return ``lp_ema``
    unchanged."""
    new_ema = lp_update(due, cfg, lp_ema) if cfg.variant == "learning_potential" else dict(lp_ema)
    baseline = new_ema if cfg.lp_baseline == "updated" else lp_ema
    rewards = []
    for d in due:
        e = d.entry
        if not e.valid:
            rewards.append(invalid_env_reward(cfg, e.checked))
            continue
        x = DesignInputs(e.rate(cfg.rate_measure), e.regret or 0.0, lp_baseline=baseline.get(e.skill, 0.0))
        rewards.append(designer_reward(x, cfg))
    return tuple(rewards), new_ema


def lp_update(due: Sequence[DueCredit], cfg: RewardConfig, lp_ema: Mapping[str, float]) -> dict[str, float]:
    """Each skill's slow EMA moved toward the mean window rate of its valid environments in ``due``."""
    by_skill: dict[str, list[float]] = defaultdict(list)
    for d in due:
        if d.entry.valid:
            by_skill[d.entry.skill].append(d.entry.rate(cfg.rate_measure))
    new_ema = dict(lp_ema)
    for skill, rates in by_skill.items():
        new_ema[skill] = ema_update(lp_ema.get(skill, 0.0), math.fsum(rates) / len(rates), cfg.lp_ema)
    return new_ema


def spurious_rewards(
    rewards: Sequence[float], regens: Sequence[int], source: DesignerReward, seed: int
) -> tuple[float, ...]:
    """The rewards the designer is trained on under ``designer.reward=source`` (the spurious-reward control).

    ``rewards[i]`` is sample ``i``'s own reward and ``regens[i]`` the step of the regeneration that designed it.
    'regret' returns the rewards unchanged. 'shuffled' permutes each regeneration's rewards among its samples
    by a permutation that moves at least two of them (a regeneration of one sample keeps its reward): the same
    multiset of rewards, unrelated to the designs. 'random' draws each one uniformly between its
    regeneration's lowest and highest reward. The draws depend only on ``seed``, the regeneration and the
    rewards' order, so a run and its resume credit the same values.
    """
    if len(rewards) != len(regens):
        raise ValueError(f"{len(rewards)} rewards for {len(regens)} regeneration steps")
    if source == "regret":
        return tuple(rewards)
    out = list(rewards)
    for regen in dict.fromkeys(regens):
        where = [i for i, r in enumerate(regens) if r == regen]
        mine = [rewards[i] for i in where]
        rng = random.Random(f"{seed}/{regen}/designer-reward/{source}")
        drawn = [rng.uniform(min(mine), max(mine)) for _ in mine] if source == "random" else _moved(mine, rng)
        for i, value in zip(where, drawn, strict=True):
            out[i] = value
    return tuple(out)


def _moved(values: Sequence[float], rng: random.Random) -> list[float]:
    """``values`` in a uniformly drawn order other than their own (their own when there is one value)."""
    order = list(range(len(values)))
    while len(values) > 1 and order == sorted(order):
        rng.shuffle(order)
    return [values[i] for i in order]
