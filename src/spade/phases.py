"""The pieces the loop is made of: its components and the design phase (design -> check -> remember -> hint).

:func:`make_components` builds the policy, trainer, sandbox, archive and corpus of a run. :func:`design_phase`
asks the designer for one regeneration of environments, runs each through the validation ladder in the
sandbox, archives accepted and rejected sources with their findings, and writes hints for the accepted ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import random
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spade import cluster, designer, procedural, tool_prompts, transcripts
from spade.actions import last_boxed, strip_reasoning
from spade.backends.batching import BatchingPolicy
from spade.checker import CheckReport, Finding, FindingCode
from spade.config import TrainConfig, TranscriptConfig
from spade.corpus import CorpusSampler, SamplerState, load_corpus
from spade.demos import same_instance_demos
from spade.ecosystem import remote as ecosystem_remote
from spade.hints import Hint, HintRequest, hint_metrics, write_hints
from spade.memory import FILENAME as MEMORY_FILE
from spade.memory import EnvRecord, EnvStatus, Memory, StoredFinding, archive_sources, seed_sources
from spade.prompts import DesignRequest, review_system
from spade.rollout import reset_options
from spade.rundir import RunDir, atomic_write
from spade.sandbox import EnvRunner, SandboxError
from spade.seeds import derive_rng, derive_seed
from spade.skills import Setting, skills_for
from spade.types import EnvSource, SamplingParams, Trainer, TrainSample, Trajectory


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
    """Why each hint call for it was kept or refused (:data:`spade.hints.HintReason`) and what the model
    wrote, for the design transcript."""

    def hints_for(self, n: int) -> list[str | None]:
        """The hint of each of the first ``n`` hinted seeds (the same code-only hint for all of them)."""
        if self.seed_hints:
            return [*self.seed_hints[:n], *[None] * (n - len(self.seed_hints))]
        return [self.hint] * n


@dataclass
class Components:
    """The long-lived parts of a run."""

    run: RunDir
    policy: BatchingPolicy
    trainer: Trainer
    runner: EnvRunner
    memory: Memory
    sampler: CorpusSampler | None
    pool: list[EnvSource]
    keep: TranscriptConfig = dataclasses.field(default_factory=TranscriptConfig)
    """What to keep of transcripts."""

    @property
    def corpus(self) -> Any:
        """The corpus (for its metrics), or an object with empty metrics when grounding is off."""
        return self.sampler.corpus if self.sampler is not None else _NoCorpus()

    def corpus_state(self) -> dict[str, Any]:
        """The sampler's resumable state."""
        return self.sampler.state.to_dict() if self.sampler is not None else {}

    def restore_corpus(self, state: dict[str, Any]) -> None:
        """Continue sampling from a saved state."""
        if self.sampler is not None and state:
            self.sampler = CorpusSampler(self.sampler.corpus, state=SamplerState.from_dict(state))

    def save_design_sample(self, ref: str, sample: TrainSample) -> None:
        """Store a designer sample until its delayed credit is due."""
        data = {"tokens": sample.tokens_T, "mask": sample.mask_T, "logprobs": sample.sample_logprobs_T}
        atomic_write(self.run.root / "samples" / f"{ref}.json", json.dumps(data))

    def load_design_sample(self, ref: str) -> TrainSample | None:
        """A stored designer sample (None when it had nothing to train on)."""
        path = self.run.root / "samples" / f"{ref}.json"
        if not path.exists():
            return None
        data = json.loads(path.read_text())
        return TrainSample(
            tuple(data["tokens"]), tuple(data["mask"]), tuple(data["logprobs"]), 0.0, "designer"
        )

    def prune_design_samples(self) -> int:
        """Delete stored designer samples no kept checkpoint still awaits credit for; returns how many.

        A sample is needed while a checkpoint's delayed-credit buffer names it (resuming from that
        checkpoint releases it later); one written after the newest checkpoint is rewritten when its step
        reruns. Their text stays in the design transcripts.
        """
        folder = self.run.root / "samples"
        needed: set[str] = set()
        for checkpoint in self.run.checkpoints.glob("step_*"):
            if (checkpoint / "state.json").is_file():
                needed.update(str(e["sample_ref"]) for e in self.run.read_state(checkpoint).get("credit", []))
        gone = 0
        for path in folder.glob("*.json") if folder.is_dir() else ():
            if path.stem not in needed:
                path.unlink(missing_ok=True)
                gone += 1
        return gone

    def record_plays(self, step: int, trajectories: Sequence[Trajectory]) -> None:
        """Keep readable transcripts of some of this step's plays (retention: ``self.keep``)."""
        if not self.keep.enabled:
            return
        kept = transcripts.pick_episodes(trajectories, self.keep.episodes_per_env)
        decode = self.policy.template.decode
        transcripts.write(
            self.run.root, step, "play", [transcripts.play_record(t, step, decode) for t in kept]
        )
        transcripts.prune(self.run.root, step, self.keep)


