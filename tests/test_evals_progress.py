"""What an evaluation says about its cost: counts up front, a measured estimate, plain lines for a log."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from spade.config import EvalOptions
from spade.evals import runner
from spade.evals.base import ItemResult, Progress, Workload
from spade.evals.policies import ScriptedSolver, probe_rate
from spade.evals.progress import Estimate, ProgressLog, duration, episode_tokens, rough_estimate
from spade.evals.registry import SUITES, make_suite
from spade.evals.runner import SuiteRequest, arun
from spade.scripted.policy import ScriptedPolicy


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


def test_the_log_gives_the_count_no_estimate_from_one_episode_and_lines_every_tenth_or_30_s() -> None:
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
    log(1, 64)  # one early episode says nothing about the round (the old estimate: 40 s x 2 rounds)
    assert (
        lines[-1]
        == "math: first episode done after 40 s; a measured estimate follows once 32 episodes are done"
    )
    assert log.estimate_s(1, 40.0) is None
    before = len(lines)
    for done in range(2, 7):  # below the next 10% mark (7 of 64): nothing new
        log(done, 64)
    assert len(lines) == before
    log(7, 64)
    assert lines[-1] == "math: 7/64 episodes (11%), 40 s elapsed, no estimate yet"
    clock.now += 80.0
    log(32, 64)  # a round's worth done: the mean time per episode, rough until 3/4 of the episodes are done
    assert lines[-1] == (
        "math: 32/64 episodes done after 2 min 0 s; estimate ~4 min 0 s in all "
        "(measured: the time per episode so far; rough until 48 are done)"
    )
    log(39, 64)
    assert lines[-1].endswith("~1 min 17 s left (rough)")
    clock.now += 60.0
    log(52, 64)
    assert lines[-1] == "math: 52/64 episodes (81%), 3 min 0 s elapsed, ~42 s left"
    log(64, 64)
    assert lines[-1] == "math: 64/64 episodes done in 3 min 0 s"


def _seconds(text: str) -> float:
    """The seconds of a :func:`duration` text (``2 min 5 s``)."""
    words = text.split()
    units = {"h": 3600, "min": 60, "s": 1}
    return sum(float(n) * units[u] for n, u in zip(words[::2], words[1::2], strict=True))


def _simulated_lines(
    durations: list[float], in_flight: int, prior: Estimate | None
) -> tuple[list[str], float]:
    """A batching engine's episodes (``in_flight`` slots, each refilled when its episode ends), logged; the
    lines and the suite's wall time."""
    clock, lines = FakeClock(), []
    start = clock.now
    log = ProgressLog(
        "envs", Workload(len(durations), 1, "n", in_flight), lines.append, clock=clock, prior=prior
    )
    slots = [0.0] * in_flight
    ends = []
    for d in durations:
        k = min(range(in_flight), key=lambda i: slots[i])
        slots[k] += d
        ends.append(slots[k])
    for done, end in enumerate(sorted(ends), 1):
        clock.now = start + end
        log(done, len(durations))
    return lines, max(ends)


def test_an_early_short_episode_of_a_batched_round_does_not_make_the_estimate_3_to_5_times_short() -> None:
    """Issue: 64 episodes, 32 in flight; the first one ended early and "~2 min 53 s in all" was printed for a
    suite that took 7 min 38 s. Episodes of a round differ: the short ones finish first."""
    durations = [10.0 if i % 8 == 0 else 200.0 + 3 * i for i in range(64)]
    lines, actual = _simulated_lines(durations, 32, None)
    shown = [ln for ln in lines if "estimate ~" in ln]
    assert shown
    assert all("first episode" not in ln for ln in shown)
    for line in shown:
        estimate = _seconds(line.split("estimate ~")[1].split(" in all")[0])
        assert actual / 2 <= estimate <= actual * 2, (line, actual)
    assert "rough until 48 are done" in shown[0]


def test_a_rough_estimate_from_the_engine_probe_comes_first_and_says_it_is_rough() -> None:
    work = Workload(256, 1, "8 per task × 32 tasks", 32)
    prior = rough_estimate(work, 1024, 100.0)  # 8 rounds × 1024 tokens at 100 tokens/s
    assert prior.seconds == pytest.approx(81.92)
    assert prior.how == "8 rounds × up to 1024 tokens at 100 tokens/s (engine probe, 32 in flight)"
    clock, lines = FakeClock(), []
    log = ProgressLog("math", work, lines.append, clock=clock, prior=prior)
    assert lines[1] == (
        "math: rough estimate ~1 min 22 s in all (8 rounds × up to 1024 tokens at 100 tokens/s (engine probe, "
        "32 in flight): generation only, long prompts add to it, short replies take less); measured once 32 "
        "episodes are done"
    )
    clock.now += 30.0
    log(0, 256)
    assert lines[-1] == "math: 0/256 episodes (0%), 30 s elapsed, ~52 s left (rough)"


def test_the_tokens_an_episode_may_generate() -> None:
    assert episode_tokens("math", EvalOptions(max_tokens=512, max_turns=2)) == 1024
    assert episode_tokens("code", EvalOptions(max_tokens=512, max_turns=2)) == 512
    # envs: its own turn budget (params), each reply capped by the context, all within the context
    assert episode_tokens("envs", EvalOptions(max_tokens=64, params={"max_turns": 5})) == 320
    assert episode_tokens("envs", EvalOptions(max_tokens=512, params={"context_tokens": 2048})) == 2048


def test_the_runner_probes_the_engine_before_a_suite_and_hands_the_estimate_on() -> None:
    seen: list[tuple[str, Estimate | None]] = []

    def factory(name: str, work: Workload | None, prior: Estimate | None) -> Progress:
        seen.append((name, prior))
        return lambda done, total: None

    request = SuiteRequest("math", EvalOptions(tasks=("chain_sum",), limit=2))
    asyncio.run(arun(ScriptedPolicy(), [request], progress=factory))
    ((name, prior),) = seen
    assert name == "math"
    assert prior is not None
    assert prior.seconds > 0
    assert "engine probe, 2 in flight" in prior.how
    solver = SuiteRequest("envs", EvalOptions(tasks=("countdown",)))
    asyncio.run(arun(ScriptedSolver(), [solver], progress=factory))
    assert seen[-1] == ("envs", None)  # no engine to probe


def test_probe_rate_times_a_batch_of_short_requests() -> None:
    rate = asyncio.run(probe_rate(ScriptedPolicy(), 4))
    assert rate is not None
    assert rate > 0


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

    def factory(name: str, work: Workload | None, prior: object) -> Progress:
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
    assert lines[1].startswith("math: rough estimate ~")  # within seconds: from the engine probe
    assert "(engine probe, 1 in flight)" in lines[1]
    assert lines[2].startswith("math: 1/4 episodes done after ")
    assert "estimate ~" in lines[2]
    assert "rough until 3 are done" in lines[2]
    assert any(ln.startswith("math: 2/4 episodes (50%)") for ln in lines)
    assert lines[-2].startswith("math: 4/4 episodes done in ")
    assert lines[-1] == f"results: {tmp_path / 'r'}"
