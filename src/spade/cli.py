"""The `spade` command line: each subcommand parses its config and calls one library function."""

from __future__ import annotations


def main() -> None:
    """Entry point of the `spade` console script."""
    raise SystemExit("spade: no subcommands yet")
