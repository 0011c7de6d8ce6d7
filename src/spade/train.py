"""The SPADE loop: design -> check -> hint -> play -> reward -> update -> remember -> log -> checkpoint.

Read it top to bottom: :func:`train` sets up (or resumes) a run and calls :func:`run_step` once per step;
each phase lives in a function below (:mod:`spade.phases` holds the design phase). Every random choice is
drawn from a seed derived from ``(seed, purpose, step, ...)`` by :func:`spade.seeds.derive_seed`, so a
step's outcome depends only on the checkpointed state it starts from: resuming a killed run gives the same
results as an uninterrupted one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spade import cluster, procedural, resources, stopping
from spade import credit as cr
from spade import rewards as rw
from spade.backends import policy_metrics
from spade.config import ConfigError, TrainConfig
from spade.credit import EnvStats, PendingCredit
from spade.design import DesignOutcome, design_phase, fresh_only
from spade.errors import SpadeError
from spade.evals.intrain import TrainEval
from spade.memory import EnvStatus, Memory
from spade.memory_select import pool_batch
from spade.options import RUNTIME_OPTIONS, changed_options, with_options
from spade.phases import Components, make_components
from spade.regret import estimate_regret
from spade.rollout import PlayJob, episode_seeds, paired_jobs, run_jobs, status_counts
from spade.rundir import RunDir
from spade.seeds import derive_rng, derive_seed
from spade.training import distributed, follow_run, sft
from spade.types import PlayStatus, TrainSample, Trajectory

Progress = Callable[[str], None]


class PolicyFailedError(SpadeError):
    """Every play of a step failed in the model: the engine is broken, and the step would train on nothing.

    Raised before the step is recorded, so the run stops at its last checkpoint and ``--resume`` repeats the
    step once the engine works (engines that fail one request at a time answer with error completions).
    """


@dataclass
class LoopState:
    """Everything the loop carries from one step to the next (checkpointed as JSON)."""

    step: int = 0
    current: list[str] = field(default_factory=list)
    """Environment ids played at every step until the next regeneration."""
    credit: list[PendingCredit] = field(default_factory=list)
    """Designer samples awaiting delayed credit, each with its window of plays so far."""
    lp_ema: dict[str, float] = field(default_factory=dict)
    """learning_potential variant: per-skill slow EMA of window win rates."""
    corpus: dict[str, Any] = field(default_factory=dict)
    """The corpus sampler's resumable state."""
    levels: dict[str, procedural.TaskLevel] = field(default_factory=dict)
    """procedural mode: each Reasoning-Gym task's difficulty controller."""
    sampled_tokens: int = 0
    """Completion tokens the model has sampled in the run so far (``sampled_token_budget``)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (the checkpoint's ``state.json``)."""
        return {"step": self.step, "current": list(self.current), "credit": [e.to_dict() for e in self.credit],
                "lp_ema": dict(self.lp_ema), "corpus": self.corpus,
                "levels": {k: v.to_dict() for k, v in self.levels.items()},
                "sampled_tokens": self.sampled_tokens}  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LoopState:
        """Rebuild a state written by :meth:`to_dict`."""
        return cls(
            step=int(data["step"]),
            current=[str(e) for e in data["current"]],
            credit=[PendingCredit.from_dict(e) for e in data["credit"]],
            lp_ema={str(k): float(v) for k, v in data["lp_ema"].items()},
            corpus=dict(data["corpus"]),
            levels={str(k): procedural.TaskLevel.from_dict(v) for k, v in data.get("levels", {}).items()},
            sampled_tokens=int(data.get("sampled_tokens", 0)),  # absent in checkpoints of older runs
        )


# -- entry points ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Resumed:
    """What a resume changes in the saved config: the step total (None: as saved) and runtime options."""

    steps: int | None = None
    runtime: Mapping[str, Any] = field(default_factory=dict)


