"""One regeneration of environments: design, check, archive, hint, retrying rejected slots.

:meth:`DesignPhase.run` plans the regeneration's slots, asks the designer for one environment per slot
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from spade import cluster, transcripts
from spade.checker import Checker, CheckReport
from spade.checker.novelty import Fingerprints
from spade.config import DesignerConfig, TrainConfig
from spade.config.skills import skills_for
from spade.design.check import Checks
from spade.design.corpus import CorpusSampler
from spade.design.designer import Design, design, design_metrics
from spade.design.hints import Hinter
from spade.design.request import Requests, Slot, plan_slots
from spade.design.samples import DesignSamples
from spade.memory.archive import EnvStatus, Memory, StoredFinding
from spade.play.rollout import reset_options
from spade.rundir import RunDir
from spade.sandbox import EnvRunner
from spade.seeds import derive_rng
from spade.types import EnvSource, Policy, SamplingParams, plural


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


@dataclass
class DesignPhase:
    """One run's design phase, built once from its settings and parts (:func:`build`); :meth:`run` designs,
    checks, archives and hints one regeneration."""

    designer: DesignerConfig
    seed: int
    policy: Policy
    """Writes the designs."""
    memory: Memory
    """The archive: accepted and rejected designs, with their findings."""
    run_dir: RunDir
    requests: Requests
    checks: Checks
    hinter: Hinter
    samples: DesignSamples
    """Designer samples awaiting delayed credit."""
    keep_transcripts: bool = True
    """Write each design's transcript (``transcripts.enabled``)."""
    novelty: Fingerprints | None = None
    """Measures accepted designs' novelty against the archive (None: ``checker.novelty_seeds`` is 0)."""
    progress: Callable[[str], None] = lambda _: None
    """Receives a line as each part starts (designs, checks, retries, hints)."""

    async def run(self, step: int) -> tuple[list[DesignOutcome], dict[str, Any]]:
        """Design, check, archive and hint one regeneration of environments.

        A slot whose design fails extraction or the checker is designed again with a fresh document (and a
        fresh parent), up to ``designer.attempts`` designs per slot, as the released recipe retries. Unlike
        the release, every failed attempt stays an outcome: its sample is credited ``reward.invalid_penalty``.
        """
        d = self.designer
        self.samples.prune()
        rng = derive_rng(self.seed, "design", step)
        skills = list(d.skills) or list(skills_for(d.setting))
        epoch = step // d.regen_interval
        slots = plan_slots(
            skills, d.skills_per_regen, epoch, d.envs_per_regen, edit_fraction=d.edit_fraction, rng=rng
        )
        tried = _Attempts()
        todo = list(slots)
        for attempt in range(d.attempts):
            if todo and attempt:
                self.progress(
                    f"step {step}: design {plural(len(todo), 'rejected slot')} again ({attempt + 1} of {d.attempts})"
                )
            todo = await self._attempt(todo, rng, step, tried=tried) if todo else todo
        outcomes, hint_stats = await self._hint(tried.outcomes, step)
        if self.keep_transcripts:
            records = [
                _design_record(x, o, r, step)
                for x, o, r in zip(tried.designs, outcomes, tried.reports, strict=True)
            ]
            transcripts.write(self.run_dir.root, step, "design", records)
        metrics = _design_metrics(tried.designs, outcomes)
        metrics.update(await self._novelty(outcomes))
        metrics.update(hint_stats)
        metrics["designer/attempts_mean"] = len(tried.designs) / max(len(slots), 1)
        metrics["designer/slots_filled"] = (len(slots) - len(todo)) / max(len(slots), 1)
        metrics["time/check_s"] = tried.check_s
        return outcomes, metrics

    async def _attempt(
        self, slots: Sequence[Slot], rng: random.Random, step: int, *, tried: _Attempts
    ) -> list[Slot]:
        """Design, check and archive one design for each of ``slots`` (added to ``tried``); returns the slots
        whose design was rejected. Environment ids and probe seeds count designs over the regeneration."""
        d = self.designer
        epoch, first = step // d.regen_interval, len(tried.designs)
        requests = [self.requests.make(slot, rng, epoch * d.envs_per_regen + slot.index) for slot in slots]
        params = SamplingParams(
            temperature=d.temperature, top_p=d.top_p, top_k=d.top_k, max_tokens=d.max_tokens
        )
        designs = await design(
            self.policy, requests, params, doc_tokens=d.doc_tokens, example_chars=d.example_code_chars
        )
        t0 = time.perf_counter()
        self.progress(f"step {step}: check {plural(len(designs), 'design')} ({_extract_failures(designs)})")
        reports = await self.checks.check(designs, step, first=first)
        tried.check_s += time.perf_counter() - t0
        failed = []
        for slot, made, report in zip(slots, designs, reports, strict=True):
            env_id = f"s{step:05d}_{len(tried.outcomes):02d}_{made.skill}"
            outcome = self._archive(made, report, env_id, step)
            tried.designs.append(made)
            tried.reports.append(report)
            tried.outcomes.append(outcome)
            failed += [] if outcome.valid else [slot]
        return failed

    def _archive(self, design: Design, report: CheckReport | None, env_id: str, step: int) -> DesignOutcome:
        """Archive one design, and store its training sample unless the designer is not trained."""
        if design.trainable and self.designer.train:
            self.samples.save(env_id, design.train_sample(0.0))
        if design.code is None:
            return DesignOutcome(
                env_id, design.skill, design.mode, False, env_id, None, f"extract_{design.status}"
            )
        assert report is not None
        source = EnvSource(design.code, design.skill, env_id, design.parent_id, design.doc_id, step)
        status = EnvStatus.VALID if report.ok else EnvStatus.REJECTED
        findings = [StoredFinding(f.code.value, f.message) for f in report.findings]
        added = self.memory.add(source, status=status, findings=findings)
        valid = added.status is EnvStatus.VALID and added.env_id == env_id
        self.run_dir.save_source(env_id, design.code, rejected=not valid)
        reason = "" if valid else report.fatal[0].code.value if report.fatal else added.outcome.value
        return DesignOutcome(env_id, design.skill, design.mode, valid, env_id, None, reason)

    async def _hint(
        self, outcomes: list[DesignOutcome], step: int
    ) -> tuple[list[DesignOutcome], dict[str, Any]]:
        """Hint the accepted outcomes (:meth:`spade.design.hints.Hinter.hint_envs`) and archive each first
        hint."""
        accepted = [o.env_id for o in outcomes if o.valid]
        then = "; write their hints" if accepted else ""
        self.progress(f"step {step}: {len(accepted)} of {plural(len(outcomes), 'design')} accepted{then}")
        by_env, metrics = await self.hinter.hint_envs(accepted, step)
        updated = []
        for o in outcomes:
            mine = by_env.get(o.env_id, [])
            texts = [None if h is None else h.hint for h in mine]
            first = next((t for t in texts if t), None)
            if first:
                self.memory.set_hint(o.env_id, first)
            per_seed = tuple(texts) if self.designer.hint_mode == "instance" else ()
            calls = tuple((h.reason, h.completion) for h in mine if h is not None)
            updated.append(dataclasses.replace(o, hint=first, seed_hints=per_seed, hint_calls=calls))
        return updated, metrics

    async def _novelty(self, outcomes: Sequence[DesignOutcome]) -> dict[str, float]:
        """``designer/novelty_mean`` / ``_min``: each accepted design's behaviour-fingerprint distance to the
        nearest environment archived before this regeneration (no :attr:`novelty`: not measured)."""
        new = {o.env_id for o in outcomes if o.valid}
        prints = self.novelty
        if prints is None or not new:
            return {}
        records = self.memory.records(status=EnvStatus.VALID)
        archive = [(r.env_id, r.code) for r in records if r.env_id not in new]
        designed = [r.code for r in records if r.env_id in new]  # an accepted design may be evicted at once
        if not designed:
            return {}
        found = await asyncio.to_thread(lambda: [prints.novelty(code, archive).distance for code in designed])
        return {"designer/novelty_mean": sum(found) / len(found), "designer/novelty_min": min(found)}


