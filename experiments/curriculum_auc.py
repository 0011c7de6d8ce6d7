"""Does a self-designed curriculum beat fixed environments? Learning curves on a held-out family, paired
within seed, recorded durably: the experiment of issue 42.

Every arm in ``--arms`` trains, for every seed in ``--seeds``, from the same warm start (cached per seed
under ``<runs>/.sft-cache``, :func:`spade.run.warm_start.cached_warm_start`) to the same sampled-token budget
(the last mark), and is evaluated on the held-out suite at the same sampled-token marks
(``spade train --eval.at-tokens``, same items and evaluation seeds for every arm). Each finished run writes
one small JSON record, ``<records>/<arm>-s<seed>.json`` (per-item episode returns and wins at each mark,
the sampled tokens at each mark, wall time, steps, regenerations, the code commit, a config hash; no
weights). The report (``auc_report.py``: ``summary.json``, ``docs/results.md`` and its curve image) is made
from the records alone. The analysis is declared below (:data:`ANALYSIS`), before any number.

**Durable, resumable.** A run whose record exists is skipped, so the same command on a fresh machine goes
on where the last one stopped; a killed run is resumed (``spade train --resume``); ``--commit`` commits
each new record to the git repository that holds it as soon as it is written (only that file). Runs
started at one commit keep that commit: run the harness from a worktree at a fixed commit, with
``--records`` pointing at the main checkout's folder::

    git worktree add ../spade-exp <commit>
    cd ../spade-exp && PYTHONPATH=src python experiments/curriculum_auc.py --name pilot --commit \\
        --records /path/to/spade/experiments/results/pilot

Runs import spade from the checkout the harness lives in (its ``src`` first on ``PYTHONPATH``, whatever
is installed), so each record names the commit of the code that ran it; records of another plan (marks, arms' options,
suite, episodes) are refused, not mixed: a new plan needs a new ``--name``.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

HERE = Path(__file__).resolve().parent
ARMS: dict[str, tuple[str, ...]] = {
    "selfplay": ("--mode", "selfplay"),
    "fixed_pool": ("--mode", "fixed_pool"),
    "selfplay_untrained": ("--mode", "selfplay", "--designer.no-train"),
    "selfplay_shuffled": ("--mode", "selfplay", "--designer.reward", "shuffled"),
    "procedural": ("--mode", "procedural"),
}
"""``spade train`` options of each arm. ``selfplay_untrained``: the designer designs but is never updated
(what its learning adds over the variety of designs). ``selfplay_shuffled``: the spurious-reward control,
the designer trained on its regeneration's regrets shuffled across the environments (a reward of the right
scale carrying no information about which design was better)."""
DESIGNING = ("selfplay", "selfplay_untrained", "selfplay_shuffled")
DEFAULT_ARMS = ("selfplay", "fixed_pool", "selfplay_untrained", "selfplay_shuffled")
PRIMARY_TASKS = "variants:heldout"
"""The held-out family (``spade eval envs --tasks variants:heldout``): rule and size variants of the trained
game and of other seed games, no arm trains on any."""
PRIMARY = ("fixed_pool", "selfplay")
"""The primary comparison: ``selfplay - fixed_pool``."""
PRIMARY_ENDPOINT: Literal["return", "win"] = "return"
"""Primary: the episode's return (the environment's own, in [-1, 1], with partial credit where the game
gives it; no format bonus: evaluation plays with ``play.format_reward`` 0). Secondary: the win."""
TARGET_HALF_WIDTH = 0.05
ANALYSIS = f"""\
- **Design**: every arm of a seed starts from the same warm start (one cached supervised warm start per
  seed) and trains to the same budget of sampled tokens (every completion: agent replies, designs, hints),
  evaluated at the same marks; every arm plays the same number of unhinted agent episodes per step
  (`rollout.fill_batch`: a fixed pool of one game plays it 16 times where self-play plays 4 designs 4 times);
  every designing arm makes at least 8 regenerations per run (the harness refuses a plan that would not).
- **Primary endpoint**: the area under the held-out learning curve: a run's mean held-out score over the
  K >= 4 sampled-token marks after the warm start (every mark weighs the same; the marks are the same for
  every arm). Mark 0, the warm start, is shared by every arm of a seed and reported, not averaged in (it
  would only dilute a difference).
