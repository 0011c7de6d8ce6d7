"""Checking one batch of designs: the validation ladder, the novelty of edits and the policy's review.

:func:`check_all` runs every extracted source through the ladder in the sandbox; :func:`reject_unchanged`
rejects an accepted edit whose scripted solution plays exactly as its parent's; :func:`review` (rung 9,
``checker.llm_review``) lets the policy accept or reject what is left. Each returns one report per design
(None where no code was extracted), a rejection as a fatal finding added to the report.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from spade import cluster
from spade.checker import CheckReport, Finding, FindingCode
from spade.config import TrainConfig
from spade.config.types import Setting
from spade.demos import same_instance_demos
from spade.design.designer import Design
from spade.prompt_texts import review_system
from spade.replies import review_verdict
from spade.rollout import reset_options
from spade.seeds import derive_seed
from spade.types import SamplingParams

if TYPE_CHECKING:
    from spade.components import Components


async def check_all(
    cfg: TrainConfig, c: Components, designs: Sequence[Design], step: int, *, first: int = 0
) -> list[CheckReport | None]:
    """Run the ladder on every extracted source, a few at a time (each ladder waits on its sandbox children).

    ``first``: the regeneration's index of ``designs[0]`` (retries continue the count), which seeds the probes.
    """
    gate = asyncio.Semaphore(cluster.check_concurrency(cfg))

    async def one(i: int, design: Design) -> CheckReport | None:
        if design.code is None:
            return None
        async with gate:  # in a thread over the local sandbox, or on a Ray worker
            seed = derive_seed(cfg.seed, "check", step, first + i)
            return await cluster.check_source(c.runner, design.code, cfg.checker, seed=seed, win=cfg.play)

    return list(await asyncio.gather(*(one(i, x) for i, x in enumerate(designs))))


async def reject_unchanged(
    cfg: TrainConfig,
    c: Components,
    designs: Sequence[Design],
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

    async def one(i: int, design: Design, report: CheckReport | None) -> CheckReport | None:
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


async def review(
    c: Components,
    designs: Sequence[Design],
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
        verdict = review_verdict(reply.text) if reply.finish_reason != "error" else None
        report = reports[i]
        if report is not None and (verdict or "").strip().upper() != "ACCEPT":
            why = f"the reviewing model answered {verdict!r}" if verdict else "the review gave no verdict"
            finding = Finding(FindingCode.LLM_REVIEW, "fatal", "review", f"{why} (fail closed)")
            out[i] = dataclasses.replace(report, ok=False, findings=(*report.findings, finding))
    return out
