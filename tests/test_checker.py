"""The validation ladder: every seed and official-format environment passes, every broken one is rejected
with its expected code, and the ladder's parts behave (extraction, static checks, probes, reports, CLI).

Safe cases run under both runners (the unsafe in-process one and the process sandbox); hostile cases only
under the sandbox.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spade import envs
from spade.checker import CheckReport, FindingCode, check_env
from spade.checker.episodes import Episode, StepRecord
from spade.checker.feasibility import exploit_findings, solution_actions, unconfirmed
from spade.checker.probes import RandomActions, number_guess
from spade.cli.check import check_files
from spade.config import CheckerConfig, WinRule
from spade.replies import extract_code, prose_actions
from spade.sandbox import Limits, Sandbox, SandboxError
from spade.sandbox.api import EnvRunner
from spade.sandbox.inprocess import InProcessSandbox

BROKEN = Path(__file__).parent / "broken_envs"
FIXTURES = Path(envs.__file__).parent / "official_fixtures"
# Level 0 edited to 2 dials of 1-8 in 10 turns: binary search still wins, but guessing at random in the range
# shown wins about a third of the games; the lock's default level (1) is untouched.
GUESSABLE_LOCK = envs.spec("combination_lock").source().replace("    (3, 12, 12),", "    (2, 8, 10),", 1)
_EXPECT = re.compile(r"^# expect: (\w+)$", re.MULTILINE)
# Short limits so hostile cases (infinite loops) fail fast; every honest environment call takes milliseconds.
FAST_LIMITS = Limits(call_timeout_s=2.0, load_timeout_s=3.0)


def _broken_cases() -> list[tuple[str, str, bool]]:
    cases = []
    for path in sorted(BROKEN.glob("*.py")):
        text = path.read_text()
        match = _EXPECT.search(text)
        assert match is not None, f"{path.name} needs a '# expect: CODE' header"
        cases.append((path.name, match.group(1), "# sandbox-only" in text))
    return cases


BROKEN_CASES = _broken_cases()
SAFE_CASES = [(name, code) for name, code, hostile in BROKEN_CASES if not hostile]
FIXTURE_FILES = sorted(p.name for p in FIXTURES.glob("*.py") if not p.name.startswith("_"))


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    try:
        box = Sandbox(FAST_LIMITS).start()
    except SandboxError as exc:  # pragma: no cover - only on machines without process isolation support
        pytest.skip(f"the process sandbox cannot start here: {exc}")
    with box:
        yield box


@pytest.fixture(params=["inprocess", "sandbox"])
def runner(request: pytest.FixtureRequest) -> EnvRunner:
    if request.param == "inprocess":
        return InProcessSandbox(FAST_LIMITS)
    box: Sandbox = request.getfixturevalue("sandbox")
    return box


def _fatal_codes(report: CheckReport) -> list[str]:
    return [f.code.value for f in report.fatal]


# -- the corpus ------------------------------------------------------------------------------------------


def test_the_corpus_covers_the_required_defects() -> None:
    codes = {code for _, code, _ in BROKEN_CASES}
    required = {
        "NO_TERMINATION", "REWARD_RANGE", "REWARD_NAN", "NONDETERMINISTIC", "STEP_CRASH",
        "EXPLOITABLE_CONSTANT", "SOLUTION_FAILS", "ANSWER_LEAK", "GLOBAL_RNG", "MISSING_METHOD",
        "SYNTAX_ERROR", "TIMEOUT", "MEMORY", "FORBIDDEN",
    }  # fmt: skip
    assert required <= codes
    assert len(BROKEN_CASES) >= 20
    assert {c.value for c in FindingCode} >= codes


@pytest.mark.parametrize(("name", "expected"), SAFE_CASES)
def test_broken_environment_is_rejected_with_its_code(runner: EnvRunner, name: str, expected: str) -> None:
    report = check_env((BROKEN / name).read_text(), runner, seed=1234, filename=name)
    assert not report.ok
    assert _fatal_codes(report)[0] == expected, [str(f) for f in report.findings]


@pytest.mark.parametrize(("name", "expected"), [(n, c) for n, c, hostile in BROKEN_CASES if hostile])
def test_hostile_environment_is_rejected_by_the_sandbox(sandbox: Sandbox, name: str, expected: str) -> None:
    report = check_env((BROKEN / name).read_text(), sandbox, seed=99, filename=name)
    assert not report.ok
    assert _fatal_codes(report)[0] == expected, [str(f) for f in report.findings]
    assert sandbox.live_instances() == 0


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_rejection_does_not_depend_on_the_probe_seed(seed: int) -> None:
    with InProcessSandbox() as box:
        for name, expected in SAFE_CASES:
            report = check_env((BROKEN / name).read_text(), box, seed=seed)
            assert _fatal_codes(report)[:1] == [expected], (name, [str(f) for f in report.findings])


# -- environments that must pass ------------------------------------------------------------------------


@pytest.mark.parametrize("name", envs.names())
def test_seed_environment_passes(runner: EnvRunner, name: str) -> None:
    report = check_env(envs.spec(name).source(), runner, seed=2024, filename=name)
    assert report.ok, [str(f) for f in report.findings]
    assert report.stats["solution_win_rate"] == 1.0
    assert not [f for f in report.findings if f.severity == "warning"], [str(f) for f in report.findings]


@pytest.mark.parametrize("name", FIXTURE_FILES)
def test_official_format_fixture_passes(runner: EnvRunner, name: str) -> None:
    report = check_env((FIXTURES / name).read_text(), runner, seed=7, filename=name)
    assert report.ok, [str(f) for f in report.findings]
    assert report.official_format
    assert report.stats["solution_win_rate"] == 1.0
    # they seed the global RNG in reset, as the official prompts ask: accepted, with a warning
    assert FindingCode.GLOBAL_RNG in report.codes


# -- extraction ----------------------------------------------------------------------------------------------

CODE = "from spade.env import TextEnv\n\n\nclass AEnv(TextEnv):\n    pass\n"


def test_extract_takes_the_last_python_block_that_defines_a_class() -> None:
    usage = "Usage:\n```python\nenv = AEnv()\n```"
    reply = f"Plan.\n```python\nx = 1\n```\nHere it is:\n```python\n{CODE}```\n{usage}"
    assert extract_code(reply) == CODE


def test_extract_ignores_code_inside_reasoning() -> None:
    reply = "<think>\n```python\nclass DraftEnv: pass\n```\n</think>\nFinal:\n```py\n" + CODE + "```"
    assert extract_code(reply) == CODE
    assert extract_code("<think>```python\nclass DraftEnv: pass\n```") is None  # never closed: all reasoning


def test_extract_keeps_a_truncated_block_and_whole_unfenced_code() -> None:
    assert extract_code("```python\nclass AEnv:\n    def reset(self") == "class AEnv:\n    def reset(self\n"
    assert extract_code(CODE) == CODE
    assert extract_code("I cannot write that.") is None
    assert extract_code("```json\n{}\n```") is None


def test_a_model_reply_is_checked_through_extraction() -> None:
    source = envs.spec("countdown").source()
    reply = f"<think>let me design</think>Sure!\n```python\n{source}```\nEnjoy."
    report = check_env(reply, InProcessSandbox(), seed=3)
    assert report.ok
    mid_line = reply.index("def solution(") + len("def solution(")  # cut off inside a statement
    cut = check_env(reply[:mid_line], InProcessSandbox(), seed=3)
    assert _fatal_codes(cut) == ["SYNTAX_ERROR"]
    assert "cut off" in cut.fatal[0].message
    assert _fatal_codes(check_env("No code today.", InProcessSandbox())) == ["NO_CODE"]


# -- static checks -------------------------------------------------------------------------------------------

NATIVE = """
import random
from spade.env import TextEnv

