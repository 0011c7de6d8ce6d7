"""What reaches the terminal: spade's own lines, and the model engine's output kept in a log file.

A model engine (vLLM, transformers, torch) writes its own INFO and WARNING lines, progress bars and native
warnings to stdout and stderr, from this process and from the processes it starts; to a user they read as
problems ("Failed to load weights") among spade's lines. :func:`output_to` sends the process's file
descriptors 1 and 2 to a log file and hands spade a :class:`Console` on the real terminal, so the engine is
silenced at the source (redirecting Python's logging would miss native code and child processes).
:func:`run_output` does this for a training run, whose log is ``RUN/logs/engine-<start time>.log``; the
errors a run ends on still reach the terminal, with the tail of that log (:func:`engine_tail`).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from spade.types import plural

LOGS = "logs"
"""A run directory's folder of engine logs (``RUN/logs/engine-<start time>.log``)."""

PROBLEM_MARKS = ("ERROR", "CRITICAL", "Traceback (most recent call last)", "Error:")
"""Substrings that make an engine log line a problem worth naming on the terminal."""


@dataclass(slots=True)
class Console:
    """Streams on the terminal, and the log that receives everything else (None: nothing redirected).

    A run that does not exist yet logs to a hidden file beside its folder (the run's setup may still refuse
    or replace the folder); :meth:`settle` moves it to ``final`` once the run is there.
    """

    out: TextIO
    err: TextIO
    log: Path | None = None
    final: Path | None = None
    """Where ``log`` belongs: ``RUN/logs/engine-*.log``."""

    def settle(self) -> bool:
        """Move the log into the run once the run is created (the open file keeps receiving output); whether
        the log is in the run now."""
        if self.log is None or self.final is None:
            return False
        if self.log != self.final:
            if not (self.final.parent.parent / "config.json").is_file() or not self.log.exists():
                return False
            self.final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(self.log, self.final)
            self.log = self.final
        return True

    def kept_log(self) -> Path | None:
        """The log, when it exists and holds something (an empty log is dropped when the block ends)."""
        if self.log is None or not self.log.is_file() or self.log.stat().st_size == 0:
            return None
        return self.log


@contextlib.contextmanager
def output_to(log: Path | None) -> Iterator[Console]:
    """Send what this process and the processes it starts write to stdout and stderr to ``log`` (appended)
    while the block runs, and yield a :class:`Console` on the real stdout and stderr. ``None``: nothing is
    redirected (``--verbose``) and the console is ``sys.stdout``/``sys.stderr``."""
    if log is None:
        yield Console(sys.stdout, sys.stderr)
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with log.open("ab") as f:
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
    out, err = _terminal(sys.stdout, 1, saved[0]), _terminal(sys.stderr, 2, saved[1])
    try:
        yield Console(out, err, log)
    finally:
        for stream, std in ((out, sys.stdout), (err, sys.stderr)):
            if stream is not std:
                with contextlib.suppress(OSError, ValueError):  # a terminal gone away: nothing to tell
                    stream.close()
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
            sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def _terminal(stream: TextIO, fd: int, saved: int) -> TextIO:
    """A stream on the terminal: a new one on ``saved`` when ``stream`` writes to file descriptor ``fd`` (now
    redirected), else ``stream`` itself (a stream that captures in memory, as a test harness installs)."""
    try:
        on_fd = stream.fileno() == fd
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        on_fd = False
    return os.fdopen(os.dup(saved), "w", buffering=1) if on_fd else stream


def engine_log_name(started: float | None = None) -> str:
    """``engine-<local start time>.log``: one log per start, so a resumed run keeps its earlier logs; the
    other ranks of a multi-process launch add theirs (``engine-<time>-rank1.log``)."""
    rank = os.environ.get("RANK", "0") if int(os.environ.get("WORLD_SIZE", "1")) > 1 else "0"
    suffix = f"-rank{rank}" if rank != "0" else ""
    return time.strftime(f"engine-%Y%m%d-%H%M%S{suffix}.log", time.localtime(started))


@contextlib.contextmanager
def run_output(run_dir: Path, *, verbose: bool, fresh: bool) -> Iterator[Console]:
    """:func:`output_to` for a training run: the engine's output goes to ``run_dir/logs/engine-*.log``.

    ``fresh``: the run is set up anew (created, or replaced with --overwrite), so the log starts as a hidden
    file beside it, ``.<name>.engine-*.log``, and moves into the run once the run exists
    (:meth:`Console.settle`). When the block ends an empty log is dropped, and so is a folder made for it.
    """
    if verbose:
        with output_to(None) as console:
            yield console
        return
    final = run_dir / LOGS / engine_log_name()
    log = run_dir.parent / f".{run_dir.name}.{final.name}" if fresh else final
    made = [p for p in (log.parent, *log.parent.parents) if not p.exists()]
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.touch()
    except OSError:  # the run's own setup meets the same error and reports it: nothing is redirected
        with output_to(None) as console:
            yield console
        return
    try:
        with output_to(log) as redirected:
            console = Console(redirected.out, redirected.err, log, final)
            yield console
    finally:
        console.settle()
        _drop_if_empty(console.log or log, made)


