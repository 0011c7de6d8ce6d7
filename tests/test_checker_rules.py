"""Checker rules that judge what a design is worth playing: the solution's win rate over tested seeds (an
instance nobody can win makes regret noise) and whether a game takes more than one reply."""

from __future__ import annotations

from pathlib import Path

import pytest

from spade import envs
from spade.checker import CheckReport, FindingCode, check_env
from spade.config import PAPER, PAPER_TOOL, CheckerConfig
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
    from spade.cli import main  # noqa: PLC0415 - the command under test

    path = str(FIXTURES / "one_reply.py")
    assert main(["check", "--seed", "11", path]) == 0
    assert "[warning] ONE_REPLY_GAME" in capsys.readouterr().out
    assert main(["check", "--seed", "11", "--preset", "paper", path]) == 1
    assert "[fatal] ONE_REPLY_GAME" in capsys.readouterr().out
    assert main(["check", "--preset", "nonesuch", path]) == 2
