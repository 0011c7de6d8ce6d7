"""Memory use of a run: this process and every live process it started (engine workers, the sandbox zygote).

``peak_rss_gb`` sums each live process's own high-water mark (``VmHWM`` in ``/proc/<pid>/status``): an upper
bound of the tree's true peak (the peaks need not coincide, and pages shared after a fork count once per
process), so a figure under a budget is really under it. Processes that already exited (single-use sandbox
instances) are not counted; they are small. Off Linux it falls back to this process's ``ru_maxrss``.
"""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path

_PROC = Path("/proc")


def _status_kib(pid: int, field: str) -> int:
    """A ``kB`` field of ``/proc/<pid>/status`` (0 when the process is gone or the field is absent)."""
    try:
        text = (_PROC / str(pid) / "status").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith(field + ":"):
            parts = line.split()
            return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    return 0


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tasks = list((_PROC / str(pid) / "task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return out


def process_tree(pid: int | None = None) -> list[int]:
    """``pid`` (default: this process) and all its live descendants."""
    root = os.getpid() if pid is None else pid
    seen, todo = [], [root]
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.append(p)
        todo += _children(p)
    return seen


def _self_peak_kib() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak // 1024 if sys.platform == "darwin" else peak)  # bytes on macOS, KiB on Linux


def peak_rss_gb(pid: int | None = None) -> float:
    """Sum of the high-water RSS of ``pid``'s live process tree, in GB (10^9 bytes); see the module doc."""
    if not _PROC.is_dir():
        return _self_peak_kib() * 1024 / 1e9
    tree = process_tree(pid)
    total = sum(_status_kib(p, "VmHWM") for p in tree)
    if pid is None:
        total = max(total, _self_peak_kib())
    return total * 1024 / 1e9


def rss_gb(pid: int | None = None) -> float:
    """Current RSS of ``pid``'s live process tree, in GB."""
    return sum(_status_kib(p, "VmRSS") for p in process_tree(pid)) * 1024 / 1e9


def metrics() -> dict[str, float]:
    """``resources/peak_rss_gb`` and ``resources/rss_gb`` of this process tree."""
    return {"resources/peak_rss_gb": round(peak_rss_gb(), 3), "resources/rss_gb": round(rss_gb(), 3)}
