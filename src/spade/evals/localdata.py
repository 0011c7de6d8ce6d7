"""Benchmarks that no package ships, read from a local copy in their published format (``--data PATH``).

A suite here takes ``opts.params["data"]``: a file (``.jsonl``, ``.json``, ``.csv``, ``.parquet``) or a
folder of such files (read in name order). A missing path, an unreadable file or records without the fields
the benchmark publishes each raise one :class:`EvalError` naming the path and what was expected, before any
model is loaded (suites call :func:`data_path` and their loader in ``check``).

Selection is shared: ``opts.tasks`` empty selects every item; otherwise each task is an item id or a category
(AIME year, GPQA domain, LiveCodeBench difficulty, ...); ``opts.limit`` keeps the first N selected items in
the file's order. Single-turn question-and-answer items (AIME, GPQA) run through :func:`run_qa`.
"""

from __future__ import annotations

import csv
import functools
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from spade.config import EvalOptions
from spade.evals.base import EvalError, ItemResult, Progress, Workload, plural
from spade.evals.chat import ChatEpisode, Judge, chat_episode, gather_bounded
from spade.types import Message, Policy

DATA_PARAM = "data"
"""The parameter (``--data PATH`` or ``--param data=PATH``) that names the local copy."""
EXTENSIONS = (".jsonl", ".json", ".csv", ".parquet")
"""Files a folder is read from (other files are ignored)."""

Record = dict[str, Any]


def data_path(suite: str, opts: EvalOptions) -> Path:
    """The local copy ``opts`` names (EvalError when none is named or it does not exist)."""
    raw = opts.params.get(DATA_PARAM)
    if raw is None or raw == "":
        raise EvalError(
            f"suite {suite!r} reads a local copy of the benchmark, which no package ships: pass --data PATH "
            "(docs/eval.md says where to get it and which file)"
        )
    path = Path(str(raw)).expanduser()
    if not path.exists():
        raise EvalError(f"{suite}: --data {path} does not exist (docs/eval.md names the file to fetch)")
    return path


def data_files(suite: str, path: Path, extensions: Sequence[str] = EXTENSIONS) -> list[Path]:
    """``path`` itself, or the files under the folder ``path`` with one of ``extensions``, in name order."""
    if path.is_file():
        if path.suffix.lower() not in extensions:
            raise EvalError(f"{suite}: {path} is not a {'/'.join(extensions)} file")
        return [path]
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in extensions)
    if not files:
        raise EvalError(f"{suite}: the folder {path} holds no {'/'.join(extensions)} file")
    return files


def read_records(suite: str, path: Path, extensions: Sequence[str] = EXTENSIONS) -> list[Record]:
    """Every record of the file or folder ``path`` (EvalError when a file cannot be read or parsed)."""
    return [record for _, record in read_located(suite, path, extensions)]


def read_located(suite: str, path: Path, extensions: Sequence[str] = EXTENSIONS) -> list[tuple[str, Record]]:
    """Every record of ``path`` with where it is (``aime_2025.jsonl line 3``, ``gpqa.csv row 2``,
    ``x.json record 0``), for errors that point at the line to fix."""
    out: list[tuple[str, Record]] = []
    for file in data_files(suite, path, extensions):
        stat = file.stat()
        out += _read_file(suite, str(file), stat.st_mtime_ns, stat.st_size)
    if not out:
        raise EvalError(f"{suite}: {path} holds no records")
    return out