def train(
    cfg: TrainConfig,
    *,
    resume: bool = False,
    progress: Progress | None = None,
    overwrite: bool = False,
    steps: int | None = None,
    runtime: Mapping[str, Any] | None = None,
) -> RunDir:
    """Run (or, with ``resume``, continue) a training run; returns its run directory.

    Args:
        cfg: the run's config; with ``resume`` only ``cfg.run_dir`` is used (the saved config applies).
        resume: continue the run in ``cfg.run_dir`` from its newest complete checkpoint.
        progress: receives one line per phase and step.
        overwrite: delete what ``cfg.run_dir`` holds first (with ``resume``: start the saved run over).
        steps: with ``resume``, a new step total (extends a finished run), not below the steps done.
        runtime: with ``resume``, new values of runtime options by dotted name (``{"model.threads": 1}``;
            :data:`spade.options.RUNTIME_OPTIONS`): they take effect and are saved with the config.

    Raises:
        spade.config.ConfigError: ``runtime`` names another option, or ``steps`` is below the steps done.
        spade.stopping.Interrupted: a stop was requested (SIGINT/SIGTERM); the run is resumable.
        spade.rundir.RunLockedError: another process drives the run.
        spade.rundir.RunStateError: the run directory cannot be continued as it is (message: the way out).
        PolicyFailedError: every play of a step failed in the model (a broken engine); the run is resumable.

    Under ``accelerate launch`` rank 0 runs the loop and the other ranks only train (:mod:`spade.distributed`).
    """
    if distributed.is_follower():
        return follow_run(cfg, resume=resume)
    say = progress or (lambda _: None)
    resumed = Resumed(steps, dict(runtime or {}))
    return asyncio.run(stopping.run_until_stopped(_train(cfg, resume, say, overwrite, resumed)))


async def _train(
    cfg: TrainConfig, resume: bool, progress: Progress, overwrite: bool, resumed: Resumed
) -> RunDir:
    run = RunDir(cfg.run_dir)
    fresh_root = not run.root.exists()
    if resume:
        run.load_config()  # raises before anything (even the lock file) is written when there is no run
    with run.lock() as note:
        if note:
            progress(note)
        cfg, resume = _open_run(run, cfg, resume, overwrite, resumed, progress=progress)
        ready = False
        try:
            with make_components(cfg, run) as c:
                state = _restore(cfg, run, c, progress) if resume else _fresh(cfg, c)
                ready = True
                first = await _warm_start(cfg, run, c, state, progress)
                await _loop(cfg, run, c, state, progress, first=first)
        except BaseException:
            if not ready and not resume and fresh_root:  # a run that never started leaves nothing behind
                run.discard()
            elif not ready and not resume:
                run.clear()
            raise
    return run


def _open_run(
    run: RunDir, cfg: TrainConfig, resume: bool, overwrite: bool, resumed: Resumed, *, progress: Progress
) -> tuple[TrainConfig, bool]:
    """The config to run and whether it continues saved state (False: a fresh start).

    Raises:
        ConfigError: a resume that changes an option other than runtime ones, or sets fewer steps than
            the run has done; raised before anything is written.
    """
    if resume:
        cfg = _with_runtime(run.load_config(), resumed.runtime, progress)
        if resumed.steps is not None:
            cfg = dataclasses.replace(cfg, steps=resumed.steps)
        if not overwrite:
            run.check_archive()
            done = run.resume_point().step  # raises when there is nothing safe to continue from
            if resumed.steps is not None and resumed.steps < done:
                raise ConfigError(
                    f"--steps {resumed.steps} is below the {done} steps {run.root} has done: pass --steps "
                    f"{done} or more to extend it, or leave --steps out (or add --overwrite to start it over)"
                )
            run.save_config(cfg)
            return cfg, True
    if overwrite:
        run.clear()
    run.create(cfg)
    return cfg, False


