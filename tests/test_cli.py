"""The `spade` command line, driven through subprocesses as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spade import envs

FIXTURES = Path(__file__).parents[1] / "src" / "spade" / "envs" / "official_fixtures"


def spade(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spade.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_envs_lists_every_seed_environment_with_its_skill() -> None:
    out = spade("envs")
    assert out.returncode == 0
    for name in envs.names():
        line = next(ln for ln in out.stdout.splitlines() if ln.startswith(name + " "))
        assert envs.spec(name).skill in line


def test_help_and_unknown_command() -> None:
    assert spade("--help").returncode == 0
    bad = spade("frobnicate")
    assert bad.returncode == 2
    assert "unknown command" in bad.stderr


@pytest.mark.parametrize("name", ["sokoban", "release_pipeline"])
def test_scripted_solver_wins_and_prints_the_transcript(name: str) -> None:
    out = spade("play", name, "--solver", "scripted", "--seed", "4")
    assert out.returncode == 0, out.stderr
    assert "--- turn 1 ---" in out.stdout
    assert "Result: won" in out.stdout


def test_human_session_with_invalid_input_then_winning_moves() -> None:
    env = envs.make("countdown")
    env.reset(seed=5)
    moves = env.solution()
    assert isinstance(moves, list)
    script = "\n".join(["", "/bogus", "/call", "/help", "/tools", *moves]) + "\n"
    out = spade("play", "countdown", "--seed", "5", stdin=script)
    assert out.returncode == 0, out.stderr
    assert "Empty input" in out.stdout
    assert "Unknown or incomplete command '/bogus'" in out.stdout
    assert "Unknown or incomplete command '/call'" in out.stdout
    assert "This environment has no tools." in out.stdout
    assert "Result: won" in out.stdout


def test_arrow_keys_and_tool_calls_in_a_game_are_refused_without_costing_a_turn() -> None:
    script = (
        "\x1b[D\n\x1b[A\x1b[A\n/call move {}\n/quit\n"  # left, up up: what arrow keys type without readline
    )
    out = spade("play", "sokoban", "--seed", "1", "--max-turns", "3", stdin=script)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("holds terminal control codes (an arrow key?) and was not sent") == 2
    assert "This game has no tools: /call is for tool-use environments" in out.stdout
    assert "--- turn 1 ---" not in out.stdout  # nothing was sent as a move
    assert "Stopped." in out.stdout


def _in_a_terminal(args: list[str], keys: bytes) -> str:
    """Run ``spade ARGS`` on a pseudo-terminal, type ``keys`` at its first prompt, return all it printed."""
    import pty  # noqa: PLC0415 - POSIX only
    import select  # noqa: PLC0415

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "spade.cli", *args], stdin=slave, stdout=slave, stderr=slave
    )
    os.close(slave)
    out, typed = b"", False
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 120)
            chunk = os.read(master, 4096) if ready else b""  # nothing for 2 minutes: give up
            if not chunk:
                break
            out += chunk
            if not typed and out.rstrip().endswith(b">"):
                os.write(master, keys)
                typed = True
    except OSError:  # the session ended: Linux reports the closed terminal as EIO
        pass
    finally:
        os.close(master)
        proc.kill()
        proc.wait()
    return out.decode(errors="replace")


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
def test_a_terminal_session_edits_lines_so_arrow_keys_move_the_cursor() -> None:
    # ← then /quit: with line editing the arrow moves the cursor and the line is /quit; without it the line
    # starts with an escape sequence, is refused, and the second /quit ends the session
    out = _in_a_terminal(["play", "sokoban", "--seed", "1"], b"\x1b[D/quit\r/quit\r")
    assert "Stopped." in out
    assert "control codes" not in out


def test_human_session_ends_cleanly_on_end_of_input_and_quit() -> None:
    eof = spade("play", "sequences", "--seed", "1", stdin="not a term\n")
    assert eof.returncode == 0
    assert "Stopped." in eof.stdout
    quit_ = spade("play", "knapsack", "--seed", "1", stdin="/quit\n")
    assert quit_.returncode == 0
    assert "Stopped." in quit_.stdout


def test_tool_commands_in_a_human_session() -> None:
    script = '/tools\n/call list_commits {not json\n/call list_commits {"limit": 3}\n/answer nothing\n'
    out = spade("play", "release_pipeline", "--seed", "2", stdin=script)
    assert out.returncode == 0, out.stderr
    assert "Tools: " in out.stdout
    assert "Arguments must be a JSON object" in out.stdout
    assert "Episode ended after 2 turns: the environment ended it (a win or a loss)." in out.stdout


def test_answer_in_a_game_is_refused_without_spending_a_turn() -> None:
    out = spade("play", "countdown", "--seed", "5", stdin="/answer 7\n/quit\n")
    assert out.returncode == 0, out.stderr
    assert (
        "This game has no tools: /answer is for tool-use environments; type your action instead."
        in out.stdout
    )
    assert "--- turn 1 ---" not in out.stdout  # nothing was sent: the game still stands at turn 0
    assert "reward" not in out.stdout


def test_files_play_in_the_sandbox_native_and_official() -> None:
    native = envs.spec("seating").source_path
    assert native is not None
    for path in (native, FIXTURES / "game_calculator_target.py", FIXTURES / "tool_calendar_multiturn.py"):
        out = spade("play", str(path), "--solver", "scripted", "--seed", "3")
        assert out.returncode == 0, out.stderr
        assert "Result: won" in out.stdout, path


def test_hostile_file_is_contained(tmp_path: Path) -> None:
    bad = tmp_path / "loop.py"
    bad.write_text(
        "from spade.env import TextEnv\n\nclass LoopEnv(TextEnv):\n    def _reset(self, options):\n"
        "        while True:\n            pass\n\nENV = LoopEnv\n"
    )
    out = spade("play", str(bad), "--solver", "scripted")
    assert out.returncode == 1
    assert "timeout" in out.stderr


def test_a_binary_file_is_named_as_not_text_python(tmp_path: Path) -> None:
    image = tmp_path / "board.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    out = spade("play", str(image), "--solver", "scripted")
    assert out.returncode == 2
    assert (
        out.stderr
        == f"spade play: {image} is not a text Python file (it is not UTF-8 text); give an environment's .py file\n"
    )


def test_missing_environment_is_a_clear_error() -> None:
    out = spade("play", "no_such_env")
    assert out.returncode == 2
    assert "neither a registered environment nor a file" in out.stderr
