"""Operating a run through `spade train` as a user would: stop, fail, refuse, resume, extend.

Each test drives the real command in a subprocess. The signal tests use the real hf backend (the case that
used to hang: generation runs in worker threads); the others use the scripted backend, which exercises the
same run-directory and CLI code in seconds.
"""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from line_stream import lines as stream_lines
from spade.backends.openai_server import ModelServerDownError, OpenAIPolicy
from spade.backends.vllm_server import free_port
from spade.rundir import RunDir
from spade.types import SamplingParams

SCRIPTED = [
    "--model.backend", "scripted", "--steps", "2", "--play.action-mode", "boxed", "--play.max-turns", "6",
    "--play.turn-tokens", "256", "--play.context-tokens", "16384", "--designer.envs-per-regen", "2",
    "--designer.regen-interval", "2", "--designer.max-tokens", "4096", "--rollout.plays-per-env", "2",
    "--rollout.hint-plays-per-env", "2", "--reward.variant", "regret", "--checker.probe-episodes", "2",
    "--checker.exploit-episodes", "2", "--corpus.no-enabled",
]  # fmt: skip


def spade(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "spade.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    return lines[0]


# -- 1. SIGINT / SIGTERM stop a real-model run within seconds, resumably ------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_stops_a_real_model_run_cleanly_and_names_the_resume_command(
    tmp_path: Path, sig: signal.Signals
) -> None:
    cmd = [sys.executable, "-m", "spade.cli", "train", "--preset", "cpu-tiny", "--runs-dir", str(tmp_path),
           "--name", "sig", "--designer.max-tokens", "4000", "--model.max-context", "8192",
           "--model.backend", "hf", "--sft.episodes", "0", "--sft.designs", "0", "--sft.hints", "0"]  # fmt: skip
    # A long grace period: the process must stop by itself, not by the watchdog that ends it after grace_s.
    env = {**os.environ, "SPADE_STOP_GRACE_S": "600"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        lines = stream_lines(proc.stdout)
        while "step 0: design" not in lines.get(timeout=300):
            pass
        time.sleep(1.0)  # well inside generation of a 4000-token design
        proc.send_signal(sig)
        code = proc.wait(timeout=120)  # a hang guard: the old code generated on for minutes
    finally:
        proc.kill()
    err = proc.stderr.read() if proc.stderr else ""
    assert code == 128 + sig, err
    assert f"stopped by {sig.name}" in err
    assert "ending now" not in err  # stopped cleanly, not by the watchdog
    assert f"continue with: spade train --resume {tmp_path / 'sig'}" in err
    run = RunDir(tmp_path / "sig")
    assert run.load_config().name == "sig"  # resumable: config kept, no lock held
    assert run.resume_point().step == 0
    with run.lock():
        pass


REAL_TINY = [
    "--preset", "cpu-tiny", "--model.backend", "hf", "--mode", "fixed_pool", "--steps", "1",
    "--reward.no-drop-constant-groups", "--sft.designs", "0", "--sft.hints", "0", "--sft.hinted-episodes", "0",
]  # fmt: skip


def _interrupt_at(cmd: list[str], marker: str, env: dict[str, str]) -> tuple[int, str]:
    """Run ``cmd``, send SIGINT as soon as it prints a line holding ``marker``; the exit code and stderr."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        lines = stream_lines(proc.stdout)
        while marker not in (line := lines.get(timeout=600)):
            if not line:  # the run ended first
                pytest.fail(f"no line with {marker!r}: {proc.stderr.read() if proc.stderr else ''}")
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=120)  # a hang guard only
    finally:
        proc.kill()
    return code, proc.stderr.read() if proc.stderr else ""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("phase", "flags", "marker"),
    [
        (
            "warm start",
            [
                "--sft.episodes",
                "4",
                "--sft.batch",
                "1",
                "--rollout.plays-per-env",
                "2",
            ],
            "sft: training on",
        ),
        (
            "update",
            [
                "--sft.episodes",
                "0",
                "--rollout.plays-per-env",
                "8",
                "--rollout.no-fill-batch",
                "--play.max-turns",
                "3",
            ],
            "step 0: update on 8 agent",
        ),
    ],
)
def test_ctrl_c_in_the_synchronous_torch_work_stops_the_run_and_records_a_stop(
    tmp_path: Path, phase: str, flags: list[str], marker: str
) -> None:
    """The warm start's steps and the update hold the event loop (seconds of torch work per micro-batch):
    the trainer checks the flag itself, so the run stops at once, long before the watchdog would end it."""
    from spade.cli.runs import run_info  # noqa: PLC0415

    cmd = [sys.executable, "-m", "spade.cli", "train", *REAL_TINY, *flags, "--runs-dir", str(tmp_path),
           "--name", "stop"]  # fmt: skip
    env = {**os.environ, "SPADE_STOP_GRACE_S": "10"}  # the default, named: what the stop must beat
    code, err = _interrupt_at(cmd, marker, env)
    assert code == 130, err
    assert "ending now" not in err, f"{phase}: ended by the watchdog, not by the stop request"
    assert f"no step finished yet; continue with: spade train --resume {tmp_path / 'stop'}" in err
    assert run_info(tmp_path / "stop").status == "stopped"
    resumed = spade("train", "--resume", str(tmp_path / "stop"), timeout=1800)  # a hang guard: ~4 min quiet
    assert resumed.returncode == 0, resumed.stderr
    assert run_info(tmp_path / "stop").status == "finished"


@pytest.mark.slow
def test_ctrl_c_while_the_model_loads_stops_before_the_next_start_up_stage(
    tmp_path: Path, tiny_dir: Path
) -> None:
    """The start-up stages (threads, model, trainer, archive, warm start) hold the event loop, so a stop
    request reaches no cancellation there: the run checks it after each stage and goes no further."""
    cmd = [sys.executable, "-m", "spade.cli", "train", *REAL_TINY, "--sft.episodes", "6", "--model.model",
           str(tiny_dir), "--runs-dir", str(tmp_path), "--name", "load"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "SPADE_STOP_GRACE_S": "600"})  # fmt: skip
    try:
        while not (tmp_path / "load" / "config.json").exists():  # the run exists: its model starts now
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=300)  # a hang guard only
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "SIGINT: stopping" in err
    assert "ending now" not in err  # it stopped by itself, not by the watchdog
    assert "sft:" not in out, out  # no later stage started
    assert "step 0" not in out, out
    assert "stopped by SIGINT before the run started; nothing was kept" in err
    assert not (tmp_path / "load").exists()


STUCK = """
import sys, time
from spade.cli import train as train_cli
from spade.rundir import RunDir

def stuck(args, cfg, run_dir, steps, runtime, *, console):  # work no stop request reaches (a long C call)
    run = RunDir(run_dir)
    with run.lock():
        run.create(cfg)
        print("running", file=console.out, flush=True)
        while True:
            time.sleep(0.05)

train_cli._train = stuck
sys.exit(train_cli.run_cli(sys.argv[1:]))
"""


@pytest.mark.parametrize("how", ["watchdog", "second signal"])
def test_a_run_ended_by_force_after_ctrl_c_is_recorded_as_stopped(tmp_path: Path, how: str) -> None:
    """The watchdog (or a second Ctrl-C) ends the process without unwinding; the run was still stopped on
    request and resumes from its last checkpoint, so `spade runs` must not call it failed."""
    from spade.cli.runs import run_info  # noqa: PLC0415

    grace = "0.5" if how == "watchdog" else "600"
    cmd = [sys.executable, "-c", STUCK, *SCRIPTED, "--runs-dir", str(tmp_path), "--name", "stuck"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "SPADE_STOP_GRACE_S": grace})  # fmt: skip
    lines, errors = stream_lines(proc.stdout), stream_lines(proc.stderr)
    try:
        while "running" not in lines.get(timeout=120):
            pass
        proc.send_signal(signal.SIGINT)
        if how == "second signal":
            while "SIGINT: stopping" not in errors.get(timeout=120):
                pass
            proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=120)
    finally:
        proc.kill()
    err = "".join(iter(lambda: errors.get(timeout=60), ""))
    assert code == 130, err
    assert ("still busy 0.5 s after SIGINT" if how == "watchdog" else "SIGINT again: ending now") in err
    assert run_info(tmp_path / "stuck").status == "stopped"
    with RunDir(tmp_path / "stuck").lock() as note:
        assert note == ""  # nothing stale was taken over


# -- 2. a dead model server is refused at start; an outage mid-run stops the run ---------------------------


BUSY_STREAM = """
import io, sys
from spade.stopping import exit_now

class Busy(io.TextIOWrapper):
    def write(self, text):  # as a buffer whose write a signal handler interrupted
        raise RuntimeError("reentrant call inside <_io.BufferedWriter name=2>")

exit_now(130, "SIGINT again: ending now.", console=Busy(open(2, "wb", closefd=False)))
"""


def test_the_forced_exit_message_gets_out_when_a_signal_interrupted_a_write_to_the_console() -> None:
    """A second Ctrl-C can arrive while the first one's line is being written: the stream refuses the
    reentrant write, so the message goes straight to the file and the exit code stays the signal's."""
    done = subprocess.run(
        [sys.executable, "-c", BUSY_STREAM], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr == "SIGINT again: ending now.\n"


def test_dead_server_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    out = spade("train", "--model.backend", "openai", "--model.openai.base-urls", url, "--steps", "1",
                "--runs-dir", str(tmp_path), "--name", "dead")  # fmt: skip
    assert out.returncode == 2
    assert f"no model server answers at {url}" in one_line(out.stderr)
    assert not (tmp_path / "dead").exists()


@contextmanager
def standin(mode: str, arg: float) -> Iterator[str]:
    port = free_port()
    script = Path(__file__).with_name("openai_standin.py")
    process = subprocess.Popen([sys.executable, str(script), str(port), mode, str(arg)])
    try:
        for _ in range(400):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.kill()
        process.wait(10)


@pytest.mark.timeout(120)
def test_server_dying_mid_run_is_an_outage_not_error_completions() -> None:
    params = SamplingParams(max_tokens=4, seed=0)
    with standin("die", 2) as url:
        policy = OpenAIPolicy(url, model="m", timeout_s=2.0, retries=1, backoff_s=0.05, backoff_max_s=0.2,
                              outage_s=1.5)  # fmt: skip

        async def run() -> None:
            ok = await policy.sample([[1, 2], [3, 4]], params)  # the server answers two requests
            assert [c.finish_reason for c in ok] == ["stop", "stop"]
            with pytest.raises(ModelServerDownError, match=r"failed every request for 1\.5 s"):
                await policy.sample([[5, 6]], params)  # then dies: retried for outage_s, then raised
            await policy.aclose()

        asyncio.run(run())


# -- 3. setup errors: one line, before any run directory exists ----------------------------------------------


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--corpus.enabled", "--corpus.path", "/nonexistent/corpus.jsonl"], "corpus path /nonexistent"),
        (["--mode", "fixed_pool", "--pool", "/nonexistent/pool"], "pool folder /nonexistent/pool"),
        (["--model.backend", "hf", "--model.model", "/nonexistent/model"], "--model.model: cannot resolve"),
    ],
)
def test_bad_paths_are_one_line_and_leave_no_run(tmp_path: Path, flags: list[str], message: str) -> None:
    out = spade("train", *SCRIPTED, *flags, "--runs-dir", str(tmp_path), "--name", "bad")
    assert out.returncode == 2
    assert message in one_line(out.stderr)
    assert not (tmp_path / "bad").exists()


