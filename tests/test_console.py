"""The console of `spade train`: engine output kept in RUN/logs, --verbose, progress notes in silent phases."""

from __future__ import annotations

import dataclasses
import io
import subprocess
import sys
from pathlib import Path

import pytest

from scripted_run import tiny_config
from spade.cli.console import Ticker, engine_log_name
from spade.config import DesignerConfig
from spade.run.loop import train
from spade.scoring.samples import update_line

ENGINE = "INFO 12-05 16:04:39 [loader.py:42] Failed to load weights"

CHATTY = f"""
import os, sys
from spade.cli import train as train_cli
from spade.rundir import RunDir

def chatty(args, cfg, run_dir, steps, runtime, *, console):  # an engine writing from native code and Python
    run = RunDir(run_dir)
    with run.lock():
        run.create(cfg)
        os.write(1, b"{ENGINE}\\n")
        print("WARNING engine from Python", file=sys.stderr)
        print("spade: a progress line", file=console.out)
    return run

train_cli._train = chatty
train_cli._report = lambda run, mode, engine: print(engine)
sys.exit(train_cli.run_cli(sys.argv[1:]))
"""


def _train(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-c", CHATTY, "--model.backend", "scripted", "--runs-dir", str(tmp_path),
           "--name", "r", *flags]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)


def test_engine_lines_go_to_the_run_log_not_the_console(tmp_path: Path) -> None:
    out = _train(tmp_path)
    assert out.returncode == 0, out.stderr
    assert "spade: a progress line" in out.stdout
    assert "Failed to load weights" not in out.stdout + out.stderr
    assert "WARNING engine" not in out.stdout + out.stderr
    (log,) = (tmp_path / "r" / "logs").glob("engine-*.log")
    assert ENGINE in log.read_text()
    assert "WARNING engine from Python" in log.read_text()
    assert f"Engine output: {log}" in out.stdout
    assert not list(tmp_path.glob(".r.*"))  # the hidden log of the fresh run moved into it


@pytest.fixture(scope="module")
def agent_only(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """A real one-step fixed-pool run of the scripted backend (no engine, no warm start): its console."""
    runs = tmp_path_factory.mktemp("runs")
    cmd = [sys.executable, "-m", "spade.cli", "train", "--model.backend", "scripted", "--mode", "fixed_pool",
           "--steps", "1", "--runs-dir", str(runs), "--name", "fp", "--corpus.no-enabled", "--sft.episodes", "0",
           "--sft.designs", "0", "--sft.hints", "0"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr
    return out, runs / "fp"


def test_an_engine_that_writes_nothing_names_no_log(
    agent_only: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    out, run = agent_only
    assert "engine output" not in out.stdout.lower()
    assert not (run / "logs").exists()


def test_an_agent_only_step_counts_only_agent_samples_and_says_why_there_are_none(
    agent_only: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    out, _ = agent_only
    assert "] step 0: play 1 environment\n" in out.stdout
    (line,) = [ln for ln in out.stdout.splitlines() if "update" in ln]
    assert "designer" not in line
    assert line.endswith(
        "step 0: no update (0 agent samples): every environment's plays returned the same, so they hold no "
        "learning signal"
    )


def test_the_update_line_names_the_roles_a_mode_trains() -> None:
    constant = {"agent/constant_group_share": 1.0}
    assert update_line(2, 12, None, {}) == "step 2: update on 12 agent samples"
    assert update_line(2, 1, 3, {}) == "step 2: update on 1 agent + 3 designer samples"
    assert update_line(2, 0, 1, constant) == (
        "step 2: update on 0 agent + 1 designer sample (no agent sample: every environment's plays returned the "
        "same, so they hold no learning signal)"
    )
    assert update_line(2, 0, 0, {"agent/constant_group_share": 0.0}) == (
        "step 2: no update (0 agent + 0 designer samples): no play sampled a token to train on"
    )


def test_verbose_shows_the_engine_lines(tmp_path: Path) -> None:
    out = _train(tmp_path, "--verbose")
    assert out.returncode == 0, out.stderr
    assert ENGINE in out.stdout
    assert "WARNING engine from Python" in out.stderr
    assert not (tmp_path / "r" / "logs").exists()


def test_a_silent_phase_gets_plain_notes_off_a_terminal() -> None:
    now = [0.0]
    out = io.StringIO()
    ticker = Ticker(out, idle_s=5, every_s=15, clock=lambda: now[0])
    ticker.line("sft: warm start")
    for t in range(1, 101):  # 100 s of silence, ticked once a second: notes further and further apart
        now[0] = float(t)
        ticker.tick()
    ticker.line("step 0: design")
    lines = out.getvalue().splitlines()
    assert lines == [
        "[    0.0s] sft: warm start",
        "[   15.0s] sft: warm start: still going (15 s)",
        "[   45.0s] sft: warm start: still going (45 s)",
        "[  100.0s] step 0: design",
    ]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_silent_phase_on_a_terminal_is_one_line_rewritten_in_place() -> None:
    now = [0.0]
    out = _Terminal()
    ticker = Ticker(out, idle_s=5, clock=lambda: now[0])
    for t in range(1, 9):
        now[0] = float(t)
        ticker.tick()
    ticker.line("sft: warm start")
    text = out.getvalue()
    assert text.count("\n") == 1  # the notes never end a line
    assert "\r\033[K[    8.0s] setting up the run and starting the model: still going (8 s)" in text
    assert text.endswith("\r\033[K[    8.0s] sft: warm start\n")


def test_the_design_phase_says_as_it_goes_what_it_checks_and_retries(tmp_path: Path) -> None:
    """Between the regeneration's line and the play line the design phase names its parts with their counts:
    the checks of each attempt (how many replies held no code), the retried slots, what was accepted."""
    cfg = dataclasses.replace(tiny_config(tmp_path, "designs", steps=1), designer=DesignerConfig(
        envs_per_regen=3, regen_interval=1, skills_per_regen=2, max_tokens=4096, attempts=2))  # fmt: skip
    lines: list[str] = []
    row = train(cfg, progress=lines.append).read_metrics()[0]
    start = lines.index("step 0: design environments")
    end = next(i for i, line in enumerate(lines) if line.startswith("step 0: play "))
    phase = lines[start + 1 : end]
    made, accepted = round(row["designer/envs"]), round(row["designer/valid_rate"] * row["designer/envs"])
    assert phase[0].startswith("step 0: check 3 designs (")
    assert phase[-1].startswith(f"step 0: {accepted} of {made} designs accepted")
    retried = made - 3  # the mixed scripted designer writes broken and hostile sources: some slots go again
    assert retried > 0
    assert phase[1] == f"step 0: design {retried} rejected slot{'s' if retried > 1 else ''} again (2 of 2)"
    assert phase[2].startswith(f"step 0: check {retried} design")
    assert len(phase) == 4


def test_each_rank_of_a_launch_logs_to_its_own_engine_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both ranks of `accelerate launch` move their log into the same run in the same second: rank 1's must
    not replace rank 0's."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    leader = engine_log_name(0.0)
    monkeypatch.setenv("RANK", "1")
    follower = engine_log_name(0.0)
    assert leader.startswith("engine-")
    assert leader.endswith(".log")
    assert "rank" not in leader
    assert follower == leader.removesuffix(".log") + "-rank1.log"
