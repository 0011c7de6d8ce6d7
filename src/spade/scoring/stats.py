"""A step's statistics of each environment it played: plays, wins, returns and hint-based regret, typed
where they are computed (the loop records them in the archive; designer credit counts them into its
windows)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from spade.config.types import RegretMethod
from spade.scoring.regret import RegretEstimate, estimate_regret
from spade.types import PlayStatus, Trajectory


@dataclass(frozen=True, slots=True)
class EnvStats:
    """What one step's finished plays of one environment measured."""

    plays: int
    """Finished unhinted plays (at least 1)."""
    wins: int
    """Unhinted plays won."""
    return_sum: float
    """Sum of the unhinted plays' episode returns."""
    regret: RegretEstimate | None = None
    """Hint-based regret of this step; None when the hinted arm was not played."""

    @property
    def win_rate(self) -> float:
        """Fraction of unhinted plays won."""
        return self.wins / self.plays


def env_stats(
    plain: Sequence[Trajectory], hinted: Sequence[Trajectory], estimator: RegretMethod = "control_variate"
) -> dict[str, EnvStats]:
    """Per environment with a finished unhinted play: its plays, wins, returns and regret estimate."""
    per_env: dict[str, EnvStats] = {}
    for env_id in dict.fromkeys(t.env_id for t in plain):
        mine = [t for t in plain if t.env_id == env_id and t.status is not PlayStatus.ENV_ERROR]
        mine_h = [t for t in hinted if t.env_id == env_id and t.status is not PlayStatus.ENV_ERROR]
        if not mine:
            continue
        regret = None
        if mine_h:
            regret = estimate_regret(
                [(t.seed, t.episode_return) for t in mine_h],
                [(t.seed, t.episode_return) for t in mine],
                estimator,
            )
        returns = float(np.sum([t.episode_return for t in mine]))
        per_env[env_id] = EnvStats(len(mine), sum(t.success for t in mine), returns, regret)
    return per_env
