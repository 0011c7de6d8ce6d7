"""The command line: the ``spade`` commands (:mod:`spade.cli.app`) and what only they use: the train, eval and
play commands, runs, report and its charts and page, export, the run summary and the console."""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """The ``spade`` command (:func:`spade.cli.app.main`), imported on call: a module of this package loads
    without the whole command line."""
    from spade.cli.app import main as app_main  # noqa: PLC0415

    return app_main(argv)
