"""``spade train``: a preset (or a config file), command-line overrides of any config field, or ``--resume
RUN_DIR``; with ``--print-config`` (or as ``spade config``) it prints the resolved config instead and starts
nothing.

Everything that can be checked is checked before a run directory is touched (:mod:`spade.run.preflight`);
every error the project raises on purpose prints as one line. Exit status: 0 finished, 1 the run stopped
on a failure (a model-server outage), 2 bad options or a run directory that cannot be used as it is,
128 + the signal number when SIGINT/SIGTERM stopped it, 141 when stdout's reader went away. Whenever a
run stops early, the last line is the exact command that continues it.
"""

from __future__ import annotations

import argparse
import dataclasses
import errno
import os
import shlex
import shutil
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import tyro

from spade import modes, stopping
from spade.cli.console import Console, failure_note, finish_note, run_output, ticking
from spade.cli.summary import run_summary
from spade.cli.train_help import HELP_ALL, short_help
from spade.cluster import ClusterError
from spade.config import CPU_TINY, PRESETS, ConfigError, TrainConfig, load_file, preset, to_json, to_toml
from spade.config.options import RUNTIME_OPTIONS, changed_options
from spade.config.recipes import Recipe, apply_recipe
from spade.errors import SpadeError
from spade.memory.archive import Memory
from spade.run import preflight
from spade.run.loop import train
from spade.rundir import RunDir, RunLockedError, RunStateError
from spade.training.distributed import DistributedError


@dataclass(frozen=True)
class TrainArgs:
    """The command line of ``spade train``."""

    config: Annotated[TrainConfig, tyro.conf.arg(name="")] = field(default_factory=lambda: CPU_TINY)
    preset: str = "cpu-tiny"
    """Named defaults the other options override: cpu-tiny (embedded 135M model, 2 CPU cores, minutes),
    paper (the released games recipe, 8 GPUs), paper-tool (the released tool-use recipe, 8 GPUs) or paper-8b
    (the released 8B games recipe: thinking, KL 0.005). A config file is given with --config, not here."""
    recipe: Recipe = "spade"
    """Fields laid over the preset (or config file) before the other options: spade (none: the preset as
    it is) or released (the authors' released code wherever spade differs; docs/paper-recipe.md lists each
    field and why spade differs)."""
    config_file: Annotated[Path | None, tyro.conf.arg(name="config", metavar="FILE")] = None
    """Start from this config file instead of a preset: TOML as `spade config` prints it (a hand-written one
    may leave options out: they take their defaults, as in a preset's own file) or JSON (.json: a run's
    config.json). The other options override it; the run name is the file's. Not with --preset."""
    resume: Path | None = None
    """Continue the run in this directory from its newest complete checkpoint, with its saved config: only
    --steps (to extend it, not below the steps done), --overwrite and runtime options such as
    --model.threads may be given as well (docs/running.md lists them)."""
    overwrite: bool = False
    """Replace what the run directory holds (with --resume: start that run over from step 0)."""
    print_config: bool = False
    """Print the resolved config (the preset with the options given; with --resume, the run's) and exit
    without starting anything; as `spade config`."""
    format: Literal["toml", "json"] = "toml"
    """Format of --print-config: TOML, or JSON (the form of a run's config.json)."""
    json: bool = False
    """Print the config as JSON (same as --format json)."""
    verbose: bool = False
    """Show the model engine's own output (its log lines, progress bars and warnings) here; by default it
    goes to RUN/logs/engine-<start time>.log and only spade's lines and errors reach the terminal."""


def _split(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="spade train", add_help=False)
    parser.add_argument("--preset", default=None)
    parser.add_argument("--config", type=Path, default=None)
    parser.add_argument("--recipe", default=None)
    parser.add_argument("--resume", type=Path, default=None)
    parser.add_argument("--overwrite", action="store_true")
    parser.add_argument("--steps", type=int, default=None)
    return parser.parse_known_args(list(argv))


def parse_args(argv: Sequence[str]) -> TrainArgs:
    """The options a command line asks for (``--help`` prints the common options and exits, ``--help-all``
    every option: :mod:`spade.cli.train_help`), their names checked against the registries
    (:func:`spade.run.preflight.check_names`)."""
    from spade.run.preflight import check_names  # noqa: PLC0415 - imports httpx, needed only once parsed

    args = _parse_args(argv)
    check_names(args.config)
    return args


