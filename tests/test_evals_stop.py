"""Stopping `spade eval` as a user does (Ctrl-C, SIGTERM), and what reaches the terminal while it runs.

Each stop test drives the real command in a subprocess and sends the signal at a line it prints. The fast
cases use the scripted backend and the scripted solver; the real-model case (the one that used to generate on
for minutes) runs the hf backend on the embedded model. A test waits for the exit with a generous timeout (a
hang guard) and never asserts how fast the stop was.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from line_stream import lines as stream_lines
from spade.config import EvalOptions
from spade.evals import report
from spade.evals.runner import SuiteReport
from spade.evals.stats import summarise


def _stop_at(
    cmd: list[str], marker: str, *, grace: str, signals: tuple[signal.Signals, ...] = (signal.SIGINT,)
) -> tuple[int, str]:
    """Run ``cmd``, send ``signals`` (one after the other, each once the last one's "stopping" line is out)
    as soon as stderr holds a line with ``marker``; the exit code and all of stderr."""
    env = {**os.environ, "SPADE_STOP_GRACE_S": grace}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    errors, seen = stream_lines(proc.stderr), []
    try:
        while marker not in (line := errors.get(timeout=600)):
            seen.append(line)
            if not line:
                pytest.fail(f"no line with {marker!r}: {''.join(seen)}")
        seen.append(line)
        for k, sig in enumerate(signals):
            if k:
                while "stopping" not in (line := errors.get(timeout=120)):
                    seen.append(line)
                seen.append(line)
            proc.send_signal(sig)
        code = proc.wait(timeout=300)  # a hang guard only
    finally:
        proc.kill()
    rest = "".join(iter(lambda: errors.get(timeout=60), ""))
    return code, "".join(seen) + rest


EVAL = [sys.executable, "-m", "spade.cli", "eval"]
MANY = ["envs", "--tasks", "variants:combination_lock", "--episodes", "400", "--solver"]
"""10,400 scripted-solution episodes: minutes of sandboxed play, so the signal lands in the middle."""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_eval_cleanly_says_nothing_was_written_and_exits_128_plus_signal(
    tmp_path: Path, sig: signal.Signals
) -> None:
    out = tmp_path / "r"
    code, err = _stop_at([*EVAL, *MANY, "--out", str(out)], "26 items", grace="600", signals=(sig,))
    assert code == 128 + sig, err
    assert f"spade eval: stopped by {sig.name}; nothing was written" in err
    assert "ending now" not in err  # stopped by itself, not by the watchdog
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []  # no engine log left beside it either


STUCK_LOAD = """
import os, sys, time
from spade.evals import runner

terminal = os.fdopen(os.dup(2), "w")  # the engine's output is redirected: say it on the real stderr

def load(source, concurrency, **options):  # a model load: one long call that no stop request reaches
    print("loading the model", file=terminal, flush=True)
    while True:
        time.sleep(0.05)

runner.load_policy = load
from spade.cli.eval import run_eval
sys.exit(run_eval(sys.argv[1:]))
"""


def test_a_stop_while_the_model_loads_ends_the_process_after_the_grace_period(tmp_path: Path) -> None:
    """Work no stop request reaches (a model load is one long call): the watchdog ends it."""
    cmd = [sys.executable, "-c", STUCK_LOAD, "math:chain_sum", "--limit", "1", "--out", str(tmp_path / "r")]
    code, err = _stop_at(cmd, "loading the model", grace="0.5")
    assert code == 130, err
    assert "still busy 0.5 s after SIGINT: ending now. Nothing was written." in err
    assert list(tmp_path.iterdir()) == []  # the unfinished engine log is dropped too


def test_a_second_ctrl_c_ends_eval_at_once(tmp_path: Path) -> None:
    cmd = [sys.executable, "-c", STUCK_LOAD, "math:chain_sum", "--limit", "1", "--out", str(tmp_path / "r")]
    code, err = _stop_at(cmd, "loading the model", grace="600", signals=(signal.SIGINT, signal.SIGINT))
    assert code == 130, err
    assert "SIGINT again: ending now. Nothing was written." in err


@pytest.mark.slow
def test_ctrl_c_stops_eval_on_the_real_hf_backend_while_it_generates(tmp_path: Path) -> None:
    """The case that generated on for minutes after Ctrl-C: generation runs in worker threads."""
    cmd = [*EVAL, "math:chain_sum", "--limit", "4", "--max-tokens", "512", "--model.backend", "hf",
           "--model.threads", "1", "--out", str(tmp_path / "r")]  # fmt: skip
    code, err = _stop_at(cmd, "rough estimate", grace="600")  # the probe ran: the suite generates now
    assert code == 130, err
    assert "spade eval: stopped by SIGINT; nothing was written" in err
    assert "ending now" not in err
    assert list(tmp_path.iterdir()) == []


# -- what reaches the terminal ------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_engine_output_goes_to_a_log_and_stdout_holds_the_results_only(tmp_path: Path) -> None:
    """The hf backend's loading bar and generation-flag warnings go to <out>/engine.log (--verbose shows
    them); stdout holds the results (--json: one line per suite, nothing stray)."""
    out = tmp_path / "r"
    cmd = [*EVAL, "math:chain_sum", "--limit", "1", "--max-tokens", "8", "--model.backend", "hf",
           "--model.threads", "1", "--json", "--out", str(out)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    assert json.loads(line)["suite"] == "math"
    spade_lines = ("math: ", "results: ", "engine output: ")
    assert [ln for ln in done.stderr.splitlines() if not ln.startswith(spade_lines)] == []
    assert (out / "engine.log").is_file()
    assert f"engine output: {out / 'engine.log'} (--verbose shows it here)" in done.stderr


@pytest.mark.parametrize("verbose", [[], ["--verbose"]])
def test_stdout_holds_the_results_only_with_or_without_verbose(tmp_path: Path, verbose: list[str]) -> None:
    """Reasoning-Gym's bf generator prints a "." per item it builds: those went to stdout, before the JSON."""
    cmd = [*EVAL, "reasoning_gym:bf", "--limit", "2", "--model.backend", "scripted", "--json", *verbose,
           "--out", str(tmp_path / "r")]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    assert json.loads(line)["suite"] == "reasoning_gym"