def test_runs_dir_that_is_a_file_or_read_only(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    out = spade("train", *SCRIPTED, "--runs-dir", str(tmp_path / "file"))
    assert out.returncode == 2
    assert "is a file, not a folder" in one_line(out.stderr)
    if os.geteuid() == 0:
        return  # root writes anywhere
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o555)
    out = spade("train", *SCRIPTED, "--runs-dir", str(ro / "runs"))
    assert out.returncode == 2
    assert "cannot write in" in one_line(out.stderr)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_runs_dir_where_no_folder_can_be_made_is_not_worth_a_retry(tmp_path: Path) -> None:
    """/proc: a non-root user is refused by the preflight; root passes it (root may write anywhere) and
    meets the error when the run directory is made. Either way the message says what to change."""
    out = spade("train", *SCRIPTED, "--runs-dir", "/proc/spade-runs")
    assert out.returncode == 2
    line = one_line(out.stderr)
    assert "run the same command again" not in line
    assert (
        "writable --runs-dir" in line
        or "would fail again, no folder can be made there: choose another --runs-dir" in line
    )
    assert not Path("/proc/spade-runs").exists()


@pytest.mark.parametrize(
    ("code", "why"),
    [
        (errno.EROFS, "the file system is read-only: choose another --runs-dir"),
        (errno.EACCES, "this user may not write there: choose another --runs-dir"),
        (errno.ENOTDIR, "part of the path is a file, not a folder: choose another --runs-dir"),
    ],
)
def test_file_system_errors_that_a_retry_meets_again_say_what_to_change(
    tmp_path: Path, code: int, why: str
) -> None:
    from spade.cli.train import _failure  # noqa: PLC0415

    run_dir = tmp_path / "runs" / "r"
    exc = OSError(code, os.strerror(code), str(run_dir / "memory.sqlite"))
    status, after = _failure(exc, run_dir)
    assert status == 2
    assert (
        f"nothing was kept. The same command would fail again, {why} (now {run_dir.parent}) or --name"
        in after
    )
    elsewhere = OSError(
        code, os.strerror(code), str(tmp_path / "model" / "config.json")
    )  # not the run's path
    assert _failure(elsewhere, run_dir) == (
        1,
        " before the run started; nothing was kept: run the same command again",
    )
    assert _failure(ConnectionResetError("peer"), run_dir)[0] == 1  # may pass: a retry is the advice


