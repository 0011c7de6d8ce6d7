"""``spade eval`` and ``spade compare``: parse, call :mod:`spade.evals`, print a table or JSON lines.

Bad input (unknown suite, task or preset, a run without a policy, a missing package, a server that is down,
an existing output folder) prints one line saying what to do and exits with status 2; nothing is written.

Ctrl-C (SIGINT) or SIGTERM stops an evaluation in every phase (loading the model, generating, scoring): the
engines end their batch at the next decode step (:mod:`spade.stopping`, as in training), and whatever still
runs :data:`STOP_GRACE_S` seconds later is ended by force; a second signal ends the process at once. Either
way the process exits with ``128 + signal`` (130 for Ctrl-C) after ``spade eval: stopped by SIGINT; nothing
was written``. The model engine's own output (vLLM's and transformers' logs, loading bars, warnings) goes to
``<out>/engine.log`` instead of the terminal, unless ``--verbose``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import sys
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import tyro
from rich import progress as rp
from rich.console import Console as RichConsole

from spade import stopping
from spade.cli.console import Console, failure_note
from spade.cli.engine_log import engine_output
from spade.config import EvalOptions, EvalSettings, ModelConfig
from spade.evals import protocols
from spade.evals.base import EvalError, Progress, Workload
from spade.evals.registry import DATA_SUITES, SUITES

if TYPE_CHECKING:
    from spade.evals.compare import Comparison
    from spade.evals.progress import Estimate
    from spade.evals.runner import ProgressFactory, SuiteReport

STOP_GRACE_S = 2.0
"""Seconds a stopped evaluation may take to end by itself before it is ended by force (SPADE_STOP_GRACE_S
overrides it). Nothing is written until the end, so there is nothing to save: a stop is quick in every phase."""


# The scoring options (--episodes, --limit, ...) and their defaults are EvalSettings', as in training's
# eval section; the fields below are the command line's own.
@dataclass(frozen=True)
class EvalArgs(EvalSettings):
    """Evaluate a policy on held-out suites (see docs/eval.md).

    SUITES are suite names (envs, reasoning_gym, math, bfcl, code; with --data PATH: aime, gpqa_diamond,
    livecodebench, acebench, tau2_bench), each optionally with its own task list:
    `reasoning_gym:basic_arithmetic,leg_counting`, `acebench:agent` (ACEBench-Agent); files, folders and
    environment names after `envs` are its environments (`spade eval envs path/to/pool`). The policy is the
    model below (default: the embedded SmolLM2-135M on the hf backend), a run's trained policy (--run), or
    the environments' scripted solutions (--solver, envs only). Evaluation seeds are >= 2**31; training
    seeds are below.
    """

    suites: Annotated[tuple[str, ...], tyro.conf.Positional] = ()
    """Suites to run (with optional `:task1,task2`); after envs, environment files, folders or names."""
    tasks: str = ""
    """Comma-separated tasks for suites named without their own list (RG tasks, env names, files, folders)."""
    preset: str = "default"
    """Reasoning-Gym task parameters: default (package defaults), hard (the paper's A.3 table), easy."""
    protocol: protocols.ProtocolName = "default"
    """Each benchmark's sampling by name: default (the options here) or paper (the paper's samples per item,
    temperature, top-p and token budget for aime, gpqa_diamond, livecodebench, reasoning_gym, tau2_bench,
    bfcl, acebench; the table: docs/eval.md). Options given here override the protocol's."""
    param: Annotated[tuple[tuple[str, ...], ...], tyro.conf.UseAppendAction] = ()
    """Task parameters KEY=VALUE (JSON values); `task.KEY=VALUE` for one task; envs: difficulty, action_mode,
    max_turns, context_tokens, demos. Several after one flag or the flag repeated: both add up."""
    top_p: float = EvalOptions().top_p
    """Sampling nucleus (1.0: off)."""
    top_k: int = EvalOptions().top_k
    """Sample among the K likeliest tokens only (0: off); sent to every backend that samples (hf, vllm, and
    OpenAI-compatible servers as vLLM's top_k field; the OpenAI API itself has none and is refused)."""
    run: Annotated[tuple[Path, ...], tyro.conf.UseAppendAction] = ()
    """Evaluate this run's trained policy (its model config, weights from <run>/policy). Repeated (`--run A
    --run B`): evaluate each run on the same items (into <out>/<k>-<run name>) and print their comparison
    as `spade compare` does; without suites, compare the runs' latest in-training evaluations."""
    checkpoint: int | None = None
    """With --run: the step of a kept checkpoint instead of the latest policy (of every run)."""
    data: Path | None = None
    """Local copy of a benchmark no package ships, for the one suite named that reads it (aime, gpqa_diamond,
    livecodebench, acebench): a file or folder in the benchmark's published format (docs/eval.md)."""
    run_archive: Path | None = None
    """envs suite: also evaluate the accepted environments of this run's archive."""
    solver: bool = False
    """envs suite: play each environment's scripted solution() instead of a model (sanity check)."""
    model: ModelConfig = field(default_factory=ModelConfig)
    out: Path | None = None
    """Results folder (summary.json + <suite>.jsonl); default eval-results/<UTC time>."""
    overwrite: bool = False
    """Replace an existing --out folder."""
    json: bool = False
    """Print one JSON object per suite as the last lines of stdout instead of the table."""
    list_tasks: bool = False
    """List the Reasoning-Gym tasks with their category and exit."""
    verbose: bool = False
    """Show the model engine's own output (its logs, loading bars, warnings) here instead of writing it to
    <out>/engine.log."""


@dataclass(frozen=True)
class CompareArgs:
    """Compare runs or evaluation results folders item by item (each with the first).

    A run directory stands for its latest in-training evaluation (<run>/eval/step_N). Differences are
    B − A over the items both scored, with a 95% bootstrap interval over items.
    """

    inputs: Annotated[tuple[Path, ...], tyro.conf.Positional] = ()
    """Runs or results folders."""
    json: bool = False
    """Print one JSON object per suite and pair instead of the table."""


def parse_param(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with a JSON value (plain text when it is not JSON)."""
    key, eq, raw = text.partition("=")
    if not eq or not key:
        raise EvalError(f"--param takes KEY=VALUE (got {text!r}), e.g. --param max_terms=2")
    try:
        return key, json.loads(raw)
    except json.JSONDecodeError:
        return key, raw


def options(args: EvalArgs) -> EvalOptions:
    """The evaluation options an invocation asks for."""
    params: dict[str, Any] = {"preset": args.preset} if args.preset != "default" else {}
    params.update(parse_param(p) for group in args.param for p in group)
    return EvalOptions.of(
        args,
        top_p=args.top_p,
        top_k=args.top_k,
        tasks=tuple(t for t in args.tasks.split(",") if t),
        params=params,
    )


def _check(args: EvalArgs) -> None:
    if not args.suites:
        raise EvalError(f"name at least one suite: {', '.join(SUITES)} (e.g. `spade eval reasoning_gym`)")
    if args.episodes < 1 or args.concurrency < 1 or args.max_tokens < 1 or args.fewshot < 0 or args.top_k < 0:
        raise EvalError("--episodes, --concurrency and --max-tokens must be >= 1, --fewshot and --top-k >= 0")
    if args.solver and args.run:
        raise EvalError("choose one policy: --solver or --run")
    if args.data is not None:
        named = [s for s in dict.fromkeys(w.partition(":")[0] for w in args.suites) if s in DATA_SUITES]
        if len(named) != 1:
            raise EvalError(
                f"--data is the local copy of one benchmark: name exactly one of {', '.join(sorted(DATA_SUITES))} "
                f"(named: {', '.join(named) or 'none'}; run the others separately)"
            )


@contextmanager
def _progress(err: TextIO) -> Iterator[ProgressFactory]:
    """Per-suite progress on ``err`` (the terminal's stderr): the count and a rough estimate up front, then a
    bar on a terminal, or plain lines (every 10% of the episodes or 30 s) for a log."""
    if not _isatty(err):
        yield lambda name, work, prior: _log(
            name, work, prior, lambda line: print(line, file=err, flush=True), True
        )
        return
    bar = rp.Progress(
        rp.TextColumn("{task.description}"),
        rp.BarColumn(),
        rp.MofNCompleteColumn(),
        rp.TextColumn("episodes"),
        rp.TimeElapsedColumn(),
        rp.TimeRemainingColumn(),
        console=RichConsole(file=err),
    )

    def factory(name: str, work: Workload | None, prior: Estimate | None) -> Progress:
        task = bar.add_task(name, total=work.total if work else None)
        log = _log(
            name, work, prior, lambda line: bar.console.print(line, markup=False, highlight=False), False
        )

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)
            log(done, total)

        return update

    with bar:
        yield factory


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError, AttributeError):
        return False


def _log(
    name: str, work: Workload | None, prior: Estimate | None, write: Callable[[str], None], periodic: bool
) -> Progress:
    from spade.evals.progress import ProgressLog  # noqa: PLC0415

    if work is None:
        return lambda done, total: None
    return ProgressLog(name, work, write, periodic=periodic, prior=prior)


def _source(args: EvalArgs) -> Any:
    from spade.evals.policies import PolicySource  # noqa: PLC0415

    if args.solver:
        return PolicySource(kind="solver", seed=args.seed)
    if args.run:
        return PolicySource(kind="run", run=args.run[0], checkpoint=args.checkpoint, seed=args.seed)
    return PolicySource(kind="model", model=args.model, seed=args.seed)


def run_eval(argv: Sequence[str]) -> int:
    """``spade eval``: returns the exit status (0, or 2 on bad input; a stop request exits 128 + signal)."""
    args = tyro.cli(EvalArgs, args=list(argv), prog="spade eval")
    given = protocols.explicit_options(argv)
    from spade.evals.runner import SuiteRequest  # noqa: PLC0415 - subcommands import what they need

    try:
        if args.list_tasks:
            return _list_tasks()
        if len(args.run) > 1 and not args.suites:  # as `spade compare A B ...`
            return _print_comparisons(_compare(args.run), as_json=args.json)
        _check(args)
        opts = options(args)
        requests = [
            SuiteRequest(*suite_options(s, opts, args, given))
            for s in suite_selections(args.suites, opts.tasks)
        ]
    except EvalError as exc:
        print(f"spade eval: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before the stop handlers are in place
        print("\nspade eval: stopped by SIGINT; nothing was written", file=sys.stderr)
        return 130
    out = args.out or Path("eval-results") / datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    console: Console | None = None
    try:
        with (
            engine_output(out, verbose=args.verbose) as console,
            stopping.handle_signals(
                "Nothing was written.",
                grace_s=_grace_s(),
                on_forced_exit=_dropper(console),
                console=console.err,
            ),
        ):
            reports, folders = _evaluate(args, requests, out, console.err)
    except stopping.Interrupted as exc:
        print(f"spade eval: {exc}; nothing was written", file=sys.stderr)
        stopping.exit_now(_signal_code(exc.signal_name))  # skip seconds of the engines' interpreter teardown
    except EvalError as exc:
        if note := failure_note(console):  # the engine's own last words come first
            print(note, file=sys.stderr)
        print(f"spade eval: {exc}", file=sys.stderr)
        return 2
    print(f"results: {', '.join(map(str, folders))}", file=sys.stderr)
    if console is not None and (log := console.kept_log()) is not None:
        print(f"engine output: {log} (--verbose shows it here)", file=sys.stderr)
    if reports is None:
        return _print_comparisons(_compare(folders), as_json=args.json)
    return _print_reports(reports, as_json=args.json)


def _print_reports(reports: Sequence[SuiteReport], *, as_json: bool) -> int:
    """Print the results on stdout: the table and its footer, or one JSON object per suite."""
    from spade.evals import report  # noqa: PLC0415 - subcommands import what they need

    if as_json:
        for r in reports:
            print(json.dumps(r.to_dict(), sort_keys=True))
    else:
        report.print_table(report.eval_table(reports))
        print(report.footer(reports))
    return 0


def _evaluate(
    args: EvalArgs, requests: Sequence[Any], out: Path, err: TextIO
) -> tuple[list[SuiteReport] | None, list[Path]]:
    """Evaluate with progress on ``err``: the reports (None with several runs) and the results folders."""
    from spade.evals.runner import evaluate  # noqa: PLC0415

    with _progress(err) as bars:
        if len(args.run) > 1:
            return None, _eval_runs(args, requests, out, bars)
        return evaluate(requests, _source(args), out=out, overwrite=args.overwrite, progress=bars), [out]


def _grace_s() -> float:
    return float(os.environ.get("SPADE_STOP_GRACE_S", STOP_GRACE_S))


def _signal_code(name: str) -> int:
    """128 + the signal's number (130 for SIGINT), as a shell reports a process a signal ended."""
    return 128 + (int(signal.Signals[name]) if name in ("SIGINT", "SIGTERM") else 2)


def _dropper(console: Console) -> Callable[[], None]:
    """What a forced exit runs: drop the unfinished engine log (nothing was written)."""

    def drop() -> None:
        if console.log is not None:
            with suppress(OSError):
                console.log.unlink()

    return drop


def _eval_runs(args: EvalArgs, requests: Sequence[Any], out: Path, bars: ProgressFactory) -> list[Path]:
    """Evaluate every ``--run`` on the same requests into ``out/<k>-<run name>``; returns those folders.

    Results are written next to ``out`` first and moved into place only when every run was evaluated, so a
    failure (say, a run without a policy) leaves nothing behind.
    """
    from spade.evals.policies import PolicySource, run_weights  # noqa: PLC0415
    from spade.evals.results import check_writable  # noqa: PLC0415
    from spade.evals.runner import evaluate  # noqa: PLC0415

    check_writable(out, overwrite=args.overwrite)
    for run in args.run:  # every run has a policy before any is evaluated
        run_weights(run, args.checkpoint)
    tmp = out.parent / f".{out.name}.runs-{os.getpid()}"
    names = [f"{k}-{run.resolve().name}" for k, run in enumerate(args.run, 1)]
    try:
        for run, name in zip(args.run, names, strict=True):
            source = PolicySource(kind="run", run=run, checkpoint=args.checkpoint, seed=args.seed)
            evaluate(requests, source, out=tmp / name, progress=bars)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return [out / name for name in names]


def _compare(paths: Sequence[Path]) -> list[Comparison]:
    from spade.evals.compare import compare_paths  # noqa: PLC0415

    return compare_paths(paths)


def _print_comparisons(comparisons: Sequence[Comparison], *, as_json: bool) -> int:
    """Print comparisons as ``spade compare`` does (a table, or one JSON object per suite and pair)."""
    from spade.evals import report  # noqa: PLC0415

    if as_json:
        for c in comparisons:
            print(json.dumps(c.to_dict(), sort_keys=True))
    else:
        report.print_table(report.compare_table(comparisons))
    return 0


def suite_selections(words: Sequence[str], tasks: Sequence[str] = ()) -> list[tuple[str, tuple[str, ...]]]:
    """The positional words of ``spade eval`` as ``(suite, tasks)`` pairs.

    A word is a suite (``name`` or ``name:task1,task2``; ``tasks`` applies to a suite named without a list),
    or, after ``envs``, one of its environments: a file, a folder or a registry name (``spade eval envs
    path/to/pool a.py``), which replaces ``tasks`` or extends the suite's own list.

    Raises:
        EvalError: a word that is neither a suite nor after ``envs``.
    """
    from spade.evals.runner import parse_suite  # noqa: PLC0415

    groups: list[tuple[str, list[str]]] = []
    for word in words:
        if word.partition(":")[0] in SUITES:
            groups.append((word, []))
        elif groups and groups[-1][0].partition(":")[0] == "envs":
            groups[-1][1].append(word)
        else:
            raise EvalError(
                f"unknown suite {word!r}; choose from: {', '.join(SUITES)} (environment files, folders and "
                f"names go after the suite envs: `spade eval envs {word}`)"
            )
    out = []
    for spec, extra in groups:
        name, chosen = parse_suite(spec, tasks)
        listed = chosen if ":" in spec else ()
        out.append((name, (*listed, *extra) if extra else chosen))
    return out


def suite_options(
    parsed: tuple[str, tuple[str, ...]], opts: EvalOptions, args: EvalArgs, given: Collection[str] = ()
) -> tuple[str, EvalOptions]:
    """One suite's options: its tasks, its ``--protocol`` values (but the options ``given`` on the command
    line), and for envs the run archive and the model's context window."""
    name, tasks = parsed
    params = dict(opts.params)
    if name == "envs":
        params.setdefault("context_tokens", args.model.max_context)
        if args.run_archive is not None:
            params["archive"] = str(args.run_archive)
    elif args.run_archive is not None:
        raise EvalError("--run-archive applies to the envs suite only")
    if name in DATA_SUITES and args.data is not None:
        params["data"] = str(args.data)
    return name, protocols.apply(
        args.protocol, name, dataclasses.replace(opts, tasks=tasks, params=params), given
    )


def _list_tasks() -> int:
    from spade.evals.registry import make_suite  # noqa: PLC0415

    make_suite("reasoning_gym")  # a missing package fails here with the install hint
    from spade.envs.rg_tasks import category_of  # noqa: PLC0415
    from spade.evals.rg import all_tasks  # noqa: PLC0415

    for name in all_tasks():
        print(f"{name:<28} {category_of(name)}")
    return 0


def run_compare(argv: Sequence[str]) -> int:
    """``spade compare``: returns the exit status (0, or 2 on bad input)."""
    args = tyro.cli(CompareArgs, args=list(argv), prog="spade compare")
    try:
        comparisons = _compare(args.inputs)
    except EvalError as exc:
        print(f"spade compare: {exc}", file=sys.stderr)
        return 2
    return _print_comparisons(comparisons, as_json=args.json)