def _with_runtime(cfg: TrainConfig, runtime: Mapping[str, Any], progress: Progress) -> TrainConfig:
    """The saved ``cfg`` with new values of runtime options; a progress line names each change."""
    refused = sorted(set(runtime) - set(RUNTIME_OPTIONS))
    if refused:
        raise ConfigError(
            f"a resumed run keeps its saved config: {', '.join(refused)} cannot change (only the runtime "
            f"options {', '.join(RUNTIME_OPTIONS)}); start a new run to change them"
        )
    new = with_options(cfg, runtime)
    before = changed_options(new, cfg)
    for name, value in changed_options(cfg, new).items():
        progress(f"resuming with {name}={value!r} (was {before[name]!r})")
    return new


async def _warm_start(
    cfg: TrainConfig, run: RunDir, c: Components, state: LoopState, progress: Progress
) -> dict[str, Any]:
    """The supervised warm start (``sft``) of a run at step 0; its metrics go into step 0's row.

    Step 0 has no checkpoint, so a run killed before step 0 ended starts over, warm start included.
    """
    if state.step > 0 or not (cfg.sft.episodes or cfg.sft.designs or cfg.sft.hints):
        return {}
    edits = f" and {cfg.sft.designs} line edits" if cfg.sft.designs else ""
    edits += f" and {cfg.sft.hints} hints" if cfg.sft.hints else ""
    progress(
        f"sft: warm start on {cfg.sft.episodes} scripted episodes of {', '.join(sft.env_names(cfg))}{edits}"
    )
    c.policy.release_memory()
    metrics = await sft.cached_warm_start(cfg, c.runner, c.policy.template, c.trainer, progress)
    c.policy.load_weights(c.trainer.export_weights(run.root / "policy"))
    progress(sft.describe(metrics, sft.env_names(cfg)))
    return metrics


async def _loop(
    cfg: TrainConfig,
    run: RunDir,
    c: Components,
    state: LoopState,
    progress: Progress,
    *,
    first: dict[str, Any],
) -> None:
    board = run.tensorboard(purge_step=state.step)
    step_times: list[float] = []
    evaluator = TrainEval(cfg, run.root)  # held-out evaluation (spade.evals.intrain); off when every=0
    try:
        while state.step < cfg.steps and not _budget_spent(cfg, state):
            if evaluator.due(state.step):
                progress(f"step {state.step}: evaluate on {', '.join(cfg.eval.suites)}")
            evals = await evaluator.at_step(c.policy, state.step)
            started = time.perf_counter()
            row = await run_step(cfg, c, state, progress)
            row.update(first if state.step == 0 else {})
            state.sampled_tokens += _sampled_tokens(row)
            row["budget/sampled_tokens"] = float(state.sampled_tokens)
            row.update(evals)
            row["time/step_s"] = time.perf_counter() - started
            run.append_metrics(row)
            board.write(row)
            state.step += 1
            _checkpoint(run, c, state)
            step_times.append(row["time/step_s"])
            progress(_summary(cfg, row, eta_s=float(np.mean(step_times)) * (cfg.steps - state.step)))
        if _budget_spent(cfg, state):
            progress(f"sampled-token budget reached: {state.sampled_tokens} >= {cfg.sampled_token_budget} "
                     f"tokens after {state.step} of {cfg.steps} steps")  # fmt: skip
        final = await evaluator.at_end(c.policy, state.step)
        if final is not None:
            run.append_metrics(final)
            board.write(final)
    finally:
        board.close()
        if isinstance(c.trainer, distributed.LeaderTrainer):
            c.trainer.stop()


def _sampled_tokens(row: Mapping[str, Any]) -> int:
    """Completion tokens one step sampled: agent replies (both arms), designs and hints."""
    keys = ("agent/sampled_tokens", "designer/sampled_tokens", "hint/sampled_tokens")
    return int(sum(row.get(k, 0.0) for k in keys))


