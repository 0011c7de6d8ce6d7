"""One regeneration of environments: design, check, archive, hint, retrying rejected slots.

:func:`design_phase` plans the regeneration's slots, asks the designer for one environment per slot
(:mod:`spade.design.request`, :mod:`spade.design.designer`), checks each (:mod:`spade.design.check`),
archives accepted and rejected sources with their findings, designs the rejected slots again up to
``designer.attempts`` times, and writes hints for the accepted ones (:mod:`spade.design.hints`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spade import transcripts
from spade.checker import CheckReport
from spade.checker.novelty import Fingerprints
from spade.config import TrainConfig
from spade.design.check import check_all, reject_unchanged, review
from spade.design.designer import Design, design, design_metrics
from spade.design.hints import hint_envs
from spade.design.request import Slot, design_request, plan_slots
from spade.memory import EnvStatus, Memory, StoredFinding
from spade.seeds import derive_rng
from spade.skills import skills_for
from spade.types import EnvSource, SamplingParams

if TYPE_CHECKING:
    from spade.components import Components


@dataclass(frozen=True, slots=True)
class DesignOutcome:
    """One designer sample after checking: which environment it became and whether it was accepted."""

    env_id: str
    skill: str
    mode: str
    valid: bool
    sample_ref: str
    hint: str | None
    """The hint from the code alone (``designer.hint_mode='code'``), or the first seed's hint."""
    reason: str
    """Why it was rejected (a finding or extraction code), '' when accepted."""
    seed_hints: tuple[str | None, ...] = ()
    """``designer.hint_mode='instance'``: one hint per hinted seed, in seed order (None: rejected)."""
    hint_calls: tuple[tuple[str, str], ...] = ()
    """Why each hint call for it was kept or refused (:data:`spade.design.hints.HintReason`) and what the
    model wrote, for the design transcript."""

    def hints_for(self, n: int) -> list[str | None]:
        """The hint of each of the first ``n`` hinted seeds (the same code-only hint for all of them)."""
        if self.seed_hints:
            return [*self.seed_hints[:n], *[None] * (n - len(self.seed_hints))]
        return [self.hint] * n


async def design_phase(
    cfg: TrainConfig, c: Components, step: int
) -> tuple[list[DesignOutcome], dict[str, Any]]:
    """Design, check, archive and hint one regeneration of environments.

    A slot whose design fails extraction or the checker is designed again with a fresh document (and a
    fresh parent), up to ``designer.attempts`` designs per slot, as the released recipe retries. Unlike the
    release, every failed attempt stays an outcome: its sample is credited ``reward.invalid_penalty``.
    """
    d = cfg.designer
    c.prune_design_samples()
    rng = derive_rng(cfg.seed, "design", step)
    skills = list(d.skills) or list(skills_for(d.setting))
    epoch = step // d.regen_interval
    slots = plan_slots(
        skills, d.skills_per_regen, epoch, d.envs_per_regen, edit_fraction=d.edit_fraction, rng=rng
    )
    tried = _Attempts()
    todo = list(slots)
    for attempt in range(d.attempts):
        if todo and attempt:
            c.progress(
                f"step {step}: design {_count(todo, 'rejected slot')} again ({attempt + 1} of {d.attempts})"
            )
        todo = await _attempt(cfg, c, todo, rng, step, tried=tried) if todo else todo
    outcomes, hint_stats = await _hint(cfg, c, tried.outcomes, step)
    if c.keep.enabled:
        records = [
            _design_record(x, o, r, step)
            for x, o, r in zip(tried.designs, outcomes, tried.reports, strict=True)
        ]
        transcripts.write(c.run.root, step, "design", records)
    metrics = _design_metrics(tried.designs, outcomes)
    metrics.update(await _novelty(cfg, c, outcomes))
    metrics.update(hint_stats)
    metrics["designer/attempts_mean"] = len(tried.designs) / max(len(slots), 1)
    metrics["designer/slots_filled"] = (len(slots) - len(todo)) / max(len(slots), 1)
    metrics["time/check_s"] = tried.check_s
    return outcomes, metrics