def _parse_args(argv: Sequence[str]) -> TrainArgs:
    known, rest = _split(argv)
    helps = {"-h", "--help", HELP_ALL} & set(rest)
    if known.resume is not None and not helps:
        return _resume_args(argv, known)
    base, source = _base(known)
    description = (
        f"Run SPADE self-play training. --preset (or --config FILE) chooses the defaults ({', '.join(PRESETS)}; "
        f"now: {source}); every other option overrides one field. See docs/running.md."
    )
    default = TrainArgs(base, known.preset or "cpu-tiny", known.recipe or "spade", known.config)
    if helps and HELP_ALL not in helps:
        own = {f.name: getattr(default, f.name) for f in dataclasses.fields(TrainArgs) if f.name != "config"}
        print(short_help(TrainArgs, base, description, own))
        raise SystemExit(0)
    argv = ["--help" if a == HELP_ALL else a for a in argv]  # tyro's listing of every option
    args = tyro.cli(TrainArgs, default=default, args=list(argv), prog="spade train", description=description)
    if _names_itself(argv) or known.config is not None:  # a config file's name is its own
        return args
    return dataclasses.replace(args, config=dataclasses.replace(args.config, name=default_name(args.config)))


def default_name(cfg: TrainConfig) -> str:
    """The run name used when ``--name`` is not given: the preset's, plus ``-<mode>`` for a baseline mode.

    Self-play keeps the bare preset name (``runs/cpu-tiny``, which ``make train`` and the docs use), so the
    baselines of the same preset get run directories of their own instead of colliding with it
    (:meth:`spade.modes.Mode.run_name`).
    """
    return modes.make(cfg).run_name(cfg.name)


def _base(known: argparse.Namespace) -> tuple[TrainConfig, str]:
    """The config the options override (a preset's, or a config file's), and what it came from.

    Raises:
        ConfigError: both --preset and --config, a file given to --preset, an unknown preset, or a config
            file that cannot be read or holds a bad value.
    """
    if known.config is not None:
        if known.preset is not None:
            raise ConfigError(
                f"--config {known.config} replaces the preset: drop --preset {known.preset} (or --config)"
            )
        return apply_recipe(load_file(known.config), known.recipe or "spade"), str(known.config)
    name = known.preset or "cpu-tiny"
    if name not in PRESETS and (
        "/" in name or Path(name).suffix in (".toml", ".json") or Path(name).exists()
    ):
        raise ConfigError(
            f"--preset takes a preset name ({', '.join(PRESETS)}); to start from the config file {name}, pass "
            f"--config {name}"
        )
    return apply_recipe(preset(name), known.recipe or "spade"), name


def _names_itself(argv: Sequence[str]) -> bool:
    return any(a == "--name" or a.startswith("--name=") for a in argv)


def _resume_args(argv: Sequence[str], known: argparse.Namespace) -> TrainArgs:
    """The options of a resume: the run's saved config, with the new step total and runtime options given.

    Raises:
        spade.rundir.RunStateError: ``known.resume`` holds no readable run.
        ConfigError: --preset or --config, or an option other than --steps, --overwrite and runtime options
            given a new value.
    """
    saved = RunDir(known.resume).load_config()
    args = tyro.cli(TrainArgs, default=TrainArgs(saved), args=list(argv), prog="spade train")
    bases = [name for name in ("preset", "config", "recipe") if getattr(known, name) is not None]
    refused = [
        name for name in changed_options(saved, args.config) if name not in (*RUNTIME_OPTIONS, "steps")
    ]
    if bases or refused:
        flags = " ".join(f"--{name.replace('_', '-')}" for name in (*bases, *refused))
        raise ConfigError(
            f"--resume continues a run with its saved config; besides --steps, --overwrite and runtime "
            f"options (such as --model.threads; see docs/running.md) nothing may change: drop {flags}, or "
            f"start a new run (--name) with them"
        )
    return args


def parse_config(argv: Sequence[str]) -> tuple[TrainConfig, Path | None]:
    """The config a command line asks for, and the run directory to resume (if any)."""
    args = parse_args(argv)
    return args.config, args.resume


def render_config(args: TrainArgs) -> str:
    """The resolved config as ``--print-config`` prints it: TOML, or JSON with ``--json``/``--format json``."""
    return to_json(args.config) + "\n" if args.json or args.format == "json" else to_toml(args.config)


CONFIG_USAGE = f"""usage: spade config [PRESET] [OPTION ...] [--json | --format json]

Print the resolved config of `spade train --preset PRESET OPTION ...` and exit, starting nothing.
PRESET: {", ".join(PRESETS)} (default cpu-tiny). OPTION: any option of `spade train --help-all`;
with --config FILE, that file's config; with --resume RUN_DIR, the config that run continues with. TOML by
default; JSON (--json) in the form of a run's config.json. `spade train --config FILE` reads either back."""


