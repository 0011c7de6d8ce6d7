"""What the cpu-tiny preset can learn from: agent wins with and without demonstrations, designer validity, speed.

Small probes of the pieces `make train` is made of, on the embedded model, with the preset's own settings:

- agent: for each seed game, ``--episodes`` plays at the preset's difficulty with 0 and with 1 worked
  demonstration (``play.demos``), through the loop's own ``run_jobs``; win rate, well-formed-reply rate and
  sampled tokens/s at the loop's batch (every play of the phase at once), and the prompt tokens the engine
  computed (not taken from its prefix cache) per sampled token;
- designer: ``--designs`` designer replies under the preset's edit format, each run through the checker:
  the share that extract/apply, and the share the checker accepts (``designer/valid_rate`` of the loop);
- the engine's start time and this process tree's peak memory.

    python bench/cpu_tiny.py [--json] [--backend hf|vllm] [--engine-dtype auto|float32|bfloat16] [--episodes 16]
        [--designs 16] [--envs countdown ...] [--weights RUN/policy] [--vllm block_size=32 ...]

Runs in one process (the engine is started once); figures are medians of nothing: one probe each, so rerun
for noise on a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from spade import envs
from spade.backends import make_policy, policy_metrics
from spade.backends.batching import BatchingPolicy
from spade.checker import check_env
from spade.config import CPU_TINY, TrainConfig
from spade.design import designer
from spade.design.prompts import DesignRequest, Exemplar
from spade.play.rollout import PlayJob, episode_seeds, run_jobs
from spade.resources import peak_rss_gb
from spade.sandbox import Sandbox
from spade.types import Policy, SamplingParams


def _agent(
    cfg: TrainConfig, policy: Policy, runner: Sandbox, name: str, *, demos: int, n: int
) -> dict[str, Any]:
    source = envs.spec(name).source()
    seeds = episode_seeds(cfg.seed, 0, name, n)
    jobs = [PlayJob(name, source, s) for s in seeds]
    play = dataclasses.replace(cfg.play, demos=demos)
    before = policy_metrics(policy)
    t0 = time.perf_counter()
    trajs = asyncio.run(run_jobs(runner, policy, jobs, play, max_concurrent=cfg.rollout.max_concurrent_plays))
    wall = time.perf_counter() - t0
    sampled = sum(sum(t.mask_T) for t in trajs)
    engine = {k: v - before.get(k, 0.0) for k, v in policy_metrics(policy).items()}
    computed = engine.get("engine/prompt_tokens", 0.0) - engine.get("engine/prompt_tokens_cached", 0.0)
    turns = sum(len(t.transitions) for t in trajs)
    boxed = sum("\\boxed{" in tr.reply for t in trajs for tr in t.transitions)
    return {
        "win_rate": round(sum(t.success for t in trajs) / n, 3),
        "boxed_rate": round(boxed / max(turns, 1), 3),
        "turns_mean": round(turns / n, 2),
        "tok_s": round(sampled / wall, 1),
        "prompt_tokens_computed_per_sampled": round(computed / max(sampled, 1), 1),
        "statuses": sorted({t.status.value for t in trajs}),
    }


def _designer(cfg: TrainConfig, policy: Policy, runner: Sandbox, n: int) -> dict[str, Any]:
    """``n`` designer replies in the preset's edit format, parents the seed games of its skills, checked."""
    d = cfg.designer
    games = [n for n in envs.names("games") if envs.spec(n).skill in d.skills]  # the preset's parents
    requests = []
    for i in range(n):
        spec = envs.spec(games[i % len(games)])
        parent = Exemplar(spec.name, spec.source(), spec.skill, None, None)
        requests.append(DesignRequest(spec.skill, "edit", "", difficulty=d.difficulty, parent=parent,
                                      edit_format=d.edit_format))  # fmt: skip
    params = SamplingParams(temperature=d.temperature, max_tokens=d.max_tokens)
    designs = asyncio.run(designer.design(policy, requests, params, example_chars=d.example_code_chars))
    reports = [
        check_env(x.code, runner, cfg.checker, seed=i) if x.code else None for i, x in enumerate(designs)
    ]
    why = Counter(
        (r.fatal[0].code.value if r.fatal else "?") if r is not None else f"extract_{x.status}"
        for x, r in zip(designs, reports, strict=True)
        if r is None or not r.ok
    )
    return {
        "applied_rate": round(sum(x.code is not None for x in designs) / n, 3),
        "valid_rate": round(sum(r is not None and r.ok for r in reports) / n, 3),
        "completion_tokens_mean": round(sum(sum(x.mask_T) for x in designs) / n, 1),
        "rejected": dict(why),
        "replies": [x.completion for x in designs[:6]],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--backend", default=CPU_TINY.model.backend, choices=["hf", "vllm"])
    dtypes = ["model", "auto", "float32", "bfloat16"]
    ap.add_argument("--engine-dtype", default=CPU_TINY.model.vllm.dtype, choices=dtypes)
    ap.add_argument("--weights", help="a policy folder to load first (a run's policy/: its trained adapter)")
    ap.add_argument("--vllm", nargs="*", default=[], metavar="KEY=INT", help="VLLMConfig overrides")
    ap.add_argument("--episodes", type=int, default=16)
    ap.add_argument("--designs", type=int, default=0)
    ap.add_argument("--envs", nargs="*", default=list(envs.names("games")))
    ap.add_argument("--demos", nargs="*", type=int, default=[0, 1])
    ap.add_argument("--design-tokens", type=int, default=CPU_TINY.designer.max_tokens)
    args = ap.parse_args()
    cfg = dataclasses.replace(
        CPU_TINY,
        model=dataclasses.replace(
            CPU_TINY.model,
            backend=args.backend,
            vllm=dataclasses.replace(
                CPU_TINY.model.vllm,
                dtype=args.engine_dtype,
                **{k: int(v) for k, v in (kv.split("=") for kv in args.vllm)},
            ),
        ),
        designer=dataclasses.replace(CPU_TINY.designer, max_tokens=args.design_tokens),
    )
    out: dict[str, Any] = {"backend": args.backend, "engine_dtype": args.engine_dtype, "vllm": args.vllm}
    t0 = time.perf_counter()
    policy = BatchingPolicy(make_policy(cfg.model, seed=0), max_batch=cfg.rollout.max_concurrent_plays)
    out["engine_start_s"] = round(time.perf_counter() - t0, 1)
    if args.weights:
        policy.load_weights(Path(args.weights))
    with Sandbox(limits=cfg.sandbox) as runner:
        for name in args.envs:
            for k in args.demos:
                out[f"agent/{name}/demos{k}"] = _agent(cfg, policy, runner, name, demos=k, n=args.episodes)
                if not args.json:
                    print(name, k, out[f"agent/{name}/demos{k}"], flush=True)
        if args.designs:
            out["designer"] = _designer(cfg, policy, runner, args.designs)
    out["peak_rss_gb"] = round(peak_rss_gb(), 2)
    print(json.dumps(out, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
