"""Where an evaluation's engine output goes: a log file beside the results folder, then inside it.

A model engine (vLLM, transformers, torch) writes its own log lines, loading bars and warnings to the
process's stdout and stderr; ``spade eval`` keeps them out of the terminal as ``spade train`` and ``spade
play`` do (:func:`spade.cli.console.output_to`), so that stdout holds the results only.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout, suppress
from pathlib import Path

from spade import stopping
from spade.cli.console import Console, output_to

ENGINE_LOG = "engine.log"
"""The engine's output in the results folder (while the evaluation runs: a hidden file beside it)."""


@contextmanager
def engine_output(out: Path, *, verbose: bool) -> Iterator[Console]:
    """Send the engine's output to a log while the block runs (:func:`spade.cli.console.output_to`); yield the
    terminal's streams.

    The log is ``.<out name>.<pid>.engine.log`` beside the results folder while the evaluation runs (the
    process id: evaluations started in the same second in one folder keep their own logs). When the block
    ends, it moves into the results folder (``out/engine.log``) if the folder was written; otherwise (a
    failure) it stays beside it as ``<out name>.engine.log`` when it holds anything, and is removed when the
    block ended on a stop request or the engine wrote nothing (with the folders made for it). ``Console.log``
    says where it ended up. ``verbose``: nothing is redirected (Python's own ``print`` goes to stderr).
    """
    log = out.parent / f".{out.name}.{os.getpid()}.{ENGINE_LOG}"
    made = [p for p in (log.parent, *log.parent.parents) if not p.exists()]
    if verbose or not _start(log):  # a folder that cannot be written: the results would fail the same way
        # Nothing is redirected, but what Python code prints (a package's "." per generated item) goes to
        # stderr: stdout holds the results only.
        with output_to(None) as console, redirect_stdout(sys.stderr):
            yield console
        return
    keep = True
    try:
        with output_to(log) as console:
            yield console
    except stopping.Interrupted:
        keep = False
        raise
    finally:
        console.log = _place_log(log, out, keep=keep)
        for folder in () if console.log else reversed(made):
            with suppress(OSError):  # not empty: it stays
                folder.rmdir()


def _start(log: Path) -> bool:
    """Create the (empty) log and its folders; whether that worked."""
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.touch()
    except OSError:
        return False
    return True


def _place_log(log: Path, out: Path, *, keep: bool) -> Path | None:
    """Where the finished evaluation's engine log goes (see :func:`engine_output`); None: removed."""
    try:
        empty = log.stat().st_size == 0
    except FileNotFoundError:  # removed by someone else while the evaluation ran: nothing to place
        return None
    if not keep or empty:
        log.unlink(missing_ok=True)
        return None
    final = out / ENGINE_LOG if out.is_dir() else out.parent / f"{out.name}.{ENGINE_LOG}"
    os.replace(log, final)
    return final
