"""``spade runs``: the runs under a runs folder with their status, progress, mode, backend, latest metrics and
age.

Status: ``running`` (the pid in the run's ``run.lock`` is alive; a run without a lock file counts as
running while it wrote something within the stale window), ``finished`` (every configured step is done),
``failed`` (the lock still names a process that is gone: it was killed before it could let go) or
``stopped`` (ended before its last step and let go of its lock: Ctrl-C or SIGTERM, also when the stop
watchdog or a second signal ended the process by force, see :mod:`spade.stopping`). A failed or stopped run
continues with ``spade train --resume``.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from spade.errors import SpadeError
from spade.modes.registry import label
from spade.rundir import RunDir, lock_state

RunStatus = Literal["running", "finished", "failed", "stopped", "unreadable"]
STALE_MIN_S = 600.0
"""Without a lock file, a run that wrote nothing for this long (or 3 mean steps, if longer) is not running."""
SHOWN = ("agent/win_rate", "agent/win_rate_hint", "designer/valid_rate", "designer/regret_mean")


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One run as ``spade runs`` shows it."""

    name: str
    path: Path
    status: RunStatus
    steps_done: int
    steps_total: int
    mode: str
    age_s: float
    """Seconds since the run last wrote its metrics (or its config, before the first step)."""
    pid: int | None = None
    last: dict[str, float] = field(default_factory=dict)
    """Latest value of each of :data:`SHOWN` the run has logged."""
    note: str = ""
    backend: str = "?"
    """The model backend that samples (``model.backend``: hf, vllm, openai, scripted)."""


def _activity(run: RunDir) -> float:
    paths = [run.metrics_path, run.checkpoints / "LATEST", run.config_path]
    return max((p.stat().st_mtime for p in paths if p.exists()), default=0.0)


def _last_values(rows: list[dict[str, Any]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for row in rows:
        out.update({k: float(row[k]) for k in SHOWN if isinstance(row.get(k), int | float)})
    return out


def run_info(root: Path, now: float | None = None) -> RunInfo:
    """Status, progress and latest metrics of the run in ``root``."""
    run = RunDir(Path(root))
    now = time.time() if now is None else now
    age = now - _activity(run)
    lock, pid = lock_state(run.root)
    pid = pid if lock == "live" else None
    try:
        cfg = run.load_config()
    except (SpadeError, ValueError, OSError) as exc:
        return RunInfo(run.root.name, run.root, "unreadable", 0, 0, "?", age, pid, note=str(exc))
    rows = run.read_metrics()
    done = max((int(r["step"]) + 1 for r in rows), default=0)
    step_s = [float(r["time/step_s"]) for r in rows if "time/step_s" in r]
    stale = max(STALE_MIN_S, 3 * statistics.fmean(step_s)) if step_s else STALE_MIN_S
    status: RunStatus
    if lock == "live":
        status = "running"
    elif done >= cfg.steps:
        status = "finished"
    elif lock == "stale":
        status = "failed"
    else:  # without a lock file (a run from before locks) recent activity means it is still going
        status = "running" if lock == "absent" and age < stale else "stopped"
    return RunInfo(
        run.root.name, run.root, status, done, cfg.steps, label(cfg), age, pid, _last_values(rows),
        backend=cfg.model.backend,
    )  # fmt: skip


def list_runs(runs_dir: Path) -> list[RunInfo]:
    """Every run directory under ``runs_dir``, newest activity first.

    A run directory has ``config.json`` and a ``checkpoints/`` folder (a model folder has a config.json too).
    """
    folder = Path(runs_dir)
    if not folder.is_dir():
        return []
    found = [
        run_info(p)
        for p in sorted(folder.iterdir())
        if (p / "config.json").is_file() and (p / "checkpoints").is_dir()
    ]
    return sorted(found, key=lambda i: i.age_s)


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    if seconds < 172_800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.0f}d"


def format_runs(infos: list[RunInfo]) -> str:
    """A table with a header: name, status, step, mode, backend, age, latest metrics."""
    header = ("RUN", "STATUS", "STEP", "MODE", "BACKEND", "AGE", "WIN", "WIN+HINT", "VALID", "REGRET")
    lines: list[tuple[str, ...]] = [header]
    for i in infos:
        vals = [i.last.get(k) for k in SHOWN]
        cells = ["–" if v is None else f"{v:+.2f}" if k.endswith("regret_mean") else f"{v:.2f}"
                 for k, v in zip(SHOWN, vals, strict=True)]  # fmt: skip
        status = i.status + (f" (pid {i.pid})" if i.pid else "")
        lines.append(
            (i.name, status, f"{i.steps_done}/{i.steps_total}", i.mode, i.backend, _age(i.age_s), *cells)
        )
    widths = [max(len(row[c]) for row in lines) for c in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in lines
    )
