"""The root of every error this project raises on purpose.

Each boundary names its own subclass (``ConfigError``, ``SandboxError``, ``CorpusError``, ...); catching
:class:`SpadeError` catches all of them and nothing else, so a CLI can print one line for any of them and
let real bugs surface as tracebacks.
"""

from __future__ import annotations


class SpadeError(Exception):
    """An error raised by spade on purpose; the message says what is wrong and how to fix it."""


class SetupError(SpadeError):
    """A run (or an evaluation) cannot start as configured; the message says what to change."""
