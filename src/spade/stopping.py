"""Stopping a run on request: SIGINT/SIGTERM set one process-wide flag that every engine checks.

Generation runs in worker threads (``asyncio.to_thread``) that cancelling a task cannot stop, and
``asyncio.run`` waits for them before it returns. So a stop is cooperative: :func:`request` sets a flag that
the hf backend checks between decode steps and the vllm backend between engine steps (both then end their
batch at once), :func:`run_until_stopped` cancels the loop's main task when the flag is set, and the run
ends with :class:`Interrupted`. Synchronous work that holds the event loop, so that no cancellation reaches
it (the warm start's supervised steps, the trainer's forward and backward passes), calls :func:`check`
between its pieces instead. Checkpoints are atomic, so the run resumes from its last complete step.

:func:`handle_signals` installs the handlers (the CLI does): the first signal asks for a clean stop and arms
a watchdog that ends the process after ``grace_s`` seconds whatever is still running; a second signal ends
it at once. Either way the message given (the exact resume command) is printed first, and ``on_forced_exit``
runs: the process was asked to stop, so the CLI records the run as stopped, not as killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, NoReturn, TextIO, TypeVar

from spade.errors import SpadeError

T = TypeVar("T")

_STOP = threading.Event()
_SIGNAL: list[str] = []


class Interrupted(SpadeError):
    """The run was stopped on request (a signal); it is resumable from its last checkpoint."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(f"stopped by {signal_name}")
        self.signal_name = signal_name


def request(signal_name: str = "a stop request") -> None:
    """Ask everything that checks the flag to stop as soon as it can."""
    if not _STOP.is_set():
        _SIGNAL.append(signal_name)
    _STOP.set()


def requested() -> bool:
    """Whether a stop was requested (cheap: engines call it at every decode step)."""
    return _STOP.is_set()


def check() -> None:
    """Raise :class:`Interrupted` when a stop was requested: the stop point of synchronous loops.

    Raises:
        Interrupted: a stop was requested; the caller's work is abandoned (the last checkpoint stands).
    """
    if _STOP.is_set():
        raise Interrupted(_SIGNAL[0] if _SIGNAL else "a stop request")


def clear() -> None:
    """Forget a stop request (a new run in the same process, or a test)."""
    _STOP.clear()
    _SIGNAL.clear()


async def _watch(task: asyncio.Task[Any], poll_s: float) -> None:
    while not _STOP.is_set():
        await asyncio.sleep(poll_s)
    task.cancel()


async def run_until_stopped(coro: Coroutine[Any, Any, T], *, poll_s: float = 0.1) -> T:
    """Await ``coro``; when a stop is requested, cancel it and raise :class:`Interrupted`.

    The cancellation unwinds ``coro`` (its ``finally`` blocks and context managers close files, the
    sandbox and the archive) while the engines' worker threads return at their next decode step.
    """
    main = asyncio.ensure_future(coro)
    watcher = asyncio.ensure_future(_watch(main, poll_s))
    try:
        return await main
    except asyncio.CancelledError:
        if _STOP.is_set():
            raise Interrupted(_SIGNAL[0] if _SIGNAL else "a stop request") from None
        raise
    finally:
        watcher.cancel()


def exit_now(code: int, message: str = "", *, console: TextIO | None = None) -> NoReturn:
    """Flush the standard streams (after ``message``, written to ``console``, default stderr) and end the
    process without interpreter teardown."""
    with contextlib.suppress(OSError, ValueError):
        if message:
            _write(console or sys.stderr, message + "\n")
        for stream in (console, sys.stdout, sys.stderr):
            if stream is not None:
                with contextlib.suppress(RuntimeError):  # a write to it was interrupted: see _write
                    stream.flush()
    os._exit(code)


def _write(stream: TextIO, text: str) -> None:
    """``text`` to ``stream``, or straight to its file when a signal handler interrupted a write to the same
    stream (a second Ctrl-C while the first one's line is written: its buffer refuses a reentrant call)."""
    try:
        stream.write(text)
    except RuntimeError:
        os.write(stream.fileno(), text.encode())


@contextlib.contextmanager
def handle_signals(
    message: str,
    *,
    grace_s: float = 10.0,
    on_forced_exit: Callable[[], None] | None = None,
    console: TextIO | None = None,
) -> Iterator[None]:
    """SIGINT and SIGTERM stop the run cleanly (see the module docstring) while the block runs.

    Args:
        message: printed when the process has to be ended by force (the resume command).
        grace_s: how long a clean stop may take before the watchdog ends the process.
        on_forced_exit: called (from the watchdog thread or the signal handler) just before the process is
            ended by force; it must be quick and must not raise.
        console: where the stop messages go (default stderr; the terminal while engine output is logged).
    """

    def force(code: int, text: str) -> None:
        if on_forced_exit is not None:
            on_forced_exit()
        exit_now(code, text, console=console)

    def on_signal(signum: int, _frame: object) -> None:
        name = signal.Signals(signum).name
        code = 128 + signum
        if _STOP.is_set():  # second signal: do not wait any longer
            force(code, f"\n{name} again: ending now. {message}")
        request(name)
        # The signal may land while a progress line is being written to the same stream: see _write.
        _write(console or sys.stderr, f"\n{name}: stopping (a second {name} ends at once)\n")
        watchdog = threading.Timer(
            grace_s, force, args=(code, f"still busy {grace_s:g} s after {name}: ending now. {message}")
        )
        watchdog.daemon = True
        watchdog.start()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