@dataclass
class _Attempts:
    """Every design of one regeneration so far, in order, with its check report and archived outcome."""

    designs: list[Design] = dataclasses.field(default_factory=list)
    reports: list[CheckReport | None] = dataclasses.field(default_factory=list)
    outcomes: list[DesignOutcome] = dataclasses.field(default_factory=list)
    check_s: float = 0.0


def build(
    cfg: TrainConfig,
    *,
    run: RunDir,
    policy: Policy,
    runner: EnvRunner,
    memory: Memory,
    sampler: CorpusSampler | None,
    keep_transcripts: bool,
    progress: Callable[[str], None],
) -> DesignPhase:
    """The design phase of ``cfg``'s run over the run's parts (its settings resolved once, here)."""
    d = cfg.designer
    checks = Checks(
        Checker(cfg.checker, cfg.play), runner, memory, policy, cfg.seed,
        concurrency=cluster.check_concurrency(cfg.cluster), review=cfg.checker.llm_review,
        review_tokens=cfg.checker.review_max_tokens or d.hint_max_tokens,
        review_temperature=cfg.checker.review_temperature, review_fail_open=cfg.checker.review_fail_open,
        setting=d.setting, max_turns=cfg.play.max_turns,
        options=reset_options(cfg.play, None),
    )  # fmt: skip
    hinter = Hinter(
        d, policy, runner, memory, cfg.seed,
        hint_plays=cfg.rollout.hint_plays_per_env, max_context=cfg.model.max_context,
    )  # fmt: skip
    seeds = cfg.checker.novelty_seeds
    return DesignPhase(
        d, cfg.seed, policy, memory, run,
        requests=Requests(d, memory, sampler, steer=cfg.memory.enabled),
        checks=checks,
        hinter=hinter,
        samples=DesignSamples(run),
        keep_transcripts=keep_transcripts,
        novelty=Fingerprints(runner, seeds, cfg.play.difficulty) if seeds > 0 else None,
        progress=progress,
    )  # fmt: skip


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
