"""The run directory survives damage: fallback checkpoints, cut metrics, damaged files, the run lock."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from spade.config import TrainConfig
from spade.rundir import RunDir, RunLockedError, RunStateError, lock_state


def _run_with_steps(tmp_path: Path, metrics_steps: int, checkpoints: list[int]) -> RunDir:
    """A run directory as the loop leaves it: metrics rows 0..n-1 and complete checkpoints."""
    run = RunDir(tmp_path / "r")
    run.create(TrainConfig(name="r", runs_dir=tmp_path))
    for step in range(metrics_steps):
        run.append_metrics({"step": step, "agent/win_rate": 0.5})
    for step in checkpoints:
        run.commit_checkpoint(run.begin_checkpoint(step), step, {"step": step})
    return run


def test_resume_point_is_the_latest_checkpoint(tmp_path: Path) -> None:
    run = _run_with_steps(tmp_path, 5, [4, 5])
    point = run.resume_point()
    assert (point.step, point.notes) == (5, ())
    assert point.checkpoint == run.checkpoints / "step_5"


@pytest.mark.parametrize("damage", ["garbage", "", "missing", "step_9"])
def test_damaged_latest_falls_back_to_the_newest_complete_checkpoint(tmp_path: Path, damage: str) -> None:
    run = _run_with_steps(tmp_path, 5, [4, 5])
    latest = run.checkpoints / "LATEST"
    if damage == "missing":
        latest.unlink()
    else:
        latest.write_text(damage)
    point = run.resume_point()
    assert point.step == 5
    assert any("LATEST is damaged" in n and "step_5" in n for n in point.notes), point.notes


def test_damaged_state_of_the_newest_checkpoint_falls_back_to_the_previous(tmp_path: Path) -> None:
    run = _run_with_steps(tmp_path, 5, [4, 5])
    (run.checkpoints / "step_5" / "state.json").write_text('{"step": 5, "curr')
    assert run.resume_point().step == 4


def test_cut_last_metrics_line_goes_back_to_rerun_its_step(tmp_path: Path) -> None:
    run = _run_with_steps(tmp_path, 5, [4, 5])
    text = run.metrics_path.read_text()
    run.metrics_path.write_text(text[: len(text) - 8])  # the row of step 4 is cut
    point = run.resume_point()
    assert point.step == 4
    assert any("step 4" in n and "cut" in n for n in point.notes), point.notes


def test_history_without_any_checkpoint_is_never_restarted_silently(tmp_path: Path) -> None:
    run = _run_with_steps(tmp_path, 5, [4, 5])
    for path in run.checkpoints.glob("step_*"):
        for f in path.iterdir():
            f.unlink()
        path.rmdir()
    before = run.metrics_path.read_text()
    with pytest.raises(RunStateError, match=r"--overwrite"):
        run.resume_point()
    assert run.metrics_path.read_text() == before


def test_killed_before_the_first_checkpoint_starts_over(tmp_path: Path) -> None:
    run = _run_with_steps(tmp_path, 1, [])  # step 0 logged, killed before its checkpoint
    point = run.resume_point()
    assert (point.checkpoint, point.step) == (None, 0)


def test_damaged_config_and_archive_name_the_file_and_the_way_out(tmp_path: Path) -> None:
    run = _run_with_steps(tmp_path, 1, [1])
    run.config_path.write_text(run.config_path.read_text()[:50])
    with pytest.raises(RunStateError, match=r"config\.json is damaged.*--overwrite"):
        run.load_config()
    db = sqlite3.connect(run.root / "memory.sqlite")
    db.execute("CREATE TABLE t (x)")
    db.executemany("INSERT INTO t VALUES (?)", [("x" * 500,)] * 200)
    db.commit()
    db.close()
    run.check_archive()  # a healthy archive passes
    data = (run.root / "memory.sqlite").read_bytes()
    (run.root / "memory.sqlite").write_bytes(data[: len(data) // 2])
    with pytest.raises(RunStateError, match=r"memory\.sqlite is damaged.*--overwrite"):
        run.check_archive()


def test_missing_run_is_named(tmp_path: Path) -> None:
    with pytest.raises(RunStateError, match="not a run directory"):
        RunDir(tmp_path / "nothing").load_config()


def test_lock_refuses_a_second_holder_and_names_the_owner(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "r")
    with run.lock() as note:
        assert note == ""
        assert (run.root / "run.lock").read_text().strip() == str(os.getpid())
        code = (
            "import sys; from spade.rundir import RunDir, RunLockedError\n"
            "from pathlib import Path\ntry:\n    RunDir(Path(sys.argv[1])).lock().__enter__()\n"
            "except RunLockedError as e:\n    print(e); sys.exit(3)\n"
        )
        other = subprocess.run(
            [sys.executable, "-c", code, str(run.root)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert other.returncode == 3, other.stderr
        assert f"process {os.getpid()}" in other.stdout
        with pytest.raises(RunLockedError):  # a second holder in the same process as well
            run.lock().__enter__()
    with run.lock():  # released on exit
        pass


def test_stale_lock_of_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()  # fmt: skip
    run = RunDir(tmp_path / "r")
    run.root.mkdir()
    (run.root / "run.lock").write_text(dead + "\n")
    with run.lock() as note:
        assert f"stale lock of process {dead}" in note


def test_letting_go_records_a_release_but_only_of_this_processs_lock(tmp_path: Path) -> None:
    """What a process ended by force after a stop request leaves: a released lock (`spade runs`: stopped)."""
    run = RunDir(tmp_path / "r")
    run.let_go()  # no lock file: nothing to do, nothing raised
    with run.lock():
        assert lock_state(run.root) == ("live", os.getpid())
        run.let_go()
        assert lock_state(run.root) == ("released", None)
    (run.root / "run.lock").write_text("1\n")  # another process's lock is left alone
    run.let_go()
    assert (run.root / "run.lock").read_text() == "1\n"


def test_complete_steps_stops_at_a_gap(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.metrics_path.write_text("\n".join(json.dumps({"step": s}) for s in (0, 1, 3)) + "\n")
    assert run.complete_steps() == 2
