"""`spade runs` (status of each run) and `spade play --solver model` (the trained policy plays)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from scripted_run import tiny_run
from spade import envs
from spade.cli.app import main
from spade.cli.runs import STALE_MIN_S, list_runs, run_info
from spade.config import ModelConfig, TrainConfig, to_json
from spade.rundir import RunDir


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("runs")
    tiny_run(folder, "done", steps=4)
    return folder


def _copy(runs: Path, tmp_path: Path, name: str, keep_steps: int | None = None) -> Path:
    dst = tmp_path / name
    shutil.copytree(runs / "done", dst)
    if keep_steps is not None:
        RunDir(dst).truncate_metrics(keep_steps)
    return dst


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_status_of_finished_running_failed_and_stopped_runs(runs: Path, tmp_path: Path) -> None:
    _copy(runs, tmp_path, "finished")
    live = _copy(runs, tmp_path, "live", keep_steps=1)
    (live / "run.lock").write_text(f"{os.getpid()}\n")
    crashed = _copy(runs, tmp_path, "crashed", keep_steps=1)
    (crashed / "run.lock").write_text(f"{_dead_pid()}\n")
    released = _copy(runs, tmp_path, "released", keep_steps=1)  # wrote just now, but let go of its lock
    (released / "run.lock").write_text("")
    stopped = _copy(runs, tmp_path, "stopped", keep_steps=1)
    old = time.time() - 2 * STALE_MIN_S
    for p in stopped.rglob("*"):
        os.utime(p, (old, old))
    recent = _copy(runs, tmp_path, "recent", keep_steps=1)  # no lock, wrote just now
    (recent / "run.lock").unlink(missing_ok=True)
    (tmp_path / "broken" / "checkpoints").mkdir(parents=True)
    (tmp_path / "broken" / "config.json").write_text("{not json")
    (tmp_path / "model").mkdir()  # a model folder has a config.json too: not a run
    (tmp_path / "model" / "config.json").write_text("{}")
    got = {i.name: i for i in list_runs(tmp_path)}
    assert {n: i.status for n, i in got.items()} == {
        "finished": "finished", "live": "running", "crashed": "failed", "stopped": "stopped",
        "recent": "running", "released": "stopped", "broken": "unreadable",
    }  # fmt: skip
    assert got["live"].pid == os.getpid()
    assert (got["finished"].steps_done, got["finished"].steps_total) == (4, 4)
    assert got["stopped"].steps_done == 1
    assert got["stopped"].age_s > STALE_MIN_S
    assert "agent/win_rate" in got["finished"].last
    assert run_info(recent).age_s < STALE_MIN_S


def test_cli_runs_table_and_json(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", str(runs)]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split()[:6] == ["RUN", "STATUS", "STEP", "MODE", "BACKEND", "AGE"]
    assert row.split()[:5] == ["done", "finished", "4/4", "selfplay", "scripted"]
    assert main(["runs", str(runs), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "finished"
    assert data["backend"] == "scripted"
    assert data["path"] == str(runs / "done")
    assert main(["runs", str(runs / "nowhere")]) == 0
    assert "no runs under" in capsys.readouterr().err


def test_model_solver_plays_with_the_runs_policy(
    runs: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the engine's log would go
    code = main(["play", "countdown", "--solver", "model", "--run", str(runs / "done"), "--seed", "1"])
    out = capfd.readouterr().out  # the transcript goes to the real stdout (file descriptor 1)
    assert code == 0
    assert "with the trained weights" in out
    assert "--- turn 0 ---" in out
    assert "model> " in out
    assert "action: " in out
    assert re.search(r"Episode ended after \d+ turns?: [a-z]", out)  # how it ended in words, not a code
    assert list(tmp_path.iterdir()) == []  # the scripted backend wrote nothing: no empty log is left
    assert not (runs / "done" / "logs").exists()
    assert "Engine output" not in out
    image = tmp_path / "board.png"
    image.write_bytes(b"\x89PNG\r\n\x1a\n")
    assert main(["play", str(image), "--run", str(runs / "done")]) == 2
    assert f"spade play: {image} is not a text Python file" in capfd.readouterr().err
    image.unlink()
    assert main(["play", "countdown", "--run", str(tmp_path / "nowhere")]) == 2
    assert capfd.readouterr().err == (
        f"spade play: {tmp_path / 'nowhere'} is not a run directory (no config.json); give --run a run "
        "`spade runs` lists\n"
    )
    assert not (tmp_path / "nowhere").exists()  # no log folder made there either
    assert main(["play", "countdown", "--solver", "model"]) == 2
    assert "--run" in capfd.readouterr().err
    assert main(["play", "countdown", "--solver", "scripted", "--run", str(runs / "done")]) == 2
    assert (
        capfd.readouterr().err
        == "spade play: --run makes the run's model play; drop --solver scripted (or --run)\n"
    )


NOISY_ENGINE = """
import logging, os, subprocess, sys
import spade.backends
from spade.cli.app import main