- **Score**: an episode's return (the environment's own return, in [-1, 1], with partial credit where the
  game gives it; evaluation adds no format bonus) is primary; the win (1 for a won episode) is secondary.
  An item's score is the mean over its episodes; a run's score at a mark is the mean over items.
- **Primary comparison**: `{PRIMARY[1]} - {PRIMARY[0]}` on the held-out family (`{PRIMARY_TASKS}`), paired
  within seed: both arms of a seed start from the same warm start and play the same items with the same
  evaluation seeds; the estimate is the mean over seeds of the seeds' differences.
- **Secondary**: the final-mark score; the win endpoint; every other arm against `{PRIMARY[0]}` and
  `{PRIMARY[1]}` against each control (`selfplay_untrained`: designer never updated; `selfplay_shuffled`:
  designer trained on regrets shuffled across a regeneration's environments).
- **Intervals**: 95% percentile intervals of a stratified bootstrap (as rliable): seeds resampled within each
  arm (as pairs for a paired difference), then items, the same items for every arm and mark; 2000 resamples.
  The mean is reported beside the interquartile mean (IQM) of the seeds.
- **Verdict**: better or worse only when the primary interval excludes 0; the design targets a half-width of
  at most {TARGET_HALF_WIDTH}, and where it is wider the smallest effect detectable (80% power, 5% two-sided)
  is stated beside the verdict.
"""
DEFAULT_MARKS = (0, 11_000, 22_000, 33_000, 44_000)
STEP_TOKENS = {"cpu-tiny": (4000, 1400)}
"""Sampled tokens of a regeneration step and of another step, measured on cpu-tiny self-play: what the plan
check projects regenerations from (``--step-tokens`` overrides)."""
SPADE = (sys.executable, "-c", "import sys\nfrom spade.cli.app import main\nsys.exit(main())")


@dataclass(frozen=True, slots=True)
class Plan:
    """Everything the experiment does, resolved from the command line."""

    name: str
    preset: str
    arms: tuple[str, ...]
    seeds: tuple[int, ...]
    marks: tuple[int, ...]
    regen_interval: int
    delay: int
    max_steps: int
    tasks: str
    episodes: int
    temperature: float
    limit: int | None
    records: Path
    runs: Path
    parallel: int
    commit: bool
    train_args: tuple[str, ...]
    min_regens: int
    step_tokens: tuple[int, int]

    @property
    def budget(self) -> int:
        """Sampled tokens per run: the last mark."""
        return self.marks[-1]

    def key(self) -> str:
        """What every record's numbers depend on, whatever its arm and seed: records of another plan are
        not mixed with this one's (arms and seeds can be added; caps, checks, paths and parallelism
        change no number)."""
        kept = ("preset", "marks", "regen_interval", "delay", "tasks", "episodes", "temperature", "limit",
                "train_args")  # fmt: skip
        fields = {k: v for k, v in asdict(self).items() if k in kept}
        return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog="see docs/results.md")
    p.add_argument("--name", default="pilot", help="experiment name: records in experiments/results/NAME")
    p.add_argument("--preset", default="cpu-tiny")
    p.add_argument("--arms", nargs="+", default=list(DEFAULT_ARMS), choices=list(ARMS))
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3])
    p.add_argument("--marks", nargs="+", type=int, default=list(DEFAULT_MARKS),
                   help="sampled-token marks, from 0; the last is the budget")  # fmt: skip
    p.add_argument("--regen-interval", type=int, default=2, help="steps between regenerations")
    p.add_argument(
        "--delay", type=int, default=None, help="reward.delay (default: the regeneration interval)"
    )
    p.add_argument("--max-steps", type=int, default=200, help="a cap only: the budget should end every run")
    p.add_argument("--tasks", default=PRIMARY_TASKS, help="the held-out envs suite's --tasks")
    p.add_argument("--episodes", type=int, default=1, help="evaluation episodes per item at each mark")
    p.add_argument("--temperature", type=float, default=0.6, help="evaluation sampling temperature")
    p.add_argument("--limit", type=int, default=None, help="evaluate only the first N items (tests)")
    p.add_argument("--records", type=Path, default=None, help="default: experiments/results/NAME")
    p.add_argument("--runs", type=Path, default=None, help="run directories (default: runs/NAME)")
    p.add_argument("--parallel", type=int, default=2, help="runs at once (one torch thread each)")
    p.add_argument("--commit", action="store_true", help="git-commit each new record as it is written")
    p.add_argument("--min-regens", type=int, default=8, help="regenerations every designing run must make")
    p.add_argument("--step-tokens", nargs=2, type=int, default=None, metavar=("REGEN", "OTHER"),
                   help="sampled tokens of a regeneration step and of another (for the plan check)")  # fmt: skip
    p.add_argument("--report-only", action="store_true", help="write the report from the records; train none")
    p.add_argument("--results", type=Path, default=HERE.parent / "docs" / "results.md")
    p.add_argument("--budget-hours", type=float, default=15.0, help="machine hours of the whole experiment")
    p.add_argument("train_args", nargs="*", help="after --: options for every spade train")
    return p


def parse_plan(argv: Sequence[str]) -> tuple[Plan, argparse.Namespace]:
    """The plan a command line asks for; a plan that would break the design is refused (SystemExit)."""
    parser = _parser()
    a = parser.parse_args(list(argv))
    plan = Plan(
        name=a.name, preset=a.preset, arms=tuple(dict.fromkeys(a.arms)), seeds=tuple(dict.fromkeys(a.seeds)),
        marks=tuple(a.marks), regen_interval=a.regen_interval,
        delay=a.regen_interval if a.delay is None else a.delay, max_steps=a.max_steps, tasks=a.tasks,
        episodes=a.episodes, temperature=a.temperature, limit=a.limit,
        records=a.records or HERE / "results" / a.name, runs=a.runs or Path("runs") / a.name,
        parallel=a.parallel, commit=a.commit, train_args=tuple(a.train_args), min_regens=a.min_regens,
        step_tokens=tuple(a.step_tokens or STEP_TOKENS.get(a.preset, (4000, 1400))),
    )  # fmt: skip
    problem = check_plan(plan) or ("" if a.report_only else check_arms(plan))
    if problem:
        parser.error(problem)
    return plan, a


def check_arms(plan: Plan) -> str:
    """Why ``spade train`` would refuse an arm's options ('' when it takes every arm's)."""
    import contextlib  # noqa: PLC0415
    import io  # noqa: PLC0415

    from spade.cli.train import parse_config  # noqa: PLC0415 - spade is imported only when used

    for arm in plan.arms:
        args = train_command(plan, arm, plan.seeds[0])[1:]
        try:
            with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
                parse_config(args)
        except (SystemExit, Exception) as exc:  # boundary: tyro exits on an unknown option
            why = str(exc) if not isinstance(exc, SystemExit) else "an option it does not know"
            return (
                f"arm {arm}: spade train refuses its options ({shlex.join(ARMS[arm])}; {why}): drop the arm"
            )
    return ""


def check_plan(plan: Plan) -> str:
    """Why ``plan`` breaks the pre-declared design ('' when it does not)."""
    m = plan.marks
    if m[0] != 0 or any(a >= b for a, b in itertools.pairwise(m)):
        return f"--marks must start at 0 (the warm start) and increase (got {' '.join(map(str, m))})"
    if len(m) - 1 < 4:
        return f"--marks has {len(m) - 1} marks after the warm start; the area needs K >= 4"
    if not set(PRIMARY) <= set(plan.arms):
        return f"--arms must hold both arms of the primary comparison, {' and '.join(PRIMARY)}"
    if plan.episodes > 1 and plan.temperature <= 0:
        return "--episodes above 1 need --temperature above 0 (greedy episodes repeat one another)"
    steps, regens = projected_run(plan)
    if any(a in DESIGNING for a in plan.arms) and regens < plan.min_regens:
        return (f"a designing run would make about {regens} regenerations ({steps} steps at "
                f"{plan.step_tokens[0]}/{plan.step_tokens[1]} sampled tokens per regeneration/other step, "
                f"interval {plan.regen_interval}); --min-regens is {plan.min_regens}: raise the last mark "
                "or lower --regen-interval")  # fmt: skip
    if steps > plan.max_steps:
        return (
            f"--max-steps {plan.max_steps} would end runs before the budget (about {steps} steps): raise it"
        )
    return ""


def projected_run(plan: Plan) -> tuple[int, int]:
    """(steps, regenerations) of a designing run that spends the budget at ``plan.step_tokens``."""
    regen, other = plan.step_tokens
    tokens = steps = regens = 0
    while tokens < plan.budget:
        is_regen = steps % plan.regen_interval == 0
        tokens += regen if is_regen else other
        regens += is_regen
        steps += 1
    return steps, regens


# -- one run -------------------------------------------------------------------------------------------

Log = Callable[[str], None]


def run_name(arm: str, seed: int) -> str:
    """A run's name: its run directory and its record file."""
    return f"{arm}-s{seed}"


