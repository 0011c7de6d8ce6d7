"""Memory use of a run: this process and every live process it started (engine workers, the sandbox zygote).

``peak_rss_gb`` sums each live process's own high-water mark (``VmHWM`` in ``/proc/<pid>/status``): an upper
bound of the tree's true peak (the peaks need not coincide, and pages shared after a fork count once per
process), so a figure under a budget is really under it. Processes that already exited (single-use sandbox
instances) are not counted; they are small. Off Linux it falls back to this process's ``ru_maxrss``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

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


_M_MMAP_THRESHOLD = -3
_MADV_DONTNEED = 4
_GLIBC_MAX_THRESHOLD = 32 << 20  # where glibc's own adaptive threshold ends up after a few large frees


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim, libc.mallopt  # noqa: B018 -- glibc only (musl has neither)
    except (OSError, AttributeError):
        return None
    return libc


def release_free_memory() -> None:
    """Give the heap pages freed since the last call back to the system (Linux/glibc; elsewhere nothing).

    glibc keeps freed heap memory mapped for reuse: when training and an in-process engine take turns, each
    phase's leftovers would add to the next one's footprint.
    """
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


def drop_pages(tensors: Iterable[Any]) -> int:
    """Return the memory pages of each CPU tensor's storage to the system; returns the bytes released.

    The tensors stay valid and read as zeros afterwards; a page is taken again when it is next written. For a
    buffer whose contents are no longer needed, such as an engine's KV cache once its prefix cache is
    emptied. Tensors on other devices, and every tensor off Linux/glibc, are left alone (0 bytes).
    """
    libc = _libc()
    if libc is None:
        return 0
    page = os.sysconf("SC_PAGE_SIZE")
    seen: set[int] = set()
    released = 0
    for tensor in tensors:
        if tensor.device.type != "cpu":
            continue
        storage = tensor.untyped_storage()
        begin = storage.data_ptr()
        if begin in seen:
            continue
        seen.add(begin)
        start = -(-begin // page) * page  # whole pages inside the storage only
        end = (begin + storage.nbytes()) // page * page
        if end <= start:
            continue
        if libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), _MADV_DONTNEED) == 0:
            released += end - start
    return released


@contextlib.contextmanager
def compact_heap(threshold: int = 1 << 20) -> Iterator[None]:
    """Inside the block, every allocation of ``threshold`` bytes or more gets its own mapping, returned to the
    system when freed; afterwards free heap pages are released too (Linux/glibc; elsewhere nothing).

    glibc serves blocks of up to 32 MiB from its heap once a few large blocks were freed, and a backward
    pass's short-lived tensors of 1–32 MiB then fragment it: the embedded model's step on a 900-token
    episode peaked ≈0.9 GB higher than the tensors alive at any time. Mapping each block costs page faults
    (that step ran ≈1.5× longer), so this is for memory-bound machines.
    """
    libc = _libc()
    if libc is None:
        yield
        return
    libc.mallopt(_M_MMAP_THRESHOLD, threshold)
    try:
        yield
    finally:
        libc.mallopt(_M_MMAP_THRESHOLD, _GLIBC_MAX_THRESHOLD)
        libc.malloc_trim(0)