def config_cli(argv: Sequence[str]) -> int:
    """``spade config``: print the resolved config of a preset and options; returns the exit code."""
    args = list(argv)
    if args[:1] in (["-h"], ["--help"]):
        print(CONFIG_USAGE)
        return 0
    if args and not args[0].startswith("-"):
        args = ["--preset", *args]
    try:
        parsed = parse_args(args)
    except (SpadeError, ConfigError) as exc:
        print(f"spade config: {exc}", file=sys.stderr)
        return 2
    print(render_config(parsed), end="")
    return 0


def resume_command(run_dir: Path) -> str:
    """The exact command that continues the run in ``run_dir``."""
    return f"spade train --resume {shlex.quote(str(run_dir))}"


def run_cli(argv: Sequence[str]) -> int:
    """Parse, check, train, report; returns the exit code."""
    try:
        args = parse_args(argv)
        if args.print_config:
            print(render_config(args), end="")
            return 0
        explicit_steps = _split(argv)[0].steps
        cfg = args.config
        run_dir, runtime = _check_setup(args)
    except (SpadeError, ConfigError) as exc:
        print(f"spade train: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nspade train: interrupted before the run started; nothing was written", file=sys.stderr)
        return 130
    again = resume_command(run_dir)
    console: Console | None = None
    try:
        grace_s = float(os.environ.get("SPADE_STOP_GRACE_S", "10"))
        # A process ended by force after a stop request still stopped on request: its checkpoints are
        # atomic and it resumes from the last one, so the run is recorded as let go (stopped), not failed.
        with (
            run_output(run_dir, verbose=args.verbose, fresh=args.resume is None or args.overwrite) as console,
            stopping.handle_signals(
                f"The run resumes from its last checkpoint: {again}",
                grace_s=grace_s,
                on_forced_exit=RunDir(run_dir).let_go,
                console=console.err,
            ),
        ):
            run = _train(args, cfg, run_dir, explicit_steps, runtime, console=console)
    except stopping.Interrupted as exc:
        print(f"spade train: {exc}{_after_stop(run_dir)}", file=sys.stderr)
        code = 128 + (int(signal.Signals[exc.signal_name]) if exc.signal_name in ("SIGINT", "SIGTERM") else 2)
        stopping.exit_now(code)  # the run is saved and closed; skip seconds of interpreter teardown
    except BrokenPipeError:  # stdout's reader went away: spade.cli.app ends the command quietly
        raise
    except (SpadeError, ConfigError, OSError) as exc:
        code, after = _failure(exc, run_dir)
        if code == 1 and (note := failure_note(console)):  # the engine's own last words come first
            print(note, file=sys.stderr)
        print(f"spade train: {exc}{after}", file=sys.stderr)
        return code
    _report(run, modes.label(cfg), finish_note(console))
    return 0


def _check_setup(args: TrainArgs) -> tuple[Path, dict[str, Any]]:
    """The run directory and the runtime options a resume changes, once the setup passed its checks."""
    cfg = args.config
    if args.resume is None:
        preflight.check_setup(cfg, fresh=True, mode_checks=modes.preflight)
        return cfg.run_dir, {}
    saved = RunDir(args.resume).load_config()
    runtime = {k: v for k, v in changed_options(saved, cfg).items() if k in RUNTIME_OPTIONS}
    preflight.check_setup(cfg, fresh=args.overwrite, mode_checks=modes.preflight)
    return args.resume, runtime


def _report(run: RunDir, mode: str, engine: str) -> None:
    """The summary of a finished run, where its metrics and curves are, and the ``engine`` log's note."""
    with Memory.in_run_dir(run.root) as memory:
        plays = memory.played()
    print("\n".join(run_summary(run.read_metrics(), plays, mode=mode)))
    print(
        f"Run finished: {run.root} (metrics: {run.metrics_path}; curves: tensorboard --logdir {run.root / 'tb'})"
    )
    if engine:
        print(engine)


def _train(
    args: TrainArgs,
    cfg: TrainConfig,
    run_dir: Path,
    steps: int | None,
    runtime: dict[str, Any],
    *,
    console: Console,
) -> RunDir:
    """Train with progress lines on ``console``; the first line after the engine wrote to its log (once the
    run exists: :meth:`spade.cli.console.Console.settle` moves a fresh run's log into it) says where the log is.
    An engine that writes nothing (the scripted backend) gets no such line: its empty log is dropped."""
    told = [console.log is None]
    with ticking(console.out) as ticker:

        def progress(line: str) -> None:
            if not told[0] and console.settle() and console.kept_log() is not None:
                told[0] = True
                ticker.line(f"engine output goes to {console.log} (--verbose shows it here)")
            ticker.line(line)

        if args.resume is not None:
            target = TrainConfig(runs_dir=run_dir.parent, name=run_dir.name)
            return train(
                target, resume=True, progress=progress, overwrite=args.overwrite, steps=steps, runtime=runtime
            )
        return train(cfg, progress=progress, overwrite=args.overwrite)