def train_command(plan: Plan, arm: str, seed: int, marks: Sequence[int] | None = None) -> list[str]:
    """``spade train`` arguments of a fresh run, evaluated at ``marks`` (default: the plan's)."""
    limit = "None" if plan.limit is None else str(plan.limit)
    marks = plan.marks if marks is None else marks
    return ["train", "--preset", plan.preset, *ARMS[arm], "--seed", str(seed), "--name", run_name(arm, seed),
            "--runs-dir", str(plan.runs), "--steps", str(plan.max_steps),
            "--sampled-token-budget", str(plan.budget), "--designer.regen-interval", str(plan.regen_interval),
            "--reward.delay", str(plan.delay), "--eval.every", "0",
            "--eval.at-tokens", *map(str, marks), "--eval.suites", f"envs:{plan.tasks}",
            "--eval.limit", limit, "--eval.episodes", str(plan.episodes),
            "--eval.temperature", str(plan.temperature), "--eval.seed", "0", "--model.threads", "1",
            *plan.train_args]  # fmt: skip


def code_commit() -> dict[str, Any]:
    """The commit of the code that runs (this file's repository) and whether its tree has changes."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(HERE), *args], capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    return {
        "commit": git("rev-parse", "HEAD") or "unknown",
        "dirty": bool(git("status", "--porcelain", "src")),
    }


def run_one(plan: Plan, arm: str, seed: int, log: Log) -> Path:
    """Train (or resume) one run to its end and write its record; returns the record's path."""
    name = run_name(arm, seed)
    where = plan.runs / name
    fresh = not (where / "config.json").is_file()
    import auc_records  # noqa: PLC0415 - a sibling module

    # the warm start is the seed's, whatever the arm: evaluated once per seed, its scores reused
    shared = auc_records.warm_start_scores(plan, seed) is not None
    marks = plan.marks[1:] if shared else plan.marks
    args = (
        train_command(plan, arm, seed, marks)
        if fresh
        else ["train", "--resume", str(where), "--model.threads", "1"]
    )
    if fresh and where.exists():
        args.append("--overwrite")  # a run that never wrote its config: nothing to keep
    log(f"{name}: {'training' if fresh else 'resuming'}: spade {shlex.join(args)}")
    started = time.perf_counter()
    log_file = plan.runs / f"{name}.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("a") as sink:
        # one thread per run (--parallel runs share the cores); the spade of this checkout, whatever is installed
        src = os.pathsep.join([str(HERE.parent / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": src}
        status = STOP.run([*SPADE, *args], stdout=sink, stderr=subprocess.STDOUT, env=env)
    wall = _add_wall(plan.runs / f"{name}.wall.json", time.perf_counter() - started)
    if status in STOPPED or STOP.requested.is_set():
        STOP.requested.set()  # a run stopped by a signal stops the experiment: no other run starts
        raise Stopped(f"{name}: stopped (status {status}); the same command resumes it")
    if status != 0:
        raise RuntimeError(f"{name}: spade train failed with status {status}; see {log_file}")
    return auc_records.write_record(plan, arm, seed, where, wall)


STOPPED = (130, 143, -signal.SIGINT, -signal.SIGTERM)
"""Exit statuses of a ``spade train`` stopped by SIGINT or SIGTERM (resumable), not failed."""


class Stopped(Exception):
    """A run was stopped by a signal: the experiment stops too."""


class Stopper:
    """Runs the experiment's ``spade train`` processes; a SIGINT or SIGTERM to the harness is passed on to
    every one of them (each stops resumably, as a Ctrl-C to it would), and no further run starts."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self.live: set[subprocess.Popen[bytes]] = set()
        self.lock = threading.Lock()

    def run(self, cmd: Sequence[str], **kwargs: Any) -> int:
        """Run ``cmd`` to its end (``subprocess.Popen`` keyword arguments); its exit status."""
        with self.lock:
            if self.requested.is_set():
                return 130
            proc = subprocess.Popen(list(cmd), **kwargs)
            self.live.add(proc)
        try:
            return proc.wait()
        finally:
            with self.lock:
                self.live.discard(proc)

    def stop(self, signum: int, _frame: object = None) -> None:
        """Signal handler: stop every live run with the same signal and start no other."""
        self.requested.set()
        with self.lock:
            for proc in self.live:
                proc.send_signal(signum)


STOP = Stopper()


def _add_wall(path: Path, seconds: float) -> float:
    """The run's wall seconds over every invocation on this machine (kept beside the run)."""
    total = (json.loads(path.read_text())["wall_s"] if path.is_file() else 0.0) + seconds
    path.write_text(json.dumps({"wall_s": total}))
    return float(total)


# -- all runs ------------------------------------------------------------------------------------------


def pending_runs(plan: Plan, log: Log) -> list[tuple[str, int]]:
    """The (arm, seed) pairs with no record, arm by arm."""
    import auc_records  # noqa: PLC0415

    auc_records.check_plan_records(plan)
    todo = []
    for arm in plan.arms:
        for seed in plan.seeds:
            if (plan.records / f"{run_name(arm, seed)}.json").is_file():
                log(f"{run_name(arm, seed)}: recorded, skipped")
            else:
                todo.append((arm, seed))
    return todo


def run_all(plan: Plan, log: Log) -> list[str]:
    """Run every pending run, ``plan.parallel`` at once; returns the failures (a failure stops no other)."""
    import auc_records  # noqa: PLC0415

    todo = pending_runs(plan, log)
    lock, failures = threading.Lock(), []

    def job(arm: str, seed: int) -> None:
        if STOP.requested.is_set():
            return
        try:
            record = run_one(plan, arm, seed, log)
        except Stopped as exc:
            log(str(exc))
            return
        except Exception as exc:  # boundary: one failed run must not stop the others
            failures.append(str(exc))
            log(str(exc))
            return
        log(f"{run_name(arm, seed)}: wrote {record}")
        if plan.commit:
            with lock:  # one commit at a time from this process
                log(auc_records.commit_record(record))

    # First one run of each seed with no record: it makes the seed's warm start (cached) and evaluates it;
    # then the others, which reuse both. Runs of one seed never make its warm start side by side.
    recorded = {r["seed"] for r in auc_records.load_records(plan.records)}
    first = [
        next(pair for pair in todo if pair[1] == s)
        for s in dict.fromkeys(s for _, s in todo)
        if s not in recorded
    ]
    for phase in (first, [pair for pair in todo if pair not in first]):
        with ThreadPoolExecutor(max_workers=max(1, plan.parallel)) as pool:
            for arm, seed in phase:
                pool.submit(job, arm, seed)
    return failures


def main(argv: Sequence[str] | None = None) -> int:
    """Run (or skip) every run, then write the report; returns the exit status (1: a run failed)."""
    import auc_report  # noqa: PLC0415

    argv = list(sys.argv[1:] if argv is None else argv)
    plan, a = parse_plan(argv)

    def log(line: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)

    failures = [] if a.report_only else _run_all_stoppable(plan, log)
    written = auc_report.write(plan, a.results, a.budget_hours, command=run_command(argv))
    log(f"wrote {', '.join(str(p) for p in written)}")
    if failures:
        log(f"{len(failures)} runs failed: {'; '.join(failures)}")
    if STOP.requested.is_set():
        log("stopped: the same command skips what is recorded and resumes the rest")
        return 130
    return 1 if failures else 0


def _run_all_stoppable(plan: Plan, log: Log) -> list[str]:
    """:func:`run_all` with SIGINT and SIGTERM passed on to the runs (the handlers before are restored)."""
    before = {signum: signal.signal(signum, STOP.stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        return run_all(plan, log)
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def run_command(argv: Sequence[str]) -> str:
    """The command that runs the plan of ``argv``: without the options that only say where things go."""
    drop, kept, skip = {"--records", "--runs", "--results"}, [], 0
    for arg in argv:
        if skip or arg in drop:
            skip = 0 if skip else 1
            continue
        if arg not in ("--report-only", "--commit"):
            kept.append(arg)
    return shlex.join(["python", "experiments/curriculum_auc.py", *kept])


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` for counts."""
    return math.ceil(a / b)


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    sys.exit(main())
