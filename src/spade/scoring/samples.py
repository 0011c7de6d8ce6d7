"""A step's plays and credited designs as training samples with advantages, and their metrics.

:func:`score_agent` turns the unhinted plays into agent samples with group-relative advantages (constant
groups dropped) and measures each environment (:func:`spade.scoring.stats.env_stats`: plays, wins, returns,
hint-based regret). :func:`score_designer` does the same for the designer samples whose delayed credit is
due. Nothing here writes: the loop records the statistics in the archive (``Components.remember``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from spade.config import TrainConfig
from spade.design import DesignOutcome
from spade.play.rollout import prompt_reuse, status_counts
from spade.scoring import rewards as rw
from spade.scoring.credit import DueCredit, PendingCredit
from spade.scoring.stats import EnvStats, env_stats
from spade.types import PlayStatus, TrainSample, Trajectory, TurnTokens, plural


def score_agent(
    cfg: TrainConfig, trajectories: Sequence[Trajectory]
) -> tuple[list[TrainSample], dict[str, Any], dict[str, EnvStats]]:
    """Agent samples with group advantages, metrics, and what each environment's plays measured."""
    plain = [t for t in trajectories if not t.hinted]
    hinted = [t for t in trajectories if t.hinted]
    adv = rw.agent_advantages([t.episode_return for t in plain], [t.env_id for t in plain])
    # the compact filter drops unfinished plays after their group's advantages were computed with them
    compacted = [cfg.rollout.compact_filter and t.status is not PlayStatus.TERMINATED for t in plain]
    samples = [
        sample
        for t, a, drop, cut in zip(plain, adv.advantages_N, adv.drop_N, compacted, strict=True)
        if not (drop and cfg.reward.drop_constant_groups) and not cut
        for sample in agent_samples(t, float(a))
    ]
    per_env = env_stats(plain, hinted, cfg.reward.regret_estimator)
    metrics: dict[str, Any] = {
        "agent/plays": float(len(plain)),
        "agent/win_rate": mean([t.success for t in plain]),
        "agent/return_mean": mean([t.episode_return for t in plain]),
        "agent/turns_mean": mean([len(t.transitions) for t in plain]),
        "agent/samples_kept": float(len(samples)),
        "agent/constant_group_share": constant_share([t.env_id for t in plain], adv.drop_N.tolist()),
        "agent/tokens": float(sum(len(t.tokens_T) for t in trajectories)),
        "agent/sampled_tokens": float(sum(sum(t.mask_T) for t in trajectories)),
        **prompt_reuse(trajectories),
        **status_counts(plain, "agent"),
    }
    if cfg.rollout.compact_filter:
        metrics["agent/compacted"] = float(sum(compacted))
    seeds = [t.success for t in plain if t.env_id.startswith("seed:")]
    if seeds:  # the seed games are the same at every step: wins there are comparable across regenerations
        metrics["agent/win_rate_seeds"] = mean(seeds)
    if hinted:  # only regeneration steps play the hinted arm
        metrics["agent/win_rate_hint"] = mean([t.success for t in hinted])
        errors = [s.regret.se for s in per_env.values() if s.regret is not None and s.regret.se is not None]
        if errors:
            metrics["designer/regret_se"] = mean(errors)
    return samples, metrics, per_env


def agent_samples(t: Trajectory, advantage: float) -> list[TrainSample]:
    """A play's training samples: its token stream, or (a thinking model) each turn on its own prompt, every
    turn with the episode's advantage (as released); none when nothing was sampled."""
    parts = t.turns or (TurnTokens(t.tokens_T, t.mask_T, t.sample_logprobs_T),)
    return [
        TrainSample(p.tokens_T, p.mask_T, p.sample_logprobs_T, advantage, "agent")
        for p in parts
        if any(p.mask_T)
    ]