_RETRY_FAILS = {
    errno.EACCES: "this user may not write there",
    errno.EPERM: "this user may not write there",
    errno.EROFS: "the file system is read-only",
    errno.ENOTDIR: "part of the path is a file, not a folder",
    errno.EEXIST: "part of the path is a file, not a folder",
    errno.ENOENT: "no folder can be made there",
}
"""File-system errors that running the same command again meets again, and why."""


def _failure(exc: BaseException, run_dir: Path) -> tuple[int, str]:
    """The exit code of a run that ended on ``exc`` and the end of its message (what to do next).

    A file-system error under the run directory before the run started is a setup error (status 2, nothing
    kept) that no retry cures: the message says so and what to change, not "run the same command again".
    A full disk names the full file system and what the run holds on it, and advises the resume only once
    space is freed.
    """
    if _is_setup_error(exc, run_dir):
        return 2, ""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return _disk_full(exc, run_dir)
    if not isinstance(exc, OSError) or exc.errno not in _RETRY_FAILS:
        return 1, _after_stop(run_dir)
    why = _RETRY_FAILS[exc.errno]
    if (run_dir / "config.json").exists() or not _under(exc, run_dir):
        return 1, _after_stop(run_dir)
    return 2, (
        f"; nothing was kept. The same command would fail again, {why}: choose another --runs-dir "
        f"(now {run_dir.parent}) or --name"
    )


def _under(exc: OSError, run_dir: Path) -> bool:
    """Whether the path ``exc`` names is the run directory, one of its parents or inside it."""
    if not isinstance(exc.filename, str | os.PathLike):
        return False
    path = Path(exc.filename)
    return path == run_dir or path in run_dir.parents or run_dir in path.parents


def _is_setup_error(exc: BaseException, run_dir: Path) -> bool:
    """Errors that running the same command again meets again: the run directory's state, the config, a
    launch that cannot train it, and a cluster that cannot be joined before the run started (their
    messages say what to change)."""
    if isinstance(exc, RunLockedError | RunStateError | ConfigError | DistributedError):
        return True
    return isinstance(exc, ClusterError) and not (run_dir / "config.json").exists()


def _disk_full(exc: OSError, run_dir: Path) -> tuple[int, str]:
    """The exit code and advice after a write failed for want of space: which file system is full, what
    the run holds there, and the resume only once space is freed (status 2 where nothing was kept)."""
    where = Path(exc.filename) if isinstance(exc.filename, str | os.PathLike) else run_dir
    fs = _mount_point(where)
    usage = shutil.disk_usage(fs)
    full = f"the file system of {where} ({fs}: {_size(usage.free)} free of {_size(usage.total)}) is full"
    if not (run_dir / "config.json").exists():
        return 2, (
            f"; nothing was kept. The same command would fail again, {full}: free space there or choose "
            f"another --runs-dir (now {run_dir.parent}) or --name"
        )
    held = _largest(run_dir) if _mount_point(run_dir) == fs else ""
    return 1, (
        f"; {full}, so resuming now would fail the same way: free space there{held} or move the run to a "
        f"larger disk first{_after_stop(run_dir)}"
    )


def _mount_point(path: Path) -> Path:
    """The mount point of the file system that holds ``path`` (or would: its nearest existing folder)."""
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    while not os.path.ismount(path) and path != path.parent:
        path = path.parent
    return path


def _largest(run_dir: Path) -> str:
    """`` (this run holds 380 KiB, most in checkpoints 300 KiB)``: what there is to free in the run."""
    sizes = {p.name: _tree_size(p) for p in run_dir.iterdir()}
    top = max(sizes, key=sizes.__getitem__, default=None)
    most = f", most in {top} {_size(sizes[top])}" if top is not None else ""
    return f" (this run holds {_size(sum(sizes.values()))}{most})"


def _tree_size(path: Path) -> int:
    if path.is_symlink() or not path.is_dir():
        return path.lstat().st_size
    return sum(p.lstat().st_size for p in path.rglob("*") if not p.is_dir() or p.is_symlink())


def _size(n: float) -> str:
    """``512 B``, ``380.0 KiB``, ``1.2 GiB``."""
    units = ["B", "KiB", "MiB", "GiB"]
    while n >= 1024 and len(units) > 1:
        n /= 1024
        units.pop(0)
    return f"{n:.0f} B" if units[0] == "B" else f"{n:.1f} {units[0]}"


def _after_stop(run_dir: Path) -> str:
    """The end of the message after an early stop: where the run stands and the command that continues it."""
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
