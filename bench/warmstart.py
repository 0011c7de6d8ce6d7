"""The warm start's time on a quiet machine and beside one busy process, at torch's old and new thread count.

    .venv/bin/python bench/warmstart.py [--model embedded] [--steps 1] [--examples 8] [--tokens 256]
        [--repeats 3] [--json]

What is timed is the warm start's own loop (:func:`spade.run.warm_start._imitate`: ``--steps`` optimiser steps
of ``--examples`` examples each, with the cpu-tiny preset's trainer settings) on synthetic examples shaped
like its episodes (a prompt, then replies that carry the loss), once per repeat, in two conditions: the
machine as it is ("quiet"), and with one more process spinning a core ("busy": a python loop, as another
torch process would). Each is timed at two thread counts: the old choice, torch's default of one thread per
usable core, and the new one, :func:`spade.backends.threads.choose` from the cores and the 1-minute load
average (what ``spade train`` now does when ``--model.threads`` is not given). The load average lags by a
minute, so in the busy condition the new choice counts the spinning process among the busy cores even
before the average has caught up with it (as it has for a run started beside a long-running process).

Prints, per condition, the median seconds at each thread count and the ratio old / new (above 1: the new
choice is faster), and the ratio busy / quiet at each count. Figures from a shared machine move with its
load: compare the ratios within one run, not across runs.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator

import torch

from spade.backends.threads import choose, load_average, usable_cores
from spade.config import CPU_TINY, ModelConfig, TrainConfig
from spade.run import warm_start
from spade.training.trainer import TorchTrainer
from spade.types import TrainSample


def examples(n: int, tokens: int, seed: int) -> list[TrainSample]:
    """``n`` episode-like examples: a 96-token prompt, then 24-token turns whose last 8 tokens are a reply."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        ids = tuple(rng.randrange(100, 40_000) for _ in range(tokens))
        mask = tuple(int(t >= 96 and t % 24 >= 16) for t in range(tokens))
        out.append(TrainSample(ids, mask, tuple(0.0 for _ in mask), 1.0, "agent"))
    return out


@contextlib.contextmanager
def spinning() -> Iterator[None]:
    """One more process keeping a core busy while the block runs."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(2.0)  # let it reach the run queue
        yield
    finally:
        proc.kill()
        proc.wait()


def time_warm_start(
    cfg: TrainConfig, trainer: TorchTrainer, samples: list[TrainSample], threads: int
) -> float:
    """Seconds of one warm start over ``samples`` at ``threads`` torch threads."""
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    warm_start._imitate(cfg, trainer, samples, lambda _: None)
    return time.perf_counter() - t0


def main() -> None:
    """Parse flags, run, print."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--steps", type=int, default=1, help="optimiser steps per warm start")
    parser.add_argument("--examples", type=int, default=8, help="examples per step (sft.batch)")
    parser.add_argument("--tokens", type=int, default=256, help="tokens per example")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    cfg = dataclasses.replace(
        CPU_TINY,
        trainer=dataclasses.replace(CPU_TINY.trainer, autocast="off"),
        sft=dataclasses.replace(CPU_TINY.sft, batch=args.examples, epochs=1, lr=0.0),
    )
    trainer = TorchTrainer(cfg.trainer, ModelConfig(model=args.model, device="cpu"), seed=0)
    samples = examples(args.steps * args.examples, args.tokens, seed=0)
    cores = usable_cores()
    time_warm_start(cfg, trainer, samples[: args.examples], cores)  # warm-up: first-call allocations
    results: dict[str, dict[str, object]] = {}
    for condition in ("quiet", "busy"):
        with spinning() if condition == "busy" else contextlib.nullcontext():
            load = load_average() or 0.0
            counted = (
                max(load, 1.0) if condition == "busy" else load
            )  # the spinner, before the average has it
            new = choose(0, cores=cores, load=counted)
            counts = {"old": cores, "new": new.threads}
            times: dict[str, list[float]] = {"old": [], "new": []}
            for _ in range(args.repeats):
                for which, threads in counts.items():  # interleaved: both see the same drift in load
                    times[which].append(time_warm_start(cfg, trainer, samples, threads))
        medians = {which: statistics.median(ts) for which, ts in times.items()}
        results[condition] = {
            "load_1min": round(load, 2),
            "choice": new.line(),
            "threads": counts,
            "median_s": medians,
            "times_s": times,
            "old_over_new": medians["old"] / medians["new"],
        }
    for which in ("old", "new"):
        quiet = results["quiet"]["median_s"][which]  # type: ignore[index]
        busy = results["busy"]["median_s"][which]  # type: ignore[index]
        results[f"busy_over_quiet_{which}"] = {"ratio": busy / quiet}
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"warm start: {args.steps} step(s) of {args.examples} examples x {args.tokens} tokens, "
          f"{args.repeats} repeats, {cores} usable cores")  # fmt: skip
    for condition in ("quiet", "busy"):
        r = results[condition]
        med, thr = r["median_s"], r["threads"]
        print(f"{condition:5s} (load {r['load_1min']}; new choice: {r['choice']}): "  # type: ignore[index]
              f"old {thr['old']} threads {med['old']:.2f} s, new {thr['new']} threads {med['new']:.2f} s, "  # type: ignore[index]
              f"old/new {r['old_over_new']:.2f}")  # fmt: skip
    for which in ("old", "new"):
        print(f"busy/quiet at the {which} choice: {results[f'busy_over_quiet_{which}']['ratio']:.2f}")


if __name__ == "__main__":
    main()