def update_line(step: int, n_agent: int, n_designer: int | None, row: Mapping[str, Any]) -> str:
    """The progress line before a step's update: its samples by role, the designer's only where the mode
    trains one (``n_designer`` None: an agent-only mode), and why there are no agent samples when there are
    none (``row``: the step's metrics so far)."""
    roles = plural(n_agent, "agent sample")
    if n_designer is not None:
        roles = f"{n_agent} agent + {plural(n_designer, 'designer sample')}"
    if n_agent:
        return f"step {step}: update on {roles}"
    why = (
        "every environment's plays returned the same, so they hold no learning signal"
        if row.get("agent/constant_group_share") == 1.0
        else "no play sampled a token to train on"
    )
    if n_designer:
        return f"step {step}: update on {roles} (no agent sample: {why})"
    return f"step {step}: no update ({roles}): {why}"


def constant_share(env_ids_N: Sequence[str], drop_N: Sequence[bool]) -> float:
    """Fraction of the step's groups (an environment's unhinted plays) whose returns were all equal: their
    plays carry no gradient and are dropped (``reward.drop_constant_groups``)."""
    dropped = {e: bool(d) for e, d in zip(env_ids_N, drop_N, strict=True)}
    return sum(dropped.values()) / len(dropped) if dropped else 0.0


def pending(d: DesignOutcome, per_env: Mapping[str, EnvStats], step: int) -> PendingCredit:
    """A new buffer entry for one designer sample; a valid env none of whose plays finished counts as invalid.

    Its window starts empty: :func:`spade.scoring.credit.add_plays` adds this step's plays like any later step's.
    """
    stats = per_env.get(d.env_id)
    regret = stats.regret.regret if stats is not None and stats.regret is not None else None
    checked = not d.valid and not d.reason.startswith("extract_")
    return PendingCredit(
        d.sample_ref, d.env_id, d.skill, step, d.valid and stats is not None, regret, checked=checked
    )


def score_designer(
    cfg: TrainConfig,
    due: Sequence[DueCredit],
    rewards: Sequence[float],
    n_agent: int,
    load: Callable[[str], TrainSample | None],
) -> tuple[list[TrainSample], dict[str, Any]]:
    """The designer samples ``due`` for credit with their ``rewards`` as advantages, and their metrics.

    ``n_agent``: the step's agent plays (the designer scale counts them before constant groups are dropped, as
    the authors do); ``load``: a stored designer sample by reference (None: it had nothing to train on).
    """
    valid = [d.entry for d in due if d.entry.valid]
    measured = [e.regret for e in valid if e.regret is not None]
    metrics: dict[str, Any] = {
        "designer/credited": float(len(due)),
        "designer/reward_mean": mean(rewards),
        "designer/regret_measured": float(len(measured)),
        "designer/win_rate_mean": mean([e.rate(cfg.reward.rate_measure) for e in valid]),
        "designer/window_plays_mean": mean([e.plays for e in valid]),
        "designer/staleness_mean": mean([d.staleness for d in due]),
    }
    if measured:  # absent rather than 0 when no hint was accepted and played
        metrics["designer/regret_mean"] = mean(measured)
        metrics["designer/regret_min"], metrics["designer/regret_max"] = min(measured), max(measured)
    n_designer = max(1, cfg.designer.envs_per_regen)
    scale = rw.designer_scale(
        max(n_agent, 1), n_designer, cfg.designer.regen_interval, cfg.reward.designer_scale_cap
    )
    adv = rw.designer_advantages(rewards, [d.entry.skill for d in due], scale)
    samples = []
    for d, a, drop in zip(due, adv.advantages_N, adv.drop_N, strict=True):
        sample = load(d.entry.sample_ref)
        if sample is None or (drop and cfg.reward.drop_constant_groups):
            continue
        samples.append(
            TrainSample(
                sample.tokens_T, sample.mask_T, sample.sample_logprobs_T, float(a), "designer", d.staleness
            )
        )
    metrics["designer/samples_kept"] = float(len(samples))
    return samples, metrics


def mean(values: Sequence[float] | Sequence[bool] | Sequence[int]) -> float:
    """The mean, 0.0 for no values."""
    return float(np.mean(values)) if len(values) else 0.0
