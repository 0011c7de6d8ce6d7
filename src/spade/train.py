"""The SPADE loop: design -> check -> hint -> play -> reward -> update -> remember -> log -> checkpoint.

Read it top to bottom: :func:`train` sets up (or resumes) a run and calls :func:`run_step` once per step;
each phase lives in a function below (:mod:`spade.phases` holds the design phase). Every random choice is
drawn from a generator seeded by ``(seed, step, purpose)``, so a step's outcome depends only on the
checkpointed state it starts from: resuming a killed run gives the same results as an uninterrupted one.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spade import rewards as rw
from spade.config import TrainConfig
from spade.evals.intrain import TrainEval
from spade.memory import EnvStatus, Memory
from spade.phases import Components, DesignOutcome, design_phase, make_components
from spade.rollout import episode_seeds, paired_jobs, run_jobs, status_counts
from spade.rundir import RunDir
from spade.types import TrainSample, Trajectory

Progress = Callable[[str], None]


@dataclass
class LoopState:
    """Everything the loop carries from one step to the next (checkpointed as JSON)."""

    step: int = 0
    current: list[str] = field(default_factory=list)
    """Environment ids played at every step until the next regeneration."""
    credit: list[dict[str, Any]] = field(default_factory=list)
    """Designer samples awaiting delayed credit (spade.rewards.PendingCredit dicts)."""
    lp_ema: dict[str, float] = field(default_factory=dict)
    corpus: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict."""
        return {"step": self.step, "current": self.current, "credit": self.credit, "lp_ema": self.lp_ema,
                "corpus": self.corpus}  # fmt: skip


# -- entry points ------------------------------------------------------------------------------------------


def train(cfg: TrainConfig, *, resume: bool = False, progress: Progress | None = None) -> RunDir:
    """Run (or, with ``resume``, continue) a training run; returns its run directory."""
    return asyncio.run(_train(cfg, resume=resume, progress=progress or (lambda _: None)))


async def _train(cfg: TrainConfig, *, resume: bool, progress: Progress) -> RunDir:
    run = RunDir(cfg.run_dir)
    if resume:
        cfg = run.load_config()
    else:
        run.create(cfg)
    with make_components(cfg, run) as c:
        state = _restore(cfg, run, c) if resume else _fresh(cfg, c)
        board = run.tensorboard(purge_step=state.step)
        step_times: list[float] = []
        evaluator = TrainEval(cfg, run.root)  # held-out evaluation (spade.evals.intrain); off when every=0
        try:
            while state.step < cfg.steps:
                evals = await evaluator.at_step(c.policy, state.step)
                started = time.perf_counter()
                row = await run_step(cfg, c, state, progress)
                row.update(evals)
                row["time/step_s"] = time.perf_counter() - started
                run.append_metrics(row)
                board.write(row)
                state.step += 1
                _checkpoint(run, c, state)
                step_times.append(row["time/step_s"])
                progress(_summary(cfg, row, eta_s=float(np.mean(step_times)) * (cfg.steps - state.step)))
            final = await evaluator.at_end(c.policy, cfg.steps)
            if final is not None:
                run.append_metrics(final)
                board.write(final)
        finally:
            board.close()
    return run


def _fresh(cfg: TrainConfig, c: Components) -> LoopState:
    if cfg.memory.warm_start or cfg.mode == "fixed_pool":
        c.memory.warm_start(c.pool)
    return LoopState(corpus=c.corpus_state())


