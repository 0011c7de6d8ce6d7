"""Evaluation throughput on the embedded model: episodes per second and the share of wall time in generation.

Runs one Reasoning-Gym suite (by default ``math:basic_arithmetic,chain_sum`` at the ``easy`` preset, 2 turns)
through :func:`spade.evals.runner.arun` with every episode in flight under the concurrency cap, so the hf
backend batches their requests. ``generation_share`` is the fraction of the suite's wall time the engine
spends inside its batched ``generate`` calls (target >= 0.8: the model is never idle waiting for scoring,
rendering or bookkeeping); ``in_flight_share`` is the runner's own, looser figure (wall time with any
request running or queued). One torch thread unless ``--threads``.

    .venv/bin/python bench/eval.py [--json] [--limit 8] [--episodes 2] [--max-tokens 64] [--concurrency 32]

``--suite envs[:TASKS]`` measures the ``envs`` suite on cpu-tiny's in-process vLLM engine instead (by default
the lock variants, every item, 4 episodes each): see ``bench/eval_envs.py`` for what it runs and prints
(``envs_episodes_per_s``, ``engine_share``, ``speedup_vs_before``).

    .venv/bin/python bench/eval.py --suite envs --json [--episodes 4] [--repeats 3] [--before-episodes 1]

JSON keys: ``eval_episodes_per_s``, ``generation_share``, ``in_flight_share``, ``engine_batches``,
``engine_mean_batch``, ``episodes``, ``wall_s``, ``score``, ``ci95``, ``load_s`` (model load, not counted in
the rate), ``backend``, ``concurrency``, ``cpu_s`` (process CPU time of the evaluation: on a loaded machine
``wall_s`` is mostly waiting for a core).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

import eval_envs  # bench/eval_envs.py, beside this script
from spade.config import EvalOptions, ModelConfig
from spade.evals.policies import PolicySource, load_policy
from spade.evals.runner import SuiteRequest, arun


class EngineClock:
    """Times the hf engine's own batched ``generate`` calls (they run one at a time in a worker thread)."""

    def __init__(self, policy: Any) -> None:
        self.busy_s = 0.0
        self.calls = 0
        self.sequences = 0
        policy = getattr(policy, "policy", policy)  # the engine under a batching wrapper (vllm)
        inner = getattr(policy, "generate", None)
        if inner is None:
            return

        def timed(prompts: Any, params: Any) -> Any:
            started = time.perf_counter()
            try:
                return inner(prompts, params)
            finally:
                self.busy_s += time.perf_counter() - started
                self.calls += 1
                self.sequences += len(prompts)

        policy.generate = timed


def main() -> None:
    """Parse, run once, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--suite", default="math:basic_arithmetic,chain_sum")
    parser.add_argument("--preset", default="easy")
    parser.add_argument("--limit", type=int, default=None, help="items (default: 8; envs: all)")
    parser.add_argument("--episodes", type=int, default=None, help="per item (default: 2; envs: 4)")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--backend", default="hf")
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--threads", type=int, default=1)
    eval_envs.add_arguments(parser)
    args = parser.parse_args()
    envs = args.suite.partition(":")[0] == "envs"
    args.limit = args.limit if args.limit is not None or envs else 8
    args.episodes = args.episodes if args.episodes is not None else (4 if envs else 2)
    import torch  # noqa: PLC0415 - after argument parsing, so --help is instant

    torch.set_num_threads(args.threads)
    figures = eval_envs.run(args) if envs else run(args)
    if args.json:
        print(json.dumps(figures, sort_keys=True))
    else:
        for key, value in sorted(figures.items()):
            print(f"{key:>22}: {value}")


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Load the policy, evaluate once, return the figures."""
    name, _, tasks = args.suite.partition(":")
    opts = EvalOptions(
        episodes=args.episodes, limit=args.limit, temperature=0.7, max_tokens=args.max_tokens,
        concurrency=args.concurrency, tasks=tuple(t for t in tasks.split(",") if t),
        params={"preset": args.preset} if args.preset != "default" else {},
    )  # fmt: skip
    started = time.perf_counter()
    source = PolicySource(model=ModelConfig(backend=args.backend, model=args.model))
    policy = load_policy(source, args.concurrency)
    load_s = time.perf_counter() - started
    engine = EngineClock(policy)
    cpu0 = time.process_time()
    # arun, not evaluate: evaluate's one-token preflight request would be timed by the engine clock too.
    (report,) = asyncio.run(arun(policy, [SuiteRequest(name, opts)]))
    episodes = report.summary.total.n
    return {
        "eval_episodes_per_s": round(episodes / report.time_s, 3),
        "generation_share": round(engine.busy_s / report.time_s, 4) if engine.busy_s else None,
        "in_flight_share": round(report.in_flight_share, 4),
        "engine_batches": engine.calls,
        "engine_mean_batch": round(engine.sequences / max(engine.calls, 1), 1),
        "episodes": episodes,
        "wall_s": round(report.time_s, 2),
        "load_s": round(load_s, 2),
        "score": report.summary.total.score,
        "ci95": list(report.summary.total.ci95),
        "cpu_s": round(time.process_time() - cpu0, 2),
        "backend": args.backend,
        "concurrency": args.concurrency,
    }


if __name__ == "__main__":
    main()
