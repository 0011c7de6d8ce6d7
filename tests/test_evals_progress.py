"""What an evaluation says about its cost: counts up front, a measured estimate, plain lines for a log."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from spade.backends.scripted import ScriptedPolicy
from spade.config import EvalOptions
from spade.evals import runner
from spade.evals.base import ItemResult, Progress, Workload
from spade.evals.progress import ProgressLog, duration
from spade.evals.registry import SUITES, make_suite
from spade.evals.runner import SuiteRequest, arun


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_limit_counts_per_task_and_the_count_says_so() -> None:
    work = make_suite("math").workload(EvalOptions(limit=2))
    assert (work.items, work.total, work.in_flight) == (64, 64, 32)
    assert work.counted == "--limit 2 per task × 32 tasks"
    default = make_suite("reasoning_gym").workload(EvalOptions(tasks=("gcd",)))
    assert (default.items, default.counted) == (8, "8 per task (the default of --limit) × 1 task")
    envs = make_suite("envs").workload(EvalOptions(tasks=("sokoban", "countdown"), episodes=3, concurrency=4))
    assert (envs.items, envs.total, envs.in_flight, envs.counted) == (2, 6, 4, "2 environments")
    assert make_suite("envs").workload(EvalOptions(limit=3)).counted == "3 environments (--limit 3)"
    bfcl = make_suite("bfcl").workload(EvalOptions())
    assert (bfcl.items, bfcl.counted) == (
        120,
        "up to 20 per category (the default of --limit) × 6 categories",
    )
    code = make_suite("code").workload(EvalOptions(limit=3))
    assert (code.items, code.counted) == (3, "3 problems (--limit 3)")


def test_the_log_gives_the_count_a_measured_estimate_and_lines_every_tenth_or_30_s() -> None:
    clock, lines = FakeClock(), []
    log = ProgressLog("math", Workload(64, 1, "--limit 2 per task × 32 tasks", 32), lines.append, clock=clock)
    assert lines == [
        "math: 64 items (--limit 2 per task × 32 tasks) × 1 episode = 64 episodes, 32 at a time (--concurrency)"
    ]
    log(0, 64)
    clock.now += 30.0  # a heartbeat while the first round is in flight
    log(0, 64)
    assert lines[-1] == "math: 0/64 episodes (0%), 30 s elapsed, no episode finished yet"
    clock.now += 10.0
    log(1, 64)  # the first episode took 40 s; two rounds of 32 -> 80 s in all
    assert lines[-1] == (
        "math: first episode done after 40 s; estimate ~1 min 20 s in all "
        "(2 rounds of up to 32 episodes at a time, each about as long as the first)"
    )
    assert log.estimate_s(1, 40.0) == 80.0
    before = len(lines)
    for done in range(2, 7):  # below the next 10% mark (7 of 64): nothing new
        log(done, 64)
    assert len(lines) == before
    log(7, 64)
    assert lines[-1] == "math: 7/64 episodes (11%), 40 s elapsed, ~40 s left"
    clock.now += 40.0
    log(32, 64)  # the first round is done: from now on the mean time per episode
    assert lines[-1] == "math: 32/64 episodes (50%), 1 min 20 s elapsed, ~1 min 20 s left"
    log(64, 64)
    assert lines[-1] == "math: 64/64 episodes done in 1 min 20 s"


def test_under_a_bar_only_the_count_the_estimate_and_the_end_are_written() -> None:
    clock, lines = FakeClock(), []
    log = ProgressLog("envs", Workload(3, 1, "3 environments", 1), lines.append, periodic=False, clock=clock)
    clock.now += 2.0
    for done in range(4):
        log(done, 3)
    assert (
        lines[1]
        == "envs: first episode done after 2.0 s; estimate ~6.0 s in all (3 episodes, each about as long as the first)"
    )
    assert lines[2:] == ["envs: 3/3 episodes done in 2.0 s"]


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.42, "0.4 s"), (41.4, "41 s"), (125, "2 min 5 s"), (3790, "1 h 3 min")]
)
def test_durations_read_naturally(seconds: float, text: str) -> None:
    assert duration(seconds) == text


class WaitingSuite:
    """A suite whose one episode finishes only after the runner's heartbeat has repeated its counts twice."""

    name = "waiting"

    def workload(self, opts: EvalOptions) -> Workload:
        return Workload.of(1, "1 thing", opts)

    async def run(self, policy: object, opts: EvalOptions, progress: Progress) -> list[ItemResult]:
        self.beats = asyncio.Event()
        progress(0, 1)
        await self.beats.wait()
        progress(1, 1)
        return [ItemResult("waiting", "a", "c", (1.0,))]


def test_the_runner_repeats_the_counts_while_nothing_finishes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(SUITES, "waiting", f"{__name__}:WaitingSuite")
    monkeypatch.setattr(runner, "HEARTBEAT_S", 0.001)
    suite = make_suite("waiting")
    calls: list[tuple[int, int]] = []
    seen: list[Workload | None] = []

    def factory(name: str, work: Workload | None) -> Progress:
        seen.append(work)

        def callback(done: int, total: int) -> None:
            calls.append((done, total))
            if calls.count((0, 1)) >= 3:  # the suite's own call, then two heartbeats
                suite.beats.set()  # type: ignore[attr-defined]

        return callback

    asyncio.run(arun(ScriptedPolicy(), [SuiteRequest("waiting")], [suite], progress=factory))
    assert seen == [Workload(1, 1, "1 thing", 1)]
    assert calls[:3] == [(0, 1)] * 3
    assert calls[-1] == (1, 1)


def test_eval_logs_plain_lines_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "spade.cli", "eval", "math:chain_sum,gcd", "--limit", "2", "--model.backend",
         "scripted", "--concurrency", "1", "--out", str(tmp_path / "r")],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    assert (
        lines[0]
        == "math: 4 items (--limit 2 per task × 2 tasks) × 1 episode = 4 episodes, 1 at a time (--concurrency)"
    )
    assert lines[1].startswith("math: first episode done after ")
    assert "(4 episodes, each about as long as the first)" in lines[1]
    assert any(ln.startswith("math: 2/4 episodes (50%)") for ln in lines)
    assert lines[-2].startswith("math: 4/4 episodes done in ")
    assert lines[-1] == f"results: {tmp_path / 'r'}"
