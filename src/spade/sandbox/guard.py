"""Python-level tripwires installed in a child after hardening: they name what an environment tried.

The system-call filter is what enforces the rules; these hooks fire first for the common Python routes
(``socket``, ``subprocess``, ``os.fork``, ``open(..., "w")``, ``threading``, ``ctypes``), raise a
``PermissionError`` that says what is not allowed, and record the attempt so the child reports ``forbidden``
even when the environment swallows the exception. Audit hooks cannot be removed from Python code.

Two more replacements keep verdicts independent of wall time: ``time.sleep`` returns at once (waiting is never
part of an environment's logic, and a sleeping call would otherwise end only at the wall-clock backstop), and
changing signal handlers or interval timers is refused (so the per-call CPU-time limit cannot be disarmed).
"""

from __future__ import annotations

import _thread
import importlib
import os
import signal
import sys
import threading
import time
from typing import Any, SupportsIndex

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_WRITE_MODES = frozenset("wax+")

_PREFIXES: tuple[tuple[str, str], ...] = (
    ("socket.", "the network"),
    ("http.client.", "the network"),
    ("urllib.", "the network"),
    ("ftplib.", "the network"),
    ("smtplib.", "the network"),
    ("imaplib.", "the network"),
    ("poplib.", "the network"),
    ("nntplib.", "the network"),
    ("telnetlib.", "the network"),
    ("syslog.", "the system log"),
    ("webbrowser.", "external programs"),
    ("ctypes.", "native code (ctypes)"),
    ("shutil.", "file-system changes"),
    ("tempfile.", "temporary files"),
)
_EVENTS: dict[str, str] = {
    "os.system": "external programs",
    "os.exec": "external programs",
    "os.posix_spawn": "external programs",
    "os.spawn": "external programs",
    "subprocess.Popen": "external programs",
    "pty.spawn": "external programs",
    "os.fork": "new processes",
    "os.forkpty": "new processes",
    "os.kill": "signals",
    "os.killpg": "signals",
    "signal.pthread_kill": "signals",
    "os.remove": "file-system changes",
    "os.rename": "file-system changes",
    "os.mkdir": "file-system changes",
    "os.rmdir": "file-system changes",
    "os.chmod": "file-system changes",
    "os.chown": "file-system changes",
    "os.link": "file-system changes",
    "os.symlink": "file-system changes",
    "os.truncate": "file-system changes",
    "os.utime": "file-system changes",
    "os.chflags": "file-system changes",
    "os.setxattr": "file-system changes",
    "os.removexattr": "file-system changes",
    "fcntl.ioctl": "device control (ioctl)",
}

violations: list[str] = []
"""What the environment attempted since the last :func:`take` (event name and category)."""


def _category(event: str, args: tuple[Any, ...]) -> str | None:
    if event == "open":
        mode, flags = (args[1], args[2]) if len(args) >= 3 else (None, 0)
        writes = isinstance(flags, int) and flags & _WRITE_FLAGS
        if writes or (isinstance(mode, str) and _WRITE_MODES & set(mode)):
            return "file writes"
        return None
    found = _EVENTS.get(event)
    if found is not None:
        return found
    for prefix, category in _PREFIXES:
        if event.startswith(prefix):
            return category
    return None


def _hook(event: str, args: tuple[Any, ...]) -> None:
    category = _category(event, args)
    if category is not None:
        violations.append(f"{event} ({category})")
        raise PermissionError(f"the sandbox does not allow {category} ({event})")


def _no_threads(*args: Any, **kwargs: Any) -> Any:
    violations.append("_thread.start_new_thread (threads)")
    raise RuntimeError("the sandbox does not allow threads")


def _no_signal_changes(*args: Any, **kwargs: Any) -> Any:
    violations.append("signal handlers or timers (signals)")
    raise PermissionError("the sandbox does not allow changing signal handlers or timers")


def _no_wait(seconds: float | SupportsIndex) -> None:
    """``time.sleep`` inside an instance: checks its argument like the original, then returns at once."""
    if float(seconds) < 0:
        raise ValueError("sleep length must be non-negative")


_SIGNAL_CALLS = ("signal", "setitimer", "alarm", "siginterrupt", "pthread_sigmask", "sigwait", "pause")


def install() -> None:
    """Install the audit hook and the tripwires (once per child, before any untrusted code)."""
    sys.addaudithook(_hook)
    _thread.start_new_thread = _no_threads
    threading._start_new_thread = _no_threads  # type: ignore[attr-defined]
    time.sleep = _no_wait
    for module in (signal, importlib.import_module("_signal")):
        for name in _SIGNAL_CALLS:
            if hasattr(module, name):
                setattr(module, name, _no_signal_changes)


def take() -> list[str]:
    """Return and clear the recorded violations."""
    found = list(violations)
    violations.clear()
    return found
