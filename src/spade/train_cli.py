"""``spade train``: a preset, command-line overrides of any config field, or ``--resume RUN_DIR``."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import tyro

from spade.config import PRESETS, ConfigError, TrainConfig, preset


def _split(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="spade train", add_help=False)
    parser.add_argument("--preset", default="cpu-tiny")
    parser.add_argument("--resume", type=Path, default=None)
    return parser.parse_known_args(list(argv))


def parse_config(argv: Sequence[str]) -> tuple[TrainConfig, Path | None]:
    """The config a command line asks for, and the run directory to resume (if any)."""
    known, rest = _split(argv)
    if known.resume is not None:
        if rest:
            raise ConfigError(
                f"--resume continues a run with its saved config; drop the other options {rest}"
            )
        return TrainConfig(), known.resume
    base = preset(known.preset)
    description = (
        f"Run SPADE self-play training. --preset chooses the defaults ({', '.join(PRESETS)}; "
        "now: " + known.preset + "); every option below overrides one field. --resume RUN_DIR continues a "
        "stopped or killed run with its saved config."
    )
    cfg = tyro.cli(TrainConfig, default=base, args=rest, prog="spade train", description=description)
    return cfg, None


def run_cli(argv: Sequence[str]) -> int:
    """Parse, train, report; returns the exit code."""
    from spade.train import train  # noqa: PLC0415

    try:
        cfg, resume = parse_config(argv)
    except ConfigError as exc:
        print(f"spade train: {exc}", file=sys.stderr)
        return 2
    started = time.perf_counter()

    def progress(line: str) -> None:
        print(f"[{time.perf_counter() - started:7.1f}s] {line}", flush=True)

    try:
        if resume is not None:
            run = train(
                cfg.__class__(runs_dir=resume.parent, name=resume.name), resume=True, progress=progress
            )
        else:
            run = train(cfg, progress=progress)
    except (ConfigError, FileExistsError, FileNotFoundError) as exc:
        print(f"spade train: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nspade train: interrupted; continue with `spade train --resume <run dir>`", file=sys.stderr)
        return 130
    from spade.summary import run_summary  # noqa: PLC0415

    print("\n".join(run_summary(run.read_metrics())))
    print(f"Run finished: {run.root} (metrics in {run.metrics_path})")
    return 0
