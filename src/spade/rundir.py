"""The run directory: resolved config, metrics (JSONL + TensorBoard), environment sources and checkpoints.

Layout of ``runs/<name>/``::

    config.json           the resolved TrainConfig
    metrics.jsonl         one JSON object per finished step
    tb/                   TensorBoard events of the same metrics
    memory.sqlite         the environment archive (spade.memory.archive)
    envs/                 generated sources: <env_id>.py (accepted) and rejected/<env_id>.py
    samples/              designer samples awaiting delayed credit
    checkpoints/step_N/   loop state (state.json) and trainer state; LATEST names the newest
    run.lock              the pid of the process driving the run (flock-ed while it runs)

A checkpoint is written into a temporary folder and renamed into place, then LATEST is replaced atomically,
so a kill at any moment leaves the previous checkpoint intact. Resuming from step N truncates the metrics to
steps below N and rolls the archive back, so the continued run matches an uninterrupted one.

Damage is survived where it can be and named where it cannot (:meth:`RunDir.resume_point`): a damaged or
missing LATEST falls back to the newest complete ``step_N``; a cut metrics line makes the run go back to the
checkpoint of that step so it is rerun; a run whose history exists but whose checkpoints are all gone is
never restarted from step 0 silently (``--overwrite`` does that on request). A damaged config.json,
state.json or memory.sqlite raises :class:`RunStateError` naming the file and the way out.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from spade.config import ConfigError, TrainConfig, from_json, to_json
from spade.errors import SpadeError

KEEP_CHECKPOINTS = 2
LOCK_NAME = "run.lock"


class RunStateError(SpadeError):
    """A run directory that cannot be continued as it is; the message names the file and the way out."""


class RunLockedError(SpadeError):
    """Another live process drives this run."""


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """Where a resumed run continues: a checkpoint (None: from step 0) and what was noticed on the way."""

    checkpoint: Path | None
    step: int
    notes: tuple[str, ...] = ()


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
            raise RunStateError(
                f"{self.root} already holds a run: continue it with `spade train --resume {self.root}`, "
                "replace it with --overwrite, or choose another --name"
            )
        self.make_folders()
        self.save_config(cfg)

    def make_folders(self) -> None:
        """Make the run's folders where they are missing (a run directory may hold only a hand-written
        config.json: resuming it starts that run)."""
        for sub in ("envs/rejected", "samples", "checkpoints", "tb"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)

    def save_config(self, cfg: TrainConfig) -> None:
        """Write (or replace, when a run is extended) the resolved config."""
        atomic_write(self.config_path, to_json(cfg) + "\n")

    def load_config(self) -> TrainConfig:
        """The config the run was started with.

        Raises:
            RunStateError: no run here, or its config.json is damaged.
        """
        if not self.config_path.is_file():
            raise RunStateError(
                f"{self.root} is not a run directory (no config.json): check the path given to --resume"
            )
        try:
            return from_json(self.config_path.read_text())
        except (ValueError, TypeError, ConfigError) as exc:  # ConfigError names the key and the bad value
            raise RunStateError(
                f"{self.config_path} is damaged ({exc}): fix it or restore it from a copy, or start the run "
                f"over with `spade train --overwrite --name {self.root.name} --runs-dir {self.root.parent} ...`"
            ) from None

    def clear(self) -> None:
        """Delete everything the run wrote (``--overwrite``), keeping the lock file of the caller."""
        if not self.root.is_dir():
            return
        for path in self.root.iterdir():
            if path.name == LOCK_NAME:
                continue
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()

    def discard(self) -> None:
        """Remove a run that never finished setting up (nothing of value is in it)."""
        shutil.rmtree(self.root, ignore_errors=True)

    @contextlib.contextmanager
    def lock(self) -> Iterator[str]:
        """Hold the run for this process; yields a note when a stale lock was taken over ('' if none).

        The lock is an ``flock`` on ``run.lock`` (released by the kernel when the process dies, so a killed
        run never blocks a resume); the file holds the owner's pid for the message.

        Raises:
            RunLockedError: a live process holds the run.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / LOCK_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            owner = _read_pid(path)
            raise RunLockedError(
                f"{self.root} is being driven by process {owner or '?'}: wait for it to end or stop it "
                f"(kill -INT {owner or 'PID'}); two processes must not drive one run"
            ) from None
        previous = _read_pid(path)
        note = f"took over the stale lock of process {previous} (no longer running)" if previous else ""
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield note
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)

    def let_go(self) -> None:
        """Record that this process let go of the run (an empty ``run.lock``) without closing the lock.

        For a process about to end by force after it was asked to stop: ``spade runs`` then shows the run as
        stopped, not failed (the kernel drops the ``flock`` itself when the process ends). Does nothing when
        the lock file names another process; never raises.
        """
        path = self.root / LOCK_NAME
        if _read_pid(path) != os.getpid():
            return
        with contextlib.suppress(OSError), path.open("r+") as f:
            f.truncate(0)

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

    def complete_steps(self) -> int:
        """How many steps from 0 on have a complete metrics row (a cut or missing row ends the count)."""
        steps = {int(r["step"]) for r in self.read_metrics() if "step" in r}
        n = 0
        while n in steps:
            n += 1
        return n

    def truncate_metrics(self, before_step: int) -> None:
        """Keep only rows of steps below ``before_step`` (resume)."""
        rows = [r for r in self.read_metrics() if int(r["step"]) < before_step]
        atomic_write(self.metrics_path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))

    # -- checkpoints ------------------------------------------------------------------------------------

    def latest_checkpoint(self) -> Path | None:
        """The newest complete checkpoint, or None (see :meth:`resume_point` for damaged pointers)."""
        return self.resume_point().checkpoint

    def complete_checkpoints(self) -> list[tuple[int, Path]]:
        """(step, folder) of every checkpoint whose state.json reads back, newest first."""
        found = []
        for path in self.checkpoints.glob("step_*"):
            if not path.name[5:].isdigit() or not path.is_dir():
                continue
            try:
                state = self.read_state(path)
            except (OSError, ValueError):
                continue
            if state.get("step") == int(path.name[5:]):
                found.append((int(path.name[5:]), path))
        return sorted(found, reverse=True)

    def resume_point(self) -> ResumePoint:
        """The checkpoint a resume continues from, falling back past damage (see the module docstring).

        Raises:
            RunStateError: the run has a history (metrics of several steps) but no usable checkpoint.
        """
        complete = self.complete_checkpoints()
        notes: list[str] = []
        pointer = self._pointer()
        if complete and pointer != complete[0][1].name:
            notes.append(
                f"checkpoints/LATEST is damaged or stale ({pointer!r} names no complete checkpoint); using the newest "
                f"complete checkpoint {complete[0][1].name}"
            )
        done = self.complete_steps()
        usable = [(step, path) for step, path in complete if step <= done]
        if complete and usable and usable[0] != complete[0]:
            notes.append(
                f"metrics.jsonl has no complete row for step {done} (a cut line): going back to "
                f"{usable[0][1].name} to run it again"
            )
        elif complete and not usable:
            notes.append(f"metrics.jsonl lacks rows before step {complete[0][0]}; they stay missing")
            usable = complete[:1]
        if usable:
            return ResumePoint(usable[0][1], usable[0][0], tuple(notes))
        if done > 1:
            raise RunStateError(
                f"{self.checkpoints} holds no usable checkpoint although metrics.jsonl records {done} steps; "
                f"nothing was changed. Restore a checkpoint, or start this run over with `spade train "
                f"--resume {self.root} --overwrite` (discards its history)"
            )
        return ResumePoint(None, 0, ("no checkpoint yet: starting from step 0",))

    def check_archive(self) -> None:
        """Raise :class:`RunStateError` when memory.sqlite exists but is not a readable database."""
        path = self.root / "memory.sqlite"
        if not path.exists():
            return
        try:
            with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
                ok = db.execute("PRAGMA quick_check").fetchone()
        except sqlite3.DatabaseError as exc:
            ok = (str(exc),)
        if not ok or ok[0] != "ok":
            raise RunStateError(
                f"{path} is damaged ({ok[0] if ok else 'unreadable'}): restore it from a copy, or start the run "
                f"over with `spade train --resume {self.root} --overwrite` (discards its history)"
            )

    def _pointer(self) -> str:
        try:
            return (self.checkpoints / "LATEST").read_text(errors="replace").strip()[:40]
        except OSError:
            return ""

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


def _read_pid(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


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


LockState = Literal["absent", "released", "live", "stale"]


def lock_state(root: Path) -> tuple[LockState, int | None]:
    """Who holds a run: no lock file (``absent``), an empty one (``released``), or the pid written in it,
    ``live`` when that process exists and ``stale`` when it is gone (killed without letting go).
    """
    path = Path(root) / LOCK_NAME
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return "absent", None
    except OSError:
        return "stale", None
    pid = int(text) if text.isdigit() else None
    if pid is None or pid <= 0:
        return ("stale" if text else "released"), None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "stale", pid
    except PermissionError:  # alive, owned by another user
        return "live", pid
    return "live", pid
