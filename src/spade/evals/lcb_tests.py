"""LiveCodeBench's test cases and the program that runs one of them in the sandbox.

A problem's tests are its public and private ``test_cases``: each ``{"input", "output", "testtype"}`` with
``testtype`` ``stdin`` (the program reads ``input`` on standard input and must print ``output``) or
``functional`` (LeetCode style: ``input`` is one JSON value per line, the arguments of the starter code's
method ``metadata["func_name"]``; ``output`` is the JSON of the return value). The private cases are
published either as a JSON string or as base64 of a zlib-compressed pickle of that JSON string; the pickle is
read by an unpickler that refuses every global, so it can only yield plain values.

:func:`case_program` builds the program for one test as LiveCodeBench's ``testing_util`` grades it: the
solution after the benchmark's import prelude; without a ``func_name`` the solution runs as ``__main__`` with
the input on ``sys.stdin`` and its printed lines are compared (stripped; equal as text, or as lists of
decimals); with one, ``Solution().<func_name>(*args)`` (the module-level function when there is no ``class
Solution``) is compared with ``==`` (a tuple counts as a list). The program raises ``AssertionError`` on a
wrong answer, so :func:`spade.sandbox.programs.run_program` reports it as failed. What it does not do: stop a
solution from subverting the grader it runs beside (see :mod:`spade.sandbox.programs`).
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import pickle
import zlib
from dataclasses import dataclass
from typing import Any, Literal

from spade.evals.base import EvalError

TestType = Literal["stdin", "functional"]

PRELUDE = (
    "from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\n"
    "from heapq import *\nfrom bisect import *\nfrom copy import *\nfrom math import *\nfrom random import *\n"
    "from statistics import *\nfrom itertools import *\nfrom functools import *\nfrom operator import *\n"
    "from io import *\nfrom sys import *\nfrom json import *\nfrom builtins import *\nfrom typing import *\n"
    "import string\nimport re\nimport datetime\nimport collections\nimport heapq\nimport bisect\nimport copy\n"
    "import math\nimport random\nimport statistics\nimport itertools\nimport functools\nimport operator\n"
    "import io\nimport sys\nimport json\nsys.setrecursionlimit(50000)\n"
)
"""LiveCodeBench's ``import_string``: what every solution may use without importing it."""

HARNESS = r"""
import io as _io
import json as _json
import sys as _sys
from decimal import Decimal as _Decimal


def _lines(text):
    return [line.strip() for line in text.strip().split("\n")]


def _decimals(line):
    try:
        return [_Decimal(x) for x in line.split()]
    except Exception:
        return None


def _same_output(got, want):
    a, b = _lines(got), _lines(want)
    if len(a) != len(b):
        return "wrong answer: %d output lines, expected %d" % (len(a), len(b))
    for k, (x, y) in enumerate(zip(a, b)):
        if x != y and (_decimals(x) is None or _decimals(x) != _decimals(y)):
            return "wrong answer at line %d: %r != %r" % (k, x[:80], y[:80])
    return None


def _run_stdin(code, given):
    real_in, real_out = _sys.stdin, _sys.stdout
    _sys.stdin = _io.TextIOWrapper(_io.BytesIO(given.encode("utf-8")), encoding="utf-8")
    _sys.stdout = out = _io.StringIO()
    try:
        exec(code, {"__name__": "__main__"})
    except SystemExit:
        pass
    finally:
        _sys.stdin, _sys.stdout = real_in, real_out
    return out.getvalue()


def _run_call(code, source, func, given):
    real_out = _sys.stdout
    _sys.stdout = _io.StringIO()
    try:
        scope = {"__name__": "__solution__"}
        exec(code, scope)
        owner = scope["Solution"]() if "class Solution" in source else None
        method = getattr(owner, func) if owner is not None else scope[func]
        got = method(*[_json.loads(line) for line in given.split("\n")])
    finally:
        _sys.stdout = real_out
    return list(got) if isinstance(got, tuple) else got


def _check(source, prelude, func, given, want):
    try:
        code = compile(prelude + "\n\n" + source, "<solution>", "exec")
    except SyntaxError as exc:
        raise AssertionError("compilation error: %s" % exc) from None
    if func is None:
        problem = _same_output(_run_stdin(code, given), want)
    else:
        got = _run_call(code, source, func, given)
        problem = None if got == _json.loads(want) else "wrong answer: %r != %r" % (str(got)[:80], want[:80])
    if problem is not None:
        raise AssertionError(problem)
"""
"""The grader, as the head of every test program (names start with ``_`` to stay out of the solution's way)."""


@dataclass(frozen=True, slots=True)
class Case:
    """One test case."""

    given: str
    want: str
    kind: TestType


class _PlainUnpickler(pickle.Unpickler):
    """Unpickles plain values only: any class or function reference is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused global {module}.{name}")


def parse_cases(raw: Any, where: str) -> list[Case]:
    """The test cases of a ``*_test_cases`` field: a JSON string, or base64(zlib(pickle(JSON string)))."""
    text = raw
    if isinstance(raw, str):
        try:
            return _cases(json.loads(raw), where)
        except json.JSONDecodeError:
            text = _unpack(raw, where)
    if not isinstance(text, str):
        raise EvalError(f"livecodebench: {where} is not a JSON string of test cases")
    try:
        return _cases(json.loads(text), where)
    except json.JSONDecodeError as exc:
        raise EvalError(f"livecodebench: {where} is not JSON after decompressing: {exc}") from None


def _unpack(raw: str, where: str) -> Any:
    try:
        blob = zlib.decompress(base64.b64decode(raw.encode("utf-8"), validate=False))
        return _PlainUnpickler(io.BytesIO(blob)).load()
    except (binascii.Error, zlib.error, pickle.UnpicklingError, EOFError, ValueError) as exc:
        raise EvalError(
            f"livecodebench: {where} is neither JSON nor base64(zlib(pickle)) test cases: {exc}"
        ) from None


def _cases(value: Any, where: str) -> list[Case]:
    if not isinstance(value, list):
        raise EvalError(f"livecodebench: {where} is not a list of test cases")
    out = []
    for t in value:
        if not isinstance(t, dict) or not {"input", "output", "testtype"} <= set(t):
            raise EvalError(f"livecodebench: {where} has a test case without input, output and testtype")
        if t["testtype"] not in ("stdin", "functional"):
            raise EvalError(
                f"livecodebench: {where} has the test type {t['testtype']!r} (stdin or functional)"
            )
        out.append(Case(str(t["input"]), str(t["output"]), t["testtype"]))
    return out


def case_program(source: str, case: Case, func: str | None) -> str:
    """The program that runs ``source`` on ``case`` and raises AssertionError unless it passes.

    As in LiveCodeBench, ``func`` (the problem's ``metadata["func_name"]``) decides the mode: a call of that
    method when given, standard input and output otherwise.
    """
    return f"{HARNESS}\n_check({source!r}, {PRELUDE!r}, {func!r}, {case.given!r}, {case.want!r})\n"


def extract_code(reply: str) -> str:
    """LiveCodeBench's rule: the text between the last two lines that hold ```````` (empty without two)."""
    lines = reply.split("\n")
    fences = [i for i, line in enumerate(lines) if "```" in line]
    if len(fences) < 2:
        return ""
    return "\n".join(lines[fences[-2] + 1 : fences[-1]])