class _NoCorpus:
    def metrics(self) -> dict[str, float]:
        return {}


@contextlib.contextmanager
def make_components(cfg: TrainConfig, run: RunDir) -> Iterator[Components]:
    """Build every component of a run; closes the sandbox and the archive on exit."""
    from spade.backends import make_policy, make_trainer  # noqa: PLC0415 - heavy imports on demand

    policy = BatchingPolicy(
        make_policy(cfg.model, seed=derive_seed(cfg.seed, "policy")),
        max_batch=cfg.rollout.max_concurrent_plays,
        gather_s=cfg.rollout.batch_gather_s,
    )
    trainer = make_trainer(cfg)
    sampler = None
    if cfg.mode == "selfplay" and cfg.corpus.enabled:
        sampler = CorpusSampler(load_corpus(cfg.corpus.path), seed=derive_seed(cfg.seed, "corpus"))
    with cluster.open_runner(cfg) as sandboxed, Memory.in_run_dir(run.root, cfg.memory) as memory:
        runner = ecosystem_remote.wrap_runner(cfg.pool, sandboxed)  # openenv:URL pools play on the server
        yield Components(run, policy, trainer, runner, memory, sampler, _pool(cfg), cfg.transcripts)


def _pool(cfg: TrainConfig) -> list[EnvSource]:
    """The warm-start / fixed-pool environments: the seed library (``designer.seeds``, else the seeds of
    ``designer.skills``), a run's archive, or a folder of files; in procedural mode the Reasoning-Gym task
    environments."""
    if cfg.mode == "procedural":
        return procedural.sources(cfg.procedural)
    if not cfg.pool:
        d = cfg.designer
        return seed_sources(d.setting, d.skills, d.seeds)
    if ecosystem_remote.is_remote(cfg.pool):
        return ecosystem_remote.pool_sources(cfg.pool)
    folder = Path(cfg.pool)
    if (folder / MEMORY_FILE).exists():
        return archive_sources(folder)
    files = sorted((folder / "games").glob("*.py")) or sorted(folder.glob("*.py"))
    if not files:
        raise FileNotFoundError(f"no environment files (*.py or games/*.py) in pool folder {folder}")
    known = {**skills_for("games"), **skills_for("tool_use")}
    out = []
    for f in files:
        skill = next((s for s in known if f.stem.endswith(s)), "")
        out.append(EnvSource(code=f.read_text(), skill=skill, env_id=f"pool_{f.stem}"))
    return out


# -- design phase ------------------------------------------------------------------------------------------


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
    slots = designer.plan_slots(skills, d.skills_per_regen, step // d.regen_interval, d.envs_per_regen,
                         edit_fraction=d.edit_fraction, rng=rng)  # fmt: skip
    tried = _Attempts()
    todo = list(slots)
    for _ in range(d.attempts):
        todo = await _attempt(cfg, c, todo, rng, step, tried=tried) if todo else todo
    outcomes, hint_stats = await _hint(cfg, c, tried.outcomes, step)
    if c.keep.enabled:
        records = [
            _design_record(x, o, r, step)
            for x, o, r in zip(tried.designs, outcomes, tried.reports, strict=True)
        ]
        transcripts.write(c.run.root, step, "design", records)
    metrics = _design_metrics(tried.designs, outcomes)
    metrics.update(hint_stats)
    metrics["designer/attempts_mean"] = len(tried.designs) / max(len(slots), 1)
    metrics["designer/slots_filled"] = (len(slots) - len(todo)) / max(len(slots), 1)
    metrics["time/check_s"] = tried.check_s
    return outcomes, metrics


