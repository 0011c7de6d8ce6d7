"""Episodes per second: the local sandbox against Ray workers on one and on two nodes.

A scripted policy (no model: generation costs nothing) plays a CPU-heavy environment (each step burns
``--step-ms`` of CPU in the sandboxed child) through :func:`spade.play.rollout.run_jobs`, the loop's own play
function, with three runners:

* ``episodes_per_s_local``: the sandbox in this process (``cluster.backend=local``);
* ``episodes_per_s_ray_1``: one Ray worker actor;
* ``episodes_per_s_ray_2``: two Ray worker actors, spread over a two-node local Ray cluster (real
  ``ray start`` processes, 1 CPU each; ``ray_nodes_used`` counts the nodes that played).

It also measures the per-call costs the step-time model in docs/scaling.md uses, with a burner of no CPU
and one play at a time: ``call_ms_local`` / ``call_ms_ray``, the wall time of one environment call (open,
reset, step or close, with the scripted policy's turn) and ``driver_cpu_ms_per_call_local`` /
``driver_cpu_ms_per_call_ray``, the CPU the training process spends per call; and ``step_cpu_ms``, the
burn of one step.
Figures are medians over ``--repeats``. On a 2-core machine the Ray figures cannot scale: both nodes share
the same two cores with the driver.

Usage: nice -n 19 python bench/scale.py [--json] [--episodes N] [--turns T] [--step-ms MS] [--repeats R]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from typing import Any

from spade.cluster.local import LocalRayCluster, NodeSpec
from spade.config import ClusterConfig, PlayConfig
from spade.play.rollout import PlayJob, run_jobs
from spade.sandbox import EnvRunner, Limits, Sandbox
from spade.scripted.policy import ScriptedPolicy

SOURCE = '''
from spade.env import TextEnv

class Burner(TextEnv):
    """Every step burns a fixed amount of CPU; the episode ends after max_turns."""
    max_turns = TURNS

    def _reset(self, options):
        self.total = 0
        return "Say anything; answer inside \\\\boxed{}.", {}

    def step(self, action):
        acc = 0
        for i in range(LOOPS):
            acc = (acc * 31 + i) % 1000003
        self.total += acc % 2
        return self.end_turn(f"turn done ({acc})", 0.0)

ENV = Burner
'''

LOOPS_PER_MS = 14000
"""Loop iterations of the burner per millisecond of CPU (roughly, CPython 3.11 on a modern core)."""


def source(turns: int, step_ms: float) -> str:
    """The burner environment with ``turns`` turns of about ``step_ms`` CPU each."""
    return SOURCE.replace("TURNS", str(turns)).replace("LOOPS", str(int(step_ms * LOOPS_PER_MS)))


def play_once(runner: EnvRunner, code: str, episodes: int, concurrent: int, turns: int) -> float:
    """Seconds to play ``episodes`` episodes of ``code`` with at most ``concurrent`` at once."""
    cfg = PlayConfig(action_mode="lenient", max_turns=turns, turn_tokens=64, context_tokens=8192)
    jobs = [PlayJob("burner", code, seed) for seed in range(episodes)]
    t0 = time.perf_counter()
    out = asyncio.run(run_jobs(runner, ScriptedPolicy(), jobs, cfg, max_concurrent=concurrent))
    elapsed = time.perf_counter() - t0
    bad = [t.error for t in out if t.error]
    if bad:
        raise SystemExit(f"plays failed: {bad[:3]}")
    return elapsed


def measure(runner: EnvRunner, args: argparse.Namespace) -> dict[str, float]:
    """Episodes per second (median over repeats) and one call's cost without CPU burn."""
    heavy, light = source(args.turns, args.step_ms), source(args.turns, 0.0)
    play_once(runner, heavy, 2, 2, args.turns)  # warm-up: workers import, zygotes preload
    rates = [
        args.episodes / play_once(runner, heavy, args.episodes, args.concurrent, args.turns)
        for _ in range(args.repeats)
    ]
    calls = 3 + args.turns  # open, reset, the steps, close
    per_call, cpu_per_call = [], []
    for _ in range(args.repeats):
        cpu0 = time.process_time()
        per_call.append(play_once(runner, light, 8, 1, args.turns) / (8 * calls))
        cpu_per_call.append((time.process_time() - cpu0) / (8 * calls))
    return {
        "episodes_per_s": statistics.median(rates),
        "call_ms": 1000 * statistics.median(per_call),
        "driver_cpu_ms_per_call": 1000 * statistics.median(cpu_per_call),
    }


def step_cpu_ms(step_ms: float) -> float:
    """What one burner step costs in-process (the environment's own CPU, no sandbox)."""
    loops = int(step_ms * LOOPS_PER_MS)
    t0 = time.process_time()
    for _ in range(5):
        acc = 0
        for i in range(loops):
            acc = (acc * 31 + i) % 1000003
    return 1000 * (time.process_time() - t0) / 5


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every figure of the benchmark."""
    limits = Limits(call_timeout_s=10.0, stall_timeout_s=60.0)
    out: dict[str, Any] = {"episodes": args.episodes, "turns": args.turns, "step_ms": args.step_ms}
    out["step_cpu_ms"] = step_cpu_ms(args.step_ms)
    with Sandbox(limits) as sandbox:
        local = measure(sandbox, args)
    out["episodes_per_s_local"], out["call_ms_local"] = local["episodes_per_s"], local["call_ms"]
    out["driver_cpu_ms_per_call_local"] = local["driver_cpu_ms_per_call"]
    from spade.cluster.ray_runner import RayRunner  # noqa: PLC0415 - Ray only for these figures

    # A loopback cluster runs without token auth (a token another cluster left in ~/.ray would not match).
    os.environ["RAY_AUTH_MODE"] = "disabled"
    with LocalRayCluster([NodeSpec(1), NodeSpec(1, {"node_b": 1})]) as cluster:
        for n in (1, 2):
            cfg = ClusterConfig(backend="ray", address=cluster.address, workers=n, cpus_per_worker=1)
            with RayRunner(cfg, limits) as runner:
                runner.metrics()
                figures = measure(runner, args)
                played = runner.metrics()
            out[f"episodes_per_s_ray_{n}"] = figures["episodes_per_s"]
            out[f"call_ms_ray_{n}"] = figures["call_ms"]
            out[f"driver_cpu_ms_per_call_ray_{n}"] = figures["driver_cpu_ms_per_call"]
            nodes = sum(1 for k, v in played.items() if k.startswith("cluster/instances/") and v > 0)
            out["ray_nodes_used" if n == 2 else "ray_nodes_used_1"] = nodes
    out["call_ms_ray"] = out.pop("call_ms_ray_1")
    out["driver_cpu_ms_per_call_ray"] = out.pop("driver_cpu_ms_per_call_ray_1")
    del out["call_ms_ray_2"], out["driver_cpu_ms_per_call_ray_2"]
    return out


def main() -> None:
    """Parse arguments, run, print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--episodes", type=int, default=24, help="episodes per measurement")
    parser.add_argument("--turns", type=int, default=4, help="turns per episode")
    parser.add_argument("--step-ms", type=float, default=20.0, help="CPU burnt per environment step, ms")
    parser.add_argument("--concurrent", type=int, default=8, help="plays at once")
    parser.add_argument("--repeats", type=int, default=3, help="repeats (medians are reported)")
    args = parser.parse_args()
    out = run(args)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for key, value in out.items():
            print(f"{key:>24}: {value:.3f}" if isinstance(value, float) else f"{key:>24}: {value}")


if __name__ == "__main__":
    main()
