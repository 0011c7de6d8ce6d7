"""The SPADE loop: choose environments -> play -> score -> credit the designer -> update -> checkpoint -> log.

Read it top to bottom: :func:`train` opens (or resumes) a run, warm-starts the policy and calls
:func:`run_step` once per step. The mode (:mod:`spade.modes`) chooses the environments of each regeneration
and credits the designer; the rest of a step is the same for every mode. Every random choice is drawn from a
seed derived from ``(seed, purpose, step, ...)`` (:func:`spade.seeds.derive_seed`), so a step's outcome
depends only on the checkpointed state it starts from: a resumed run gives an uninterrupted one's results.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from spade import cluster, modes, resources, stopping
from spade.backends import policy_metrics, prefix_cache_hit_rate
from spade.config import TrainConfig
from spade.errors import SpadeError
from spade.evals.intrain import TrainEval
from spade.modes import Mode, Regeneration
from spade.run import warm_start
from spade.run.components import Components, make_components
from spade.run.resume import Progress, Resumed, check_start, fresh, open_run, restore, save_checkpoint
from spade.run.state import LoopState
from spade.rundir import RunDir
from spade.scoring.samples import score_agent, update_line
from spade.training import distributed, follow_run
from spade.types import PlayStatus, TrainSample, Trajectory, plural


class PolicyFailedError(SpadeError):
    """Every play of a step failed in the model: the engine is broken, and the step would train on nothing.

    Raised before the step is recorded, so the run stops at its last checkpoint and ``--resume`` repeats the
    step once the engine works (engines that fail one request at a time answer with error completions).
    """


# -- entry point -------------------------------------------------------------------------------------------


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
            :data:`spade.config.options.RUNTIME_OPTIONS`): they take effect and are saved with the config.

    Raises:
        spade.config.ConfigError: ``runtime`` names another option, or ``steps`` is below the steps done.
        spade.stopping.Interrupted: a stop was requested (SIGINT/SIGTERM); the run is resumable.
        spade.rundir.RunLockedError: another process drives the run.
        spade.rundir.RunStateError: the run directory cannot be continued as it is (message: the way out).
        PolicyFailedError: every play of a step failed in the model (a broken engine); the run is resumable.

    Under ``accelerate launch`` rank 0 runs the loop and the other ranks only train (:mod:`spade.training.distributed`).
    """
    if distributed.is_follower():
        return follow_run(cfg, resume=resume, progress=progress)
    resumed, say = Resumed(steps, dict(runtime or {})), progress or (lambda _: None)
    return asyncio.run(stopping.run_until_stopped(_train(cfg, resume, say, overwrite, resumed)))


async def _train(
    cfg: TrainConfig, resume: bool, progress: Progress, overwrite: bool, resumed: Resumed
) -> RunDir:
    run = RunDir(cfg.run_dir)
    fresh_root = not run.root.exists()
    check_start(run, cfg, resume)
    with run.lock() as note:
        if note:
            progress(note)
        cfg, resume = open_run(run, cfg, resume, overwrite, resumed, progress=progress)
        ready = False
        try:
            mode = modes.make(cfg)
            with make_components(cfg, run, mode, progress=progress) as c:
                state = restore(cfg, run, c, mode, progress) if resume else fresh(cfg, c, mode)
                ready = True
                first = await _warm_start(cfg, run, c, state, progress)
                await _loop(cfg, run, c, mode, state, progress=progress, first=first)
        except BaseException:
            if not ready and not resume and fresh_root:  # a run that never started leaves nothing behind
                run.discard()
            elif not ready and not resume:
                run.clear()
            raise
    return run


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
    games = ", ".join(warm_start.env_names(cfg))
    progress(f"sft: warm start on {cfg.sft.episodes} scripted episodes of {games}{edits}")
    c.policy.release_memory()
    metrics = await warm_start.cached_warm_start(cfg, c.runner, c.policy.template, c.trainer, progress)
    c.policy.load_weights(c.trainer.export_weights(run.root / "policy"))
    progress(warm_start.describe(metrics, warm_start.env_names(cfg)))
    return metrics


# -- the loop ----------------------------------------------------------------------------------------------


async def _loop(
    cfg: TrainConfig,
    run: RunDir,
    c: Components,
    mode: Mode,
    state: LoopState,
    *,
    progress: Progress,
    first: dict[str, Any],
) -> None:
    stopping.check()  # asked for during the start-up, which held the event loop: no cancellation reached it
    board = run.tensorboard(purge_step=state.step)
    step_times: list[float] = []
    evaluator = TrainEval(cfg, run.root)  # held-out evaluation (spade.evals.intrain)
    try:
        while state.step < cfg.steps and not _budget_spent(cfg, state):
            if evaluator.due(state.step, state.sampled_tokens):
                progress(f"step {state.step}: evaluate on {', '.join(cfg.eval.suites)}")
            evals = await evaluator.at_step(c.policy, state.step, state.sampled_tokens)
            started = time.perf_counter()
            row = await run_step(cfg, c, mode, state, progress)
            row.update(first if state.step == 0 else {})
            state.sampled_tokens += _sampled_tokens(row)
            row["budget/sampled_tokens"] = float(state.sampled_tokens)
            row.update(evals)
            row["time/step_s"] = time.perf_counter() - started
            run.append_metrics(row)
            board.write(row)
            state.step += 1
            save_checkpoint(run, c, state)
            step_times.append(row["time/step_s"])
            progress(_summary(cfg, row, eta_s=float(np.mean(step_times)) * (cfg.steps - state.step)))
        if _budget_spent(cfg, state):
            progress(f"sampled-token budget reached: {state.sampled_tokens} >= {cfg.sampled_token_budget} "
                     f"tokens after {state.step} of {cfg.steps} steps")  # fmt: skip
        final = await evaluator.at_end(c.policy, state.step, state.sampled_tokens)
        if final is not None:
            run.append_metrics(final)
            board.write(final)
    finally:
        board.close()
        if isinstance(c.trainer, distributed.LeaderTrainer):
            c.trainer.stop()


