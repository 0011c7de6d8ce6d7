"""``spade train``'s command line: what a resume accepts, and printing the resolved config."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import spade.backends
from scripted_run import tiny_config, tiny_run
from spade.cli.app import main as cli_main
from spade.cli.train import parse_config, run_cli
from spade.config import CPU_TINY, PAPER, ConfigError, TrainConfig, from_dict, from_json, to_json
from spade.config.options import with_options
from spade.errors import SpadeError
from spade.run.loop import train


@pytest.fixture
def finished(tmp_path: Path) -> Path:
    """A scripted run that has done its 2 steps."""
    return tiny_run(tmp_path, "run", steps=2).root


def test_resume_accepts_runtime_options_and_they_take_effect(
    finished: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`make train ARGS="--model.threads 1"` on an existing run: docs/running.md recommends it."""
    threads: list[int] = []
    monkeypatch.setattr(spade.backends, "set_threads", threads.append)
    args = ["--resume", str(finished), "--steps", "3", "--model.threads", "1", "--transcripts.no-enabled"]
    assert run_cli(args) == 0
    assert threads == [1]
    assert "resuming with model.threads=1 (was 0)" in capsys.readouterr().out
    assert not list((finished / "transcripts").glob("step_000002.*"))  # none kept for the resumed step
    assert list((finished / "transcripts").glob("step_000001.*"))
    saved = from_json((finished / "config.json").read_text())
    assert (saved.steps, saved.model.threads, saved.transcripts.enabled) == (3, 1, False)