def _restore(cfg: TrainConfig, run: RunDir, c: Components) -> LoopState:
    checkpoint = run.latest_checkpoint()
    if checkpoint is None:  # killed before the first checkpoint: start the same run over
        c.memory.rollback_to(-1)
        run.truncate_metrics(0)
        return _fresh(cfg, c)
    data = run.read_state(checkpoint)
    state = LoopState(data["step"], data["current"], data["credit"], data["lp_ema"], data["corpus"])
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
        progress(f"step {step}: design")
        t0 = time.perf_counter()
        if cfg.mode == "selfplay":
            designed, design_metrics = await design_phase(cfg, c, step)
            row.update(design_metrics)
        state.current = _choose_current(cfg, c.memory, designed, step)
        row["time/design_s"] = time.perf_counter() - t0 - row.get("time/check_s", 0.0)

    progress(f"step {step}: play {len(state.current)} environments")
    t0 = time.perf_counter()
    trajectories = await _play(cfg, c, state.current, designed, step)
    row["time/play_s"] = time.perf_counter() - t0

    agent_samples, agent_metrics, per_env = _score_agent(cfg, trajectories)
    row.update(agent_metrics)
    row["speed/sampled_tokens_per_s"] = row["agent/sampled_tokens"] / max(row["time/play_s"], 1e-9)
    state.credit += [_pending(d, per_env, step) for d in designed]
    designer_samples, designer_metrics = _score_designer(cfg, c, state, step, len(agent_samples))
    row.update(designer_metrics)

    progress(f"step {step}: update on {len(agent_samples)} agent + {len(designer_samples)} designer samples")
    t0 = time.perf_counter()
    row.update(_update(c, agent_samples + designer_samples))
    row["time/update_s"] = time.perf_counter() - t0

    for env_id, (win, regret, plays) in per_env.items():
        c.memory.record_stats(env_id, step, win, regret, plays)
    row.update(c.memory.metrics())
    row["memory/size"] = row.get("memory/valid", 0.0)
    row.update(c.corpus.metrics())
    return row


def _choose_current(
    cfg: TrainConfig, memory: Memory, designed: Sequence[DesignOutcome], step: int
) -> list[str]:
    """The new valid environments; topped up from the archive (PLR replay) when there are too few."""
    want = cfg.designer.envs_per_regen
    current = [d.env_id for d in designed if d.valid]
    if len(current) < want:
        replay = memory.replay(want - len(current), step, seed=cfg.seed * 1_000_003 + step)
        current += [r.env_id for r in replay if r.env_id not in current]
    if len(current) < want:  # nothing played yet to replay: draw from every archived environment
        rest = sorted(r.env_id for r in memory.records(status=EnvStatus.VALID) if r.env_id not in current)
        random.Random(f"{cfg.seed}/{step}/fill").shuffle(rest)
        current += rest[: want - len(current)]
    return current


async def _play(
    cfg: TrainConfig, c: Components, current: Sequence[str], designed: Sequence[DesignOutcome], step: int
) -> list[Trajectory]:
    hints = {d.env_id: d.hint for d in designed if d.valid and d.hint}
    rc = cfg.rollout
    jobs = []
    for env_id in current:
        seeds = episode_seeds(cfg.seed, step, env_id, max(rc.plays_per_env, rc.hint_plays_per_env))
        code = c.memory.get(env_id).code
        jobs += paired_jobs(
            env_id, code, seeds, rc.plays_per_env, hint=hints.get(env_id), hint_plays=rc.hint_plays_per_env
        )
    # More concurrent plays than live sandbox instances would only queue threads on instance slots.
    limit = min(rc.max_concurrent_plays, cfg.sandbox.max_live_instances)
    return await run_jobs(c.runner, c.policy, jobs, cfg.play, max_concurrent=limit)


# -- rewards -----------------------------------------------------------------------------------------------

EnvStats = dict[str, tuple[float, float | None, int]]
"""env id -> (unhinted win rate, paired regret or None, finished unhinted plays)."""


