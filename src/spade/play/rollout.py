"""Groups of plays: many episodes of many environments, paired hint / no-hint arms, fault isolation.

Every episode gets a fresh sandbox instance (instances are never reused across episodes). Seeds are a pure
function of ``(run seed, step, env id, index)`` (:func:`spade.seeds.derive_seed`), and the hinted and
unhinted arms of an environment draw from the same seed list (common random numbers), so regret compares
the same instances. A failed open or play is a trajectory with an error status, never an exception.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from spade.config import PlayConfig
from spade.play.agent import Episode, play_episode
from spade.play.demos import Demo, demos_by_env
from spade.sandbox import EnvRunner, SandboxError
from spade.seeds import derive_seed
from spade.types import PlayStatus, Policy, Trajectory


@dataclass(frozen=True, slots=True)
class PlayJob:
    """One episode to play."""

    env_id: str
    source: str
    seed: int
    hint: str | None = None
    difficulty: int | None = None
    """Difficulty level of this play (None: ``PlayConfig.difficulty``); procedural mode sets it per task."""


def episode_seeds(run_seed: int, step: int, env_id: str, n: int) -> list[int]:
    """``n`` seeds for one environment at one step (shared by its hinted and unhinted arms)."""
    return [derive_seed(run_seed, "episode", step, env_id, i) for i in range(n)]


def hint_seeds(run_seed: int, step: int, env_id: str, n: int) -> list[int]:
    """``n`` seeds of an environment's hinted plays of their own (``rollout.hint_seeds='own'``, as released):
    drawn apart from :func:`episode_seeds`, so the hinted arm plays other instances than the unhinted one."""
    return [derive_seed(run_seed, "hint-episode", step, env_id, i) for i in range(n)]


def paired_jobs(
    env_id: str, source: str, seeds: Sequence[int], plays: int, *, hint: str | None, hint_plays: int
) -> list[PlayJob]:
    """Unhinted plays on ``seeds[:plays]`` and, with a hint, hinted plays on ``seeds[:hint_plays]``."""
    jobs = [PlayJob(env_id, source, s) for s in seeds[:plays]]
    if hint is not None:
        jobs += [PlayJob(env_id, source, s, hint) for s in seeds[:hint_plays]]
    return jobs


async def run_jobs(
    runner: EnvRunner,
    policy: Policy,
    jobs: Sequence[PlayJob],
    cfg: PlayConfig,
    *,
    max_concurrent: int,
    demos_per_play: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> list[Trajectory]:
    """Play every job (concurrently, bounded); results come back in job order.

    Demonstrations (``cfg.demos``) derive from the played seeds of each environment and level, shared by its
    plays (training); with ``demos_per_play`` each play's come from its own seed alone, as if it were played
    by itself (the ``envs`` suite, whose episodes are independent). ``progress`` hears ``(done, total)``
    before the first play and after each.
    """
    gate = asyncio.Semaphore(max(1, max_concurrent))
    shared = {} if demos_per_play else await _shared_demos(runner, jobs, cfg)
    done = 0

    async def one(job: PlayJob) -> Trajectory:
        nonlocal done
        async with gate:
            options = reset_options(cfg, job.difficulty)
            shown = (
                await _own_demos(runner, job, cfg)
                if demos_per_play
                else shared.get((job.env_id, job.difficulty), ())
            )
            trajectory = await _play_one(runner, policy, job, cfg, options, demos=shown)
        done += 1
        if progress is not None:
            progress(done, len(jobs))
        return trajectory

    if progress is not None:
        progress(0, len(jobs))
    return list(await asyncio.gather(*(one(j) for j in jobs)))


async def _shared_demos(
    runner: EnvRunner, jobs: Sequence[PlayJob], cfg: PlayConfig
) -> dict[tuple[str, int | None], tuple[Demo, ...]]:
    """Demonstrations per environment and level, from the seeds of all its plays at that level."""
    demos: dict[tuple[str, int | None], tuple[Demo, ...]] = {}
    if cfg.demos <= 0:
        return demos
    for level in dict.fromkeys(j.difficulty for j in jobs):
        plays = [(j.env_id, j.source, j.seed) for j in jobs if j.difficulty == level]
        found = await demos_by_env(
            runner, plays, n=cfg.demos, options=reset_options(cfg, level), max_actions=cfg.demo_max_actions
        )
        demos.update({(env, level): d for env, d in found.items()})
    return demos


async def _own_demos(runner: EnvRunner, job: PlayJob, cfg: PlayConfig) -> tuple[Demo, ...]:
    """Demonstrations of one play from its own seed alone."""
    return (await _shared_demos(runner, [job], cfg)).get((job.env_id, job.difficulty), ())


def reset_options(cfg: PlayConfig, difficulty: int | None) -> dict[str, int] | None:
    """The ``reset`` options of a play at ``difficulty`` (None: ``cfg.difficulty``, None again: no options)."""
    level = cfg.difficulty if difficulty is None else difficulty
    return None if level is None else {"difficulty": level}


async def _play_one(
    runner: EnvRunner,
    policy: Policy,
    job: PlayJob,
    cfg: PlayConfig,
    options: dict[str, int] | None,
    *,
    demos: tuple[Demo, ...] = (),
) -> Trajectory:
    episode = Episode(job.env_id, job.seed, job.hint, options, demos)
    try:
        env = await runner.aopen(job.source, filename=f"<{job.env_id}>")
    except SandboxError as exc:
        return _error(job, f"{exc.kind}: {exc}")
    try:
        if options and env.meta.difficulty_levels <= int(options["difficulty"]):
            episode = Episode(job.env_id, job.seed, job.hint, None, demos)
        return await play_episode(policy, env, episode, cfg, is_tool_env=env.meta.is_tool_env)
    finally:
        await env.aclose()


def _error(job: PlayJob, message: str) -> Trajectory:
    return Trajectory(
        env_id=job.env_id,
        seed=job.seed,
        hinted=job.hint is not None,
        status=PlayStatus.ENV_ERROR,
        transitions=(),
        episode_return=0.0,
        success=False,
        error=message,
    )


def status_counts(trajectories: Sequence[Trajectory], prefix: str) -> dict[str, float]:
    """``{prefix}/status/<status>`` counts, for the metrics."""
    counts = Counter(t.status.value for t in trajectories)
    return {f"{prefix}/status/{k}": float(v) for k, v in sorted(counts.items())}


def prompt_reuse(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """``speed/prompt_reuse``: of the prompt tokens of every turn after an episode's first, the share that
    repeats the start of the episode's previous request (its prompt and reply), the most a prefix cache can
    supply within an episode. A token stream repeats all of it; a thinking model's turns repeat the previous
    prompt and whatever the template renders the same of the reply, not the reasoning it leaves out."""
    reused = total = 0
    for t in trajectories:
        if t.turns:
            for prev, cur in itertools.pairwise(t.turns):
                prompt = cur.mask_T.index(1) if 1 in cur.mask_T else len(cur.tokens_T)
                reused += _common_prefix(prev.tokens_T, cur.tokens_T[:prompt])
                total += prompt
            continue
        starts = [i for i, m in enumerate(t.mask_T) if m and (i == 0 or not t.mask_T[i - 1])]
        ends = [i for i, m in enumerate(t.mask_T) if not m and i > 0 and t.mask_T[i - 1]]
        # each later prompt is the stream up to its reply, so it holds the whole previous reply's request
        reused += sum(ends[: len(starts) - 1])
        total += sum(starts[1:])
    return {"speed/prompt_reuse": reused / total} if total else {}


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)
