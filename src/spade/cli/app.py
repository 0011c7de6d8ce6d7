"""The ``spade`` command line: each subcommand parses its options and calls one library function."""

from __future__ import annotations

import inspect
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TextIO

import tyro

import spade
from spade.cli.console import finish_note, run_output
from spade.cli.play import Solver
from spade.errors import SpadeError
from spade.evals.registry import SUITES

USAGE = """usage: spade COMMAND [options]

commands:
  check   validate environment files, folders of them or model replies in the sandbox; non-zero exit if any is rejected
  envs    list the registered seed environments
  eval    evaluate a policy on held-out suites ({suites})
  compare compare runs or evaluation results item by item, with confidence intervals
  play    play an environment (registry name or file): you, its scripted solution, or a run's trained model
  train   run SPADE self-play training (--preset cpu-tiny|paper, --resume RUN_DIR)
  config  print the resolved training config of a preset and options as TOML or JSON, and exit
  runs    list the runs under a runs folder: status, step, latest metrics, age
  report  write a self-contained HTML report of a run (curves, archive, rejected designs, episodes)
  export  export a run's valid environments as a dataset folder and a released-pool folder

`spade COMMAND --help` describes a command's options; `spade --version` prints the version.""".format(
    suites=", ".join(SUITES)
)


@dataclass(frozen=True)
class EnvsArgs:
    """List the registered seed environments with their skill and a one-line description."""

    setting: str = ""
    """Only this setting ('games' or 'tool_use'); empty for all."""


@dataclass(frozen=True)
class PlayArgs:
    """Play one environment in the terminal.

    ENV is a registry name (see `spade envs`), `rg:<task>` (a Reasoning-Gym task as `--mode procedural`
    trains on it; --difficulty picks its curriculum level), or the path of an environment file in the
    native or the official format. Files are untrusted code and run in the sandbox (a sandbox failure ends the session
    with its kind and message); registry environments are the project's own code and run in-process.
    """

    env: Annotated[str, tyro.conf.Positional]
    """Registry name, rg:<Reasoning-Gym task>, or path to an environment file."""
    seed: int | None = None
    """Episode seed (random when omitted)."""
    solver: Solver | None = None
    """'human' (the default without --run): you type actions; 'scripted': the environment's solution() plays
    and the transcript prints; 'model' (the default with --run): the trained policy of --run plays (in the
    sandbox) and every turn prints."""
    run: str = ""
    """Run directory whose model and trained policy/ weights play (implies --solver model)."""
    difficulty: int | None = None
    """Difficulty level (seed environments accept 0..n-1); with --run, default: the run's play.difficulty."""
    verbose: bool = False
    """With --run: show the engine's own output (its logs) here instead of writing it to a log file."""
    max_turns: int | None = None
    """Override the environment's turn budget."""


@dataclass(frozen=True)
class CheckArgs:
    """Run the validation ladder on environment files in the sandbox and report per file.

    Each FILE holds environment code (native or official format) or a model reply with a fenced code
    block; a folder stands for its files (the official layout games/*.py and tools/*.py, else its *.py
    files). The exit status is 0 when every file passes, 1 when any is rejected, 2 on unreadable files or a
    folder without environment files.
    """

    files: Annotated[tuple[str, ...], tyro.conf.Positional]
    """Environment files, or folders of them, to check."""
    json: bool = False
    """Print one JSON object per file and line instead of the human-readable report."""
    jobs: int = 2
    """Files checked at once."""
    seed: int | None = None
    """Seed of the probe actions and environment seeds (random when omitted; each report shows it)."""
    difficulty: int | None = None
    """Level to reset every instance at, as ``play.difficulty`` in training (default: each file's own)."""
    preset: str | None = None
    """Judge with this training preset's checker settings (``paper``, ``paper-tool``, ``paper-8b``,
    ``cpu-tiny``; default: the checker's defaults), e.g. ``paper`` rejects a one-reply game."""
    against: str | None = None
    """A run directory: also report each accepted file's novelty (behaviour-fingerprint distance to the nearest
    environment of the run's archive)."""


@dataclass(frozen=True)
class RunsArgs:
    """List the runs under a runs folder with status (running/finished/failed/stopped), step, metrics, age."""

    runs_dir: Annotated[str, tyro.conf.Positional] = "runs"
    """Folder holding run directories."""
    json: bool = False
    """One JSON object per run and line."""


@dataclass(frozen=True)
class ReportArgs:
    """Write one self-contained HTML file (opens offline) describing a run; safe while the run is going."""

    run: Annotated[str, tyro.conf.Positional]
    """Run directory."""
    out: str = ""
    """Output file (default RUN/report.html)."""
    episodes_per_env: int = 3
    """Episode transcripts shown per environment and arm (hinted / not), newest first."""