@dataclass
class _Attempts:
    """Every design of one regeneration so far, in order, with its check report and archived outcome."""

    designs: list[designer.Design] = dataclasses.field(default_factory=list)
    reports: list[CheckReport | None] = dataclasses.field(default_factory=list)
    outcomes: list[DesignOutcome] = dataclasses.field(default_factory=list)
    check_s: float = 0.0


async def _attempt(
    cfg: TrainConfig,
    c: Components,
    slots: Sequence[designer.Slot],
    rng: random.Random,
    step: int,
    *,
    tried: _Attempts,
) -> list[designer.Slot]:
    """Design, check and archive one design for each of ``slots`` (added to ``tried``); returns the slots
    whose design was rejected. Environment ids and probe seeds count designs over the regeneration."""
    d = cfg.designer
    epoch, first = step // d.regen_interval, len(tried.designs)
    requests = [_request(cfg, c, slot, rng, epoch * d.envs_per_regen + slot.index) for slot in slots]
    params = SamplingParams(temperature=d.temperature, top_p=d.top_p, top_k=d.top_k, max_tokens=d.max_tokens)
    designs = await designer.design(
        c.policy, requests, params, doc_tokens=d.doc_tokens, example_chars=d.example_code_chars
    )
    t0 = time.perf_counter()
    reports = await _check_all(cfg, c, designs, step, first=first)
    reports = await _reject_unchanged(cfg, c, designs, reports, step, first=first)
    if cfg.checker.llm_review:
        reports = await _review(c, designs, reports, d.hint_max_tokens, d.setting)
    tried.check_s += time.perf_counter() - t0
    failed = []
    for slot, design, report in zip(slots, designs, reports, strict=True):
        env_id = f"s{step:05d}_{len(tried.outcomes):02d}_{design.skill}"
        outcome = _archive(c, design, report, env_id, step, keep_sample=d.train)
        tried.designs.append(design)
        tried.reports.append(report)
        tried.outcomes.append(outcome)
        failed += [] if outcome.valid else [slot]
    return failed


def _request(
    cfg: TrainConfig, c: Components, slot: designer.Slot, rng: random.Random, design_index: int
) -> DesignRequest:
    """One prompt's inputs; ``design_index`` counts designs over the run (the task-type rotation)."""
    d = cfg.designer
    seed = rng.randrange(2**31)
    steer = cfg.memory.enabled  # the no-memory ablation shows no examples and no negatives
    examples = c.memory.examples(slot.skill, d.memory_examples, seed=seed) if steer else []
    negatives = c.memory.negatives(slot.skill, d.negative_examples, seed=seed) if steer else []
    mode, parent = slot.mode, None
    if mode == "edit":
        candidates = examples or c.memory.records(slot.skill, EnvStatus.VALID)
        parent = rng.choice(candidates) if candidates else None
        mode = "edit" if parent is not None else "generate"
    multi = d.tool_contract == "multi_turn"
    worked = (
        tool_prompts.MULTI_TURN_EXAMPLE
        if multi
        else designer.pick_worked_example(d.setting, slot.skill, rng, d.worked_example_chars)
    )
    return DesignRequest(
        skill=slot.skill,
        mode=mode,
        worked_example=worked,
        difficulty=d.difficulty,
        document=c.sampler.sample() if c.sampler is not None else None,
        examples=tuple(designer.exemplar(e) for e in examples if parent is None or e.env_id != parent.env_id),
        negatives=tuple(designer.negative(n) for n in negatives),
        parent=designer.exemplar(parent) if parent is not None else None,
        edit_format=d.edit_format,
        tool_contract=d.tool_contract,
        domain=tool_prompts.draw_domain(rng) if multi else "",
        task_type=tool_prompts.task_type_for(design_index) if multi else "",
    )


