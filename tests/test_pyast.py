"""Parsing generated code from several threads at once, and code nested too deeply to parse."""

from __future__ import annotations

import ast
import gc
import threading
from collections.abc import Callable, Iterator

import pytest

from spade import envs
from spade.checker import check_env
from spade.checker.static import parse
from spade.config import CheckerConfig
from spade.memory.archive import ast_fingerprint
from spade.pyast import parse_expression, parse_module
from spade.sandbox.inprocess import InProcessSandbox

DEEP = "class DeepEnv:\n    x = " + "1 + " * 100_000 + "1\n"
"""Legal Python that the parser cannot build a tree for (RecursionError inside ``ast.parse``)."""


class _Cycle:
    """Garbage with a finalizer: collecting it runs Python code, which lets another thread take the GIL."""

    def __del__(self) -> None:
        pass


@pytest.fixture
def frequent_gc() -> Iterator[None]:
    saved = gc.get_threshold()
    gc.set_threshold(50)
    yield
    gc.set_threshold(*saved)


def _run_threads(targets: list[Callable[[], None]]) -> list[BaseException]:
    errors: list[BaseException] = []

    def guarded(target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            except BaseException as exc:  # collected for the assertion below
                errors.append(exc)

        return run

    threads = [threading.Thread(target=guarded(t)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_checker_parses_survive_other_threads_parsing_at_once(frequent_gc: None) -> None:
    """CPython 3.11 shares the AST builder's depth counter between threads; unguarded, this run raises
    ``SystemError: AST constructor recursion depth mismatch`` several times in these 60 parses (it failed
    a training run: the checker parses in worker threads)."""
    source = envs.spec("countdown").source()
    cfg = CheckerConfig()
    stop = threading.Event()

    def check() -> None:
        for _ in range(20):
            _code, tree, found = parse(source, cfg.max_source_chars)
            assert tree is not None
            assert not found

    def fingerprint() -> None:
        for _ in range(20):
            ast_fingerprint(source)

    def litter() -> None:
        while not stop.is_set():
            a, b = _Cycle(), _Cycle()
            a.other, b.other = b, a  # type: ignore[attr-defined]

    litterer = threading.Thread(target=litter)
    litterer.start()
    try:
        errors = _run_threads([check, check, fingerprint])
    finally:
        stop.set()
        litterer.join()
    assert errors == []


def test_code_nested_too_deeply_is_a_syntax_error() -> None:
    with pytest.raises(SyntaxError, match="nested too deeply"):
        parse_module(DEEP)
    with pytest.raises(SyntaxError, match="nested too deeply"):
        parse_expression("-" * 100_000 + "1")
    assert isinstance(parse_expression("f(a=1)"), ast.Call)


def test_the_checker_rejects_code_nested_too_deeply_with_a_finding() -> None:
    report = check_env(DEEP, InProcessSandbox(), seed=1)
    assert [f.code.value for f in report.fatal] == ["SYNTAX_ERROR"]
    assert "nested too deeply" in report.fatal[0].message
