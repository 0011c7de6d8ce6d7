"""The run directory: resolved config, metrics (JSONL + TensorBoard), environment sources and checkpoints.

Layout of ``runs/<name>/``::

    config.json           the resolved TrainConfig
    metrics.jsonl         one JSON object per finished step
    tb/                   TensorBoard events of the same metrics
    memory.sqlite         the environment archive (spade.memory)
    envs/                 generated sources: <env_id>.py (accepted) and rejected/<env_id>.py
    samples/              designer samples awaiting delayed credit
    checkpoints/step_N/   loop state (state.json) and trainer state; LATEST names the newest

A checkpoint is written into a temporary folder and renamed into place, then LATEST is replaced atomically,
so a kill at any moment leaves the previous checkpoint intact. Resuming from step N truncates the metrics to
steps below N and rolls the archive back, so the continued run matches an uninterrupted one.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from spade.config import TrainConfig, from_json, to_json

KEEP_CHECKPOINTS = 2


def atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


@dataclass(frozen=True, slots=True)
class RunDir:
    """Paths and file operations of one run directory."""

    root: Path

    @property
    def config_path(self) -> Path:
        """The resolved config."""
        return self.root / "config.json"

    @property
    def metrics_path(self) -> Path:
        """Metrics, one JSON line per step."""
        return self.root / "metrics.jsonl"

    @property
    def checkpoints(self) -> Path:
        """Checkpoint folders."""
        return self.root / "checkpoints"

    def create(self, cfg: TrainConfig) -> None:
        """Make the folders and write the resolved config; refuses to overwrite another run."""
        if self.config_path.exists():
            raise FileExistsError(
                f"{self.root} already holds a run; resume it with `spade train --resume {self.root}` "
                "or choose another --name"
            )
        for sub in ("envs/rejected", "samples", "checkpoints", "tb"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        atomic_write(self.config_path, to_json(cfg) + "\n")

    def load_config(self) -> TrainConfig:
        """The config the run was started with."""
        if not self.config_path.exists():
            raise FileNotFoundError(f"{self.root} is not a run directory (no config.json)")
        return from_json(self.config_path.read_text())

    # -- environments -----------------------------------------------------------------------------------

    def save_source(self, env_id: str, code: str, *, rejected: bool) -> Path:
        """Keep a generated source (rejected ones in their own folder, for the audit trail)."""
        path = self.root / "envs" / ("rejected" if rejected else "") / f"{env_id}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, code)
        return path

    # -- metrics ----------------------------------------------------------------------------------------

    def append_metrics(self, row: Mapping[str, Any]) -> None:
        """Append one step's metrics (flushed and synced, so a kill loses at most the step in flight)."""
        with self.metrics_path.open("a") as f:
            f.write(json.dumps(dict(row), sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def read_metrics(self) -> list[dict[str, Any]]:
        """Every complete metrics row (a torn last line from a kill is ignored)."""
        if not self.metrics_path.exists():
            return []
        rows = []
        for line in self.metrics_path.read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue
        return rows

    def truncate_metrics(self, before_step: int) -> None:
        """Keep only rows of steps below ``before_step`` (resume)."""
        rows = [r for r in self.read_metrics() if int(r["step"]) < before_step]
        atomic_write(self.metrics_path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))

    # -- checkpoints ------------------------------------------------------------------------------------

    def latest_checkpoint(self) -> Path | None:
        """The newest complete checkpoint, or None."""
        pointer = self.checkpoints / "LATEST"
        if not pointer.exists():
            return None
        path = self.checkpoints / pointer.read_text().strip()
        return path if (path / "state.json").exists() else None

    def begin_checkpoint(self, step: int) -> Path:
        """A fresh temporary folder to write the checkpoint of ``step`` into."""
        tmp = self.checkpoints / f".step_{step}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        return tmp

    def commit_checkpoint(self, tmp: Path, step: int, state: Mapping[str, Any]) -> Path:
        """Write the loop state, move the folder into place, point LATEST at it, prune old ones."""
        atomic_write(tmp / "state.json", json.dumps(dict(state), sort_keys=True))
        final = self.checkpoints / f"step_{step}"
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        atomic_write(self.checkpoints / "LATEST", final.name + "\n")
        done = sorted(
            (p for p in self.checkpoints.glob("step_*") if p.is_dir()), key=lambda p: int(p.name[5:])
        )
        for old in done[:-KEEP_CHECKPOINTS]:
            shutil.rmtree(old, ignore_errors=True)
        return final

    def tensorboard(self, purge_step: int) -> Board:
        """A TensorBoard writer for ``tb/``; events of steps >= ``purge_step`` (a resumed step) are dropped."""
        return Board(self.root / "tb", purge_step)

    @staticmethod
    def read_state(checkpoint: Path) -> dict[str, Any]:
        """The loop state saved in a checkpoint."""
        state: dict[str, Any] = json.loads((checkpoint / "state.json").read_text())
        return state


class Board:
    """Scalar metrics to TensorBoard event files (the same rows as metrics.jsonl)."""

    def __init__(self, folder: Path, purge_step: int) -> None:
        from torch.utils.tensorboard import SummaryWriter  # noqa: PLC0415 - torch is heavy; import on use

        self._writer = SummaryWriter(str(folder), purge_step=purge_step if purge_step > 0 else None)

    def write(self, row: Mapping[str, Any]) -> None:
        """Add every numeric value of a metrics row at its step."""
        step = int(row["step"])
        for key, value in row.items():
            if key != "step" and isinstance(value, int | float):
                self._writer.add_scalar(key, float(value), step)
        self._writer.flush()

    def close(self) -> None:
        """Flush and close the event file."""
        self._writer.close()


RUN_LOCK_FILE = "run.lock"
"""The run lock: holds the owner's pid while a process drives the run, emptied when it lets go."""

LockState = Literal["absent", "released", "live", "stale"]


def lock_state(root: Path) -> tuple[LockState, int | None]:
    """Who holds a run: no lock file (``absent``), an empty one (``released``), or the pid written in it,
    ``live`` when that process exists and ``stale`` when it is gone (killed without letting go).

    The pid may be plain text or a JSON object with a ``pid`` field.
    """
    path = Path(root) / RUN_LOCK_FILE
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return "absent", None
    except OSError:
        return "stale", None
    pid = _pid_in(text) if text else None
    if pid is None or pid <= 0:
        return ("stale" if text else "released"), None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "stale", pid
    except PermissionError:  # alive, owned by another user
        return "live", pid
    return "live", pid


def _pid_in(text: str) -> int | None:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = text.split(maxsplit=1)[0]
    if isinstance(data, dict):
        data = data.get("pid")
    try:
        return int(data) if data is not None else None
    except (TypeError, ValueError):
        return None