async def _check_all(
    cfg: TrainConfig, c: Components, designs: Sequence[designer.Design], step: int, *, first: int = 0
) -> list[CheckReport | None]:
    """Run the ladder on every extracted source, a few at a time (each ladder waits on its sandbox children).

    ``first``: the regeneration's index of ``designs[0]`` (retries continue the count), which seeds the probes.
    """
    gate = asyncio.Semaphore(cluster.check_concurrency(cfg))

    async def one(i: int, design: designer.Design) -> CheckReport | None:
        if design.code is None:
            return None
        async with gate:  # in a thread over the local sandbox, or on a Ray worker
            seed = derive_seed(cfg.seed, "check", step, first + i)
            return await cluster.check_source(c.runner, design.code, cfg.checker, seed=seed, win=cfg.play)

    return list(await asyncio.gather(*(one(i, x) for i, x in enumerate(designs))))


async def _reject_unchanged(
    cfg: TrainConfig,
    c: Components,
    designs: Sequence[designer.Design],
    reports: list[CheckReport | None],
    step: int,
    *,
    first: int = 0,
) -> list[CheckReport | None]:
    """Reject (``UNCHANGED_GAME``) an accepted edit whose scripted solution plays one instance at
    ``play.difficulty`` exactly as its parent's does: it changed a comment or a level not played, so the
    agent would learn nothing new from it. Without a winning script on both sides nothing is compared."""
    options, turns = reset_options(cfg.play, None), cfg.play.max_turns
    gate = asyncio.Semaphore(cluster.check_concurrency(cfg))

    async def one(i: int, design: designer.Design, report: CheckReport | None) -> CheckReport | None:
        if report is None or not report.ok or design.code is None or design.parent_id is None:
            return report
        parent = c.memory.get(design.parent_id).code
        seed = derive_seed(cfg.seed, "unchanged", step, first + i)
        async with gate:
            before, after = await same_instance_demos(
                c.runner, parent, design.code, seed=seed, options=options, max_actions=turns
            )
        if before is None or before != after:
            return report
        msg = (
            f"the scripted solution plays seed {seed} exactly as in the parent {design.parent_id}: the edit "
            "changes nothing the agent plays. Fix: change a rule, or a number of the level that is played."
        )
        finding = Finding(FindingCode.UNCHANGED_GAME, "fatal", "novelty", msg)
        return dataclasses.replace(report, ok=False, findings=(*report.findings, finding))

    return list(
        await asyncio.gather(*(one(i, *pair) for i, pair in enumerate(zip(designs, reports, strict=True))))
    )


async def _review(
    c: Components,
    designs: Sequence[designer.Design],
    reports: list[CheckReport | None],
    max_tokens: int,
    setting: Setting = "games",
) -> list[CheckReport | None]:
    """Rung 9: the policy reviews every accepted environment; no explicit ACCEPT means rejection."""
    todo = [i for i, r in enumerate(reports) if r is not None and r.ok]
    prompts = [
        c.policy.template.render(
            [
                {"role": "system", "content": review_system(setting)},
                {"role": "user", "content": f"Skill: {designs[i].skill}\n```python\n{designs[i].code}\n```"},
            ],
            add_generation_prompt=True,
        )
        for i in todo
    ]
    replies = (
        await c.policy.sample(prompts, SamplingParams(temperature=0.0, max_tokens=max_tokens)) if todo else []
    )
    out = list(reports)
    for i, reply in zip(todo, replies, strict=True):
        verdict = last_boxed(strip_reasoning(reply.text)) if reply.finish_reason != "error" else None
        report = reports[i]
        if report is not None and (verdict or "").strip().upper() != "ACCEPT":
            why = f"the reviewing model answered {verdict!r}" if verdict else "the review gave no verdict"
            finding = Finding(FindingCode.LLM_REVIEW, "fatal", "review", f"{why} (fail closed)")
            out[i] = dataclasses.replace(report, ok=False, findings=(*report.findings, finding))
    return out