@functools.lru_cache(maxsize=8)
def _read_file(suite: str, name: str, mtime_ns: int, size: int) -> list[tuple[str, Record]]:
    """One file's records with their places, cached by path, modification time and size (``check``,
    ``workload`` and ``run`` all read the data)."""
    del mtime_ns, size  # only part of the cache key
    file = Path(name)
    try:
        if file.suffix.lower() == ".parquet":
            import pyarrow.parquet as pq  # noqa: PLC0415 - only Parquet copies need it

            rows = [(f"{file.name} row {k}", r) for k, r in enumerate(pq.read_table(file).to_pylist())]
        elif file.suffix.lower() == ".csv":
            with file.open(encoding="utf-8-sig", newline="") as handle:
                rows = [(f"{file.name} row {k}", r) for k, r in enumerate(csv.DictReader(handle))]
        else:
            rows = _json_rows(file.name, file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise EvalError(f"{suite}: cannot read {file}: {exc}") from None
    except Exception as exc:  # boundary: pyarrow raises its own error types on a damaged file
        raise EvalError(f"{suite}: cannot read {file}: {type(exc).__name__}: {exc}") from None
    bad = next((where for where, r in rows if not isinstance(r, dict)), None)
    if bad is not None:
        raise EvalError(f"{suite}: {file} is not a list of records (JSON objects or table rows): see {bad}")
    return rows


def _json_rows(name: str, text: str) -> list[tuple[str, Any]]:
    """A JSON array (or an object holding one under ``data``), else JSON Lines (one object per line)."""
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        return [_json_line(name, n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if isinstance(whole, dict) and isinstance(whole.get("data"), list):
        whole = whole["data"]
    rows = whole if isinstance(whole, list) else [whole]
    return [(f"{name} record {k}", r) for k, r in enumerate(rows)]


def _json_line(name: str, n: int, line: str) -> tuple[str, Any]:
    try:
        return f"{name} line {n}", json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"line {n} is not JSON ({exc.msg} at column {exc.colno})") from None


def field_of(suite: str, record: Mapping[str, Any], names: Sequence[str], where: str) -> Any:
    """The first of ``names`` that ``record`` has (EvalError naming them all when it has none)."""
    for name in names:
        if name in record and record[name] is not None:
            return record[name]
    raise EvalError(
        f"{suite}: {where} has no field {' / '.join(repr(n) for n in names)} (its fields: "
        f"{', '.join(sorted(map(str, record))[:12])}); is it the published file? (docs/eval.md)"
    )


@dataclass(frozen=True, slots=True)
class QAItem:
    """One single-turn question with its judge."""

    item_id: str
    category: str
    messages: list[Message]
    judge: Judge
    detail: dict[str, Any] = field(default_factory=dict)


def select(
    suite: str, items: Sequence[Any], opts: EvalOptions, key: Callable[[Any], tuple[str, ...]]
) -> list[Any]:
    """The items ``opts.tasks`` and ``opts.limit`` select; ``key`` gives an item's id, category and any
    further names it answers to."""
    chosen = list(items)
    if opts.tasks:
        wanted = set(opts.tasks)
        known = {part for item in items for part in key(item)}
        unknown = sorted(wanted - known)
        if unknown:
            categories = sorted({key(i)[1] for i in items})
            raise EvalError(
                f"{suite}: unknown task(s) {unknown}; a task is an item id or a category "
                f"({', '.join(categories[:10])})"
            )
        chosen = [i for i in items if wanted & set(key(i))]
    return chosen[: opts.limit] if opts.limit is not None else chosen


def unique_ids(ids: Sequence[str]) -> list[str]:
    """``ids`` with repeats told apart (``7``, ``7#2``): a folder may hold two contests that both number 1-15."""
    seen: dict[str, int] = {}
    out = []
    for i in ids:
        seen[i] = seen.get(i, 0) + 1
        out.append(i if seen[i] == 1 else f"{i}#{seen[i]}")
    return out


def workload_of(n: int, opts: EvalOptions, what: str = "item") -> Workload:
    """The workload of ``n`` selected items (``--limit`` caps them in all)."""
    cap = f" (--limit {opts.limit})" if opts.limit is not None else ""
    return Workload.of(n, f"{plural(n, what)} from --data{cap}", opts)


async def run_qa(
    suite: str, items: Sequence[QAItem], policy: Policy, opts: EvalOptions, progress: Progress
) -> list[ItemResult]:
    """Score every item ``opts.episodes`` times with one reply each (no second try: the benchmarks' rule)."""
    params = opts.sampling()
    jobs = [(item, ep) for item in items for ep in range(opts.episodes)]
    calls = [
        functools.partial(chat_episode, policy, item.messages, params, item.judge, 1) for item, _ in jobs
    ]
    outcomes = await gather_bounded(calls, opts.concurrency, progress)
    by_item: dict[str, list[ChatEpisode]] = {}
    for (item, _), outcome in zip(jobs, outcomes, strict=True):
        by_item.setdefault(item.item_id, []).append(outcome)
    return [
        ItemResult(
            suite=suite,
            item_id=item.item_id,
            category=item.category,
            scores=tuple(e.score for e in by_item[item.item_id]),
            detail={
                **item.detail,
                "errors": sum(1 for e in by_item[item.item_id] if e.error),
                "episodes": [e.to_dict() for e in by_item[item.item_id]],
            },
        )
        for item in items
    ]


class LocalQASuite(ABC):
    """A suite of one-reply questions read from ``--data``, each scored 0 or 1 by its item's judge."""

    name: ClassVar[str]
    unit: ClassVar[str]
    """What one item is called in the workload line (``problem``, ``question``)."""

    @abstractmethod
    def items(self, opts: EvalOptions) -> list[QAItem]:
        """The selected items of the local copy (EvalError for a missing path, an unreadable file, missing
        fields)."""

    def check(self, opts: EvalOptions) -> None:
        """Read the local copy (see :meth:`items`)."""
        self.items(opts)

    def workload(self, opts: EvalOptions) -> Workload:
        """The selected items."""
        return workload_of(len(self.items(opts)), opts, self.unit)

    async def run(self, policy: Policy, opts: EvalOptions, progress: Progress) -> list[ItemResult]:
        """One reply per episode, scored 0 or 1."""
        return await run_qa(self.name, self.items(opts), policy, opts, progress)
