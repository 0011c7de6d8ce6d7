"""``spade train``: a preset, command-line overrides of any config field, or ``--resume RUN_DIR``.

Everything that can be checked is checked before a run directory is touched (:mod:`spade.preflight`);
every error the project raises on purpose prints as one line. Exit status: 0 finished, 1 the run stopped
on a failure (a model-server outage), 2 bad options or a run directory that cannot be used as it is,
128 + the signal number when SIGINT/SIGTERM stopped it, 141 when stdout's reader went away. Whenever a
run stops early, the last line is the exact command that continues it.
"""

from __future__ import annotations

import argparse
import errno
import os
import shlex
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import tyro

from spade.config import CPU_TINY, PRESETS, ConfigError, TrainConfig, preset
from spade.errors import SpadeError

if TYPE_CHECKING:
    from spade.rundir import RunDir


@dataclass(frozen=True)
class TrainArgs:
    """The command line of ``spade train``."""

    config: Annotated[TrainConfig, tyro.conf.arg(name="")] = field(default_factory=lambda: CPU_TINY)
    preset: str = "cpu-tiny"
    """Named defaults the other options override: cpu-tiny (embedded 135M model, 2 CPU cores, minutes) or
    paper (the released recipe, 8 GPUs)."""
    resume: Path | None = None
    """Continue the run in this directory from its newest complete checkpoint, with its saved config (only
    --steps, to extend it, and --overwrite may be given as well)."""
    overwrite: bool = False
    """Replace what the run directory holds (with --resume: start that run over from step 0)."""


def _split(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="spade train", add_help=False)
    parser.add_argument("--preset", default="cpu-tiny")
    parser.add_argument("--resume", type=Path, default=None)
    parser.add_argument("--overwrite", action="store_true")
    parser.add_argument("--steps", type=int, default=None)
    return parser.parse_known_args(list(argv))


def parse_args(argv: Sequence[str]) -> TrainArgs:
    """The options a command line asks for (``--help`` prints every option and exits)."""
    known, rest = _split(argv)
    if known.resume is not None and "--help" not in rest and "-h" not in rest:
        if rest:
            raise ConfigError(
                f"--resume continues a run with its saved config; only --steps (to extend it) and "
                f"--overwrite apply: drop the other options ({' '.join(rest)})"
            )
        return TrainArgs(TrainConfig(), known.preset, known.resume, known.overwrite)
    base = preset(known.preset)
    description = (
        f"Run SPADE self-play training. --preset chooses the defaults ({', '.join(PRESETS)}; now: "
        f"{known.preset}); every other option overrides one field. See docs/running.md."
    )
    default = TrainArgs(base, known.preset)
    return tyro.cli(TrainArgs, default=default, args=list(argv), prog="spade train", description=description)


def parse_config(argv: Sequence[str]) -> tuple[TrainConfig, Path | None]:
    """The config a command line asks for, and the run directory to resume (if any)."""
    args = parse_args(argv)
    return args.config, args.resume


def resume_command(run_dir: Path) -> str:
    """The exact command that continues the run in ``run_dir``."""
    return f"spade train --resume {shlex.quote(str(run_dir))}"