real = spade.backends.make_policy

def make_policy(*args, **kwargs):  # the noise an engine makes while it starts
    logger = logging.getLogger("fake_engine")
    logger.addHandler(logging.StreamHandler(sys.stdout))  # as vLLM's logger, configured when imported
    logger.warning("ENGINE logged")
    print("ENGINE printed")
    os.write(1, b"ENGINE fd 1\\n")  # native code
    os.write(2, b"ENGINE fd 2\\n")
    subprocess.run([sys.executable, "-c", "print('ENGINE worker')"], check=True)  # a worker process
    return real(*args, **kwargs)

spade.backends.make_policy = make_policy
sys.exit(main(sys.argv[1:]))
"""


def test_model_solver_plays_at_the_runs_level_and_keeps_the_engine_out_of_the_transcript(
    runs: Path, tmp_path: Path
) -> None:
    run = _copy(runs, tmp_path, "level0")
    cfg = RunDir(run).load_config()
    RunDir(run).save_config(dataclasses.replace(cfg, play=dataclasses.replace(cfg.play, difficulty=0)))
    play = [
        sys.executable,
        "-c",
        NOISY_ENGINE,
        "play",
        "sokoban",
        "--run",
        str(run),
        "--seed",
        "1",
    ]  # implies model
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    quiet = subprocess.run(play, capture_output=True, text=True, timeout=120, check=False,
                           env={**os.environ, "TMPDIR": str(tmp)})  # fmt: skip
    assert quiet.returncode == 0, quiet.stderr
    assert "Level: 0 (the run's play.difficulty)" in quiet.stdout
    level0 = envs.make("sokoban").reset(seed=1, options={"difficulty": 0})[0]
    assert level0.split("Turns left")[0] in quiet.stdout  # not sokoban's default level 1
    assert "ENGINE" not in quiet.stdout + quiet.stderr
    (log,) = (run / "logs").glob("engine-*.log")  # in the run, as a training run's: nothing left in /tmp
    assert list(tmp.iterdir()) == []
    assert quiet.stdout.splitlines()[-1] == f"Engine output: {log} (--verbose shows it here)"
    assert sorted(ln for ln in log.read_text().splitlines() if ln.startswith("ENGINE")) == [
        "ENGINE fd 1", "ENGINE fd 2", "ENGINE logged", "ENGINE printed", "ENGINE worker",
    ]  # fmt: skip
    log.unlink()
    loud = subprocess.run([*play, "--difficulty", "2", "--verbose"], capture_output=True, text=True, timeout=120,
                          check=False)  # fmt: skip
    assert loud.returncode == 0, loud.stderr
    assert "Level: 2 (--difficulty)" in loud.stdout
    assert "ENGINE printed" in loud.stdout
    assert "ENGINE fd 2" in loud.stderr


@pytest.mark.slow
def test_model_solver_with_a_real_model_and_trained_weights(
    tiny_dir: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], one_torch_thread: None
) -> None:
    """The real path: the run's hf model, LoRA weights written by the torch trainer, a sandboxed episode."""
    from spade.config import PlayConfig, TrainerConfig  # noqa: PLC0415
    from spade.training.trainer import TorchTrainer  # noqa: PLC0415

    cfg = TrainConfig(
        name="hf", runs_dir=tmp_path, steps=1,
        model=ModelConfig(backend="hf", model=str(tiny_dir), device="cpu"),
        play=PlayConfig(max_turns=2, turn_tokens=8, context_tokens=2048, action_mode="lenient"),
        trainer=TrainerConfig(lora_rank=4),
    )  # fmt: skip
    run = RunDir(cfg.run_dir)
    run.root.mkdir(parents=True)
    run.config_path.write_text(to_json(cfg))
    TorchTrainer.from_config(cfg).export_weights(run.root / "policy")
    code = main(
        ["play", "countdown", "--solver", "model", "--run", str(run.root), "--seed", "2", "--verbose"]
    )
    out = capfd.readouterr().out  # the transcript goes to the real stdout (file descriptor 1)
    assert code == 0
    assert "Policy: hf" in out
    assert "with the trained weights" in out
    assert out.count("model> ") >= 1
    assert "Episode " in out