def _budget_spent(cfg: TrainConfig, state: LoopState, pending: int = 0) -> bool:
    """Whether the run's sampled tokens, with ``pending`` ones not yet counted, reach its budget."""
    return 0 < cfg.sampled_token_budget <= state.sampled_tokens + pending


def _fresh(cfg: TrainConfig, c: Components) -> LoopState:
    if cfg.memory.warm_start or cfg.mode != "selfplay":
        c.memory.warm_start(c.pool)
    levels = procedural.initial_levels(cfg.procedural) if cfg.mode == "procedural" else {}
    return LoopState(corpus=c.corpus_state(), levels=levels)


def _restore(cfg: TrainConfig, run: RunDir, c: Components, progress: Progress) -> LoopState:
    point = run.resume_point()
    for note in point.notes:
        progress(note)
    checkpoint = point.checkpoint
    if checkpoint is None:  # killed before the first checkpoint: start the same run over
        c.memory.rollback_to(-1)
        run.truncate_metrics(0)
        return _fresh(cfg, c)
    progress(f"resuming {run.root} at step {point.step} of {cfg.steps} (checkpoint {checkpoint.name})")
    if point.step >= cfg.steps:
        progress(f"the run has done all {cfg.steps} steps; extend it with `--resume {run.root} --steps N`")
    state = LoopState.from_dict(run.read_state(checkpoint))
    c.memory.rollback_to(state.step - 1)
    run.truncate_metrics(state.step)
    c.restore_corpus(state.corpus)
    c.trainer.load(checkpoint / "trainer")
    c.policy.load_weights(c.trainer.export_weights(run.root / "policy"))
    return state


def _checkpoint(run: RunDir, c: Components, state: LoopState) -> None:
    tmp = run.begin_checkpoint(state.step)
    c.trainer.save(tmp / "trainer")
    state.corpus = c.corpus_state()
    run.commit_checkpoint(tmp, state.step, state.to_dict())


# -- one step ----------------------------------------------------------------------------------------------


async def run_step(cfg: TrainConfig, c: Components, state: LoopState, progress: Progress) -> dict[str, Any]:
    """One training step; returns its metrics row."""
    step = state.step
    row: dict[str, Any] = {"step": step}
    regen = step % cfg.designer.regen_interval == 0 or not state.current
    designed: list[DesignOutcome] = []
    if regen:
        progress(f"step {step}: {_regen_line(cfg)}")
        t0 = time.perf_counter()
        if cfg.mode == "selfplay":
            designed, design_metrics = await design_phase(cfg, c, step)
            stopping.check()  # designs cut by a stop request are no designs to play
            row.update(design_metrics)
        state.current = _choose_current(cfg, c.memory, designed, step)
        row["time/design_s"] = time.perf_counter() - t0 - row.get("time/check_s", 0.0)

    progress(f"step {step}: play {len(state.current)} environments")
    t0 = time.perf_counter()
    levels = {procedural.env_id(k): v.level for k, v in state.levels.items()}
    trajectories = await _play(cfg, c, state.current, designed, step, levels=levels)
    stopping.check()  # plays cut by a stop request end as model errors: they are no outcome to score
    more = await _play_more(cfg, c, trajectories, step, levels=levels)
    stopping.check()
    trajectories += more
    row["agent/extra_plays"] = float(len(more))
    row["time/play_s"] = time.perf_counter() - t0
    failed = [t for t in trajectories if t.status is PlayStatus.MODEL_ERROR]
    if failed and len(failed) == len(trajectories):
        raise PolicyFailedError(
            f"step {step}: all {len(failed)} plays failed in the model, so nothing was learned; the first "
            f"error: {failed[0].error}. Check the model backend (--model.*)"
        )
    c.record_plays(step, trajectories)

    agent_samples, agent_metrics, per_env = _score_agent(cfg, trajectories)
    row.update(agent_metrics)
    if cfg.mode == "procedural":  # move each played task's difficulty by its win rate (RLVE-style)
        outcomes = procedural.outcomes(trajectories)
        state.levels, level_metrics = procedural.observe(state.levels, outcomes, cfg.procedural)
        row.update(level_metrics)
    row["speed/sampled_tokens_per_s"] = row["agent/sampled_tokens"] / max(row["time/play_s"], 1e-9)
    state.credit = list(cr.observe([*state.credit, *(_pending(d, per_env, step) for d in designed)], per_env))
    # The designer scale counts agent plays before constant groups are dropped (as the authors do). The run's
    # last step, by step count or by budget, credits every design still waiting.
    last = step == cfg.steps - 1 or _budget_spent(cfg, state, pending=_sampled_tokens(row))
    designer_samples, designer_metrics = _score_designer(
        cfg, c, state, step, int(row["agent/plays"]), final=last
    )
    row.update(designer_metrics)

    progress(f"step {step}: update on {len(agent_samples)} agent + {len(designer_samples)} designer samples")
    t0 = time.perf_counter()
    row.update(_update(c, agent_samples + designer_samples))
    row["time/update_s"] = time.perf_counter() - t0

    _remember(cfg, c.memory, per_env, step, row)
    row.update(c.corpus.metrics())
    row.update(resources.metrics())
    row.update(policy_metrics(c.policy))
    row.update(cluster.runner_metrics(c.runner))  # cluster/*: plays per node, lost workers, retries
    return row


