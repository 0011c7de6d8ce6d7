"""The ``envs`` suite: N episodes of each environment; an episode wins by the environment's own criterion.

Environments (``opts.tasks``): registry names, environment files, folders of files (a flat folder or the
official pool layout ``games/*.py``), ``variants:GAME`` (a seed game's held-out variants,
:mod:`spade.envs.variants`); ``params["archive"]`` adds the accepted environments of a run's
archive. None given: the whole seed library. Every episode runs in a fresh sandbox instance, seeded with
``eval_seed(seed, "envs", item, episode)`` (≥ 2**31, never a training seed). The policy plays through
:mod:`spade.play.rollout` exactly as in training; :class:`~spade.evals.policies.ScriptedSolver` instead plays each
instance's ``solution()`` (a sanity check: a sound environment scores 1.0). All episodes of the suite are one
group of plays, ``opts.concurrency`` in flight at once, so a batching policy answers their turns together.

``params``: ``archive`` (run folder), ``difficulty`` (level for seed environments), ``action_mode``
(``boxed`` / ``lenient``), ``on_length`` (``end`` / ``act``, as ``play.on_length``), ``max_turns`` (agent
turn budget, default 25), ``context_tokens`` (default 2048), ``demos`` (solved episodes of the same environment
at other seeds shown first, as ``play.demos``; default 0).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spade import envs as registry
from spade.checker.feasibility import solution_actions
from spade.config import EvalOptions, PlayConfig
from spade.envs import variants
from spade.evals.base import EvalError, ItemResult, Progress, Workload, eval_seed, plural
from spade.evals.chat import gather_bounded
from spade.evals.policies import ScriptedSolver
from spade.memory.archive import EnvStatus, Memory
from spade.play.returns import episode_return, is_success
from spade.play.rollout import PlayJob, run_jobs
from spade.sandbox import EnvRunner, Sandbox, SandboxError
from spade.types import Policy, Trajectory, status_words


@dataclass(frozen=True, slots=True)
class EnvItem:
    """One environment to evaluate."""

    name: str
    source: str
    category: str
    origin: str

    @property
    def item_id(self) -> str:
        """Name and source hash: two results pair up only on the same code."""
        return f"{self.name}@{hashlib.sha256(self.source.encode()).hexdigest()[:10]}"


def _skill_of(source: str) -> str:
    for line in source.splitlines():
        stripped = line.strip()
        if stripped.startswith("skill") and "=" in stripped:
            return stripped.split("=", 1)[1].strip().strip("\"'")
    return "other"


def _files(path: Path) -> list[Path]:
    try:
        return registry.env_files(path)
    except ValueError as exc:
        raise EvalError(str(exc)) from None


def archive_items(run: Path) -> list[EnvItem]:
    """The accepted environments of a run's archive (``memory.sqlite``)."""
    if not (run / "memory.sqlite").is_file():
        raise EvalError(f"{run} has no environment archive (memory.sqlite): pass a run directory")
    with Memory.in_run_dir(run) as memory:
        records = memory.records(status=EnvStatus.VALID)
    return [
        EnvItem(r.env_id.replace(":", "_"), r.code, r.skill or "other", f"archive:{run}") for r in records
    ]


def select_items(opts: EvalOptions) -> list[EnvItem]:
    """Resolve ``opts.tasks`` and ``params["archive"]`` to environments (errors name what is wrong)."""
    archive = opts.params.get("archive")
    names = list(opts.tasks) or ([] if archive else registry.names())
    items: list[EnvItem] = []
    for name in names:
        if name.startswith(variants.PREFIX):
            items += _variant_items(name.removeprefix(variants.PREFIX))
            continue
        if name in registry.names():
            spec = registry.spec(name)
            items.append(EnvItem(name, spec.source(), spec.skill, "registry"))
            continue
        path = Path(name)
        if not path.exists():
            raise EvalError(
                f"{name!r} is neither a registered environment (see `spade envs`) nor an existing file or folder"
            )
        for f in _files(path):
            text = f.read_text()
            items.append(EnvItem(f.stem, text, _skill_of(text), str(f)))
    if archive:
        items += archive_items(Path(str(archive)))
    if opts.limit is not None:
        items = items[: opts.limit]
    if not items:
        raise EvalError("no environments selected: name registry environments, files or a run archive")
    return items


def _variant_items(game: str) -> list[EnvItem]:
    try:
        found = variants.family(game)
    except KeyError as exc:
        raise EvalError(f"{variants.PREFIX}{game}: {exc.args[0]}") from None
    return [EnvItem(name, source, _skill_of(source), f"{variants.PREFIX}{game}") for name, source in found]


def play_config(opts: EvalOptions) -> PlayConfig:
    """How the policy plays: the evaluation's sampling settings and the environment parameters."""
    p = opts.params
    context = int(p.get("context_tokens", 2048))
    return PlayConfig(
        action_mode=p.get("action_mode", "boxed"),
        on_length=p.get("on_length", "end"),
        max_turns=int(p.get("max_turns", 25)),
        context_tokens=context,
        turn_tokens=min(opts.max_tokens, context),
        temperature=opts.temperature,
        top_p=opts.top_p,
        top_k=opts.top_k,
        difficulty=None if p.get("difficulty") is None else int(p["difficulty"]),
        demos=int(p.get("demos", 0)),
    )


