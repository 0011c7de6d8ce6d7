"""Evaluate one policy on one or more suites: the Python API behind ``spade eval`` and in-training evaluation.

:func:`evaluate` checks every suite and its selection first (unknown names, missing packages and bad
parameters fail before a model is loaded), builds the policy, sends one tiny request (a server that is down
fails here), runs the suites one after another with every episode of a suite in flight under
``opts.concurrency``, and writes the results folder atomically at the end.

A stop request (:mod:`spade.stopping`: SIGINT/SIGTERM under the CLI's handlers) ends :func:`evaluate` with
:class:`~spade.stopping.Interrupted` wherever it is (after the model loaded, during generation, before the
results are written: replies cut short would be scored as wrong), and nothing is written.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from spade import stopping
from spade.config import EvalOptions, to_dict
from spade.evals.base import EvalError, ItemResult, Progress, Suite, Workload
from spade.evals.policies import PolicySource, ScriptedSolver, load_policy, preflight, probe_rate
from spade.evals.progress import Estimate, episode_tokens, rough_estimate
from spade.evals.registry import check_suite_name, make_suite
from spade.evals.results import check_writable, write_results
from spade.evals.stats import SuiteSummary, summarise
from spade.evals.timing import TimedPolicy
from spade.types import Policy

ProgressFactory = Callable[[str, Workload | None, Estimate | None], Progress]
"""Given a suite's name, workload (None for a suite that cannot say) and rough estimate (None without a model
to probe), the progress callback of that suite; called just before the suite runs."""
HEARTBEAT_S = 30.0
"""While no episode finishes, the progress callback is called again this often with unchanged counts."""


@dataclass(frozen=True, slots=True)
class SuiteRequest:
    """One suite to run with its options."""

    name: str
    opts: EvalOptions = field(default_factory=EvalOptions)


@dataclass(frozen=True, slots=True)
class SuiteReport:
    """One suite's outcome."""

    name: str
    opts: EvalOptions
    summary: SuiteSummary
    items: list[ItemResult]
    time_s: float
    generation_s: float

    @property
    def in_flight_share(self) -> float:
        """Fraction of the suite's wall time with a generation request in flight (running or queued)."""
        return self.generation_s / self.time_s if self.time_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` object of the suite (summary, options, timing)."""
        return {
            **self.summary.to_dict(),
            "options": to_dict(self.opts),
            "time_s": round(self.time_s, 3),
            "in_flight_share": round(self.in_flight_share, 4),
            "measures_nothing": self.summary.measures_nothing,
        }


def parse_suite(spec: str, tasks: Sequence[str] = ()) -> tuple[str, tuple[str, ...]]:
    """``name`` or ``name:task1,task2`` -> (name, tasks); ``tasks`` applies when the spec names none."""
    name, _, listed = spec.partition(":")
    chosen = tuple(t for t in listed.split(",") if t) if listed else tuple(tasks)
    check_suite_name(name)
    return name, chosen


def prepare(requests: Sequence[SuiteRequest]) -> list[Suite]:
    """Build every suite and check its selection (raises EvalError before any model work)."""
    suites = []
    for r in requests:
        suite = make_suite(r.name)
        check = getattr(suite, "check", None)
        if callable(check):
            check(r.opts)
        suites.append(suite)
    return suites


async def arun(
    policy: Policy,
    requests: Sequence[SuiteRequest],
    suites: Sequence[Suite] | None = None,
    progress: ProgressFactory | None = None,
) -> list[SuiteReport]:
    """Run the suites on an already built policy (in-training evaluation calls this).

    ``progress``, when given, is called with each suite's name, :func:`workload` and rough estimate (from a
    probe of the engine, :func:`spade.evals.policies.probe_rate`: a few seconds) just before it runs; the
    callback it returns hears ``(done, total)`` after every episode and every :data:`HEARTBEAT_S` seconds
    while none finishes.
    """
    suites = list(suites) if suites is not None else prepare(requests)
    reports = []
    for request, suite in zip(requests, suites, strict=True):
        callback = None
        if progress is not None:
            work = workload(suite, request.opts)
            callback = progress(request.name, work, await _estimate(policy, request, work))
        timed = TimedPolicy(policy)
        started = time.perf_counter()
        # The solver is a marker the envs suite recognises, so it is passed on unwrapped.
        sampler = policy if isinstance(policy, ScriptedSolver) else timed
        latest = _Latest(callback)
        items = await _with_heartbeat(suite.run(sampler, request.opts, latest), latest, HEARTBEAT_S)
        elapsed = time.perf_counter() - started
        reports.append(
            SuiteReport(
                request.name, request.opts, summarise(request.name, items), items, elapsed, timed.generation_s
            )
        )
    return reports


async def _estimate(policy: Policy, request: SuiteRequest, work: Workload | None) -> Estimate | None:
    """The rough estimate of a suite from a probe of the policy's engine (None for the scripted solver)."""
    if work is None or isinstance(policy, ScriptedSolver):
        return None
    tokens_per_s = await probe_rate(policy, work.in_flight)
    if tokens_per_s is None:
        return None
    return rough_estimate(work, episode_tokens(request.name, request.opts), tokens_per_s)


def workload(suite: Suite, opts: EvalOptions) -> Workload | None:
    """The suite's workload under ``opts`` (None when the suite does not define ``workload``)."""
    method = getattr(suite, "workload", None)
    return method(opts) if callable(method) else None


class _Latest:
    """A progress callback that remembers the last counts, so a heartbeat can repeat them."""

    def __init__(self, callback: Progress | None) -> None:
        self.callback, self.done, self.total = callback, 0, 0

    def __call__(self, done: int, total: int) -> None:
        self.done, self.total = done, total
        if self.callback is not None:
            self.callback(done, total)

    def beat(self) -> None:
        """Repeat the last counts (nothing finished since; nothing before the suite's first count)."""
        if self.callback is not None and self.total > 0:
            self.callback(self.done, self.total)


async def _with_heartbeat(
    run: Coroutine[Any, Any, list[ItemResult]], latest: _Latest, every_s: float
) -> list[ItemResult]:
    """Await a suite's ``run`` (reporting to ``latest``), repeating the last counts every ``every_s`` seconds.

    Models generate in worker threads, so the event loop is free to beat while a long round is in flight.
    """
    task = asyncio.ensure_future(run)
    while True:
        finished, _ = await asyncio.wait({task}, timeout=every_s)
        if finished:
            return task.result()
        latest.beat()


def evaluate(
    requests: Sequence[SuiteRequest | str],
    policy: PolicySource | Policy | None = None,
    *,
    opts: EvalOptions | None = None,
    out: Path | None = None,
    overwrite: bool = False,
    progress: ProgressFactory | None = None,
) -> list[SuiteReport]:
    """Evaluate a policy on suites and (with ``out``) write the results folder.

    Args:
        requests: suites as :class:`SuiteRequest` or ``"name"`` / ``"name:task1,task2"`` strings (strings
            use ``opts``).
        policy: a :class:`PolicySource` (default: the embedded model on the hf backend) or a built Policy.
        opts: options for suites given as strings.
        out: results folder (``summary.json`` + ``<suite>.jsonl``); None writes nothing.
        overwrite: replace an existing ``out``.
        progress: per-suite progress callbacks (see :func:`arun`).

    Raises:
        EvalError: bad suite, task, parameter, policy or output folder; a policy that cannot generate.
        spade.stopping.Interrupted: a stop was requested (see the module docstring); nothing is written.
    """
    base = opts or EvalOptions()
    reqs = [r if isinstance(r, SuiteRequest) else SuiteRequest(*_named(r, base)) for r in requests]
    if not reqs:
        raise EvalError("name at least one suite (e.g. reasoning_gym, math, envs)")
    source = policy if policy is not None else PolicySource()
    _check_solver(source, reqs)
    suites = prepare(reqs)
    if out is not None:
        check_writable(out, overwrite=overwrite)
    built = (
        load_policy(source, max(r.opts.concurrency for r in reqs), top_k=max(r.opts.top_k for r in reqs))
        if isinstance(source, PolicySource)
        else source
    )
    stopping.check()  # asked to stop while the model loaded
    reports = asyncio.run(stopping.run_until_stopped(_checked_run(built, reqs, suites, progress)))
    stopping.check()  # replies cut short by a stop request would be scored as wrong: write nothing
    if out is not None:
        write_results(
            out, results_summary(reports, source), {r.name: r.items for r in reports}, overwrite=overwrite
        )
    return reports


def _check_solver(source: PolicySource | Policy, reqs: Sequence[SuiteRequest]) -> None:
    """Raise EvalError when the scripted solver is asked for a suite other than envs."""
    if isinstance(source, PolicySource) and source.kind == "solver":
        wrong = [r.name for r in reqs if r.name != "envs"]
        if wrong:
            raise EvalError(
                f"the scripted solver only plays environments: drop {', '.join(wrong)} or use a model"
            )


def _named(spec: str, base: EvalOptions) -> tuple[str, EvalOptions]:
    name, tasks = parse_suite(spec, base.tasks)
    return name, dataclasses.replace(base, tasks=tasks)


async def _checked_run(
    policy: Policy, reqs: Sequence[SuiteRequest], suites: Sequence[Suite], progress: ProgressFactory | None
) -> list[SuiteReport]:
    await preflight(policy)
    return await arun(policy, reqs, suites, progress)


def results_summary(reports: Sequence[SuiteReport], source: PolicySource | Policy) -> dict[str, Any]:
    """The ``summary.json`` content: when, which policy, and every suite's figures."""
    policy = source.describe() if isinstance(source, PolicySource) else {"kind": type(source).__name__}
    if isinstance(source, ScriptedSolver):
        policy = {"kind": "solver"}
    return {
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "policy": policy,
        "suites": [r.to_dict() for r in reports],
    }
