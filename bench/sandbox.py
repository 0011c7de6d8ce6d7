"""Cost of isolation: sandboxed steps and fresh instances against the in-process floor.

Measures, in one run:

* ``inprocess_step_us``: median step of a small environment called directly (the physical floor, unsafe);
* ``sandbox_step_us_median`` / ``sandbox_step_us_p95``: a full sandboxed step round trip (request, step in
  the hardened child, reply, harness validation). Target: median <= 100 µs;
* ``instances_per_s``: fresh instances per second with 2 worker threads, each instance forked, hardened,
  loaded, reset, stepped once and reaped. Target: >= 100;
* ``check_s_median``: median full validation ladder (``spade.checker.check_env``) per seed-library
  environment, in the sandbox (null when the checker is not importable). Target: <= 0.5 s.

It also reports which isolation layers were active. Timings are noisy on a shared 2-core machine.

Usage: python bench/sandbox.py [--json] [--steps N] [--seconds S] [--bubblewrap auto|on|off]
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from typing import Any

from spade import envs
from spade.envs.loader import load_env_factory
from spade.sandbox import Limits, Sandbox

SOURCE = '''
from spade.env import TextEnv

class Counter(TextEnv):
    """Reach the target count."""
    max_turns = 1_000_000

    def _reset(self, options):
        self.target = self.rng.randint(10, 20)
        self.count = 0
        return f"count to {self.target}", {}

    def step(self, action):
        self.count += 1 if action == "up" else 0
        won = self.count >= self.target
        return self.end_turn(f"count {self.count}", 1.0 if won else 0.0, terminated=won)

ENV = Counter
'''


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def inprocess_step_us(steps: int) -> float:
    env = load_env_factory(SOURCE)()
    env.reset(seed=0)
    times = []
    for _ in range(steps):
        started = time.perf_counter()
        env.step("stay")
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


def sandbox_steps_us(box: Sandbox, steps: int) -> list[float]:
    times = []
    with box.open(SOURCE) as env:
        env.reset(seed=0)
        for _ in range(steps // 10):  # warm-up
            env.step("stay")
        for _ in range(steps):
            started = time.perf_counter()
            env.step("stay")
            times.append(time.perf_counter() - started)
    return [t * 1e6 for t in times]


def instances_per_s(box: Sandbox, seconds: float, workers: int = 2) -> float:
    counts = [0] * workers
    stop = time.perf_counter() + seconds

    def work(i: int) -> None:
        while time.perf_counter() < stop:
            with box.open(SOURCE) as env:
                env.reset(seed=i)
                env.step("up")
            counts[i] += 1

    threads = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts) / (time.perf_counter() - started)


def check_times_s(box: Sandbox) -> tuple[float | None, str]:
    try:
        from spade.checker import check_env  # noqa: PLC0415 - optional: the checker may not be built yet
    except ImportError as exc:
        return None, f"spade.checker.check_env is not importable ({exc})"
    times, rejected = [], []
    for name in envs.names():
        started = time.perf_counter()
        report = check_env(envs.spec(name).source(), box, filename=f"{name}.py")
        times.append(time.perf_counter() - started)
        if not report.ok:
            rejected.append(name)
    note = f"{len(times)} seed environments" + (f"; rejected: {', '.join(rejected)}" if rejected else "")
    return statistics.median(times), note


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of the instances/s measurement")
    parser.add_argument("--bubblewrap", choices=("auto", "on", "off"), default="auto")
    args = parser.parse_args()
    with Sandbox(Limits(bubblewrap=args.bubblewrap)) as box:
        floor = inprocess_step_us(args.steps)
        steps = sandbox_steps_us(box, args.steps)
        rate = instances_per_s(box, args.seconds)
        check_s, check_note = check_times_s(box)
        result: dict[str, Any] = {
            "inprocess_step_us": round(floor, 2),
            "sandbox_step_us_median": round(statistics.median(steps), 1),
            "sandbox_step_us_p95": round(_percentile(steps, 0.95), 1),
            "sandbox_overhead_us_median": round(statistics.median(steps) - floor, 1),
            "instances_per_s": round(rate, 1),
            "check_s_median": None if check_s is None else round(check_s, 3),
            "check_note": check_note,
            "layers": box.layers,
        }
    if args.json:
        print(json.dumps(result))
        return
    for key, value in result.items():
        print(f"{key:28s} {value}")


if __name__ == "__main__":
    main()