class GuessEnv(TextEnv):
    max_turns = 3
    def _reset(self, options):
        {draw}
        return "Guess 1-99.", {{}}
    def step(self, action):
        ok = action.strip() == str(self.secret)
        return self.end_turn("yes" if ok else "no", float(ok), terminated=True)
    def solution(self):
        return [str(self.secret)]

ENV = GuessEnv
"""


def _static_codes(source: str, **cfg: Any) -> list[tuple[str, str]]:
    report = check_env(source, InProcessSandbox(), CheckerConfig(**cfg), seed=1)
    return [(f.code.value, f.severity) for f in report.findings if f.stage == "static"]


def test_global_rng_policy() -> None:
    seeded = "random.seed(self._seed)\n        self.secret = random.randint(1, 99)"
    assert _static_codes(NATIVE.format(draw=seeded)) == [("GLOBAL_RNG", "fatal")]
    assert _static_codes(NATIVE.format(draw=seeded), strict_rng=False) == [("GLOBAL_RNG", "warning")]
    constant = "random.seed(42)\n        self.secret = random.randint(1, 99)"
    assert _static_codes(NATIVE.format(draw=constant), strict_rng=False) == [("GLOBAL_RNG", "fatal")]
    numpy = "import numpy as np\n        self.secret = int(np.random.randint(1, 99))"
    assert _static_codes(NATIVE.format(draw=numpy)) == [("GLOBAL_RNG", "fatal")]
    system = "self.secret = random.SystemRandom().randint(1, 99)"
    assert _static_codes(NATIVE.format(draw=system)) == [("UNSEEDED_RNG", "fatal")]
    assert _static_codes(NATIVE.format(draw="self.secret = self.rng.randint(1, 99)")) == []


def test_module_internals_are_forbidden_statically() -> None:
    sneaky = "self.secret = random._os.getpid()"
    assert ("FORBIDDEN_CALL", "fatal") in _static_codes(NATIVE.format(draw=sneaky))


def test_imports_follow_the_configured_allow_list() -> None:
    source = NATIVE.format(draw="import fractions\n        self.secret = fractions.Fraction(6, 2).numerator")
    assert _static_codes(source) == []
    assert _static_codes(source, allowed_imports=("random", "spade.env")) == [("FORBIDDEN_IMPORT", "fatal")]


def test_the_ladder_stops_at_the_first_fatal_rung() -> None:
    report = check_env((BROKEN / "forbidden_import.py").read_text(), InProcessSandbox(), seed=1)
    assert list(report.timings_s) == ["parse", "static"]
    assert report.stats.get("episodes") is None  # nothing ran


# -- feasibility, exploits, probes ---------------------------------------------------------------------------

NO_SOLUTION = NATIVE.format(draw="self.secret = self.rng.randint(1, 99)").replace(
    "    def solution(self):\n        return [str(self.secret)]\n", ""
)


def test_feasibility_through_a_hint_following_policy() -> None:
    box = InProcessSandbox()
    unverified = check_env(NO_SOLUTION, box, seed=4)
    assert unverified.ok
    assert FindingCode.NO_SOLUTION in unverified.codes

    def cheat(observation: str, turn: int) -> str:  # a "hint" that reveals nothing wins nothing
        return "50"

    report = check_env(NO_SOLUTION, box, seed=4, policy=cheat)
    assert _fatal_codes(report) == ["INFEASIBLE"]
    assert report.stats["policy_win_rate"] == 0.0


def test_solution_strings_become_actions() -> None:
    assert solution_actions(["a", "b"]) == (["a", "b"], True)
    assert solution_actions("\\boxed{3} then \\boxed{4}") == (["3", "4"], True)
    assert solution_actions("<answer>7</answer>") == (["<answer>7</answer>"], True)
    assert prose_actions("up, up, left") == ["up", "up", "left"]
    calls = prose_actions("1. find(name='Ada') 2. book(id=3) ANSWER: done")
    assert [json.loads(c[11:-12])["name"] for c in calls[:2]] == ["find", "book"]
    assert calls[-1] == "<answer>done</answer>"
    assert prose_actions("First think about the parity of the board and then decide what to do next.") == []


def _episode(policy: str, won: bool) -> Episode:
    last = StepRecord("x", "end", 1.0 if won else 0.0, True, False)
    return Episode(policy, 0, "start", (last,))


def _won(ep: Episode) -> bool:
    return ep.won(WinRule().success_threshold, WinRule().return_mode)


def test_random_play_that_wins_too_often_is_an_exploit() -> None:
    limits = {"won": _won, "max_success": 0.2, "min_wins": CheckerConfig().exploit_min_wins}
    groups = {"random": [_episode("random", w) for w in (True, False, False, True)], "constant": []}
    found, stats = exploit_findings(groups, **limits)
    assert [f.code for f in found] == [FindingCode.EXPLOITABLE_RANDOM]
    assert stats["random_win_rate"] == 0.5
    groups["random"] = [_episode("random", w) for w in (True, False, False, False, False, False)]
    assert exploit_findings(groups, **limits)[0] == []


def test_one_lucky_win_is_replayed_before_it_counts() -> None:
    limits = {"won": _won, "max_success": 0.2, "min_wins": 2}
    groups = {"constant": [_episode("constant '7'", w) for w in (True, False, False)]}
    assert exploit_findings(groups, **limits)[0] == []  # one win is not evidence yet
    assert [(g, e.policy) for g, e in unconfirmed(groups, **limits)] == [("constant", "constant '7'")]
    groups["constant"] += [_episode("constant '7'", w) for w in (True, False, False)]
    assert [f.code for f in exploit_findings(groups, **limits)[0]] == [FindingCode.EXPLOITABLE_CONSTANT]
    assert unconfirmed(groups, **limits) == []


def test_a_script_that_wins_other_seeds_is_a_memorisation_warning() -> None:
    groups = {"replay": [_episode("replay", True), _episode("replay", True)]}
    cfg = CheckerConfig()
    limits = {"won": _won, "max_success": cfg.exploit_max_success, "min_wins": cfg.exploit_min_wins}
    found, _ = exploit_findings(groups, **limits)
    assert [(f.code, f.severity) for f in found] == [(FindingCode.FIXED_SOLUTION, "warning")]
    groups["replay"][1] = _episode("replay", False)
    assert exploit_findings(groups, **limits)[0] == []


def test_probe_actions_are_randomised_per_seed() -> None:
    obs = "Numbers: 3 7 12. Target 22. Move with \\boxed{a + b}."
    one, same, two = (
        RandomActions(random.Random(1)),
        RandomActions(random.Random(1)),
        RandomActions(random.Random(2)),
    )
    first, again, other = ([p(obs, t) for t in range(30)] for p in (one, same, two))
    assert first == again
    assert first != other
    assert len(set(first)) > 10


class RecordingRunner(InProcessSandbox):
    """In-process runner that records every (seed, action) the checker sends."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[str, object]] = []

    def open(self, source: str, *, filename: str = "<env>", max_turns: int | None = None) -> Any:
        instance = super().open(source, filename=filename, max_turns=max_turns)
        reset, step = instance.reset, instance.step
        instance.reset = lambda seed=None, options=None: (
            self.sent.append(("reset", seed)),
            reset(seed, options),
        )[1]  # type: ignore[method-assign]
        instance.step = lambda action: (self.sent.append(("step", action)), step(action))[1]  # type: ignore[method-assign]
        return instance


