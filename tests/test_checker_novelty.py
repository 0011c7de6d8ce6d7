"""Novelty against an archive: behaviour fingerprints, their distance, and ``spade check --against RUN``."""

from __future__ import annotations

import io
import json
from pathlib import Path

from spade import envs
from spade.checker.episodes import Episode, StepRecord
from spade.checker.novelty import Fingerprint, Fingerprints, features, nearest
from spade.cli.check import check_files
from spade.memory.archive import Memory, seed_sources
from spade.sandbox.inprocess import InProcessSandbox

FIXTURES = Path(__file__).parent / "checker_envs"
ARCHIVE = ("combination_lock", "countdown")
"""The small archive every test compares against (two seed games)."""


def near_duplicate() -> str:
    """The countdown seed with its class renamed and its docstrings reworded: the same game."""
    source = envs.spec("countdown").source().replace("CountdownEnv", "NumbersGameEnv")
    return source.replace('"""', '"""Reach the target with the numbers given. ', 1)


def novel() -> str:
    return (FIXTURES / "multi_turn.py").read_text()


def _archive() -> list[tuple[str, str]]:
    return [(s.env_id, s.code) for s in seed_sources("games", names=ARCHIVE)]


def _episode(*observations: str, reward: float = 0.0) -> Episode:
    steps = tuple(StepRecord("a", o, reward, False, False) for o in observations[1:])
    return Episode("random", 0, observations[0], steps)


def test_the_fingerprint_masks_numbers_and_the_distance_is_jaccard() -> None:
    a = features([_episode("Pick a number from 1 to 10.", "Too low.")])
    b = features([_episode("Pick a number from 3 to 99.", "Too low.")])
    c = features([_episode("Push the crate onto the goal square.", "The crate moved.")])
    assert a == b  # a changed constant is the same game
    assert a.distance(b) == 0.0
    assert a.distance(c) == 1 - 2 / 17  # only the reward and length features are shared
    assert a.distance(c) == c.distance(a)
    assert Fingerprint(frozenset()).distance(Fingerprint(frozenset())) == 0.0
    assert nearest(a, {}).distance == 1.0
    assert nearest(a, {"x": c, "y": b}).nearest == "y"


def test_a_near_duplicate_is_at_distance_zero_and_a_novel_design_far_from_the_archive() -> None:
    prints = Fingerprints(InProcessSandbox(), seeds=2)
    dup = prints.novelty(near_duplicate(), _archive())
    assert dup.distance == 0.0
    assert dup.nearest == "seed:countdown"
    assert dup.archived == len(ARCHIVE)
    new = prints.novelty(novel(), _archive())
    assert new.distance > 0.5
    assert prints.novelty(novel(), []).distance == 1.0


def test_fingerprints_are_played_once_per_source() -> None:
    prints = Fingerprints(InProcessSandbox(), seeds=1)
    first = prints.of(novel())
    assert prints.of(novel()) is first


def _run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    with Memory.in_run_dir(run) as memory:
        memory.warm_start(seed_sources("games", names=ARCHIVE))
    return run


def test_spade_check_against_a_run_reports_each_accepted_files_novelty(tmp_path: Path) -> None:
    run = _run_dir(tmp_path)
    files = {
        "dup.py": near_duplicate(),
        "novel.py": novel(),
        "partial.py": (FIXTURES / "partial_solution.py"),
    }
    paths = []
    for name, text in files.items():
        path = tmp_path / name
        path.write_text(text if isinstance(text, str) else text.read_text())
        paths.append(path)
    out = io.StringIO()
    code = check_files(
        paths, jobs=1, as_json=True, seed=11, runner=InProcessSandbox(), out=out, against=str(run)
    )
    rows = {Path(r["path"]).name: r for r in map(json.loads, out.getvalue().splitlines())}
    assert code == 1  # partial.py is rejected
    assert rows["dup.py"]["novelty"] == {"distance": 0.0, "nearest": "seed:countdown", "archived": 2}
    assert rows["novel.py"]["novelty"]["distance"] > 0.5
    assert "novelty" not in rows["partial.py"]  # only accepted designs are compared
    text = io.StringIO()
    check_files(paths[:1], jobs=1, seed=11, runner=InProcessSandbox(), out=text, against=str(run))
    assert "novelty=0.000  (nearest seed:countdown, 2 archived)" in text.getvalue()


def test_spade_check_against_a_folder_without_an_archive_says_so(tmp_path: Path) -> None:
    path = tmp_path / "novel.py"
    path.write_text(novel())
    assert check_files([path], runner=InProcessSandbox(), out=io.StringIO(), against=str(tmp_path)) == 2
