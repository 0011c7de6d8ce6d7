"""Harness overhead of the training loop, with no model time.

Runs one regeneration step of the ``paper`` preset's shape (24 environments, 8 plays + 16 hinted plays
each, episodes of up to 10 turns) with the scripted backend: designing, checking every environment in the
sandbox, hints, 576 sandboxed episodes, rewards, the (null) update, archive writes, metrics and the
checkpoint. Target: <= 15 s on 2 cores.

With ``--cpu-tiny-step-s S`` (the measured step time of the cpu-tiny preset on the real model, e.g. from
its metrics.jsonl ``time/step_s``) it also prints the harness share of such a step: the scripted run of the
cpu-tiny shape divided by S. Target: <= 5%.

Usage: python bench/loop.py [--json] [--cpu-tiny-step-s S] [--repeats N]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import tempfile
import time
from pathlib import Path

from spade.config import CPU_TINY, PAPER, ModelConfig, PlayConfig, ScriptedConfig, TrainConfig
from spade.run.loop import train


def _scripted(base: TrainConfig, root: Path, name: str, max_turns: int) -> TrainConfig:
    play = dataclasses.replace(base.play, action_mode="boxed", max_turns=max_turns, turn_tokens=256)
    return dataclasses.replace(
        base,
        name=name,
        runs_dir=root,
        steps=1,
        model=ModelConfig(backend="scripted", scripted=ScriptedConfig(behaviour="valid")),
        play=PlayConfig(**{f.name: getattr(play, f.name) for f in dataclasses.fields(play)}),
    )


def _step_seconds(cfg: TrainConfig) -> float:
    started = time.perf_counter()
    run = train(cfg)
    elapsed = time.perf_counter() - started
    row = run.read_metrics()[0]
    return float(row.get("time/step_s", elapsed))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--cpu-tiny-step-s", type=float, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        paper = [_step_seconds(_scripted(PAPER, root, f"paper{i}", 10)) for i in range(args.repeats)]
        tiny = [
            _step_seconds(_scripted(CPU_TINY, root, f"tiny{i}", CPU_TINY.play.max_turns))
            for i in range(args.repeats)
        ]
    result: dict[str, float | None] = {
        "paper_shape_step_s": statistics.median(paper),
        "cpu_tiny_harness_step_s": statistics.median(tiny),
        "cpu_tiny_overhead_fraction": None,
    }
    if args.cpu_tiny_step_s:
        result["cpu_tiny_overhead_fraction"] = statistics.median(tiny) / args.cpu_tiny_step_s
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"paper-shape step (scripted, 24 envs x (8 + 16) plays, <= 10 turns): {result['paper_shape_step_s']:.2f} s "
        f"(runs: {', '.join(f'{x:.2f}' for x in paper)}; target <= 15 s)"
    )
    print(f"cpu-tiny-shape step, harness only: {result['cpu_tiny_harness_step_s']:.3f} s")
    if result["cpu_tiny_overhead_fraction"] is not None:
        print(
            f"harness share of a real cpu-tiny step: {result['cpu_tiny_overhead_fraction']:.1%} (target <= 5%)"
        )


if __name__ == "__main__":
    main()
