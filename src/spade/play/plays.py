"""A step's plays: every current environment, the hinted arm of new ones, and more plays of constant groups.

Built on :mod:`spade.play.rollout` (jobs, seeds, bounded concurrent play): seeds depend only on ``(run seed,
step, env id, index)``, so a resumed step plays the same instances.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from spade.config import PlayConfig, RolloutConfig
from spade.memory.archive import Memory
from spade.play.rollout import PlayJob, episode_seeds, hint_seeds, paired_jobs, run_jobs
from spade.sandbox import EnvRunner
from spade.types import PlayStatus, Policy, Trajectory


@dataclass(frozen=True, slots=True)
class Player:
    """Plays a run's environments with its policy and runner, its settings resolved once (built by
    :func:`spade.run.components.make_components`)."""

    runner: EnvRunner
    policy: Policy
    memory: Memory
    """Holds each environment's code."""
    rollout: RolloutConfig
    """Plays per environment, hinted plays, extra plays of constant groups, concurrency."""
    play_cfg: PlayConfig
    """How one episode is played."""
    seed: int
    """The run's seed: with the step, environment id and index it seeds each play."""
    envs_per_regen: int = 1
    """The environments a full step plays (``designer.envs_per_regen``; ``rollout.fill_batch`` fills it)."""
    capacity: int = 1 << 30
    """Environment instances that can be alive at once (:func:`spade.cluster.instance_capacity`)."""

    async def play(
        self,
        current: Sequence[str],
        hints: Mapping[str, Sequence[str | None]],
        step: int,
        *,
        levels: Mapping[str, int],
    ) -> list[Trajectory]:
        """Play ``current``; ``hints``: per new environment, the hint of each hinted seed (None: no play);
        ``levels``: a difficulty level per environment id (procedural mode)."""
        hint_plays = self.rollout.hint_plays_per_env
        n_plays = self.plays_per_env(len(current))
        jobs = []
        for env_id in current:
            seeds = episode_seeds(self.seed, step, env_id, max(n_plays, hint_plays))
            code = self.memory.get(env_id).code
            plain = paired_jobs(env_id, code, seeds, n_plays, hint=None, hint_plays=0)
            jobs += [dataclasses.replace(j, difficulty=levels.get(env_id)) for j in plain]
            if env_id in hints:  # hinted arm: one code-only hint for every seed, or one hint per seed
                own = self.rollout.hint_seeds == "own"
                hinted = hint_seeds(self.seed, step, env_id, hint_plays) if own else seeds
                jobs += [
                    PlayJob(env_id, code, s, h) for s, h in zip(hinted, hints[env_id], strict=False) if h
                ]
        return await self.run(jobs)

    def plays_per_env(self, n_envs: int) -> int:
        """Unhinted plays of each of a step's ``n_envs`` environments (``rollout.fill_batch``)."""
        rc = self.rollout
        if not rc.fill_batch or n_envs <= 0:
            return rc.plays_per_env
        return max(rc.plays_per_env, math.ceil(self.envs_per_regen * rc.plays_per_env / n_envs))

    async def run(self, jobs: Sequence[PlayJob]) -> list[Trajectory]:
        """Play ``jobs`` with the run's policy and runner."""
        # More concurrent plays than live sandbox instances would only queue threads on instance slots.
        limit = min(self.rollout.max_concurrent_plays, self.capacity)
        return await run_jobs(self.runner, self.policy, jobs, self.play_cfg, max_concurrent=limit)

    async def play_more(
        self, trajectories: Sequence[Trajectory], step: int, *, levels: Mapping[str, int]
    ) -> list[Trajectory]:
        """``rollout.extra_plays`` more unhinted plays of each environment whose unhinted plays all returned
        the same, on the seeds after its first unhinted plays (those of its hinted plays, when it has them)."""
        extra = self.rollout.extra_plays
        returns: dict[str, set[float]] = {}
        for t in trajectories:
            if not t.hinted and t.status is not PlayStatus.ENV_ERROR:
                returns.setdefault(t.env_id, set()).add(round(t.episode_return, 9))
        constant = [env_id for env_id, seen in returns.items() if len(seen) == 1]
        if extra <= 0 or not constant:
            return []
        played = self.plays_per_env(len({t.env_id for t in trajectories}))
        jobs = [
            PlayJob(env_id, self.memory.get(env_id).code, seed, difficulty=levels.get(env_id))
            for env_id in constant
            for seed in episode_seeds(self.seed, step, env_id, played + extra)[played:]
        ]
        return await self.run(jobs)