def test_same_seed_same_probes_other_seed_other_probes() -> None:
    source = envs.spec("sequences").source()
    runs = {}
    for key, seed in (("a", 11), ("b", 11), ("c", 12)):
        runner = RecordingRunner()
        report = check_env(source, runner, seed=seed)
        runs[key] = (report.findings, report.stats, runner.sent)
    assert runs["a"] == runs["b"]
    assert runs["a"][2] != runs["c"][2]
    seeds = [v for k, v in runs["a"][2] if k == "reset"]
    assert len(set(seeds)) > len(seeds) // 2  # environment seeds are drawn, not a fixed list


# -- reports and the command ---------------------------------------------------------------------------------


def test_report_round_trips_through_json() -> None:
    report = check_env((BROKEN / "step_crash.py").read_text(), InProcessSandbox(), seed=8)
    again = CheckReport.from_json(report.to_json())
    assert again == report
    assert again.fatal[0].code is FindingCode.STEP_CRASH
    assert "Fix:" in again.fatal[0].message


def test_check_files_exit_codes_and_output(
    sandbox: Sandbox, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = envs.spec("knapsack").source_path
    assert good is not None
    assert check_files([good], jobs=1, as_json=False, seed=1, runner=sandbox) == 0
    assert capsys.readouterr().out.startswith("PASS ")
    bad = BROKEN / "no_termination.py"
    assert check_files([good, bad], jobs=2, as_json=True, seed=1, runner=sandbox) == 1
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["report"]["ok"] for line in lines] == [True, False]
    assert lines[1]["report"]["findings"][0]["code"] == "NO_TERMINATION"
    assert check_files([tmp_path / "missing.py"], runner=sandbox) == 2


