"""Parsing Python text from any thread, with one kind of failure.

The checker parses generated code in worker threads while the event loop's thread parses too (memory
fingerprints, edit spans). CPython 3.11 keeps the AST constructor's recursion depth in interpreter-wide state,
so two threads building trees at once can fail with ``SystemError: AST constructor recursion depth mismatch``
(python/cpython#106905). Every parse in the package therefore goes through one lock; trees are small and a
parse takes milliseconds.

Code nested too deeply for the parser (``x = 1+1+...+1`` a hundred thousand times) raises ``RecursionError``
or ``MemoryError`` from ``ast.parse``; here it raises :class:`SyntaxError` like any other unparsable text,
so callers handle one exception.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse_module(source: str) -> ast.Module:
    """The module tree of ``source``; :class:`SyntaxError` when it does not parse."""
    with _LOCK:
        try:
            return ast.parse(source)
        except (RecursionError, MemoryError) as exc:
            raise SyntaxError(f"the code is nested too deeply to parse ({type(exc).__name__})") from None


def parse_expression(source: str) -> ast.expr:
    """The expression tree of ``source``; :class:`SyntaxError` when it is not one expression."""
    with _LOCK:
        try:
            return ast.parse(source, mode="eval").body
        except (RecursionError, MemoryError) as exc:
            raise SyntaxError(
                f"the expression is nested too deeply to parse ({type(exc).__name__})"
            ) from None
