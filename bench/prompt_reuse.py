"""Prefix reuse of multi-turn play with and without ``model.thinking``, on the vllm backend.

Plays the same episodes of one seed game twice with the embedded model on an in-process vLLM engine (the
cpu-tiny engine settings): once as one token stream per episode, once with ``model.thinking`` (each turn
prompted from the chat template's rendering of the history). Prints, per mode, ``speed/prompt_reuse`` (the
share of later turns' prompt tokens that repeat the episode's previous request) and
``speed/prefix_cache_hit_rate`` (the share the engine's prefix cache supplied), so a change in how history
is rendered shows up as a change in reuse. The embedded model writes no reasoning, so with it the two modes
differ only where re-rendering tokenises a reply differently from how it was sampled.

    .venv/bin/python bench/prompt_reuse.py [--env combination_lock] [--plays 16] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json

from spade.backends import make_policy, policy_metrics, prefix_cache_hit_rate
from spade.config import ModelConfig, PlayConfig, VLLMConfig
from spade.envs import spec
from spade.play.rollout import PlayJob, prompt_reuse, run_jobs
from spade.sandbox.inprocess import InProcessSandbox


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="combination_lock")
    parser.add_argument("--plays", type=int, default=16)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    vllm = VLLMConfig(
        dtype="auto", kv_cache_gib=0.75, compile=False, block_size=32, max_batched_tokens=512, in_process=True
    )
    policy = make_policy(ModelConfig(backend="vllm", max_concurrency=args.plays, vllm=vllm))
    play = PlayConfig(
        action_mode="lenient", max_turns=8, context_tokens=1536, turn_tokens=24, on_length="act", difficulty=0
    )
    source = spec(args.env).source()
    jobs = [PlayJob(args.env, source, seed) for seed in range(args.plays)]
    out = {}
    for thinking in (False, True):
        policy.template.thinking = thinking  # type: ignore[attr-defined]
        before = policy_metrics(policy)
        with InProcessSandbox() as runner:
            trajectories = asyncio.run(run_jobs(runner, policy, jobs, play, max_concurrent=args.plays))
        row = {**prompt_reuse(trajectories), **prefix_cache_hit_rate(before, policy_metrics(policy))}
        row["turns"] = float(sum(len(t.transitions) for t in trajectories))
        out["thinking" if thinking else "stream"] = row
        policy.release_memory()  # type: ignore[attr-defined]  # each mode starts from an empty cache
    if args.json:
        print(json.dumps(out))
        return
    for mode, row in out.items():
        print(f"{mode:9s} " + "  ".join(f"{k} {v:.3f}" for k, v in row.items()))


if __name__ == "__main__":
    main()
