"""Checker rules that judge what a design is worth playing: the solution's win rate over tested seeds (an
instance nobody can win makes regret noise), whether a game takes more than one reply, whether its seeds give
different instances, whether reset starts afresh on a used instance, verdicts on win rates that do not hang
on the check's seed, and `spade check` on folders."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from spade import envs
from spade.checker import CheckReport, FindingCode, check_env, rates, reuse
from spade.checker.episodes import Episode, StepRecord
from spade.checker.rates import undecided, wilson
from spade.cli.check import check_files
from spade.config import PAPER, PAPER_TOOL, CheckerConfig
from spade.config.errors import ConfigError
from spade.sandbox import Limits, Sandbox, SandboxError
from spade.sandbox.inprocess import InProcessSandbox

FIXTURES = Path(__file__).parent / "checker_envs"
MANY_SEEDS = CheckerConfig(feasibility_seeds=12)
"""Enough seeds that a fixture half of whose instances are unwinnable both wins and loses some."""


def _check(name: str, cfg: CheckerConfig, seed: int = 11) -> CheckReport:
    return check_env((FIXTURES / name).read_text(), InProcessSandbox(), cfg, seed=seed, filename=name)


def _severity(report: CheckReport, code: FindingCode) -> str | None:
    return next((f.severity for f in report.findings if f.code is code), None)


# -- the solution's win rate ----------------------------------------------------------------------------


def test_a_partially_winnable_environment_is_rejected_below_the_required_rate() -> None:
    report = _check("partial_solution.py", MANY_SEEDS)
    assert not report.ok
    assert [f.code for f in report.fatal] == [FindingCode.SOLUTION_PARTIAL]
    rate = report.stats["solution_win_rate"]
    assert 0 < rate < 1
    assert "below the required 100%" in report.fatal[0].message


def test_the_required_rate_is_a_config_threshold() -> None:
    loose = _check("partial_solution.py", CheckerConfig(feasibility_seeds=12, min_solution_win_rate=0.0))
    assert loose.ok
    assert _severity(loose, FindingCode.SOLUTION_PARTIAL) == "warning"
    rate = loose.stats["solution_win_rate"]
    at_rate = _check("partial_solution.py", CheckerConfig(feasibility_seeds=12, min_solution_win_rate=rate))
    assert at_rate.ok  # at the threshold: accepted, with the warning
    above = _check(
        "partial_solution.py", CheckerConfig(feasibility_seeds=12, min_solution_win_rate=rate + 0.01)
    )
    assert not above.ok


def test_the_paper_presets_require_the_solution_to_win_every_tested_seed() -> None:
    for preset in (PAPER, PAPER_TOOL):
        assert preset.checker.min_solution_win_rate == 1.0
        assert preset.checker.feasibility_seeds >= 8


@pytest.mark.parametrize("name", envs.names())
def test_every_seed_solution_wins_every_seed_of_the_paper_presets(name: str) -> None:
    report = check_env(
        envs.spec(name).source(), InProcessSandbox(), PAPER.checker, seed=31, filename=name, win=PAPER.play
    )
    assert report.ok, [str(f) for f in report.findings]
    assert report.stats["solution_win_rate"] == 1.0


# -- turns ----------------------------------------------------------------------------------------------


def test_a_one_reply_game_is_flagged_and_fatal_where_the_config_says() -> None:
    warned = _check("one_reply.py", CheckerConfig())
    assert warned.ok
    assert _severity(warned, FindingCode.ONE_REPLY_GAME) == "warning"
    assert warned.stats["min_turns"] == 1
    rejected = _check("one_reply.py", CheckerConfig(reject_one_reply=True))
    assert [f.code for f in rejected.fatal] == [FindingCode.ONE_REPLY_GAME]
    assert "another seed's winning reply" in rejected.fatal[0].message
    assert not _check("one_reply.py", PAPER.checker).ok
    assert PAPER.checker.reject_one_reply
    assert PAPER_TOOL.checker.reject_one_reply


def test_a_game_that_answers_a_wrong_reply_is_multi_turn_even_when_one_reply_wins() -> None:
    report = _check("multi_turn.py", CheckerConfig(reject_one_reply=True))
    assert report.ok, [str(f) for f in report.findings]
    assert report.stats["min_turns"] == 1
    assert FindingCode.ONE_REPLY_GAME not in report.codes


def test_min_turns_is_reported_even_for_a_rejected_design() -> None:
    report = _check("partial_solution.py", MANY_SEEDS)
    assert report.stats["min_turns"] >= 1


@pytest.mark.parametrize("name", envs.names())
def test_no_seed_environment_is_a_one_reply_game(name: str) -> None:
    strict = CheckerConfig(reject_one_reply=True)
    report = check_env(envs.spec(name).source(), InProcessSandbox(), strict, seed=5, filename=name)
    assert report.ok, [str(f) for f in report.findings]
    assert report.stats["min_turns"] >= 3  # every seed game takes several replies to win


def test_spade_check_judges_with_a_presets_checker(capsys: pytest.CaptureFixture[str]) -> None:
    from spade.cli.app import main  # noqa: PLC0415 - the command under test

    path = str(FIXTURES / "one_reply.py")
    assert main(["check", "--seed", "11", path]) == 0
    assert "[warning] ONE_REPLY_GAME" in capsys.readouterr().out
    assert main(["check", "--seed", "11", "--preset", "paper", path]) == 1
    assert "[fatal] ONE_REPLY_GAME" in capsys.readouterr().out
    assert main(["check", "--preset", "nonesuch", path]) == 2


# -- seeds that give the same instance ----------------------------------------------------------------------


def test_a_game_whose_every_seed_gives_the_same_instance_is_rejected_by_the_paper_presets() -> None:
    warned = _check("fixed_instance.py", CheckerConfig())
    assert warned.ok
    assert _severity(warned, FindingCode.SEED_IGNORED) == "warning"
    assert warned.stats["distinct_instance_share"] == pytest.approx(1 / 3)
    for preset in (PAPER, PAPER_TOOL):
        rejected = _check("fixed_instance.py", preset.checker)
        assert [f.code for f in rejected.fatal] == [FindingCode.SEED_IGNORED]
        assert "3 tested seeds gave 1 distinct instance (a share of 33%, below the required 50%)" in (
            rejected.fatal[0].message
        )


def test_the_share_of_distinct_instances_is_a_config_threshold() -> None:
    assert _check("fixed_instance.py", CheckerConfig(min_distinct_instances=0.3)).ok
    assert not _check("fixed_instance.py", CheckerConfig(min_distinct_instances=0.34)).ok
    varied = _check("multi_turn.py", CheckerConfig(min_distinct_instances=1.0))
    assert varied.ok, [str(f) for f in varied.findings]
    assert varied.stats["distinct_instance_share"] == 1.0
    with pytest.raises(ConfigError, match="min_distinct_instances must be in"):
        CheckerConfig(min_distinct_instances=1.5).validate()


# -- reset on a used instance -------------------------------------------------------------------------------

STALE = [
    ("stale_progress.py", "step 1 (action "),  # any key opens the door: the last episode's keys stay turned
    ("stale_board.py", "reset(seed) returned different observations"),  # the last episode's paint shows
]


@pytest.mark.parametrize(("name", "difference"), STALE)
def test_a_reset_that_keeps_the_last_episodes_state_is_rejected(name: str, difference: str) -> None:
    report = _check(name, CheckerConfig())
    assert [(f.code, f.stage) for f in report.fatal] == [(FindingCode.STALE_RESET, "reuse")]
    message = report.fatal[0].message
    assert "on an instance that had just played seed" in message
    assert f"against a fresh instance of that seed, {difference}" in message
    assert "Fix: build every piece of episode state in reset" in message


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    try:
        box = Sandbox(Limits()).start()
    except SandboxError as exc:  # pragma: no cover - only on machines without process isolation support
        pytest.skip(f"the process sandbox cannot start here: {exc}")
    with box:
        yield box


def test_the_reuse_rung_plays_in_the_process_sandbox_too(sandbox: Sandbox) -> None:
    text = (FIXTURES / "stale_progress.py").read_text()
    assert check_env(text, sandbox, seed=4).codes[-1] is FindingCode.STALE_RESET
    report = check_env((FIXTURES / "multi_turn.py").read_text(), sandbox, seed=4)
    assert report.ok, [str(f) for f in report.findings]
    assert "reuse" in report.timings_s
    assert sandbox.live_instances() == 0


def test_without_a_playable_solution_reuse_replays_the_same_random_actions() -> None:
    draws = iter(range(100, 110))
    plan = reuse.plan([], lambda: next(draws), tool_names=(), script_cap=9, random_cap=7)
    assert [j.seed for j in plan.series] == [100, 101, 100]
    assert [j.seed for j in plan.fresh] == [101]
    assert all(j.peek_solution and j.max_steps == 7 for j in (*plan.series, *plan.fresh))
    actions = [j.policy("Pick 1 2 3", 0) for j in (*plan.series, *plan.fresh) if j.policy is not None]
    assert len(set(actions)) == 1  # every episode gets the same actions, so only the instance can differ


# -- verdicts that do not hang on the check's seed ----------------------------------------------------------

GUESS = (FIXTURES / "guess_number.py").read_text()
WIDE_GUESS = GUESS.replace("LOW, HIGH, TURNS = 1, 30, 8", "LOW, HIGH, TURNS = 1, 60, 8", 1)
"""The same game over 1-60: guessing wins 8/60, about 13%, under the limit."""


def test_a_guessable_game_gets_the_same_verdict_whatever_the_check_seed(sandbox: Sandbox) -> None:
    # Guessing wins 8/30 (27%) against a 20% limit: 32 episodes alone passed it on check seeds 3 and 6.
    for seed in (3, 6, 11):
        report = check_env(GUESS, sandbox, seed=seed, filename="guess_number.py")
        assert [f.code for f in report.fatal] == [FindingCode.EXPLOITABLE_RANDOM], seed
        assert re.search(
            r"won \d+ of \d+ episodes \(\d+%; 99% interval \d+%-\d+%; limit 20%\)",
            (report.fatal[0].message),
        ), report.fatal[0].message
        fair = check_env(WIDE_GUESS, sandbox, seed=seed, filename="guess_number.py")
        assert fair.ok, (seed, [str(f) for f in fair.findings])
        assert fair.stats["guess_win_rate"] < CheckerConfig().exploit_max_success


def test_a_rate_is_played_on_while_its_interval_holds_the_limit() -> None:
    low, high = wilson(8, 30, 0.95)
    assert (low, high) == (pytest.approx(0.1418, abs=1e-3), pytest.approx(0.4445, abs=1e-3))
    assert undecided(0, 26, 0.2, 0.99)
    assert not undecided(0, 27, 0.2, 0.99)  # never won in 27 episodes: under 20% at 99%
    played: list[int] = []

    def more(n: int) -> list[Episode]:
        played.append(n)
        return [_won_episode(i % 5 == 0) for i in range(n)]  # wins 20%: the interval never clears the limit

    out = rates.top_up([], more, won=_won, limit=0.2, confidence=0.99, cap=100, batch=32)
    assert played == [32, 32, 32, 4]
    assert len(out) == 100
    assert rates.top_up([], more, won=_won, limit=0.2, confidence=0.99, cap=100, batch=0) == []  # no batches


def _won_episode(won: bool) -> Episode:
    return Episode("guess", 0, "start", (StepRecord("x", "end", 1.0 if won else 0.0, True, False),))


def _won(ep: Episode) -> bool:
    return ep.won(1.0, "final")


# -- folders --------------------------------------------------------------------------------------------


def test_spade_check_checks_every_file_of_a_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flat = tmp_path / "flat"
    flat.mkdir()
    for name in ("multi_turn.py", "stale_board.py"):
        (flat / name).write_text((FIXTURES / name).read_text())
    (flat / "_helpers.py").write_text("X = 1\n")  # not an environment: left out, as by `spade eval envs`
    box = InProcessSandbox()
    assert check_files([flat], seed=1, runner=box) == 1
    out = capsys.readouterr().out
    assert f"PASS {flat / 'multi_turn.py'}" in out
    assert f"FAIL {flat / 'stale_board.py'}" in out
    assert "STALE_RESET" in out
    assert out.rstrip().endswith("1/2 passed")
    pool = tmp_path / "pool"
    for sub, env in (("games", "countdown"), ("tools", "company_directory")):
        (pool / sub).mkdir(parents=True)
        (pool / sub / f"{env}.py").write_text(envs.spec(env).source())
    assert check_files([pool], seed=1, runner=box) == 0
    assert capsys.readouterr().out.rstrip().endswith("2/2 passed")
    assert (
        check_files([tmp_path / "flat" / "_helpers.py"], seed=1, runner=box) == 1
    )  # a file named is checked
    capsys.readouterr()
    (tmp_path / "empty").mkdir()
    assert check_files([tmp_path / "empty"], seed=1, runner=box) == 2
    assert "no environment files (*.py, games/*.py or tools/*.py) in folder" in capsys.readouterr().err