@dataclass
class _Attempts:
    """Every design of one regeneration so far, in order, with its check report and archived outcome."""

    designs: list[Design] = dataclasses.field(default_factory=list)
    reports: list[CheckReport | None] = dataclasses.field(default_factory=list)
    outcomes: list[DesignOutcome] = dataclasses.field(default_factory=list)
    check_s: float = 0.0


async def _attempt(
    cfg: TrainConfig,
    c: Components,
    slots: Sequence[Slot],
    rng: random.Random,
    step: int,
    *,
    tried: _Attempts,
) -> list[Slot]:
    """Design, check and archive one design for each of ``slots`` (added to ``tried``); returns the slots
    whose design was rejected. Environment ids and probe seeds count designs over the regeneration."""
    d = cfg.designer
    epoch, first = step // d.regen_interval, len(tried.designs)
    requests = [design_request(cfg, c, slot, rng, epoch * d.envs_per_regen + slot.index) for slot in slots]
    params = SamplingParams(temperature=d.temperature, top_p=d.top_p, top_k=d.top_k, max_tokens=d.max_tokens)
    designs = await design(
        c.policy, requests, params, doc_tokens=d.doc_tokens, example_chars=d.example_code_chars
    )
    t0 = time.perf_counter()
    c.progress(f"step {step}: check {_count(designs, 'design')} ({_extract_failures(designs)})")
    reports = await check_all(cfg, c, designs, step, first=first)
    reports = await reject_unchanged(cfg, c, designs, reports, step, first=first)
    if cfg.checker.llm_review:
        reports = await review(c, designs, reports, d.hint_max_tokens, d.setting)
    tried.check_s += time.perf_counter() - t0
    failed = []
    for slot, made, report in zip(slots, designs, reports, strict=True):
        env_id = f"s{step:05d}_{len(tried.outcomes):02d}_{made.skill}"
        outcome = _archive(c, made, report, env_id, step, keep_sample=d.train)
        tried.designs.append(made)
        tried.reports.append(report)
        tried.outcomes.append(outcome)
        failed += [] if outcome.valid else [slot]
    return failed


def _archive(
    c: Components,
    design: Design,
    report: CheckReport | None,
    env_id: str,
    step: int,
    *,
    keep_sample: bool = True,
) -> DesignOutcome:
    """Archive one design; ``keep_sample`` False (designer not trained) stores no training sample."""
    if design.trainable and keep_sample:
        c.save_design_sample(env_id, design.train_sample(0.0))
    if design.code is None:
        return DesignOutcome(
            env_id, design.skill, design.mode, False, env_id, None, f"extract_{design.status}"
        )
    assert report is not None
    source = EnvSource(design.code, design.skill, env_id, design.parent_id, design.doc_id, step)
    status = EnvStatus.VALID if report.ok else EnvStatus.REJECTED
    findings = [StoredFinding(f.code.value, f.message) for f in report.findings]
    added = c.memory.add(source, status=status, findings=findings)
    valid = added.status is EnvStatus.VALID and added.env_id == env_id
    c.run.save_source(env_id, design.code, rejected=not valid)
    reason = "" if valid else report.fatal[0].code.value if report.fatal else added.outcome.value
    return DesignOutcome(env_id, design.skill, design.mode, valid, env_id, None, reason)


async def _hint(
    cfg: TrainConfig, c: Components, outcomes: list[DesignOutcome], step: int
) -> tuple[list[DesignOutcome], dict[str, Any]]:
    """Hint the accepted outcomes (:func:`spade.design.hints.hint_envs`) and archive each first hint."""
    accepted = [o.env_id for o in outcomes if o.valid]
    then = "; write their hints" if accepted else ""
    c.progress(f"step {step}: {len(accepted)} of {_count(outcomes, 'design')} accepted{then}")
    by_env, metrics = await hint_envs(cfg, c, accepted, step)
    updated = []
    for o in outcomes:
        mine = by_env.get(o.env_id, [])
        texts = [None if h is None else h.hint for h in mine]
        first = next((t for t in texts if t), None)
        if first:
            c.memory.set_hint(o.env_id, first)
        per_seed = tuple(texts) if cfg.designer.hint_mode == "instance" else ()
        calls = tuple((h.reason, h.completion) for h in mine if h is not None)
        updated.append(dataclasses.replace(o, hint=first, seed_hints=per_seed, hint_calls=calls))
    return updated, metrics


