"""Evaluation results on disk: a folder with ``summary.json`` and one ``<suite>.jsonl`` of items per suite.

A folder is written whole or not at all: everything goes to a hidden temporary folder beside it, which is
renamed into place at the end, so an interrupted or failed evaluation leaves nothing half-written.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spade.evals.base import EvalError, ItemResult

SUMMARY = "summary.json"


@dataclass(frozen=True, slots=True)
class StoredResults:
    """A results folder read back: its summary and every suite's items by id."""

    folder: Path
    summary: dict[str, Any]
    items: dict[str, dict[str, ItemResult]]
    """suite -> item id -> result."""


def check_writable(out: Path, *, overwrite: bool) -> None:
    """Refuse to replace an existing folder unless asked (before any work is done)."""
    if out.exists() and not overwrite:
        raise EvalError(f"{out} already exists; choose another --out or pass --overwrite")


def write_results(
    out: Path, summary: Mapping[str, Any], items: Mapping[str, Sequence[ItemResult]], *, overwrite: bool
) -> Path:
    """Write ``summary.json`` and ``<suite>.jsonl`` files into ``out`` atomically; returns ``out``."""
    check_writable(out, overwrite=overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        for suite, results in items.items():
            with (tmp / f"{suite}.jsonl").open("w") as f:
                for r in results:
                    f.write(json.dumps(item_to_dict(r), sort_keys=True) + "\n")
        (tmp / SUMMARY).write_text(json.dumps(dict(summary), indent=2, sort_keys=True) + "\n")
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def item_to_dict(r: ItemResult) -> dict[str, Any]:
    """One JSONL line."""
    return {
        "suite": r.suite,
        "item_id": r.item_id,
        "category": r.category,
        "scores": list(r.scores),
        "score": r.score,
        "detail": r.detail,
    }


def item_from_dict(d: Mapping[str, Any]) -> ItemResult:
    """Inverse of :func:`item_to_dict`."""
    return ItemResult(d["suite"], d["item_id"], d["category"], tuple(d["scores"]), dict(d.get("detail", {})))


def read_results(folder: Path) -> StoredResults:
    """Read a results folder (``spade eval --out``, or a run's ``eval/step_N``).

    Raises:
        EvalError: the folder holds no ``summary.json``.
    """
    path = folder / SUMMARY
    if not path.is_file():
        raise EvalError(f"{folder} holds no evaluation results ({SUMMARY} missing)")
    summary = json.loads(path.read_text())
    items: dict[str, dict[str, ItemResult]] = {}
    for s in summary.get("suites", []):
        name = s["suite"]
        file = folder / f"{name}.jsonl"
        lines = file.read_text().splitlines() if file.is_file() else []
        items[name] = {r.item_id: r for r in (item_from_dict(json.loads(x)) for x in lines if x.strip())}
    return StoredResults(folder, summary, items)


def latest_run_results(run: Path) -> Path:
    """The newest in-training evaluation folder of a run (``<run>/eval/step_N`` with the largest N)."""
    folders = [p for p in (run / "eval").glob("step_*") if (p / SUMMARY).is_file()]
    if not folders:
        raise EvalError(
            f"run {run} has no evaluation results: train with --eval.every N, or run "
            f"`spade eval --run {run} --out DIR` and compare DIR"
        )
    return max(folders, key=lambda p: int(p.name.removeprefix("step_")))


def resolve_results(path: Path) -> StoredResults:
    """A results folder, or a run directory (its latest in-training evaluation)."""
    if (path / SUMMARY).is_file():
        return read_results(path)
    if (path / "config.json").is_file():
        return read_results(latest_run_results(path))
    raise EvalError(f"{path} is neither an evaluation results folder nor a run directory")