# -- which environments are played -------------------------------------------------------------------------


def _regen_line(cfg: TrainConfig) -> str:
    """What a regeneration does in ``cfg.mode`` (the progress line)."""
    if cfg.mode == "fixed_pool":
        return "next batch of the fixed pool (agent only: nothing is designed)"
    if cfg.mode == "procedural":
        return "next batch of Reasoning-Gym tasks at their current levels (agent only: nothing is designed)"
    return "design"


def _choose_current(
    cfg: TrainConfig, memory: Memory, designed: Sequence[DesignOutcome], step: int
) -> list[str]:
    """The environments played until the next regeneration.

    fixed_pool and procedural: the next batch of the pool (:func:`_pool_batch`; procedural: of the task
    environments). selfplay: the new valid environments, topped up from the archive when there are too few
    (:func:`_top_up`).
    """
    if cfg.mode != "selfplay":
        return _pool_batch(cfg, memory, step)
    if not cfg.memory.enabled:  # no-memory ablation: never replay designs
        return fresh_only(cfg, memory, designed, step)
    return _top_up(cfg, memory, [d.env_id for d in designed if d.valid], step)


def _top_up(cfg: TrainConfig, memory: Memory, current: list[str], step: int) -> list[str]:
    """``current`` plus PLR replay of played environments, then any archived ones, up to envs_per_regen."""
    want = cfg.designer.envs_per_regen
    if len(current) < want:
        replay = memory.replay(want - len(current), step, seed=derive_seed(cfg.seed, "replay", step))
        current = [*current, *(r.env_id for r in replay if r.env_id not in current)]
    if len(current) < want:  # nothing played yet to replay: draw from every archived environment
        rest = sorted(r.env_id for r in memory.records(status=EnvStatus.VALID) if r.env_id not in current)
        derive_rng(cfg.seed, "fill", step).shuffle(rest)
        current = [*current, *rest[: want - len(current)]]
    return current


