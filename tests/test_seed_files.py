"""Seeds of one's own: ``--designer.seeds`` takes environment files and folders beside library names."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from scripted_run import tiny_config
from spade import envs
from spade.cli.train import parse_config
from spade.config import ConfigError
from spade.memory.archive import Memory
from spade.modes.base import pool_sources
from spade.run.loop import train

OFFICIAL = Path(envs.__file__).parent / "official_fixtures" / "game_coin_weighing.py"
"""An official-format game: it declares no skill."""


@pytest.fixture
def mine(tmp_path: Path) -> Path:
    """A folder holding a copy of a library game under another name (it declares its skill)."""
    folder = tmp_path / "mine"
    folder.mkdir()
    shutil.copy(envs.spec("countdown").source_path or "", folder / "my_countdown.py")
    return folder


def test_a_run_starts_its_archive_from_the_users_files(mine: Path, tmp_path: Path) -> None:
    """`--designer.seeds my_env.py` was refused: "are not seeds of designer.skills"."""
    cfg = tiny_config(tmp_path / "runs", "own", steps=1)
    seeds = (str(mine / "my_countdown.py"), f"{OFFICIAL}:logical_deduction")
    train(dataclasses.replace(cfg, designer=dataclasses.replace(cfg.designer, seeds=seeds)))
    with Memory.in_run_dir(tmp_path / "runs" / "own") as memory:
        archived = {r.env_id: r for r in memory.records() if r.is_seed}
    assert sorted(archived) == ["seed:game_coin_weighing", "seed:my_countdown"]
    assert archived["seed:my_countdown"].code == (mine / "my_countdown.py").read_text()
    assert (archived["seed:my_countdown"].skill, archived["seed:game_coin_weighing"].skill) == (
        "mathematical_reasoning",
        "logical_deduction",
    )


def test_a_folder_of_files_and_library_names_mix(mine: Path) -> None:
    skills = ["--designer.skills", "mathematical_reasoning", "logical_deduction"]
    cfg, _ = parse_config(["--designer.seeds", str(mine), "seating", *skills])
    assert [s.env_id for s in pool_sources(cfg)] == ["seed:seating", "seed:my_countdown"]


@pytest.mark.parametrize(
    ("seeds", "message"),
    [
        (["{dir}/missing.py"], "designer.seeds: {dir}/missing.py does not exist"),
        ([str(OFFICIAL)], rf"{OFFICIAL} declares no skill .*: give it as {OFFICIAL}:SKILL, SKILL one of"),
        ([f"{OFFICIAL}:optimization"], r"is a 'optimization' environment, not one of designer\.skills"),
        (["{dir}/countdown.py", "countdown"], r"files named as the library seeds \['countdown'\]"),
        (["sokobann"], r"are not seeds of designer\.skills; choose from .*, or give an environment file"),
    ],
)
def test_a_seed_file_that_cannot_be_used_is_named_before_anything_starts(
    mine: Path, seeds: list[str], message: str
) -> None:
    folder = str(mine.parent)
    shutil.copy(mine / "my_countdown.py", mine.parent / "countdown.py")
    skills = ["--designer.skills", "mathematical_reasoning", "logical_deduction"]
    with pytest.raises(ConfigError, match=message.replace("{dir}", folder)):
        parse_config(["--designer.seeds", *(s.replace("{dir}", folder) for s in seeds), *skills])