def fresh_only(cfg: TrainConfig, memory: Memory, designed: Sequence[DesignOutcome], step: int) -> list[str]:
    """The environments to play under the no-memory ablation (``memory.enabled=False``).

    Only this regeneration's valid designs; designed environments are never replayed. When none is valid
    the seed library (never designed) fills in, so the agent still has something to train on.
    """
    current = [d.env_id for d in designed if d.valid]
    if current:
        return current
    seeds = sorted(r.env_id for r in memory.records(status=EnvStatus.VALID) if r.is_seed)
    random.Random(f"{cfg.seed}/{step}/seed-fill").shuffle(seeds)
    return seeds[: cfg.designer.envs_per_regen]


def _count(items: Sequence[Any], noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


def _extract_failures(designs: Sequence[Design]) -> str:
    """What the design call gave: how many replies held no code to check."""
    failed = sum(x.code is None for x in designs)
    return f"{failed} gave no code" if failed else "all gave code"


def _design_record(
    design: Design, outcome: DesignOutcome, report: CheckReport | None, step: int
) -> dict[str, Any]:
    """The readable transcript of one designer sample."""
    return {
        "step": step,
        "env_id": outcome.env_id,
        "skill": design.skill,
        "mode": design.mode,
        "parent_id": design.parent_id,
        "doc_id": design.doc_id,
        "valid": outcome.valid,
        "reason": outcome.reason,
        "extract": f"{design.status}: {design.detail}" if design.code is None else "ok",
        "findings": [] if report is None else [f.to_dict() for f in report.findings],
        "hint": outcome.hint,
        "hint_calls": [{"reason": reason, "reply": reply} for reason, reply in outcome.hint_calls],
        "messages": [dict(m) for m in design.messages],
        "reply": design.completion,
    }


def _design_metrics(designs: Sequence[Design], outcomes: Sequence[DesignOutcome]) -> dict[str, Any]:
    n = max(len(outcomes), 1)
    metrics: dict[str, Any] = dict(design_metrics(designs))
    metrics["designer/envs"] = float(len(outcomes))
    metrics["designer/valid_rate"] = sum(o.valid for o in outcomes) / n
    for mode in ("generate", "edit"):
        mine = [o for o in outcomes if o.mode == mode]
        if mine:
            metrics[f"designer/valid_rate_{mode}"] = sum(o.valid for o in mine) / len(mine)
    for reason, count in Counter(o.reason for o in outcomes if not o.valid).items():
        metrics[f"designer/rejected/{reason}"] = float(count)
    return metrics


async def _novelty(cfg: TrainConfig, c: Components, outcomes: Sequence[DesignOutcome]) -> dict[str, float]:
    """``designer/novelty_mean`` / ``_min``: each accepted design's behaviour-fingerprint distance to the
    nearest environment archived before this regeneration (``checker.novelty_seeds`` 0: not measured)."""
    new = {o.env_id for o in outcomes if o.valid}
    if cfg.checker.novelty_seeds <= 0 or not new:
        return {}
    if c.fingerprints is None:
        c.fingerprints = Fingerprints(c.runner, cfg.checker.novelty_seeds, cfg.play.difficulty)
    prints, records = c.fingerprints, c.memory.records(status=EnvStatus.VALID)
    archive = [(r.env_id, r.code) for r in records if r.env_id not in new]
    designed = [r.code for r in records if r.env_id in new]  # an accepted design may be evicted at once
    if not designed:
        return {}
    found = await asyncio.to_thread(lambda: [prints.novelty(code, archive).distance for code in designed])
    return {"designer/novelty_mean": sum(found) / len(found), "designer/novelty_min": min(found)}