def _pool_batch(cfg: TrainConfig, memory: Memory, step: int) -> list[str]:
    """The fixed pool's batch for the regeneration at ``step`` (``memory.pool_order``).

    'epochs': every environment of the pool once per epoch, in a new seeded order each epoch (as released).
    'replay': half of each batch explores environments not played yet, the rest is PLR replay.
    """
    want = cfg.designer.envs_per_regen
    records = memory.records(status=EnvStatus.VALID)
    if cfg.memory.pool_order == "epochs":
        ids = sorted(r.env_id for r in records)
        index = step // cfg.designer.regen_interval
        return pool_batch(ids, want, index, lambda epoch: derive_rng(cfg.seed, "pool", epoch))
    fresh = sorted(r.env_id for r in records if r.last_step is None)
    derive_rng(cfg.seed, "explore", step).shuffle(fresh)
    return _top_up(cfg, memory, fresh[: want - want // 2], step)


async def _play(
    cfg: TrainConfig,
    c: Components,
    current: Sequence[str],
    designed: Sequence[DesignOutcome],
    step: int,
    *,
    levels: Mapping[str, int],
) -> list[Trajectory]:
    """Play ``current`` (``levels``: a difficulty level per environment id, procedural mode)."""
    new = {d.env_id: d for d in designed if d.valid}
    rc = cfg.rollout
    jobs = []
    for env_id in current:
        seeds = episode_seeds(cfg.seed, step, env_id, max(rc.plays_per_env, rc.hint_plays_per_env))
        code = c.memory.get(env_id).code
        plain = paired_jobs(env_id, code, seeds, rc.plays_per_env, hint=None, hint_plays=0)
        jobs += [dataclasses.replace(j, difficulty=levels.get(env_id)) for j in plain]
        if env_id in new:  # hinted arm: one code-only hint for every seed, or one hint per seed
            hints = new[env_id].hints_for(rc.hint_plays_per_env)
            jobs += [PlayJob(env_id, code, s, h) for s, h in zip(seeds, hints, strict=False) if h]
    return await _run_plays(cfg, c, jobs)


async def _run_plays(cfg: TrainConfig, c: Components, jobs: Sequence[PlayJob]) -> list[Trajectory]:
    # More concurrent plays than live sandbox instances would only queue threads on instance slots.
    limit = min(cfg.rollout.max_concurrent_plays, cluster.instance_capacity(cfg))
    return await run_jobs(c.runner, c.policy, jobs, cfg.play, max_concurrent=limit)


async def _play_more(
    cfg: TrainConfig,
    c: Components,
    trajectories: Sequence[Trajectory],
    step: int,
    *,
    levels: Mapping[str, int],
) -> list[Trajectory]:
    """``rollout.extra_plays`` more unhinted plays of each environment whose unhinted plays all returned the
    same, on the seeds after the first ``plays_per_env`` (those of its hinted plays, when it has them)."""
    rc = cfg.rollout
    returns: dict[str, set[float]] = {}
    for t in trajectories:
        if not t.hinted and t.status is not PlayStatus.ENV_ERROR:
            returns.setdefault(t.env_id, set()).add(round(t.episode_return, 9))
    constant = [env_id for env_id, seen in returns.items() if len(seen) == 1]
    if rc.extra_plays <= 0 or not constant:
        return []
    jobs = [
        PlayJob(env_id, c.memory.get(env_id).code, seed, difficulty=levels.get(env_id))
        for env_id in constant
        for seed in episode_seeds(cfg.seed, step, env_id, rc.plays_per_env + rc.extra_plays)[
            rc.plays_per_env :
        ]
    ]
    return await _run_plays(cfg, c, jobs)


# -- rewards -----------------------------------------------------------------------------------------------


def _score_agent(
    cfg: TrainConfig, trajectories: Sequence[Trajectory]
) -> tuple[list[TrainSample], dict[str, Any], dict[str, EnvStats]]:
    """Agent samples with group advantages, metrics, and what each environment's plays measured."""
    plain = [t for t in trajectories if not t.hinted]
    hinted = [t for t in trajectories if t.hinted]
    adv = rw.agent_advantages([t.episode_return for t in plain], [t.env_id for t in plain])
    samples = [
        TrainSample(t.tokens_T, t.mask_T, t.sample_logprobs_T, float(a), "agent")
        for t, a, drop in zip(plain, adv.advantages_N, adv.drop_N, strict=True)
        if any(t.mask_T) and not (drop and cfg.reward.drop_constant_groups)
    ]
    per_env = _env_stats(cfg, plain, hinted)
    metrics: dict[str, Any] = {
        "agent/plays": float(len(plain)),
        "agent/win_rate": _mean([t.success for t in plain]),
        "agent/return_mean": _mean([t.episode_return for t in plain]),
        "agent/turns_mean": _mean([len(t.transitions) for t in plain]),
        "agent/samples_kept": float(len(samples)),
        "agent/constant_group_share": _constant_share([t.env_id for t in plain], adv.drop_N.tolist()),
        "agent/tokens": float(sum(len(t.tokens_T) for t in trajectories)),
        "agent/sampled_tokens": float(sum(sum(t.mask_T) for t in trajectories)),
        **status_counts(plain, "agent"),
    }
    seeds = [t.success for t in plain if t.env_id.startswith("seed:")]
    if seeds:  # the seed games are the same at every step: wins there are comparable across regenerations
        metrics["agent/win_rate_seeds"] = _mean(seeds)
    if hinted:  # only regeneration steps play the hinted arm
        metrics["agent/win_rate_hint"] = _mean([t.success for t in hinted])
        errors = [s.regret.se for s in per_env.values() if s.regret is not None and s.regret.se is not None]
        if errors:
            metrics["designer/regret_se"] = _mean(errors)
    return samples, metrics, per_env


def _constant_share(env_ids_N: Sequence[str], drop_N: Sequence[bool]) -> float:
    """Fraction of the step's groups (an environment's unhinted plays) whose returns were all equal: their
    plays carry no gradient and are dropped (``reward.drop_constant_groups``)."""
    dropped = {e: bool(d) for e, d in zip(env_ids_N, drop_N, strict=True)}
    return sum(dropped.values()) / len(dropped) if dropped else 0.0


def _env_stats(
    cfg: TrainConfig, plain: Sequence[Trajectory], hinted: Sequence[Trajectory]
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
                cfg.reward.regret_estimator,
            )
        returns = float(np.sum([t.episode_return for t in mine]))
        per_env[env_id] = EnvStats(len(mine), sum(t.success for t in mine), returns, regret)
    return per_env


def _pending(d: DesignOutcome, per_env: Mapping[str, EnvStats], step: int) -> PendingCredit:
    """A new buffer entry for one designer sample; a valid env none of whose plays finished counts as invalid.

    Its window starts empty: :func:`spade.credit.observe` adds this step's plays like any later step's.
    """
    stats = per_env.get(d.env_id)
    regret = stats.regret.regret if stats is not None and stats.regret is not None else None
    checked = not d.valid and not d.reason.startswith("extract_")
    return PendingCredit(
        d.sample_ref, d.env_id, d.skill, step, d.valid and stats is not None, regret, checked=checked
    )


def _score_designer(
    cfg: TrainConfig, c: Components, state: LoopState, step: int, n_agent: int, *, final: bool
) -> tuple[list[TrainSample], dict[str, Any]]:
    """Release the designer samples due at ``step`` (all of them at the run's ``final`` step) and score them."""
    due, rest = cr.release_due(state.credit, step, cfg.reward.delay, final=final)
    state.credit = list(rest)
    if not due:
        return [], {}
    rewards, state.lp_ema = cr.credit_rewards(due, cfg.reward, state.lp_ema)
    valid = [d.entry for d in due if d.entry.valid]
    measured = [e.regret for e in valid if e.regret is not None]
    metrics: dict[str, Any] = {
        "designer/credited": float(len(due)),
        "designer/reward_mean": _mean(rewards),
        "designer/regret_measured": float(len(measured)),
        "designer/win_rate_mean": _mean([e.rate(cfg.reward.rate_measure) for e in valid]),
        "designer/window_plays_mean": _mean([e.plays for e in valid]),
        "designer/staleness_mean": _mean([d.staleness for d in due]),
    }
    if measured:  # absent rather than 0 when no hint was accepted and played
        metrics["designer/regret_mean"] = _mean(measured)
        metrics["designer/regret_min"], metrics["designer/regret_max"] = min(measured), max(measured)
    n_designer = max(1, cfg.designer.envs_per_regen)
    scale = rw.designer_scale(
        max(n_agent, 1), n_designer, cfg.designer.regen_interval, cfg.reward.designer_scale_cap
    )
    adv = rw.designer_advantages(rewards, [d.entry.skill for d in due], scale)
    samples = []
    for d, a, drop in zip(due, adv.advantages_N, adv.drop_N, strict=True):
        sample = c.load_design_sample(d.entry.sample_ref)
        if sample is None or (drop and cfg.reward.drop_constant_groups):
            continue
        samples.append(
            TrainSample(
                sample.tokens_T, sample.mask_T, sample.sample_logprobs_T, float(a), "designer", d.staleness
            )
        )
    metrics["designer/samples_kept"] = float(len(samples))
    return samples, metrics


def _update(c: Components, samples: Sequence[TrainSample]) -> dict[str, float]:
    # An in-process engine's KV cache: the update does not sit on top of it, and when there is no update
    # the next step's sampling does not add to what this one's left.
    c.policy.release_memory()
    if not samples:
        return {"update/skipped": 1.0}
    metrics = c.trainer.train_step(samples)
    c.policy.load_weights(c.trainer.export_weights(c.run.root / "policy"))
    return {k if "/" in k else f"update/{k}": float(v) for k, v in metrics.items()}


# -- memory ------------------------------------------------------------------------------------------------


def _remember(
    cfg: TrainConfig, memory: Memory, per_env: Mapping[str, EnvStats], step: int, row: dict[str, Any]
) -> None:
    """Record each played environment's statistics in the archive; add the archive's metrics to ``row``."""
    for env_id, s in per_env.items():
        regret = s.regret.regret if s.regret is not None and s.regret.se is not None else None
        memory.record_stats(env_id, step, s.win_rate, regret, s.plays)
    row.update(memory.metrics())
    row["memory/size"] = row.get("memory/valid", 0.0)
    if cfg.mode != "selfplay":  # fraction of the pool played at least once
        pool = memory.records(status=EnvStatus.VALID)
        row["pool/covered"] = sum(r.last_step is not None for r in pool) / max(len(pool), 1)


def _mean(values: Sequence[float] | Sequence[bool] | Sequence[int]) -> float:
    return float(np.mean(values)) if len(values) else 0.0


def _summary(cfg: TrainConfig, row: dict[str, Any], eta_s: float) -> str:
    """One progress line: step, validity, win rates, regret, speed and ETA."""
    parts = [f"step {row['step'] + 1}/{cfg.steps} in {row['time/step_s']:.1f}s"]
    if "designer/envs" in row:
        valid = round(row["designer/valid_rate"] * row["designer/envs"])
        parts.append(f"envs valid {valid}/{int(row['designer/envs'])}")
    hint = f" (hint {row['agent/win_rate_hint']:.2f})" if "agent/win_rate_hint" in row else ""
    parts.append(f"win {row['agent/win_rate']:.2f}{hint}")
    if "procedural/level_mean" in row:
        parts.append(f"level {row['procedural/level_mean']:.2f}")
    if "designer/regret_mean" in row:
        parts.append(f"regret {row['designer/regret_mean']:+.2f}")
    parts.append(f"{row['speed/sampled_tokens_per_s']:.0f} tok/s")
    parts.append(f"ETA {eta_s / 60:.1f} min")
    return " | ".join(parts)


def main(argv: Sequence[str]) -> int:
    """``spade train``: parse the preset, overrides and --resume, then train."""
    from spade.train_cli import run_cli  # noqa: PLC0415 - keeps tyro out of library imports

    return run_cli(argv)
