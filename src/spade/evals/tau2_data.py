"""Reading a tau2-bench domain folder: ``db.json``, ``policy.md``, ``tasks.json`` and ``split_tasks.json``.

The layout is the repository's ``data/tau2/domains/<domain>/`` (sierra-research/tau2-bench): the domain's
``get_environment`` reads ``db.json`` into its ``FlightDB`` (airline) or ``RetailDB`` (retail) and
``policy.md`` as the agent's policy, and ``get_tasks`` reads ``tasks.json`` and keeps the ids of a split in
``split_tasks.json`` (default ``base``). ``--data`` may name the ``domains/`` folder instead: the domain is
then the one the task selection names (``tau2_bench:retail``), or the only ported one it holds.
A missing file, a file that does not parse, or records outside the schema raise one :class:`EvalError`
naming the file.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spade.evals import tau2_retail
from spade.evals.base import EvalError
from spade.evals.tau2_airline import normalise_db
from spade.evals.tau2_eval import Task, TaskError, parse_task, unscored_reason

DOMAINS = ("airline", "retail")
"""Domains whose tools are ported."""
NOT_PORTED = {
    "telecom": (
        "its tasks start from initialization_actions on the simulated user's phone, whose 30 device tools the "
        "user simulator here cannot call, and are scored by ENV_ASSERTION functions over that device"
    )
}
"""tau2 domains this port refuses, and why."""
FILES = ("db.json", "policy.md", "tasks.json")
DEFAULT_SPLIT = "base"
_RECORDS = {
    "users": ("user_id", "payment_methods", "reservations"),
    "reservations": ("reservation_id", "user_id", "flights", "passengers", "payment_history", "cabin"),
    "flights": ("flight_number", "origin", "destination", "dates"),
}
"""Per table of the airline database, fields the tools rely on (checked on load)."""


@dataclass(frozen=True, slots=True)
class Domain:
    """One domain's data, read once."""

    name: str
    policy: str
    db: dict[str, Any]
    """The normalised database; every conversation plays on its own copy."""
    tasks: tuple[Task, ...]
    """The scorable tasks of the split, in file order."""
    left_out: tuple[tuple[str, str], ...]
    """(task id, why) for tasks of the split this port cannot score."""


def domain_folder(suite: str, path: Path, wanted: Sequence[str] = ()) -> Path:
    """``path`` itself when it is a domain folder; for a folder holding domain folders (``data/tau2/domains``)
    the one ``wanted`` (the task selection) names, or the only ported one there."""
    if path.is_dir() and path.name not in DOMAINS:
        present = [name for name in DOMAINS if (path / name).is_dir()]
        chosen = [name for name in present if name in wanted] or present
        if len(chosen) > 1:
            raise EvalError(
                f"{suite}: --data {path} holds the domains {', '.join(chosen)}: choose one, "
                f"e.g. {suite}:{chosen[-1]} (or --tasks {chosen[-1]}), or pass its folder"
            )
        if chosen:
            path = path / chosen[0]
    if path.name in NOT_PORTED or (path.is_dir() and set(wanted) & set(NOT_PORTED)):
        name = path.name if path.name in NOT_PORTED else sorted(set(wanted) & set(NOT_PORTED))[0]
        raise EvalError(f"{suite}: the {name} domain is not ported: {NOT_PORTED[name]}")
    if not path.is_dir() or path.name not in DOMAINS:
        raise EvalError(
            f"{suite}: --data {path} is not a tau2-bench domain folder of a ported domain ({', '.join(DOMAINS)}): "
            "pass data/tau2/domains/<domain> of the tau2-bench repository, or data/tau2/domains"
        )
    for name in FILES:
        if not (path / name).is_file():
            raise EvalError(f"{suite}: {path} has no {name} (a tau2 domain folder holds {', '.join(FILES)})")
    return path


def _json(suite: str, file: Path) -> Any:
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise EvalError(f"{suite}: cannot read {file}: {exc}") from None


def _check_db(suite: str, file: Path, db: Any, domain: str) -> dict[str, Any]:
    if not isinstance(db, dict):
        raise EvalError(f"{suite}: {file} is not a {domain} db.json (expected an object of tables)")
    if domain == "retail":
        try:
            return tau2_retail.normalise_db(db)
        except tau2_retail.RetailDataError as exc:
            raise EvalError(f"{suite}: {file}: {exc}") from None
    for table, fields in _RECORDS.items():
        records = db.get(table)
        if not isinstance(records, dict):
            raise EvalError(
                f"{suite}: {file} has no {table!r} object (an airline db.json maps ids to records)"
            )
        for key, record in records.items():
            missing = [f for f in fields if not isinstance(record, dict) or f not in record]
            if missing:
                raise EvalError(f"{suite}: {file}: {table} {key!r} lacks {', '.join(missing)}")
    extra = sorted(set(db) - set(_RECORDS))
    if extra:
        raise EvalError(f"{suite}: {file} has fields an airline db.json has not: {', '.join(extra)}")
    return normalise_db(db)


def _tasks(suite: str, file: Path) -> list[Task]:
    records = _json(suite, file)
    if not isinstance(records, list):
        raise EvalError(f"{suite}: {file} is not a JSON list of tasks")
    tasks = []
    for k, record in enumerate(records):
        try:
            tasks.append(parse_task(record))
        except TaskError as exc:
            raise EvalError(f"{suite}: {file} task {k}: {exc}") from None
    ids = [t.task_id for t in tasks]
    if len(set(ids)) != len(ids):
        raise EvalError(f"{suite}: {file} repeats a task id")
    return tasks


def _split(suite: str, folder: Path, split: str | None) -> set[str] | None:
    file = folder / "split_tasks.json"
    if not file.is_file():
        if split is not None:
            raise EvalError(f"{suite}: --param split={split} needs {file}, which is missing")
        return None
    splits = _json(suite, file)
    if not isinstance(splits, dict) or not all(isinstance(v, list) for v in splits.values()):
        raise EvalError(f"{suite}: {file} is not an object of task-id lists")
    name = split or DEFAULT_SPLIT
    if name not in splits:
        raise EvalError(f"{suite}: {file} has no split {name!r} (it has: {', '.join(sorted(splits))})")
    return {str(i) for i in splits[name]}


def load_domain(suite: str, path: Path, split: Any = None, wanted: Sequence[str] = ()) -> Domain:
    """The domain folder ``path`` (or the one of the folder holding it that ``wanted`` names), read and
    checked (EvalError naming the file)."""
    folder = domain_folder(suite, path, wanted)
    stamps = tuple((folder / n).stat().st_mtime_ns for n in FILES)
    return _load(suite, str(folder.resolve()), None if split is None else str(split), stamps)


@functools.lru_cache(maxsize=4)
def _load(suite: str, name: str, split: str | None, stamps: tuple[int, ...]) -> Domain:
    """Cached by folder, split and the files' modification times (``check``, ``workload`` and ``run`` all read)."""
    del stamps  # only part of the cache key
    folder = Path(name)
    db = _check_db(suite, folder / "db.json", _json(suite, folder / "db.json"), folder.name)
    try:
        policy = (folder / "policy.md").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalError(f"{suite}: cannot read {folder / 'policy.md'}: {exc}") from None
    keep = _split(suite, folder, split)
    tasks = [t for t in _tasks(suite, folder / "tasks.json") if keep is None or t.task_id in keep]
    left_out = tuple((t.task_id, why) for t in tasks if (why := unscored_reason(t)))
    skipped = {i for i, _ in left_out}
    return Domain(folder.name, policy, db, tuple(t for t in tasks if t.task_id not in skipped), left_out)
