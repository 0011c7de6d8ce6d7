"""Checking one batch of designs: the validation ladder, the unchanged-edit rule and the policy's review.

:meth:`Checks.check_all` runs every extracted source through the ladder in the sandbox;
:meth:`Checks.reject_unchanged` rejects an accepted edit whose scripted solution plays exactly as its parent's;
:meth:`Checks.reviewed` (rung 9, ``checker.llm_review``) lets the policy accept or reject what is left.
Each returns one report per design (None where no code was extracted), a rejection as a fatal finding added
to the report; :meth:`Checks.check` runs the three in order.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from spade import cluster
from spade.checker import Checker, CheckReport, Finding, FindingCode
from spade.config.types import Setting
from spade.design.designer import Design
from spade.design.prompt_texts import review_system
from spade.memory.archive import Memory
from spade.play.demos import same_instance_demos
from spade.replies import review_verdict
from spade.sandbox import EnvRunner
from spade.seeds import derive_seed
from spade.types import Policy, SamplingParams


@dataclass(frozen=True, slots=True)
class Checks:
    """Checks each design of a regeneration: the ladder, the unchanged-edit rule and, optionally, the review."""

    checker: Checker
    runner: EnvRunner
    memory: Memory
    """Holds the parents of edits."""
    policy: Policy
    """Reviews accepted designs (``review``)."""
    seed: int
    """The run's seed: with the step and the design's index it seeds each check."""
    concurrency: int = 4
    """Checks run at once (each ladder waits on its sandbox children)."""
    review: bool = False
    """Rung 9: the policy accepts or rejects what the ladder accepted (``checker.llm_review``)."""
    review_tokens: int = 256
    review_temperature: float = 0.0
    review_fail_open: bool = False
    """Reject only on an explicit verdict other than ACCEPT (``checker.review_fail_open``, as released)."""
    setting: Setting = "games"
    max_turns: int = 25
    """Most actions of a scripted solution compared by :meth:`reject_unchanged` (``play.max_turns``)."""
    options: dict[str, int] | None = None
    """The ``reset`` options of the level the agent plays (:func:`spade.play.rollout.reset_options`), at which
    :meth:`reject_unchanged` compares an edit with its parent."""

    async def check(
        self, designs: Sequence[Design], step: int, *, first: int = 0
    ) -> list[CheckReport | None]:
        """One report per design (None where no code was extracted): the ladder, then the unchanged-edit rule,
        then the review. ``first``: the regeneration's index of ``designs[0]`` (retries continue the count),
        which seeds the probes."""
        reports = await self.check_all(designs, step, first=first)
        reports = await self.reject_unchanged(designs, reports, step, first=first)
        return await self.reviewed(designs, reports) if self.review else reports

    async def check_all(
        self, designs: Sequence[Design], step: int, *, first: int = 0
    ) -> list[CheckReport | None]:
        """Run the ladder on every extracted source, a few at a time, on the sandbox or cluster workers."""
        gate = asyncio.Semaphore(self.concurrency)

        async def one(i: int, design: Design) -> CheckReport | None:
            if design.code is None:
                return None
            async with gate:  # in a thread over the local sandbox, or on a Ray worker
                seed = derive_seed(self.seed, "check", step, first + i)
                return await cluster.check_source(self.runner, design.code, self.checker, seed=seed)

        return list(await asyncio.gather(*(one(i, x) for i, x in enumerate(designs))))

    async def reject_unchanged(
        self, designs: Sequence[Design], reports: list[CheckReport | None], step: int, *, first: int = 0
    ) -> list[CheckReport | None]:
        """Reject (``UNCHANGED_GAME``) an accepted edit whose scripted solution plays one instance at the
        played level exactly as its parent's does: it changed a comment or a level not played, so the agent
        would learn nothing new from it. Without a winning script on both sides nothing is compared."""
        gate = asyncio.Semaphore(self.concurrency)

        async def one(i: int, design: Design, report: CheckReport | None) -> CheckReport | None:
            if report is None or not report.ok or design.code is None or design.parent_id is None:
                return report
            parent = self.memory.get(design.parent_id).code
            seed = derive_seed(self.seed, "unchanged", step, first + i)
            async with gate:
                before, after = await same_instance_demos(
                    self.runner,
                    parent,
                    design.code,
                    seed=seed,
                    options=self.options,
                    max_actions=self.max_turns,
                )
            if before is None or before != after:
                return report
            msg = (
                f"the scripted solution plays seed {seed} exactly as in the parent {design.parent_id}: the "
                "edit changes nothing the agent plays. Fix: change a rule, or a number of the level that is "
                "played."
            )
            finding = Finding(FindingCode.UNCHANGED_GAME, "fatal", "novelty", msg)
            return dataclasses.replace(report, ok=False, findings=(*report.findings, finding))

        pairs = enumerate(zip(designs, reports, strict=True))
        return list(await asyncio.gather(*(one(i, *pair) for i, pair in pairs)))

    async def reviewed(
        self, designs: Sequence[Design], reports: list[CheckReport | None]
    ) -> list[CheckReport | None]:
        """Rung 9: the policy reviews every accepted environment; no explicit ACCEPT means rejection (with
        ``review_fail_open``, only an explicit other verdict does)."""
        todo = [i for i, r in enumerate(reports) if r is not None and r.ok]
        prompts = [
            self.policy.template.render(
                [
                    {"role": "system", "content": review_system(self.setting)},
                    {
                        "role": "user",
                        "content": f"Skill: {designs[i].skill}\n```python\n{designs[i].code}\n```",
                    },
                ],
                add_generation_prompt=True,
            )
            for i in todo
        ]
        params = SamplingParams(temperature=self.review_temperature, max_tokens=self.review_tokens)
        replies = await self.policy.sample(prompts, params) if todo else []
        out = list(reports)
        for i, reply in zip(todo, replies, strict=True):
            verdict = review_verdict(reply.text) if reply.finish_reason != "error" else None
            report = reports[i]
            if report is None or (verdict or "").strip().upper() == "ACCEPT":
                continue
            if self.review_fail_open and not verdict:
                continue  # as released: no verdict, an empty reply or a failed request accepts
            why = f"the reviewing model answered {verdict!r}" if verdict else "the review gave no verdict"
            finding = Finding(FindingCode.LLM_REVIEW, "fatal", "review", f"{why} (fail closed)")
            out[i] = dataclasses.replace(report, ok=False, findings=(*report.findings, finding))
        return out