class EnvsSuite:
    """Win rate on environments (see the module docstring)."""

    name = "envs"

    def check(self, opts: EvalOptions) -> None:
        """Raise EvalError when the selection names nothing that exists."""
        select_items(opts)

    def workload(self, opts: EvalOptions) -> Workload:
        """One item per selected environment (``--limit`` caps them in all)."""
        n = len(select_items(opts))
        cap = f" (--limit {opts.limit})" if opts.limit is not None else ""
        return Workload.of(n, f"{plural(n, 'environment')}{cap}", opts)

    async def run(self, policy: Policy, opts: EvalOptions, progress: Progress) -> list[ItemResult]:
        """Play ``opts.episodes`` episodes of every selected environment."""
        items = select_items(opts)
        cfg = play_config(opts)
        jobs = [
            (item, PlayJob(item.name, item.source, eval_seed(opts.seed, self.name, item.item_id, e)))
            for item in items
            for e in range(opts.episodes)
        ]
        with Sandbox() as runner:
            if isinstance(policy, ScriptedSolver):
                calls = [functools.partial(_solve, runner, j, cfg) for _, j in jobs]
                outcomes = await gather_bounded(calls, opts.concurrency, progress)
            else:
                plays = [j for _, j in jobs]
                outcomes = await _play_all(
                    runner, policy, plays, cfg, concurrency=opts.concurrency, progress=progress
                )
        by_item: dict[str, list[dict[str, Any]]] = {}
        for (item, _), outcome in zip(jobs, outcomes, strict=True):
            by_item.setdefault(item.item_id, []).append(outcome)
        return [_result(self.name, item, by_item[item.item_id]) for item in items]


async def _play_all(
    runner: EnvRunner,
    policy: Policy,
    jobs: list[PlayJob],
    cfg: PlayConfig,
    *,
    concurrency: int,
    progress: Progress,
) -> list[dict[str, Any]]:
    """Every episode of the suite in one group of plays, ``concurrency`` at a time, so that a batching policy
    serves all of them together. Each is still its own play: a fresh instance, its own seed, and
    demonstrations from that seed alone (``demos_per_play``)."""
    trajectories = await run_jobs(
        runner, policy, jobs, cfg, max_concurrent=concurrency, demos_per_play=True, progress=progress
    )
    return [episode_record(j, t) for j, t in zip(jobs, trajectories, strict=True)]


def episode_record(job: PlayJob, trajectory: Trajectory) -> dict[str, Any]:
    """The per-episode entry of an item's results: seed, win, return, turns, status, actions, error."""
    return {
        "seed": job.seed,
        "won": trajectory.success,
        "return": trajectory.episode_return,
        "turns": len(trajectory.transitions),
        "status": trajectory.status.value,
        "actions": [t.action[:200] for t in trajectory.transitions],
        "error": trajectory.error,
    }


async def _solve(runner: EnvRunner, job: PlayJob, cfg: PlayConfig) -> dict[str, Any]:
    """Play the instance's own ``solution()``; failures are recorded, never raised."""
    record: dict[str, Any] = {"seed": job.seed, "won": False, "return": 0.0, "turns": 0, "error": ""}
    try:
        env = await runner.aopen(job.source, filename=f"<{job.env_id}>")
    except SandboxError as exc:
        return record | {"status": "env_error", "error": f"{exc.kind}: {exc}"}
    try:
        level = cfg.difficulty
        options = {"difficulty": level} if level is not None and env.meta.difficulty_levels > level else None
        await env.areset(seed=job.seed, options=options)
        actions, _ = solution_actions(await env.asolution())
        rewards, terminated = await _steps(env, actions)
    except NotImplementedError:
        return record | {"status": "no_solution", "error": "the environment defines no solution()"}
    except SandboxError as exc:
        return record | {"status": "env_error", "error": f"{exc.kind}: {exc}"}
    finally:
        await env.aclose()
    ret = episode_return(rewards, terminated, cfg.return_mode)
    won = is_success(ret, terminated, cfg.success_threshold)
    status = "terminated" if terminated else "unfinished"
    return record | {"won": won, "return": ret, "turns": len(rewards), "status": status, "actions": actions}


async def _steps(env: Any, actions: Sequence[str]) -> tuple[list[float], bool]:
    rewards: list[float] = []
    for action in actions:
        _, reward, terminated, truncated, _ = await env.astep(action)
        rewards.append(reward)
        if terminated or truncated:
            return rewards, terminated
    return rewards, False


def _result(suite: str, item: EnvItem, episodes: list[dict[str, Any]]) -> ItemResult:
    errors = sum(1 for e in episodes if e["status"] in ("env_error", "model_error", "no_solution"))
    episodes = [{**e, "ended": status_words(e["status"])} for e in episodes]  # the code's words, for people
    return ItemResult(
        suite=suite,
        item_id=item.item_id,
        category=item.category,
        scores=tuple(1.0 if e["won"] else 0.0 for e in episodes),
        detail={"task": item.name, "origin": item.origin, "errors": errors, "episodes": episodes},
    )