def _drop_if_empty(log: Path, made: list[Path]) -> None:
    """Remove an empty log, its ``logs`` folder when that is left empty, and the folders made for it."""
    if not log.is_file() or log.stat().st_size > 0:
        return
    log.unlink()
    for folder in (log.parent, *made) if log.parent.name == LOGS else made:
        with contextlib.suppress(OSError):  # not empty (or gone): it stays
            folder.rmdir()


def engine_tail(log: Path, lines: int = 15) -> list[str]:
    """The last ``lines`` non-blank lines of an engine log (carriage-return progress bars: their last state)."""
    with log.open(errors="replace") as f:
        tail = deque((ln.rsplit("\r", 1)[-1].rstrip() for ln in f if ln.strip()), maxlen=lines)
    return [ln for ln in tail if ln]


def engine_problems(log: Path) -> int:
    """How many lines of an engine log report an error (:data:`PROBLEM_MARKS`)."""
    with log.open(errors="replace") as f:
        return sum(any(mark in ln for mark in PROBLEM_MARKS) for ln in f)


def failure_note(console: Console | None) -> str:
    """What to print before the message of a run that failed: the engine log's last lines and where it is
    ("" when the engine wrote nothing)."""
    log = console.kept_log() if console is not None else None
    if log is None:
        return ""
    tail = "\n".join(f"  | {ln}" for ln in engine_tail(log))
    return f"The engine's last lines ({log}):\n{tail}" if tail else ""


def finish_note(console: Console | None) -> str:
    """The line after a finished run: where the engine log is, and how many problems it reports."""
    log = console.kept_log() if console is not None else None
    if log is None:
        return ""
    problems = engine_problems(log)
    verb = "reports" if problems == 1 else "report"
    said = f"{plural(problems, 'line')} there {verb} an error; " if problems else ""
    return f"Engine output: {log} ({said}--verbose shows it here)"


class Ticker:
    """Progress lines stamped with the time since the start, and a note of how long a phase has run while it
    prints nothing (an engine starting, a warm start, a design being written).

    On a terminal the note is one line rewritten in place (a carriage return) each second and cleared by the
    next progress line; elsewhere (a pipe, a file) it is a plain line after ``every_s`` seconds, then after
    twice, four and at most eight times as long again, so that a phase of ten minutes adds about eight. A
    background thread calls :meth:`tick` once a second between :meth:`start` and :meth:`stop`; writing to a
    terminal that went away there is not an error (the next progress line, on the caller's thread, raises
    it).
    """

    def __init__(
        self,
        out: TextIO,
        *,
        label: str = "setting up the run and starting the model",
        idle_s: float = 5.0,
        every_s: float = 15.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._out, self._clock, self._idle_s, self._every_s = out, clock, idle_s, every_s
        self._started = self._since = self._noted = clock()
        self._label = label
        self._tty = _isatty(out)
        self._shown = False  # a note stands on the terminal's last line
        self._notes = 0  # plain notes since the last progress line
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spade-ticker", daemon=True)

    def line(self, text: str) -> None:
        """Print one progress line (the phase it names is what the next notes count the time of)."""
        with self._lock:
            now = self._clock()
            self._clear()
            self._out.write(f"[{now - self._started:7.1f}s] {text}\n")
            self._out.flush()
            self._label, self._since, self._noted, self._notes = text, now, now, 0

    def tick(self) -> None:
        """Note how long the current phase has gone on, when it has printed nothing for a while."""
        with self._lock:
            now = self._clock()
            idle = now - self._since
            gap = self._every_s * 2 ** min(self._notes, 3)
            if idle < self._idle_s or (not self._tty and now - self._noted < gap):
                return
            note = f"[{now - self._started:7.1f}s] {self._label}: still going ({idle:.0f} s)"
            with contextlib.suppress(OSError, ValueError):
                if self._tty:
                    width = shutil.get_terminal_size().columns - 1
                    self._out.write("\r\033[K" + note[:width])
                    self._shown = True
                else:
                    self._out.write(note + "\n")
                    self._notes += 1
                self._out.flush()
            self._noted = now

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """End the thread and clear a note left on the terminal."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        with self._lock, contextlib.suppress(OSError, ValueError):
            self._clear()
            self._out.flush()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.tick()

    def _clear(self) -> None:
        if self._shown:
            self._out.write("\r\033[K")
            self._shown = False


@contextlib.contextmanager
def ticking(out: TextIO) -> Iterator[Ticker]:
    """A started :class:`Ticker` on ``out``, stopped when the block ends."""
    ticker = Ticker(out)
    ticker.start()
    try:
        yield ticker
    finally:
        ticker.stop()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError, AttributeError):
        return False