def test_a_run_failing_during_setup_leaves_nothing_behind(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")  # resolves as a model folder, fails to load
    out = spade("train", *SCRIPTED, "--model.backend", "hf", "--model.model", str(model),
                "--runs-dir", str(tmp_path), "--name", "broken")  # fmt: skip
    assert out.returncode != 0
    assert not (tmp_path / "broken").exists()


def test_resume_of_nothing_creates_nothing(tmp_path: Path) -> None:
    out = spade("train", "--resume", str(tmp_path / "none"))
    assert out.returncode == 2
    assert "not a run directory" in one_line(out.stderr)
    assert not (tmp_path / "none").exists()


# -- 4-6. a finished run: refuse, lock, extend, survive damage -------------------------------------------------


def test_resume_lock_extend_damage_and_overwrite(tmp_path: Path) -> None:
    base = [*SCRIPTED, "--runs-dir", str(tmp_path), "--name", "r"]
    first = spade("train", *base)
    assert first.returncode == 0, first.stderr
    run = RunDir(tmp_path / "r")
    assert [r["step"] for r in run.read_metrics()] == [0, 1]

    again = spade("train", *base)  # never replaced without asking
    assert again.returncode == 2
    assert "--overwrite" in one_line(again.stderr)

    with run.lock():  # 5. a live owner: a second process may not drive the run
        locked = spade("train", "--resume", str(run.root), "--steps", "3")
    assert locked.returncode == 2
    assert f"being driven by process {os.getpid()}" in one_line(locked.stderr)
    assert [r["step"] for r in run.read_metrics()] == [0, 1]

    done = spade("train", "--resume", str(run.root))  # 6. says where it is and how to extend
    assert done.returncode == 0, done.stderr
    assert f"resuming {run.root} at step 2 of 2 (checkpoint step_2)" in done.stdout
    assert "--steps N" in done.stdout

    (run.checkpoints / "LATEST").write_text("\x00garbage")  # 4. damaged pointer
    text = run.metrics_path.read_text()
    run.metrics_path.write_text(text[:-10])  # 6. the last metrics line is cut
    extended = spade("train", "--resume", str(run.root), "--steps", "3")
    assert extended.returncode == 0, extended.stderr
    assert "LATEST is damaged" in extended.stdout
    assert "no complete row for step 1 (a cut line)" in extended.stdout
    assert "at step 1 of 3" in extended.stdout
    assert [r["step"] for r in run.read_metrics()] == [0, 1, 2]
    assert run.load_config().steps == 3

    over = spade("train", *base, "--steps", "1", "--overwrite")
    assert over.returncode == 0, over.stderr
    assert [r["step"] for r in run.read_metrics()] == [0]


# -- 4. advice that a retry would not follow: a full disk, a launch or cluster that cannot work ------------


def _full_disk_at(monkeypatch: pytest.MonkeyPatch, method: str) -> None:
    """``RunDir.<method>`` fails as a full disk makes a write fail (a 400 KiB tmpfs as --runs-dir)."""

    def full(self: RunDir, *_args: object, **_kwargs: object) -> None:
        path = self.root / "metrics.jsonl"
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(RunDir, method, full)


def test_a_full_disk_mid_run_names_the_full_file_system_and_resumes_only_once_space_is_freed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from spade.cli.train import run_cli  # noqa: PLC0415

    _full_disk_at(monkeypatch, "append_metrics")  # step 0 played and updated; its row cannot be written
    code = run_cli([*SCRIPTED, "--sft.episodes", "0", "--sft.designs", "0", "--sft.hints", "0",
                    "--runs-dir", str(tmp_path), "--name", "full"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("spade train: [Errno 28] No space left on device")
    assert f"the file system of {tmp_path / 'full' / 'metrics.jsonl'} (" in line  # which path is full ...
    assert " free of " in line
    assert "is full, so resuming now would fail the same way" in line
    assert "free space there (this run holds " in line
    assert ", most in " in line
    assert line.endswith(
        f"first; no step finished yet; continue with: spade train --resume {tmp_path / 'full'}"
    )


def test_a_full_disk_before_the_run_started_keeps_nothing_and_says_what_to_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from spade.cli.train import run_cli  # noqa: PLC0415

    _full_disk_at(monkeypatch, "create")
    code = run_cli([*SCRIPTED, "--runs-dir", str(tmp_path), "--name", "full"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "nothing was kept. The same command would fail again, the file system of" in err
    assert f"is full: free space there or choose another --runs-dir (now {tmp_path}) or --name" in err
    assert "run the same command again" not in err
    assert "--resume" not in err


def test_a_ray_address_where_no_cluster_answers_is_a_setup_error(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    address = f"127.0.0.1:{free_port()}"
    out = spade("train", *SCRIPTED, "--cluster.backend", "ray", "--cluster.address", address,
                "--runs-dir", str(tmp_path), "--name", "ray")  # fmt: skip
    assert out.returncode == 2, out.stderr
    line = out.stderr.strip().splitlines()[-1]
    assert f"no Ray cluster answers at {address!r}" in line
    assert "ray start --head" in line  # the fix
    assert "run the same command again" not in out.stderr
    assert not (tmp_path / "ray").exists()
