"""Held-out evaluation during training: at step 0, every ``eval.every`` steps and after the last step, or at
sampled-token marks (``eval.at_tokens``).

The loop calls :meth:`TrainEval.at_step` at the top of each step (the policy before that step's update) and
:meth:`TrainEval.at_end` after the last one. Each evaluation writes ``<run>/eval/step_N`` (the same folder
format as ``spade eval --out``; N = updates the policy had; with marks ``<run>/eval/mark_M``, whose summary
also records ``mark`` and the run's ``sampled_tokens`` then) and returns metrics for the step's row:
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
    """The in-training evaluator of one run (inactive when ``cfg.eval.every`` is 0 and ``at_tokens`` empty).

    With ``eval.at_tokens`` the run is evaluated at sampled-token marks instead of steps: a mark is due once
    the run's sampled tokens reach it and its folder ``eval/mark_M`` holds no results, so a resumed run
    neither redoes a mark nor skips one (a mark cut by a stop is evaluated again by the resumed step).
    Marks reached together share one evaluation (the same policy), each in its own folder.
    """

    def __init__(self, cfg: TrainConfig, run_root: Path) -> None:
        self.cfg = cfg.eval
        self.play = cfg.play
        self.root = run_root / "eval"

    def pending_marks(self, sampled_tokens: int) -> list[int]:
        """The marks ``sampled_tokens`` has reached that have no results yet."""
        return [m for m in self.cfg.at_tokens if m <= sampled_tokens and not self._done(f"mark_{m}")]

    def due(self, updates: int, sampled_tokens: int = 0) -> bool:
        """Whether the policy after ``updates`` updates, ``sampled_tokens`` sampled, is evaluated now."""
        if self.cfg.at_tokens:
            return bool(self.pending_marks(sampled_tokens))
        return self.cfg.every > 0 and updates % self.cfg.every == 0

    async def at_step(self, policy: Policy, step: int, sampled_tokens: int = 0) -> dict[str, float]:
        """Metrics for step ``step``'s row (empty when no evaluation is due)."""
        if not self.due(step, sampled_tokens):
            return {}
        return await self.evaluate(policy, step, sampled_tokens)

    async def at_end(self, policy: Policy, steps: int, sampled_tokens: int = 0) -> dict[str, Any] | None:
        """A row ``{"step": steps, eval/...}`` for the final policy (None when disabled or already done)."""
        if self.cfg.at_tokens:
            if not self.due(steps, sampled_tokens):
                return None
        elif self.cfg.every <= 0 or self._done(f"step_{steps}"):
            return None
        return {"step": steps, **await self.evaluate(policy, steps, sampled_tokens)}

    def _done(self, folder: str) -> bool:
        return (self.root / folder / SUMMARY).is_file()

    async def evaluate(self, policy: Policy, updates: int, sampled_tokens: int = 0) -> dict[str, float]:
        """Run every suite (each guarded), write ``eval/step_<updates>`` (with marks: ``eval/mark_M`` for
        each pending mark, recording the mark and the sampled tokens), return the metrics.

        Raises:
            spade.stopping.Interrupted: a stop was requested while the suites ran; nothing is written.
        """
        started = time.perf_counter()
        marks = self.pending_marks(sampled_tokens) if self.cfg.at_tokens else []
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
            summary = results_summary(reports, policy) | {
                "updates": updates,
                "sampled_tokens": sampled_tokens,
            }
            for folder, extra in [(f"mark_{m}", {"mark": m}) for m in marks] or [(f"step_{updates}", {})]:
                write_results(self.root / folder, summary | extra, items, overwrite=True)
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
