"""A run directory written before issue #31's restructure still resumes.

tests/fixtures/rundir_v1 is a scripted self-play run (``--steps 4 --reward.delay 2``, one design per
regeneration) killed by SIGKILL after its second checkpoint: the checkpoint holds a design awaiting delayed
credit, whose stored sample is still in ``samples/``. Its tensorboard events, lock file and SQLite
write-ahead log were left out (the log merged into ``memory.sqlite``), and ``runs_dir`` was made relative.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from spade.cli.train import run_cli
from spade.rundir import RunDir

FIXTURE = Path(__file__).parent / "fixtures" / "rundir_v1"


def test_an_old_run_directory_resumes_for_one_more_step(tmp_path: Path) -> None:
    run_dir = tmp_path / "rundir_v1"
    shutil.copytree(FIXTURE, run_dir)
    old = RunDir(FIXTURE).read_metrics()
    assert [r["step"] for r in old] == [0, 1]

    assert run_cli(["--resume", str(run_dir), "--steps", "3"]) == 0

    run = RunDir(run_dir)
    rows = run.read_metrics()
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert rows[:2] == old  # the steps done before the resume are kept as they were
    assert rows[2]["designer/credited"] >= 1.0  # the design waiting in the checkpoint got its credit
    assert (run.checkpoints / "LATEST").read_text().strip() == "step_3"
    state = json.loads((run.checkpoints / "step_3" / "state.json").read_text())
    assert state["step"] == 3
    assert state["credit"] == []  # the run's last step credits every design still waiting