def test_spade_check_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    from spade.cli.app import main  # noqa: PLC0415 - the CLI module is only needed here

    path = BROKEN / "missing_step.py"
    assert main(["check", "--seed", "3", str(path)]) == 1
    assert "MISSING_METHOD" in capsys.readouterr().out
    assert main(["check"]) == 2


def test_spade_check_judges_the_level_asked_for(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from spade.cli.app import main  # noqa: PLC0415 - the CLI module is only needed here

    path = tmp_path / "lock.py"
    path.write_text(GUESSABLE_LOCK)
    assert main(["check", "--seed", "3", str(path)]) == 0
    assert main(["check", "--seed", "3", "--difficulty", "0", str(path)]) == 1
    out = capsys.readouterr().out
    assert "EXPLOITABLE_RANDOM" in out
    assert "guess_win_rate=" in out


# -- prose solutions of official tool environments -----------------------------------------------------------

PROSE = (FIXTURES / "tool_review_prose.py").read_text()
_PROSE_SOLUTION = (
    '"create_event(review, day, hour); invite(review, dana); set_reminder(review, lead); answer done"'
)


def _with_solution(solution: str) -> str:
    assert _PROSE_SOLUTION in PROSE
    return PROSE.replace(_PROSE_SOLUTION, solution)


def _call(name: str, **args: object) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


def _review_policy() -> Any:
    """Follows the instructions as they are revealed (a stand-in for the hint-following policy)."""
    title: list[str] = []

    def act(observation: str, turn: int) -> str | None:
        if m := re.search(r"Book the (.+?) on (\w+) at (\d+):00", observation):
            title[:] = [m[1]]
            return _call("create_event", title=m[1], day=m[2].lower(), hour=int(m[3]))
        if m := re.search(r"handle is ([\w.]+)\)", observation):
            return _call("invite", title=title[0], person=m[1])
        if m := re.search(r"Remind me (\d+) minutes", observation):
            return _call("set_reminder", title=title[0], minutes=int(m[1]))
        return "<answer>done</answer>" if "ALL STEPS COMPLETE" in observation else None

    return act


def test_a_prose_solution_bound_to_the_instance_is_a_warning_not_a_failure(runner: EnvRunner) -> None:
    for source in (PROSE, _with_solution(_PROSE_SOLUTION.replace("; ", '", "').join("[]"))):  # str, list
        report = check_env(source, runner, seed=3)
        assert report.ok, [str(f) for f in report.findings]
        assert FindingCode.SOLUTION_PROSE in report.codes
        assert FindingCode.SOLUTION_FAILS not in report.codes
        assert report.stats["solution_win_rate"] == 1.0


def test_an_unplayable_prose_solution_falls_back_to_other_evidence(runner: EnvRunner) -> None:
    lost = _with_solution('"invite(review, dana) first, then the rest"')  # binds, but cannot win
    alone = check_env(lost, runner, seed=3)
    assert alone.ok  # no evidence either way: NO_SOLUTION stays a warning
    assert FindingCode.SOLUTION_FAILS not in alone.codes
    assert FindingCode.NO_SOLUTION in alone.codes
    hinted = check_env(lost, runner, seed=3, policy=_review_policy())
    assert hinted.ok, [str(f) for f in hinted.findings]
    assert FindingCode.SOLUTION_PROSE in hinted.codes
    assert hinted.stats["policy_win_rate"] == 1.0
    hopeless = check_env(lost, runner, seed=3, policy=lambda observation, turn: None)
    assert not hopeless.ok
    assert FindingCode.INFEASIBLE in hopeless.codes


def test_interpret_plan_binds_names_from_the_instance() -> None:
    from spade.envs.official import PLAN_MARKER, interpret_plan  # noqa: PLC0415 - the unit under test

    with InProcessSandbox() as box, box.open(PROSE) as env:
        obs, _ = env.reset(seed=5)
        solution = env.solution()
    assert isinstance(solution, str)
    assert PLAN_MARKER in solution
    actions, explicit = solution_actions(solution)
    assert not explicit
    assert actions[-1] == "<answer>done</answer>"
    first = json.loads(actions[0].removeprefix("<tool_call>").removesuffix("</tool_call>"))
    assert first["name"] == "create_event"
    assert set(first["arguments"]) == {"title", "day", "hour"}  # positional arguments in schema order
    assert first["arguments"]["title"] in obs
    assert isinstance(first["arguments"]["hour"], int)

    class Tiny:
        def __init__(self) -> None:
            self._tools = {"move": {"parameters": {"properties": {"piece": {}, "to": {}}}}}
            self.knight = "N1"
            self._state = {"goal": "e4"}

    plan = interpret_plan(
        "move(self.knight, goal), move(rook, 'a1'), jump(x), move(a, b, c) answer: goal", Tiny()
    )
    assert plan == [
        _call("move", piece="N1", to="e4"),
        _call("move", piece="rook", to="a1"),
        "<answer>e4</answer>",
    ]


# -- the ladder's structure ----------------------------------------------------------------------------------


def test_the_stage_order_is_derived_from_the_rungs_and_evidence_is_immutable() -> None:
    import dataclasses  # noqa: PLC0415 - only this test needs it

    from spade.checker import RUNGS, STAGES, Evidence  # noqa: PLC0415 - the unit under test

    assert tuple(stage for stage, _ in RUNGS) == STAGES
    assert STAGES[0] == "parse"
    assert STAGES[-1] == "exploit"
    with pytest.raises(dataclasses.FrozenInstanceError):
        Evidence().code = "x"  # type: ignore[misc]


def test_the_checker_uses_the_win_rule_it_is_given(runner: EnvRunner) -> None:
    from spade.config import PlayConfig, WinRule  # noqa: PLC0415 - only this test needs them

    source = envs.spec(envs.names()[0]).source()  # a seed environment: solution() is an explicit script
    assert check_env(source, runner, seed=7, win=PlayConfig()).ok
    strict = check_env(source, runner, seed=7, win=WinRule(success_threshold=1.5))  # returns are clipped to 1
    assert not strict.ok
    assert FindingCode.SOLUTION_FAILS in strict.codes


def test_the_checker_plays_the_level_the_agent_plays_and_catches_guessable_answers() -> None:
    source = GUESSABLE_LOCK
    box = InProcessSandbox()
    played = check_env(source, box, seed=3, win=WinRule(difficulty=0))
    assert _fatal_codes(played) == ["EXPLOITABLE_RANDOM"]
    assert "guessing numbers in the range shown" in played.fatal[0].message
    assert played.stats["guess_win_rate"] > CheckerConfig().exploit_max_success
    assert check_env(source, box, seed=3).ok  # the default level
    assert check_env(source, box, seed=3, win=WinRule(difficulty=9)).ok  # no such level: the default


def test_number_guess_keeps_to_the_first_observations_range_and_ignores_feedback() -> None:
    policy = number_guess(random.Random(0))
    first = policy("Find a number from 3 to 9. Turns left: 5", 0)
    later = [policy("Lower: from 3-4. Turns left: 4", t) for t in range(1, 200)]
    guesses = {int(a.removeprefix("\\boxed{").removesuffix("}")) for a in [first, *later]}
    assert guesses == set(range(3, 10))