@dataclass(frozen=True)
class ExportArgs:
    """Export the run's valid environments: OUT/pool (games/, manifest.jsonl, checksums.sha256; loadable by
    `spade train --mode fixed_pool --pool OUT/pool`) and OUT/dataset (Parquet, readable by datasets)."""

    run: Annotated[str, tyro.conf.Positional]
    """Run directory."""
    out: str = ""
    """Output folder (default RUN/export)."""
    include_seeds: bool = False
    """Also export the seed-library environments the run started from."""
    overwrite: bool = False
    """Replace a non-empty output folder."""
    format: Literal["pool", "openenv", "verifiers"] = "pool"
    """'pool': OUT/pool and OUT/dataset; 'openenv': OUT/openenv, an OpenEnv server + client package;
    'verifiers': OUT/verifiers, a verifiers taskset package (both run every episode in spade's sandbox)."""


def _cmd_runs(argv: Sequence[str]) -> int:
    args = tyro.cli(RunsArgs, args=argv, prog="spade runs")
    from spade.cli.runs import format_runs, list_runs  # noqa: PLC0415

    infos = list_runs(Path(args.runs_dir))
    if args.json:
        for i in infos:
            print(json.dumps({**{k: getattr(i, k) for k in i.__dataclass_fields__}, "path": str(i.path)}))
    elif infos:
        print(format_runs(infos))
    else:
        print(f"no runs under {args.runs_dir} (start one with `spade train`)", file=sys.stderr)
    return 0


def _cmd_report(argv: Sequence[str]) -> int:
    args = tyro.cli(ReportArgs, args=argv, prog="spade report")
    from spade.cli.report import summary_line, write_report  # noqa: PLC0415

    try:
        summary = write_report(
            Path(args.run), Path(args.out) if args.out else None, episodes_per_env=args.episodes_per_env
        )
    except (SpadeError, OSError) as exc:
        print(f"spade report: {exc}", file=sys.stderr)
        return 2
    print(summary_line(summary))
    return 0


def _cmd_export(argv: Sequence[str]) -> int:
    args = tyro.cli(ExportArgs, args=argv, prog="spade export")
    from spade.cli.export import export_run, summary_line  # noqa: PLC0415

    try:
        s = export_run(Path(args.run), Path(args.out) if args.out else None, include_seeds=args.include_seeds,
                       overwrite=args.overwrite, format=args.format)  # fmt: skip
    except (SpadeError, OSError) as exc:
        print(f"spade export: {exc}", file=sys.stderr)
        return 2
    print(summary_line(s, args.format))
    return 0


def _cmd_check(argv: Sequence[str]) -> int:
    from spade.checker.findings import codes_help  # noqa: PLC0415 - light: no sandbox, no model

    codes = f"Finding codes (severity unless a check says otherwise):\n{codes_help()}"
    description = f"{inspect.cleandoc(CheckArgs.__doc__ or '')}\n\n{codes}"
    args = tyro.cli(CheckArgs, args=argv, prog="spade check", description=description)
    if not args.files:
        print("spade check: give at least one FILE (see `spade check --help`)", file=sys.stderr)
        return 2
    from spade.cli.check import check_files  # noqa: PLC0415 - subcommands import what they need
    from spade.config import PRESETS  # noqa: PLC0415 - as above

    if args.preset is not None and args.preset not in PRESETS:
        print(f"spade check: --preset must be one of {', '.join(PRESETS)}", file=sys.stderr)
        return 2
    config = PRESETS[args.preset].checker if args.preset else None
    return check_files(
        args.files, args.jobs, args.json, seed=args.seed, difficulty=args.difficulty, config=config,
        against=args.against,
    )  # fmt: skip


def _cmd_envs(argv: Sequence[str]) -> int:
    args = tyro.cli(EnvsArgs, args=argv, prog="spade envs")
    from spade import envs  # noqa: PLC0415 - subcommands import what they need, keeping `spade --help` fast

    rows = [envs.spec(n) for n in envs.names()]
    settings = sorted({s.setting for s in rows})
    if args.setting and args.setting not in settings:
        print(
            f"spade envs: unknown setting {args.setting!r}; choose one of: {', '.join(settings)}",
            file=sys.stderr,
        )
        return 2
    rows = [s for s in rows if not args.setting or s.setting == args.setting]
    width = max((len(s.name) for s in rows), default=4)
    print(f"{'NAME':<{width}}  {'SETTING':<8}  {'SKILL':<22}  DESCRIPTION")
    for s in rows:
        print(f"{s.name:<{width}}  {s.setting:<8}  {s.skill:<22}  {s.description}")
    return 0


