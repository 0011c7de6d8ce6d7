"""Held-out evaluation during training: at step 0, every ``eval.every`` steps and after the last step.

The loop calls :meth:`TrainEval.at_step` at the top of each step (the policy before that step's update) and
:meth:`TrainEval.at_end` after the last one. Each evaluation writes ``<run>/eval/step_N`` (the same folder
format as ``spade eval --out``; N = updates the policy had) and returns metrics for the step's row:
``eval/<suite>/score``, ``eval/<suite>/ci95_lo|hi``, ``eval/<suite>/<category>/score``, ``eval/<suite>/n``
and ``eval/<suite>/error`` (1 when the suite failed). A broken suite never stops training: its failure is
logged and counted, and the other suites still run.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from spade import stopping
from spade.config import EvalConfig, EvalOptions, PlayConfig, TrainConfig
from spade.evals.base import ItemResult
from spade.evals.results import SUMMARY, write_results
from spade.evals.runner import SuiteReport, SuiteRequest, arun, parse_suite, prepare, results_summary
from spade.types import Policy

log = logging.getLogger(__name__)


def eval_options(e: EvalConfig, name: str, tasks: tuple[str, ...], play: PlayConfig) -> EvalOptions:
    """The options of one in-training suite. ``envs`` is played as training plays (``play``'s action format,
    on-length rule, demonstrations, context and reply budget), up to the suite's 25 turns: a seed game's
    held-out variants are scored in the form the agent learns, whatever their own turn budget."""
    params: dict[str, Any] = {}
    max_tokens = e.max_tokens
    if name == "envs":
        params = {"context_tokens": play.context_tokens, "action_mode": play.action_mode,
                  "on_length": play.on_length, "demos": play.demos}  # fmt: skip
        max_tokens = play.turn_tokens
    if e.preset != "default":
        params["preset"] = e.preset
    if name in (data := e.data_paths()):
        params["data"] = data[name]
    return EvalOptions.of(e, max_tokens=max_tokens, tasks=tasks, params=params)


def report_metrics(report: SuiteReport) -> dict[str, float]:
    """The metrics row entries of one suite."""
    s, prefix = report.summary, f"eval/{report.name}"
    out = {
        f"{prefix}/score": s.total.score,
        f"{prefix}/ci95_lo": s.total.ci95[0],
        f"{prefix}/ci95_hi": s.total.ci95[1],
        f"{prefix}/n": float(s.total.n),
        f"{prefix}/error": 0.0,
        f"{prefix}/episode_errors": float(s.errors),
    }
    out.update({f"{prefix}/{cat}/score": v.score for cat, v in s.by_category.items()})
    return out


class TrainEval:
    """The in-training evaluator of one run (inactive when ``cfg.eval.every`` is 0)."""

    def __init__(self, cfg: TrainConfig, run_root: Path) -> None:
        self.cfg = cfg.eval
        self.play = cfg.play
        self.root = run_root / "eval"

    def due(self, updates: int) -> bool:
        """Whether the policy after ``updates`` updates is evaluated at the top of a step."""
        return self.cfg.every > 0 and updates % self.cfg.every == 0

    async def at_step(self, policy: Policy, step: int) -> dict[str, float]:
        """Metrics for step ``step``'s row (empty when no evaluation is due)."""
        return await self.evaluate(policy, step) if self.due(step) else {}

    async def at_end(self, policy: Policy, steps: int) -> dict[str, Any] | None:
        """A row ``{"step": steps, eval/...}`` for the final policy (None when disabled or already done)."""
        if self.cfg.every <= 0 or (self.root / f"step_{steps}" / SUMMARY).is_file():
            return None
        return {"step": steps, **await self.evaluate(policy, steps)}

    async def evaluate(self, policy: Policy, updates: int) -> dict[str, float]:
        """Run every suite (each guarded), write ``eval/step_<updates>``, return the metrics.

        Raises:
            spade.stopping.Interrupted: a stop was requested while the suites ran; nothing is written.
        """
        started = time.perf_counter()
        metrics: dict[str, float] = {}
        reports: list[SuiteReport] = []
        for spec in self.cfg.suites:
            report = await self._guarded(policy, spec)
            if isinstance(report, str):
                metrics[f"eval/{spec.partition(':')[0]}/error"] = 1.0
                log.warning("evaluation suite %s failed at %d updates: %s", spec, updates, report)
                continue
            reports.append(report)
            metrics.update(report_metrics(report))
        stopping.check()  # replies cut by a stop request would be scored as wrong: write no results
        if reports:
            items: dict[str, list[ItemResult]] = {r.name: r.items for r in reports}
            summary = results_summary(reports, policy) | {"updates": updates}
            write_results(self.root / f"step_{updates}", summary, items, overwrite=True)
        metrics["time/eval_s"] = time.perf_counter() - started
        return metrics

    async def _guarded(self, policy: Policy, spec: str) -> SuiteReport | str:
        """The suite's report, or the reason it failed."""
        try:
            name, tasks = parse_suite(spec)
            request = SuiteRequest(name, eval_options(self.cfg, name, tasks, self.play))
            return (await arun(policy, [request], prepare([request])))[0]
        except Exception as exc:  # boundary: a broken suite must not stop training; it is counted instead
            return f"{type(exc).__name__}: {exc}"