def test_the_envs_footer_shows_the_turn_budget_the_environments_were_played_with() -> None:
    def footer(opts: EvalOptions) -> str:
        return report.footer([SuiteReport("envs", opts, summarise("envs", []), [], 1.0, 0.5)])

    assert "max_turns 25 (or the environment's own limit)" in footer(EvalOptions())  # not --max-turns' 2
    assert "max_turns 7 (or the environment's own limit)" in footer(EvalOptions(params={"max_turns": 7}))
    math = report.footer([SuiteReport("math", EvalOptions(), summarise("math", []), [], 1.0, 0.5)])
    assert "max_turns 2," in math  # a Q&A item's tries


def test_spade_help_lists_every_eval_suite() -> None:
    from spade.cli.app import USAGE  # noqa: PLC0415
    from spade.evals.registry import SUITES  # noqa: PLC0415

    (line,) = [ln for ln in USAGE.splitlines() if ln.strip().startswith("eval ")]
    assert all(name in line for name in SUITES), line


def test_eval_results_are_ignored_by_git() -> None:
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        pytest.skip("not a git checkout")
    check = subprocess.run(
        ["git", "-C", str(root), "check-ignore", "-q", "eval-results/20260101-000000/summary.json"],
        check=False,
    )
    assert check.returncode == 0


def test_an_engine_log_removed_while_the_evaluation_runs_is_no_crash(tmp_path: Path) -> None:
    """Two evaluations started in the same second in one folder share a results name; each keeps its own
    engine log (named with its process id), and a log that vanished leaves nothing to place."""
    from spade.cli.engine_log import engine_output  # noqa: PLC0415

    out = tmp_path / "eval-results" / "20261207-024520"
    with engine_output(out, verbose=False) as console:
        logs = list(out.parent.glob(f".{out.name}.*.engine.log"))
        assert [p.name for p in logs] == [f".{out.name}.{os.getpid()}.engine.log"]
        logs[0].unlink()
    assert console.log is None
