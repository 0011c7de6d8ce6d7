"""``bench/eval.py --suite envs``: the ``envs`` suite at engine speed, against the engine itself and the old flow.

One engine (cpu-tiny's in-process vLLM with the embedded model, ``--threads`` torch threads) serves three
measurements in one invocation, on the same items (``--tasks``, by default the lock variants) played as the
experiment plays them (cpu-tiny's action format and reply budget, ``--max-turns`` turns, ``--temperature``):

- **now**: :func:`spade.evals.runner.arun` on the policy :func:`spade.evals.policies.load_policy` builds (the
  engine behind a :class:`~spade.backends.batching.BatchingPolicy`), ``--repeats`` times;
- **engine**: after each repeat, the engine alone replays that repeat's engine calls back to back (same
  prompts, same batches, same sampling parameters, prefix cache emptied first, as before each repeat): its own
  sampled-token rate on exactly this workload, with no environment, sandbox or event loop in between;
- **before**: the flow ``spade eval envs --run`` had: the bare engine (each episode's request its own engine
  call) and every episode its own group of one play (``run_jobs(..., max_concurrent=1)``) under
  ``gather_bounded``; once, on ``--before-episodes`` episodes per item (it is slow).

Figures (medians over the repeats): ``envs_episodes_per_s``; ``engine_share`` = the evaluation's sampled tokens
per second over the engine's replay rate (target >= 0.5); ``speedup_vs_before`` = episodes per second now over
before (target >= 5).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from spade.backends import policy_metrics, prefix_cache_hit_rate
from spade.config import CPU_TINY, EvalOptions
from spade.evals.base import eval_seed
from spade.evals.chat import gather_bounded
from spade.evals.envs import play_config, select_items
from spade.evals.policies import PolicySource, load_policy
from spade.evals.runner import SuiteRequest, arun
from spade.play.rollout import PlayJob, run_jobs
from spade.sandbox import Sandbox
from spade.types import Completion, Policy, SamplingParams


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The envs bench's options (``bench/eval.py`` shares ``--json``, ``--suite``, ``--threads``, ...)."""
    parser.add_argument("--before-episodes", type=int, default=1, help="episodes per item of the old flow")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-turns", type=int, default=25, help="agent turns (the experiment's 25)")
    parser.add_argument("--temperature", type=float, default=0.6, help="the experiment's evaluation's")


class EngineLog:
    """Records every batched ``generate`` call of the engine: prompts, parameters, sampled tokens, seconds."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.inner = engine.generate
        self.calls: list[tuple[list[Sequence[int]], SamplingParams, int, float]] = []
        engine.generate = self._generate

    def _generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        started = time.perf_counter()
        out: list[Completion] = self.inner(prompts, params)
        sampled = sum(len(c.token_ids_T) for c in out)
        self.calls.append((list(prompts), params, sampled, time.perf_counter() - started))
        return out

    def take(self) -> list[tuple[list[Sequence[int]], SamplingParams, int, float]]:
        """The calls so far (and forget them)."""
        calls, self.calls = self.calls, []
        return calls

    def fresh(self) -> None:
        """Empty the prefix cache: a measurement must not reuse the previous one's prompts."""
        self.engine.llm.reset_prefix_cache()

    def replay(self, calls: Sequence[tuple[list[Sequence[int]], SamplingParams, int, float]]) -> float:
        """The engine's own sampled tokens per second on ``calls``, replayed back to back from a cold cache."""
        self.fresh()
        started = time.perf_counter()
        sampled = sum(
            len(c.token_ids_T) for prompts, params, _, _ in calls for c in self.inner(prompts, params)
        )
        return sampled / (time.perf_counter() - started)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Load the engine once, measure now / engine / before, return the figures."""
    _, _, listed = args.suite.partition(":")
    tasks = tuple(t for t in listed.split(",") if t) or ("variants:combination_lock",)
    play = CPU_TINY.play
    params = {"action_mode": play.action_mode, "on_length": play.on_length, "max_turns": args.max_turns,
              "context_tokens": play.context_tokens, "demos": play.demos}  # fmt: skip
    opts = EvalOptions(
        episodes=args.episodes, limit=args.limit, temperature=args.temperature, max_tokens=play.turn_tokens,
        concurrency=args.concurrency, tasks=tasks, params=params,
    )  # fmt: skip
    model = dataclasses.replace(CPU_TINY.model, threads=args.threads)
    started = time.perf_counter()
    policy = load_policy(PolicySource(model=model), args.concurrency)
    engine = getattr(policy, "policy", policy)  # the bare engine under the batching wrapper
    load_s = time.perf_counter() - started
    log = EngineLog(engine)
    before = _before(engine, dataclasses.replace(opts, episodes=args.before_episodes), log)
    print(f"before: {before}", file=sys.stderr, flush=True)
    now = []
    for k in range(args.repeats):
        now.append(_now(policy, opts, log))
        print(f"now {k + 1}/{args.repeats}: {now[-1]}", file=sys.stderr, flush=True)
    engine.close()
    rate = statistics.median(r["episodes_per_s"] for r in now)
    return {
        "envs_episodes_per_s": round(rate, 3),
        "engine_share": round(statistics.median(r["engine_share"] for r in now), 3),
        "speedup_vs_before": round(rate / before["episodes_per_s"], 2),
        "now": now,
        "before": before,
        "load_s": round(load_s, 1),
        "tasks": list(tasks),
        "concurrency": args.concurrency,
        "threads": args.threads,
    }


def _now(policy: Policy, opts: EvalOptions, log: EngineLog) -> dict[str, Any]:
    """One evaluation through the runner, then the engine's replay of its calls."""
    log.fresh()
    cpu, before = time.process_time(), policy_metrics(policy)
    (report,) = asyncio.run(arun(policy, [SuiteRequest("envs", opts)]))
    cpu_s = time.process_time() - cpu
    cache = prefix_cache_hit_rate(before, policy_metrics(policy)).get("speed/prefix_cache_hit_rate", 0.0)
    calls = log.take()
    figures = _figures(calls, report.summary.total.n, report.time_s)
    episodes = [e for item in report.items for e in item.detail["episodes"]]
    engine_rate = log.replay(calls)
    return figures | {
        "engine_tok_per_s": round(engine_rate, 1),
        "engine_share": round(figures["sampled_tok_per_s"] / engine_rate, 3),
        "cpu_s": round(cpu_s, 1),
        "prefix_cache_hit_rate": round(cache, 3),
        "win_rate": round(sum(e["won"] for e in episodes) / len(episodes), 3),
        "mean_return": round(sum(e["return"] for e in episodes) / len(episodes), 3),
        "statuses": dict(Counter(e["status"] for e in episodes)),
    }


def _before(engine: Policy, opts: EvalOptions, log: EngineLog) -> dict[str, Any]:
    """The old flow: the bare engine, one ``run_jobs`` of one play per episode under ``gather_bounded``."""
    items, cfg = select_items(opts), play_config(opts)
    jobs = [PlayJob(i.name, i.source, eval_seed(opts.seed, "envs", i.item_id, e)) for i in items
            for e in range(opts.episodes)]  # fmt: skip

    async def alone(runner: Sandbox, job: PlayJob) -> Any:
        return (await run_jobs(runner, engine, [job], cfg, max_concurrent=1))[0]

    async def main() -> list[Any]:
        with Sandbox() as runner:
            calls = [functools.partial(alone, runner, j) for j in jobs]
            return await gather_bounded(calls, opts.concurrency, lambda done, total: None)

    log.fresh()
    started = time.perf_counter()
    trajectories = asyncio.run(main())
    wall = time.perf_counter() - started
    figures = _figures(log.take(), len(trajectories), wall)
    del figures["engine_busy_share"]  # its calls overlap, each waiting for the engine's lock: no busy share
    return figures


def _figures(calls: Sequence[tuple[Any, Any, int, float]], episodes: int, wall: float) -> dict[str, Any]:
    sampled = sum(c[2] for c in calls)
    requests = sum(len(c[0]) for c in calls)
    return {
        "episodes": episodes,
        "wall_s": round(wall, 2),
        "episodes_per_s": round(episodes / wall, 3),
        "sampled_tokens": sampled,
        "sampled_tok_per_s": round(sampled / wall, 1),
        "engine_calls": len(calls),
        "engine_mean_batch": round(requests / max(len(calls), 1), 1),
        "engine_busy_share": round(sum(c[3] for c in calls) / wall, 3),
    }