def test_resume_refuses_options_that_change_results(
    finished: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, resume = parse_config(["--resume", str(finished), "--model.threads", "1"])
    assert (resume, cfg.model.threads, cfg.seed) == (finished, 1, 0)
    with pytest.raises(ConfigError, match=r"drop --seed --designer\.edit-fraction, or start a new run"):
        parse_config(["--resume", str(finished), "--seed", "2", "--designer.edit-fraction", "0.5"])
    parse_config(["--resume", str(finished), "--seed", "0"])  # the saved value: nothing changes
    with pytest.raises(ConfigError, match="a resumed run keeps its saved config: seed cannot change"):
        train(tiny_config(finished.parent), resume=True, runtime={"seed": 2})
    out = subprocess.run([sys.executable, "-m", "spade.cli", "train", "--resume", str(finished), "--seed", "3"],
                         capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1
    assert "drop --seed" in out.stderr


def test_resume_of_a_folder_without_a_run_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SpadeError, match="not a run directory"):
        parse_config(["--resume", str(tmp_path), "--model.threads", "1"])
    assert run_cli(["--resume", str(tmp_path)]) == 2
    assert "not a run directory (no config.json)" in capsys.readouterr().err


def test_resume_refuses_fewer_steps_than_done(finished: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--resume R --steps 1` on a run that did 2 was accepted and showed "2/1"."""
    config = (finished / "config.json").read_text()
    assert run_cli(["--resume", str(finished), "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"spade train: --steps 1 is below the 2 steps {finished} has done: pass --steps 2 or more to extend "
        "it, or leave --steps out (or add --overwrite to start it over)\n"
    )
    assert (finished / "config.json").read_text() == config  # nothing written
    assert run_cli(["--resume", str(finished), "--steps", "2"]) == 0  # as many as done: nothing to do
    assert json.loads((finished / "config.json").read_text())["steps"] == 2


@pytest.mark.parametrize("command", [["train", "--print-config"], ["config"]])
def test_the_resolved_config_prints_as_toml_and_nothing_starts(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--preset", "paper"] if command[0] == "train" else ["paper"]
    options = ["--steps", "7", "--model.threads", "1", "--runs-dir", str(tmp_path / "runs")]
    assert cli_main([*command[:1], *args, *options, *command[1:]]) == 0
    printed = capsys.readouterr().out
    expected = with_options(PAPER, {"steps": 7, "model.threads": 1, "runs_dir": tmp_path / "runs"})
    assert from_dict(TrainConfig, tomllib.loads(printed)) == expected
    assert printed.startswith('name = "paper"\n')
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("flags", [["--json"], ["--format", "json"]])
def test_the_resolved_config_prints_as_json_in_the_form_of_config_json(
    flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["config", "cpu-tiny", "--seed", "3", *flags]) == 0
    assert from_json(capsys.readouterr().out) == with_options(CPU_TINY, {"seed": 3})


def test_a_resumed_runs_config_prints_with_the_runtime_options_given(
    finished: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = (finished / "config.json").read_text()
    assert (
        cli_main(["train", "--resume", str(finished), "--model.threads", "1", "--print-config", "--json"])
        == 0
    )
    assert from_json(capsys.readouterr().out) == with_options(from_json(config), {"model.threads": 1})
    assert (finished / "config.json").read_text() == config  # nothing was resumed


def test_printing_a_config_says_what_is_wrong_with_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["config", "no-such-preset"]) == 2
    assert capsys.readouterr().err.startswith("spade config: unknown preset 'no-such-preset'; choose one of")
    assert cli_main(["train", "--rollout.plays-per-env", "1", "--print-config"]) == 2
    assert "plays_per_env must be >= 2" in capsys.readouterr().err
    assert cli_main(["config", "--help"]) == 0
    assert capsys.readouterr().out.startswith("usage: spade config [PRESET]")


@pytest.mark.parametrize("name", ["cpu-tiny", "paper", "paper-tool"])
@pytest.mark.parametrize("form", [[], ["--json"]])
def test_the_config_spade_config_prints_reads_back_with_config(
    name: str, form: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`spade config ... > f.toml`, then `spade train --config f.toml` resolves the same config (None
    values, written as `# key: unset`, included); options given with --config override the file's."""
    options = ["--mode", "fixed_pool", "--steps", "3", "--eval.limit", "None", "--rollout.plays-per-env", "6"]
    assert cli_main(["config", name, *options, *form]) == 0
    path = tmp_path / ("c.json" if form else "c.toml")
    path.write_text(capsys.readouterr().out)
    expected, _ = parse_config(["--preset", name, *options])
    assert (expected.eval.limit, expected.name) == (None, f"{name}-fixed_pool")
    assert parse_config(["--config", str(path)])[0] == expected
    assert parse_config(["--config", str(path), "--seed", "5"])[0] == with_options(expected, {"seed": 5})
    assert cli_main(["config", "--config", str(path), *form]) == 0
    assert capsys.readouterr().out == path.read_text()


def test_a_config_file_goes_to_config_and_its_bad_values_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mine.toml"
    path.write_text('steps = 2\n\n[model]\nthreads = "two"\n')
    assert run_cli(["--config", str(path)]) == 2
    assert (
        capsys.readouterr().err
        == f"spade train: config file {path}: model.threads = 'two': expected an integer\n"
    )
    path.write_text(
        "steps = 2\n[rollout]\nplays_per_env = 6\n"
    )  # a hand-written subset: the rest as defaults
    cfg, _ = parse_config(["--config", str(path)])
    assert (cfg.steps, cfg.rollout.plays_per_env, cfg.name) == (2, 6, TrainConfig().name)
    assert run_cli(["--preset", str(path)]) == 2
    assert (
        f"--preset takes a preset name (paper, paper-tool, paper-8b, cpu-tiny); to start from the config file {path}, "
        f"pass --config {path}" in capsys.readouterr().err
    )
    assert run_cli(["--preset", "paper", "--config", str(path)]) == 2
    assert f"--config {path} replaces the preset: drop --preset paper" in capsys.readouterr().err


def test_resume_refuses_a_preset_or_a_config_file(finished: Path, tmp_path: Path) -> None:
    """`--resume R --preset paper` was silently ignored."""
    with pytest.raises(ConfigError, match=r"drop --preset, or start a new run"):
        parse_config(["--resume", str(finished), "--preset", "paper"])
    with pytest.raises(ConfigError, match=r"drop --config --seed, or start a new run"):
        parse_config(["--resume", str(finished), "--config", str(tmp_path / "c.toml"), "--seed", "4"])


def test_a_damaged_config_json_names_the_key_and_the_bad_value(finished: Path) -> None:
    """It was reported by its exception class only ("is damaged (TypeError)")."""
    path = finished / "config.json"
    good = json.loads(path.read_text())
    for damage, named in [
        ({"model": {**good["model"], "threads": "two"}}, "model.threads = 'two': expected an integer"),
        ({"rollout": 3}, r"\[rollout\] is 3: expected a table of RolloutConfig options"),
        ({"play": {**good["play"], "action_mode": "shout"}}, "play.action_mode = 'shout': expected one of"),
        ({"stepz": 3}, r"unknown options \['stepz'\]"),
    ]:
        path.write_text(json.dumps({**good, **damage}))
        with pytest.raises(SpadeError, match=rf"config\.json is damaged \({named}.*--overwrite"):
            parse_config(["--resume", str(finished)])


def test_a_run_directory_holding_only_a_hand_written_config_json_starts_that_run(tmp_path: Path) -> None:
    """It failed in step 0 on a missing folder (ENOENT), then advised `--resume` again."""
    run = tmp_path / "hand"
    run.mkdir()
    written = json.loads(to_json(tiny_config(tmp_path, "hand", steps=1)))
    del written["cluster"], written["transcripts"]  # written by hand: options left out take their defaults
    (run / "config.json").write_text(json.dumps(written))
    assert run_cli(["--resume", str(run)]) == 0
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 1
