"""A step's plays: every current environment, the hinted arm of new ones, and more plays of constant groups.

Built on :mod:`spade.rollout` (jobs, seeds, bounded concurrent play): seeds depend only on ``(run seed,
step, env id, index)``, so a resumed step plays the same instances.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

from spade import cluster
from spade.components import Components
from spade.config import TrainConfig
from spade.rollout import PlayJob, episode_seeds, paired_jobs, run_jobs
from spade.types import PlayStatus, Trajectory


async def play(
    cfg: TrainConfig,
    c: Components,
    current: Sequence[str],
    hints: Mapping[str, Sequence[str | None]],
    step: int,
    *,
    levels: Mapping[str, int],
) -> list[Trajectory]:
    """Play ``current``; ``hints``: per new environment, the hint of each hinted seed (None: no play);
    ``levels``: a difficulty level per environment id (procedural mode)."""
    rc = cfg.rollout
    n_plays = plays_per_env(cfg, len(current))
    jobs = []
    for env_id in current:
        seeds = episode_seeds(cfg.seed, step, env_id, max(n_plays, rc.hint_plays_per_env))
        code = c.memory.get(env_id).code
        plain = paired_jobs(env_id, code, seeds, n_plays, hint=None, hint_plays=0)
        jobs += [dataclasses.replace(j, difficulty=levels.get(env_id)) for j in plain]
        if env_id in hints:  # hinted arm: one code-only hint for every seed, or one hint per seed
            jobs += [PlayJob(env_id, code, s, h) for s, h in zip(seeds, hints[env_id], strict=False) if h]
    return await run_plays(cfg, c, jobs)


def plays_per_env(cfg: TrainConfig, n_envs: int) -> int:
    """Unhinted plays of each of a step's ``n_envs`` environments (``rollout.fill_batch``)."""
    rc = cfg.rollout
    if not rc.fill_batch or n_envs <= 0:
        return rc.plays_per_env
    return max(rc.plays_per_env, math.ceil(cfg.designer.envs_per_regen * rc.plays_per_env / n_envs))


async def run_plays(cfg: TrainConfig, c: Components, jobs: Sequence[PlayJob]) -> list[Trajectory]:
    """Play ``jobs`` with the run's policy and runner."""
    # More concurrent plays than live sandbox instances would only queue threads on instance slots.
    limit = min(cfg.rollout.max_concurrent_plays, cluster.instance_capacity(cfg))
    return await run_jobs(c.runner, c.policy, jobs, cfg.play, max_concurrent=limit)


async def play_more(
    cfg: TrainConfig,
    c: Components,
    trajectories: Sequence[Trajectory],
    step: int,
    *,
    levels: Mapping[str, int],
) -> list[Trajectory]:
    """``rollout.extra_plays`` more unhinted plays of each environment whose unhinted plays all returned the
    same, on the seeds after its first unhinted plays (those of its hinted plays, when it has them)."""
    rc = cfg.rollout
    returns: dict[str, set[float]] = {}
    for t in trajectories:
        if not t.hinted and t.status is not PlayStatus.ENV_ERROR:
            returns.setdefault(t.env_id, set()).add(round(t.episode_return, 9))
    constant = [env_id for env_id, seen in returns.items() if len(seen) == 1]
    if rc.extra_plays <= 0 or not constant:
        return []
    played = plays_per_env(cfg, len({t.env_id for t in trajectories}))
    jobs = [
        PlayJob(env_id, c.memory.get(env_id).code, seed, difficulty=levels.get(env_id))
        for env_id in constant
        for seed in episode_seeds(cfg.seed, step, env_id, played + rc.extra_plays)[played:]
    ]
    return await run_plays(cfg, c, jobs)
