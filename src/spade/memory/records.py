"""The archive's records (:mod:`spade.memory.archive`): their types, and the hashes that identify a source.

Two sources are the same environment when their text is identical (:func:`source_hash`) or when their parsed
trees match once docstrings, comments and layout are set aside (:func:`ast_fingerprint`).
"""

from __future__ import annotations

import ast
import enum
import hashlib
import json
import sqlite3
from dataclasses import dataclass
from typing import Protocol

from spade.errors import SpadeError
from spade.pyast import parse_module


class MemoryStoreError(SpadeError, RuntimeError):
    """The archive file cannot be used as asked; the message says why and what to do."""


class EnvStatus(enum.Enum):
    """Where an archived environment stands."""

    VALID = "valid"
    """Passed the checker: eligible for play, prompt examples and replay."""
    REJECTED = "rejected"
    """Failed the checker or duplicated an archived environment: kept for audit and negative examples."""
    EVICTED = "evicted"
    """Was valid, pushed out by the capacity limit: kept for audit and duplicate checks only."""


class AddOutcome(enum.Enum):
    """What :meth:`Memory.add` did."""

    ADDED = "added"
    """A new record was stored with the requested status."""
    MERGED = "merged"
    """Exactly the same source is archived already: nothing stored, the existing record's id is returned."""
    DUPLICATE = "duplicate"
    """Same AST fingerprint or behaviour trace as an archived valid environment: stored as rejected."""


class FindingLike(Protocol):
    """Anything with a finding code and message (e.g. a checker finding)."""

    @property
    def code(self) -> str:
        """Short machine-readable identifier."""
        ...

    @property
    def message(self) -> str:
        """What is wrong and how to fix it."""
        ...


@dataclass(frozen=True, slots=True)
class StoredFinding:
    """A checker finding as archived."""

    code: str
    message: str


@dataclass(frozen=True, slots=True)
class EnvRecord:
    """One archived environment with its latest statistics."""

    env_id: str
    skill: str
    code: str
    code_hash: str
    fingerprint: str
    trace_hash: str | None
    parent_id: str | None
    doc_id: str | None
    created_step: int
    status: EnvStatus
    findings: tuple[StoredFinding, ...]
    hint: str
    is_seed: bool
    duplicate_of: str | None
    win_rate: float | None
    """Latest recorded win rate (None: never played)."""
    regret: float | None
    """Latest measured regret (None: never measured)."""
    last_step: int | None
    """Latest step with recorded statistics."""


@dataclass(frozen=True, slots=True)
class AddResult:
    """The outcome of :meth:`Memory.add`."""

    env_id: str
    """The stored record's id (for MERGED: the existing record's id)."""
    outcome: AddOutcome
    status: EnvStatus
    """Status of the record ``env_id`` names."""
    matched: str | None = None
    """MERGED / DUPLICATE: the archived environment the source matched."""


@dataclass(frozen=True, slots=True)
class NegativeExample:
    """An environment the designer should not imitate, with why."""

    record: EnvRecord
    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class HistoryPoint:
    """Statistics of one environment at one step."""

    step: int
    win_rate: float
    regret: float | None
    plays: int


def source_hash(code: str) -> str:
    """SHA-256 of the exact source text."""
    return hashlib.sha256(code.encode("utf-8", errors="surrogatepass")).hexdigest()


_BLOCKS = ("body", "orelse", "finalbody", "handlers", "cases")
_DEFS = ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef


def _is_docstring(stmt: ast.stmt) -> bool:
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Constant)
        and isinstance(stmt.value.value, str)
    )


def _strip_docstrings(tree: ast.Module) -> None:
    # Definitions sit only in statement blocks, so only those are visited (a full ast.walk costs 3x more).
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, _DEFS) and node.body and _is_docstring(node.body[0]):
            node.body = node.body[1:] or [ast.Pass()]
        for name in _BLOCKS:
            stack.extend(getattr(node, name, ()))


def ast_fingerprint(code: str) -> str:
    """SHA-256 of the parsed tree without docstrings, comments or layout; unparsable code hashes its text."""
    try:
        tree = parse_module(code)
        _strip_docstrings(tree)
        dumped = ast.dump(tree, annotate_fields=False, include_attributes=False)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "text:" + source_hash(code)
    return "ast:" + hashlib.sha256(dumped.encode()).hexdigest()


def record_from_row(row: sqlite3.Row) -> EnvRecord:
    """The record an ``envs`` row of the archive holds."""
    d = {k: row[k] for k in row.keys() if k not in ("seq", "evicted_step")}  # noqa: SIM118 - Row has no __iter__ of keys
    d["status"] = EnvStatus(d["status"])
    d["findings"] = tuple(StoredFinding(f["code"], f["message"]) for f in json.loads(d["findings"]))
    d["is_seed"] = bool(d["is_seed"])
    return EnvRecord(**d)