def _archive(
    c: Components,
    design: designer.Design,
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
    """Write hints for accepted environments: one from the code alone, or (instance mode) one per seed.

    A played instance (or, per seed, each hinted instance) is opened in the sandbox for its first
    observation and solution, which the leak filter checks the hint against.
    """
    d = cfg.designer
    slots: list[tuple[str, HintRequest | None]] = []
    for o in outcomes:
        if o.valid:
            found = await _hint_requests(cfg, c, c.memory.get(o.env_id), step)
            slots += [(o.env_id, r) for r in found]
    requests = [r for _, r in slots if r is not None]
    params = SamplingParams(
        temperature=d.hint_temperature, top_p=d.top_p, top_k=d.top_k, max_tokens=d.hint_max_tokens
    )
    hints = await write_hints(
        c.policy,
        requests,
        params,
        max_words=d.hint_max_words,
        max_chars=d.hint_max_chars,
        prefix=d.hint_prefix,
        max_prompt_tokens=cfg.model.max_context - d.hint_max_tokens,
    )
    written = iter(hints)
    by_env: dict[str, list[Hint | None]] = {}
    for env_id, request in slots:  # a seed whose instance failed keeps its place, with no hint
        by_env.setdefault(env_id, []).append(next(written) if request is not None else None)
    updated = []
    for o in outcomes:
        mine = by_env.get(o.env_id, [])
        texts = [None if h is None else h.hint for h in mine]
        first = next((t for t in texts if t), None)
        if first:
            c.memory.set_hint(o.env_id, first)
        per_seed = tuple(texts) if d.hint_mode == "instance" else ()
        calls = tuple((h.reason, h.completion) for h in mine if h is not None)
        updated.append(dataclasses.replace(o, hint=first, seed_hints=per_seed, hint_calls=calls))
    return updated, hint_metrics(hints)


async def _hint_requests(
    cfg: TrainConfig, c: Components, record: EnvRecord, step: int
) -> list[HintRequest | None]:
    """Code mode: one request, its leaks checked against the first played instance; instance mode: one per
    hinted seed, with that instance's first observation (None where the instance failed to open)."""
    from spade.rollout import episode_seeds  # noqa: PLC0415 - avoids an import cycle through agent

    instance = cfg.designer.hint_mode == "instance"
    n = cfg.rollout.hint_plays_per_env if instance else 1
    setting = cfg.designer.setting
    out: list[HintRequest | None] = []
    for seed in episode_seeds(cfg.seed, step, record.env_id, n):
        opened = await _first_look(c, record, seed)
        if opened is None:
            out += [None] if instance else []
            continue
        obs, actions = opened
        if instance:
            out.append(HintRequest(record.env_id, record.code, obs, setting, actions))
        else:
            out.append(HintRequest(record.env_id, record.code, None, setting, actions, public=(obs,)))
    return out


async def _first_look(
    c: Components, record: EnvRecord, seed: int
) -> tuple[str, tuple[str, ...] | None] | None:
    """The first observation and solution actions of one instance, or None when the sandbox fails."""
    try:
        env = await c.runner.aopen(record.code, filename=f"<{record.env_id}>")
    except SandboxError:
        return None
    try:
        obs, _ = await env.areset(seed=seed)
        try:
            solution = await env.asolution()
        except NotImplementedError:
            solution = None
    except SandboxError:
        return None
    finally:
        await env.aclose()
    actions = (solution,) if isinstance(solution, str) else tuple(solution) if solution else None
    return obs, actions


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


def _design_record(
    design: designer.Design, outcome: DesignOutcome, report: CheckReport | None, step: int
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


def _design_metrics(designs: Sequence[designer.Design], outcomes: Sequence[DesignOutcome]) -> dict[str, Any]:
    n = max(len(outcomes), 1)
    metrics: dict[str, Any] = dict(designer.design_metrics(designs))
    metrics["designer/envs"] = float(len(outcomes))
    metrics["designer/valid_rate"] = sum(o.valid for o in outcomes) / n
    for mode in ("generate", "edit"):
        mine = [o for o in outcomes if o.mode == mode]
        if mine:
            metrics[f"designer/valid_rate_{mode}"] = sum(o.valid for o in mine) / len(mine)
    for reason, count in Counter(o.reason for o in outcomes if not o.valid).items():
        metrics[f"designer/rejected/{reason}"] = float(count)
    return metrics