def run_cli(argv: Sequence[str]) -> int:
    """Parse, check, train, report; returns the exit code."""
    from spade import preflight, stopping  # noqa: PLC0415
    from spade.rundir import RunDir  # noqa: PLC0415

    try:
        args = parse_args(argv)
        explicit_steps = _split(argv)[0].steps
        if args.resume is not None:
            cfg = RunDir(args.resume).load_config()
            preflight.check_setup(cfg, fresh=args.overwrite)
            run_dir = args.resume
        else:
            cfg = args.config
            preflight.check_setup(cfg, fresh=True)
            run_dir = cfg.run_dir
    except (SpadeError, ConfigError) as exc:
        print(f"spade train: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nspade train: interrupted before the run started; nothing was written", file=sys.stderr)
        return 130
    again = resume_command(run_dir)
    try:
        grace_s = float(os.environ.get("SPADE_STOP_GRACE_S", "10"))
        # A process ended by force after a stop request still stopped on request: its checkpoints are
        # atomic and it resumes from the last one, so the run is recorded as let go (stopped), not failed.
        with stopping.handle_signals(
            f"The run resumes from its last checkpoint: {again}",
            grace_s=grace_s,
            on_forced_exit=RunDir(run_dir).let_go,
        ):
            run = _train(args, cfg, run_dir, explicit_steps)
    except stopping.Interrupted as exc:
        print(f"spade train: {exc}{_after_stop(run_dir)}", file=sys.stderr)
        code = 128 + (int(signal.Signals[exc.signal_name]) if exc.signal_name in ("SIGINT", "SIGTERM") else 2)
        stopping.exit_now(code)  # the run is saved and closed; skip seconds of interpreter teardown
    except BrokenPipeError:  # stdout's reader went away: spade.cli ends the command quietly
        raise
    except (SpadeError, ConfigError, OSError) as exc:
        code, after = _failure(exc, run_dir)
        print(f"spade train: {exc}{after}", file=sys.stderr)
        return code
    from spade.memory import Memory  # noqa: PLC0415 - only needed once the run is done
    from spade.summary import run_summary  # noqa: PLC0415

    with Memory.in_run_dir(run.root) as memory:
        plays = memory.played()
    print("\n".join(run_summary(run.read_metrics(), plays, mode=cfg.mode)))
    print(
        f"Run finished: {run.root} (metrics: {run.metrics_path}; curves: tensorboard --logdir {run.root / 'tb'})"
    )
    return 0


def _train(args: TrainArgs, cfg: TrainConfig, run_dir: Path, steps: int | None) -> RunDir:
    from spade.train import train  # noqa: PLC0415

    started = time.perf_counter()

    def progress(line: str) -> None:
        print(f"[{time.perf_counter() - started:7.1f}s] {line}", flush=True)

    if args.resume is not None:
        target = TrainConfig(runs_dir=run_dir.parent, name=run_dir.name)
        return train(target, resume=True, progress=progress, overwrite=args.overwrite, steps=steps)
    return train(cfg, progress=progress, overwrite=args.overwrite)


_RETRY_FAILS = {
    errno.EACCES: "this user may not write there",
    errno.EPERM: "this user may not write there",
    errno.EROFS: "the file system is read-only",
    errno.ENOTDIR: "part of the path is a file, not a folder",
    errno.EEXIST: "part of the path is a file, not a folder",
    errno.ENOENT: "no folder can be made there",
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
}
"""File-system errors that running the same command again meets again, and why."""


def _failure(exc: BaseException, run_dir: Path) -> tuple[int, str]:
    """The exit code of a run that ended on ``exc`` and the end of its message (what to do next).

    A file-system error under the run directory before the run started is a setup error (status 2, nothing
    kept) that no retry cures: the message says so and what to change, not "run the same command again".
    """
    if _is_setup_error(exc):
        return 2, ""
    if not isinstance(exc, OSError) or exc.errno not in _RETRY_FAILS:
        return 1, _after_stop(run_dir)
    why = _RETRY_FAILS[exc.errno]
    if (run_dir / "config.json").exists() or not _under(exc, run_dir):
        return 1, _after_stop(run_dir)
    fix = "free space there or choose" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "choose"
    return 2, (
        f"; nothing was kept. The same command would fail again, {why}: {fix} another --runs-dir "
        f"(now {run_dir.parent}) or --name"
    )


def _under(exc: OSError, run_dir: Path) -> bool:
    """Whether the path ``exc`` names is the run directory, one of its parents or inside it."""
    if not isinstance(exc.filename, str | os.PathLike):
        return False
    path = Path(exc.filename)
    return path == run_dir or path in run_dir.parents or run_dir in path.parents


def _is_setup_error(exc: BaseException) -> bool:
    from spade.rundir import RunLockedError, RunStateError  # noqa: PLC0415

    return isinstance(exc, RunLockedError | RunStateError | ConfigError)


def _after_stop(run_dir: Path) -> str:
    """The end of the message after an early stop: where the run stands and the command that continues it."""
    from spade.rundir import RunDir  # noqa: PLC0415

    run = RunDir(run_dir)
    if not run.config_path.exists():  # stopped while setting up: the fresh run directory was removed
        return " before the run started; nothing was kept: run the same command again"
    try:
        point = run.resume_point()
    except SpadeError as exc:
        return f"; {exc}"
    where = (
        "no step finished yet"
        if point.checkpoint is None
        else f"the last complete checkpoint is {point.checkpoint.name} ({point.step} steps done)"
    )
    return f"; {where}; continue with: {resume_command(run_dir)}"
