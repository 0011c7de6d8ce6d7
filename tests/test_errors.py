"""Every exception class the project defines derives from ``spade.errors.SpadeError``."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import spade
from spade.config import ConfigError
from spade.errors import SpadeError
from spade.sandbox import SandboxError

SRC = Path(spade.__file__).parent
BUILTIN_ERRORS = frozenset(
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type) and issubclass(value, BaseException)
)


def _class_bases() -> dict[str, set[str]]:
    """Class name -> names of its bases, over every module of the package (by name: unique enough here)."""
    bases: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ClassDef):
                names = {
                    b.id if isinstance(b, ast.Name) else b.attr
                    for b in node.bases
                    if isinstance(b, ast.Name | ast.Attribute)
                }
                bases.setdefault(node.name, set()).update(names)
    return bases


def _reaches(
    name: str, targets: frozenset[str], bases: dict[str, set[str]], seen: frozenset[str] = frozenset()
) -> bool:
    if name in targets:
        return True
    return any(_reaches(b, targets, bases, seen | {name}) for b in bases.get(name, ()) if b not in seen)


def test_every_project_exception_derives_from_spade_error() -> None:
    bases = _class_bases()
    errors = [name for name in bases if _reaches(name, BUILTIN_ERRORS, bases)]
    assert len(errors) >= 10, errors  # the scan found the project's error classes
    strays = [
        name
        for name in errors
        if not _reaches(name, frozenset({"SpadeError"}), bases) and name != "SpadeError"
    ]
    assert strays == [], f"derive these from spade.errors.SpadeError: {strays}"


def test_errors_keep_the_builtin_base_callers_catch() -> None:
    assert issubclass(ConfigError, SpadeError)
    assert issubclass(ConfigError, ValueError)
    assert issubclass(SandboxError, SpadeError)