def _cmd_play(argv: Sequence[str]) -> int:
    args = tyro.cli(PlayArgs, args=argv, prog="spade play")
    from spade.cli.play import open_playable, play  # noqa: PLC0415
    from spade.sandbox import SandboxError  # noqa: PLC0415

    solver = args.solver or ("model" if args.run else "human")
    if args.run and solver != "model":
        print(
            f"spade play: --run makes the run's model play; drop --solver {solver} (or --run)",
            file=sys.stderr,
        )
        return 2
    options: dict[str, Any] = {} if args.difficulty is None else {"difficulty": args.difficulty}
    if solver == "model":
        return _watch(args, options)
    if solver == "human" and sys.stdin.isatty():
        import readline  # noqa: F401, PLC0415 - importing it gives input() line editing (arrow keys) and history
    try:
        with open_playable(args.env, max_turns=args.max_turns) as env:
            result = play(env, solver, seed=args.seed, options=options, out=sys.stdout)
    except (KeyError, FileNotFoundError, ValueError) as exc:
        print(f"spade play: {exc}", file=sys.stderr)
        return 2
    except SandboxError as exc:
        print(f"spade play: the environment failed ({exc.kind}): {exc}", file=sys.stderr)
        return 1
    if result.quit:
        return 0
    won = result.terminated and result.last_reward >= 1.0
    print("Result: " + ("won" if won else "not won") + f" (reward {result.last_reward:+.2f})")
    return 0


def _watch(args: PlayArgs, options: dict[str, Any]) -> int:
    if not args.run:
        print("spade play: --solver model needs --run RUN_DIR (the run whose policy plays)", file=sys.stderr)
        return 2
    # The engine's output goes to the run's own logs (RUN/logs/engine-*.log), as in training; an engine that
    # wrote nothing leaves no file, and the last line names a log that was kept.
    with run_output(Path(args.run), verbose=args.verbose, fresh=False) as console:
        code, problem = _watch_on(args, options, console.out)
    log = console.kept_log()
    if problem:
        print(f"spade play: {problem}" + (f" (engine output: {log})" if log else ""), file=sys.stderr)
    elif note := finish_note(console):
        print(note)
    return code


def _watch_on(args: PlayArgs, options: dict[str, Any], out: TextIO) -> tuple[int, str]:
    """The run's policy plays, its transcript to ``out``; the exit status and what went wrong (if anything)."""
    from spade.cli.play import watch_model  # noqa: PLC0415
    from spade.sandbox import SandboxError  # noqa: PLC0415

    try:
        watch_model(args.env, Path(args.run), seed=args.seed, options=options, max_turns=args.max_turns,
                    out=out)  # fmt: skip
    except SandboxError as exc:
        return 1, f"the environment failed ({exc.kind}): {exc}"
    except (SpadeError, FileNotFoundError, ValueError) as exc:
        return 2, str(exc)
    return 0, ""


def _cmd_train(argv: Sequence[str]) -> int:
    from spade.cli.train import run_cli  # noqa: PLC0415

    return run_cli(argv)


def _cmd_config(argv: Sequence[str]) -> int:
    from spade.cli.train import config_cli  # noqa: PLC0415

    return config_cli(argv)


def _cmd_eval(argv: Sequence[str]) -> int:
    from spade.cli.eval import run_eval  # noqa: PLC0415

    return run_eval(argv)


def _cmd_compare(argv: Sequence[str]) -> int:
    from spade.cli.eval import run_compare  # noqa: PLC0415

    return run_compare(argv)


COMMANDS: dict[str, Callable[[Sequence[str]], int]] = {
    "check": _cmd_check,
    "compare": _cmd_compare,
    "config": _cmd_config,
    "eval": _cmd_eval,
    "envs": _cmd_envs,
    "play": _cmd_play,
    "train": _cmd_train,
    "runs": _cmd_runs,
    "report": _cmd_report,
    "export": _cmd_export,
}


CUT_PIPE = 128 + 13
"""Exit status when stdout's reader went away: the status of a process ended by SIGPIPE."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``spade`` console script.

    A reader that closes stdout before the command is done (``spade runs | head -3``) ends it quietly with
    :data:`CUT_PIPE`, as SIGPIPE ends ``cat`` or ``grep`` there: not 0, because not all the output was
    delivered (``set -o pipefail`` sees that), and not a traceback, because nothing went wrong.
    """
    try:
        code = _dispatch(list(sys.argv[1:] if argv is None else argv))
        sys.stdout.flush()  # a cut pipe fails here, in the guard, rather than in the interpreter's last flush
    except BrokenPipeError:
        # The interpreter flushes stdout once more on exit; pointed at /dev/null that flush cannot fail.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return CUT_PIPE
    return code


def _dispatch(args: list[str]) -> int:
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if args else 2
    if args[0] in ("-V", "--version"):
        print(f"spade {spade.__version__}")
        return 0
    command = COMMANDS.get(args[0])
    if command is None:
        print(f"spade: unknown command {args[0]!r}\n\n{USAGE}", file=sys.stderr)
        return 2
    return command(args[1:])


if __name__ == "__main__":
    raise SystemExit(main())