async def run_step(
    cfg: TrainConfig, c: Components, mode: Mode, state: LoopState, progress: Progress
) -> dict[str, Any]:
    """One training step; returns its metrics row."""
    step = state.step
    row: dict[str, Any] = {"step": step}
    regen = await _regenerate(cfg, c, mode, state, progress=progress, row=row)  # None: same envs again
    trajectories = await _play(cfg, c, mode, state, regen, progress=progress, row=row)

    # Agent samples with group advantages (constant groups dropped) and what each environment measured.
    agent_samples, agent_metrics, per_env = score_agent(cfg, trajectories)
    row.update(agent_metrics)
    row.update(mode.observe(cfg, state, trajectories))  # procedural: difficulty levels follow the win rate
    row["speed/sampled_tokens_per_s"] = row["agent/sampled_tokens"] / max(row["time/play_s"], 1e-9)
    # The run's last step, by step count or by budget, credits every design still waiting.
    last = step == cfg.steps - 1 or _budget_spent(cfg, state, pending=_sampled_tokens(row))
    n_agent = int(row["agent/plays"])
    designer_samples, designer_metrics = mode.credit(
        cfg, c, state, regen, per_env, step=step, n_agent=n_agent, final=last
    )
    row.update(designer_metrics)

    progress(update_line(step, len(agent_samples), len(designer_samples) if mode.designs else None, row))
    t0 = time.perf_counter()
    row.update(_update(c, agent_samples + designer_samples))
    row["time/update_s"] = time.perf_counter() - t0

    row.update(c.remember(per_env, step))
    row.update(mode.metrics(cfg, c.memory))
    row.update(c.corpus.metrics())
    row.update(resources.metrics())
    row.update(policy_metrics(c.policy))
    row.update(cluster.runner_metrics(c.runner))  # cluster/*: plays per node, lost workers, retries
    return row


async def _regenerate(
    cfg: TrainConfig, c: Components, mode: Mode, state: LoopState, *, progress: Progress, row: dict[str, Any]
) -> Regeneration | None:
    """At a regeneration step, the mode's choice of environments (``state.current`` from now on)."""
    if state.step % cfg.designer.regen_interval != 0 and state.current:
        return None
    progress(f"step {state.step}: {mode.regen_line}")
    t0 = time.perf_counter()
    regen = await mode.regenerate(cfg, c, state, state.step)
    row.update(regen.metrics)
    state.current = regen.current
    row["time/design_s"] = time.perf_counter() - t0 - row.get("time/check_s", 0.0)
    return regen


async def _play(
    cfg: TrainConfig,
    c: Components,
    mode: Mode,
    state: LoopState,
    regen: Regeneration | None,
    *,
    progress: Progress,
    row: dict[str, Any],
) -> list[Trajectory]:
    """Play the current environments (new ones with their hinted arm too), then constant groups again."""
    progress(f"step {state.step}: play {plural(len(state.current), 'environment')}")
    t0, engine = time.perf_counter(), policy_metrics(c.policy)
    levels = mode.difficulty(state)
    hints = regen.hints(cfg.rollout.hint_plays_per_env) if regen is not None else {}
    trajectories = await c.player.play(state.current, hints, state.step, levels=levels)
    stopping.check()  # plays cut by a stop request end as model errors: they are no outcome to score
    more = await c.player.play_more(trajectories, state.step, levels=levels)
    stopping.check()
    trajectories += more
    row.update({"agent/extra_plays": float(len(more)), "time/play_s": time.perf_counter() - t0})
    row.update(prefix_cache_hit_rate(engine, policy_metrics(c.policy)))  # the agent's multi-turn reuse
    failed = [t for t in trajectories if t.status is PlayStatus.MODEL_ERROR]
    if failed and len(failed) == len(trajectories):
        raise PolicyFailedError(
            f"step {state.step}: all {len(failed)} plays failed in the model, so nothing was learned; the first "
            f"error: {failed[0].error}. Check the model backend (--model.*)"
        )
    c.record_plays(state.step, trajectories)
    return trajectories


def _update(c: Components, samples: Sequence[TrainSample]) -> dict[str, float]:
    # An in-process engine's KV cache: the update does not sit on top of it, and when there is no update
    # the next step's sampling does not add to what this one's left.
    c.policy.release_memory()
    if not samples:
        return {"update/skipped": 1.0}
    metrics = c.trainer.train_step(samples)
    t0 = time.perf_counter()
    c.policy.load_weights(c.trainer.export_weights(c.run.root / "policy"))
    metrics["time/weight_sync_s"] = time.perf_counter() - t0
    return {k if "/" in k else f"update/{k}": float(v) for k, v in metrics.items()}


# -- budget and progress -----------------------------------------------------------------------------------


def _sampled_tokens(row: Mapping[str, Any]) -> int:
    """Completion tokens one step sampled: agent replies (both arms), designs and hints."""
    keys = ("agent/sampled_tokens", "designer/sampled_tokens", "hint/sampled_tokens")
    return int(sum(row.get(k, 0.0) for k in keys))


def _budget_spent(cfg: TrainConfig, state: LoopState, pending: int = 0) -> bool:
    """Whether the run's sampled tokens, with ``pending`` ones not yet counted, reach its budget."""
    return 0 < cfg.sampled_token_budget <= state.sampled_tokens + pending


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