def _score_agent(
    cfg: TrainConfig, trajectories: Sequence[Trajectory]
) -> tuple[list[TrainSample], dict[str, Any], EnvStats]:
    plain = [t for t in trajectories if not t.hinted]
    hinted = [t for t in trajectories if t.hinted]
    adv = rw.agent_advantages([t.episode_return for t in plain], [t.env_id for t in plain])
    samples = [
        TrainSample(t.tokens_T, t.mask_T, t.sample_logprobs_T, float(a), "agent")
        for t, a, drop in zip(plain, adv.advantages_N, adv.drop_N, strict=True)
        if any(t.mask_T) and not (drop and cfg.reward.drop_constant_groups)
    ]
    per_env: EnvStats = {}
    for env_id in dict.fromkeys(t.env_id for t in plain):
        mine = [t for t in plain if t.env_id == env_id and t.status.value != "env_error"]
        mine_h = [t for t in hinted if t.env_id == env_id and t.status.value != "env_error"]
        if not mine:
            continue
        regret = None
        if mine_h:
            est = rw.paired_regret(
                [(t.seed, t.episode_return) for t in mine_h], [(t.seed, t.episode_return) for t in mine]
            )
            regret = est.regret
        per_env[env_id] = (rw.win_rate([t.success for t in mine]), regret, len(mine))
    metrics: dict[str, Any] = {
        "agent/plays": float(len(plain)),
        "agent/win_rate": _mean([t.success for t in plain]),
        "agent/return_mean": _mean([t.episode_return for t in plain]),
        "agent/turns_mean": _mean([len(t.transitions) for t in plain]),
        "agent/samples_kept": float(len(samples)),
        "agent/tokens": float(sum(len(t.tokens_T) for t in trajectories)),
        "agent/sampled_tokens": float(sum(sum(t.mask_T) for t in trajectories)),
        **status_counts(plain, "agent"),
    }
    if hinted:  # only regeneration steps play the hinted arm
        metrics["agent/win_rate_hint"] = _mean([t.success for t in hinted])
    return samples, metrics, per_env


def _pending(d: DesignOutcome, per_env: EnvStats, step: int) -> dict[str, Any]:
    """A buffer entry for one designer sample; a valid env none of whose plays finished counts as invalid."""
    win, regret, _ = per_env.get(d.env_id, (0.0, None, 0))
    valid = d.valid and d.env_id in per_env
    entry = rw.PendingCredit(d.sample_ref, d.env_id, d.skill, step, valid, win, regret or 0.0)
    return entry.to_dict()


def _score_designer(
    cfg: TrainConfig, c: Components, state: LoopState, step: int, n_agent: int
) -> tuple[list[TrainSample], dict[str, Any]]:
    buffer = rw.buffer_from_json(state.credit)
    due, rest = rw.release_due(buffer, step, cfg.reward.delay)
    state.credit = rw.buffer_to_json(rest)
    if not due:
        return [], {}
    rewards, state.lp_ema = rw.credit_rewards(due, cfg.reward, state.lp_ema)
    valid = [d for d in due if d.entry.valid]
    regrets = [d.entry.regret for d in valid]
    metrics: dict[str, Any] = {
        "designer/credited": float(len(due)),
        "designer/reward_mean": _mean(rewards),
        "designer/regret_mean": _mean(regrets),
        "designer/win_rate_mean": _mean([d.entry.win_rate for d in valid]),
    }
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
    if not samples:
        return {"update/skipped": 1.0}
    metrics = c.trainer.train_step(samples)
    c.policy.load_weights(c.trainer.export_weights(c.run.root / "policy"))
    return {k if "/" in k else f"update/{k}": float(v) for k, v in metrics.items()}


def _mean(values: Sequence[float] | Sequence[bool]) -> float:
    return float(np.mean(values)) if len(values) else 0.0


def _summary(cfg: TrainConfig, row: dict[str, Any], eta_s: float) -> str:
    """One progress line: step, validity, win rates, regret, speed and ETA."""
    parts = [f"step {row['step'] + 1}/{cfg.steps} in {row['time/step_s']:.1f}s"]
    if "designer/envs" in row:
        valid = round(row["designer/valid_rate"] * row["designer/envs"])
        parts.append(f"envs valid {valid}/{int(row['designer/envs'])}")
    hint = f" (hint {row['agent/win_rate_hint']:.2f})" if "agent/win_rate_hint" in row else ""
    parts.append(f"win {row['agent/win_rate']:.2f}{hint}")
    if "designer/regret_mean" in row:
        parts.append(f"regret {row['designer/regret_mean']:+.2f}")
    parts.append(f"{row['speed/sampled_tokens_per_s']:.0f} tok/s")
    parts.append(f"ETA {eta_s / 60:.1f} min")
    return " | ".join(parts)


def main(argv: Sequence[str]) -> int:
    """``spade train``: parse the preset, overrides and --resume, then train."""
    from spade.train_cli import run_cli  # noqa: PLC0415 - keeps tyro out of library imports

    return run_cli(argv)
