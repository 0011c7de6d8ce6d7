"""The environment archive (SPEC §9): an SQLite file in the run directory (``memory.sqlite``).

Every designed environment is kept with its provenance (skill, parent, grounding document, creation step),
checker findings, hint and per-step history of win rate and regret; rejected sources stay for audit and as
negative examples. Exact copies (same SHA-256) are *merged* into the existing record; valid code with the
same normalised-AST fingerprint (or the same behaviour-trace hash) as an archived environment is stored as
*rejected* with a ``duplicate`` finding. Each logical write is one transaction (WAL journal), so a process
killed at any moment leaves a consistent file; reopening it resumes, and :meth:`Memory.rollback_to` drops
whatever was written after the step of the checkpoint being resumed.
"""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from spade.config import MemoryConfig
from spade.config.types import Setting
from spade.memory.records import (
    AddOutcome,
    AddResult,
    EnvRecord,
    EnvStatus,
    FindingLike,
    HistoryPoint,
    MemoryStoreError,
    NegativeExample,
    StoredFinding,
    ast_fingerprint,
    record_from_row,
    source_hash,
)
from spade.memory.select import eviction_order, in_band, pick_examples, pick_replay
from spade.types import EnvSource

__all__ = [
    "FILENAME",
    "AddOutcome",
    "AddResult",
    "EnvRecord",
    "EnvStatus",
    "FindingLike",
    "HistoryPoint",
    "Memory",
    "MemoryStoreError",
    "NegativeExample",
    "StoredFinding",
    "archive_sources",
    "ast_fingerprint",
    "seed_sources",
    "source_hash",
]

FILENAME = "memory.sqlite"
SCHEMA_VERSION = "1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS envs (
    seq INTEGER PRIMARY KEY,
    env_id TEXT NOT NULL UNIQUE,
    skill TEXT NOT NULL,
    code TEXT NOT NULL,
    code_hash TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    trace_hash TEXT,
    parent_id TEXT,
    doc_id TEXT,
    created_step INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('valid', 'rejected', 'evicted')),
    findings TEXT NOT NULL,
    hint TEXT NOT NULL,
    is_seed INTEGER NOT NULL,
    duplicate_of TEXT,
    evicted_step INTEGER
);
CREATE INDEX IF NOT EXISTS envs_skill_status ON envs (skill, status);
CREATE INDEX IF NOT EXISTS envs_code_hash ON envs (code_hash);
CREATE INDEX IF NOT EXISTS envs_fingerprint ON envs (fingerprint);
CREATE INDEX IF NOT EXISTS envs_trace_hash ON envs (trace_hash);
CREATE TABLE IF NOT EXISTS history (
    env_id TEXT NOT NULL REFERENCES envs (env_id) ON DELETE CASCADE,
    step INTEGER NOT NULL,
    win_rate REAL NOT NULL,
    regret REAL,
    plays INTEGER NOT NULL,
    PRIMARY KEY (env_id, step)
);
"""

_SELECT = """
SELECT {columns},
    (SELECT h.win_rate FROM history h WHERE h.env_id = e.env_id ORDER BY h.step DESC LIMIT 1) AS win_rate,
    (SELECT h.regret FROM history h WHERE h.env_id = e.env_id AND h.regret IS NOT NULL
        ORDER BY h.step DESC LIMIT 1) AS regret,
    (SELECT MAX(h.step) FROM history h WHERE h.env_id = e.env_id) AS last_step
FROM envs e
"""


def seed_sources(setting: Setting, skills: Sequence[str] = (), names: Sequence[str] = ()) -> list[EnvSource]:
    """The seed library of ``setting`` as sources (env ids ``seed:<name>``, created at step 0); with
    ``skills``, only the seeds of those skills; with ``names``, only those seeds."""
    from spade import envs  # noqa: PLC0415 - imports the whole seed library; only needed for a warm start

    out = []
    for name in envs.names(setting):
        spec = envs.spec(name)
        wanted = (not skills or spec.skill in skills) and (not names or name in names)
        if spec.source_path is not None and wanted:
            out.append(EnvSource(code=spec.source(), skill=spec.skill, env_id=f"seed:{name}"))
    return out


def archive_sources(run_dir: str | Path) -> list[EnvSource]:
    """The valid environments of another run's archive, read-only, as sources (e.g. a fixed pool).

    Ids (and parent ids) become ``pool_<id>`` so they cannot collide with the reading run's own ids; skill
    and grounding document are kept, and every source counts as created at step 0 of the reading run.

    Raises:
        MemoryStoreError: ``run_dir`` has no readable archive of this schema version.
    """
    path = Path(run_dir) / FILENAME
    if not path.is_file():
        raise MemoryStoreError(f"{path} does not exist; point at a run directory that holds {FILENAME}")
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            schema = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if schema is None or schema[0] != SCHEMA_VERSION:
                found = "no schema" if schema is None else f"schema {schema[0]}"
                raise MemoryStoreError(
                    f"{path} has {found}; this version reads archive schema {SCHEMA_VERSION}"
                )
            rows = db.execute(
                "SELECT env_id, skill, code, parent_id, doc_id FROM envs WHERE status = 'valid' ORDER BY seq"
            ).fetchall()
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise MemoryStoreError(f"cannot read the archive {path}: {exc}") from exc
    return [
        EnvSource(code, skill, f"pool_{env_id}", f"pool_{parent}" if parent else None, doc)
        for env_id, skill, code, parent, doc in rows
    ]


class _Hashes(NamedTuple):
    code_hash: str
    fingerprint: str
    trace_hash: str | None


class Memory:
    """The archive: one instance per process, used from one thread, on a run directory's ``memory.sqlite``."""

    def __init__(self, path: str | Path, cfg: MemoryConfig | None = None) -> None:
        self.path = Path(path)
        self.cfg = cfg if cfg is not None else MemoryConfig()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        with self._tx():
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    self._db.execute(statement)
            row = self._db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if row is None:
                self._db.execute("INSERT INTO meta VALUES ('schema', ?)", (SCHEMA_VERSION,))
            elif row[0] != SCHEMA_VERSION:
                raise MemoryStoreError(
                    f"{self.path} has archive schema {row[0]}, this version reads {SCHEMA_VERSION}; "
                    "start a new run directory"
                )

    @classmethod
    def in_run_dir(cls, run_dir: str | Path, cfg: MemoryConfig | None = None) -> Memory:
        """Open (or create) ``<run_dir>/memory.sqlite``."""
        return cls(Path(run_dir) / FILENAME, cfg)

    def close(self) -> None:
        """Close the connection (committed writes are already on disk)."""
        self._db.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # -- reading ------------------------------------------------------------------------------------------

    def _query(
        self, where: str = "", params: Sequence[Any] = (), newest: int | None = None
    ) -> list[EnvRecord]:
        sql = _SELECT.format(columns="e.*") + (f" WHERE {where}" if where else "")
        sql += " ORDER BY e.seq" if newest is None else f" ORDER BY e.seq DESC LIMIT {int(newest)}"
        return [record_from_row(row) for row in self._db.execute(sql, params)]

    def get(self, env_id: str) -> EnvRecord:
        """One record; unknown ids raise KeyError."""
        found = self._query("e.env_id = ?", (env_id,))
        if not found:
            raise KeyError(f"no environment {env_id!r} in {self.path}")
        return found[0]

    def records(self, skill: str | None = None, status: EnvStatus | None = None) -> list[EnvRecord]:
        """Records in insertion order, optionally of one skill and/or status."""
        clauses, params = [], []
        if skill is not None:
            clauses.append("e.skill = ?")
            params.append(skill)
        if status is not None:
            clauses.append("e.status = ?")
            params.append(status.value)
        return self._query(" AND ".join(clauses), params)

    def history(self, env_id: str) -> list[HistoryPoint]:
        """Per-step statistics of one environment, oldest first."""
        rows = self._db.execute(
            "SELECT step, win_rate, regret, plays FROM history WHERE env_id = ? ORDER BY step", (env_id,)
        )
        return [HistoryPoint(r["step"], r["win_rate"], r["regret"], r["plays"]) for r in rows]

    def played(self) -> list[tuple[str, int, float, int]]:
        """(env id, step, win rate, plays) of every environment at every step it was played."""
        rows = self._db.execute("SELECT env_id, step, win_rate, plays FROM history ORDER BY step, env_id")
        return [(r["env_id"], r["step"], r["win_rate"], r["plays"]) for r in rows]

    def find_match(self, code: str, trace_hash: str | None = None) -> tuple[AddOutcome, str] | None:
        """Whether ``code`` would be merged (same text) or refused as a duplicate, and of which record."""
        return self._match(source_hash(code), ast_fingerprint(code), trace_hash)

    def _match(
        self, code_hash: str, fingerprint: str, trace_hash: str | None
    ) -> tuple[AddOutcome, str] | None:
        sql = "SELECT env_id FROM envs WHERE code_hash = ? ORDER BY seq"
        hit = self._db.execute(sql, (code_hash,)).fetchone()
        if hit is not None:
            return AddOutcome.MERGED, str(hit[0])
        sql = (
            "SELECT env_id FROM envs WHERE status != 'rejected' AND (fingerprint = ? OR trace_hash = ?)"
            " ORDER BY seq"
        )
        hit = self._db.execute(sql, (fingerprint, trace_hash)).fetchone()
        return (AddOutcome.DUPLICATE, str(hit[0])) if hit is not None else None

    # -- writing ------------------------------------------------------------------------------------------

    def add(
        self,
        source: EnvSource,
        *,
        status: EnvStatus = EnvStatus.VALID,
        findings: Iterable[FindingLike] = (),
        hint: str = "",
        trace_hash: str | None = None,
        is_seed: bool = False,
    ) -> AddResult:
        """Archive one environment (merges and duplicates: see the module doc); may evict over capacity."""
        stored = [StoredFinding(f.code, f.message) for f in findings]
        hashes = _Hashes(source_hash(source.code), ast_fingerprint(source.code), trace_hash)
        with self._tx():
            match = self._match(*hashes)
            if match is not None and match[0] is AddOutcome.MERGED:
                existing = self._db.execute(
                    "SELECT status FROM envs WHERE env_id = ?", (match[1],)
                ).fetchone()
                return AddResult(match[1], AddOutcome.MERGED, EnvStatus(existing[0]), matched=match[1])
            if self._db.execute("SELECT 1 FROM envs WHERE env_id = ?", (source.env_id,)).fetchone():
                raise ValueError(f"environment id {source.env_id!r} is already archived with different code")
            outcome, duplicate_of = AddOutcome.ADDED, None
            if match is not None and status is EnvStatus.VALID:
                outcome, duplicate_of, status = AddOutcome.DUPLICATE, match[1], EnvStatus.REJECTED
                stored.append(StoredFinding("duplicate", f"same behaviour or code structure as {match[1]}"))
            self._insert(
                source,
                status=status,
                findings=stored,
                hint=hint,
                hashes=hashes,
                is_seed=is_seed,
                duplicate_of=duplicate_of,
            )
            if status is EnvStatus.VALID and not is_seed:
                self._enforce_capacity(source.created_step)
            final = self._db.execute("SELECT status FROM envs WHERE env_id = ?", (source.env_id,)).fetchone()
        return AddResult(source.env_id, outcome, EnvStatus(final[0]), matched=duplicate_of)

    def _insert(
        self,
        source: EnvSource,
        *,
        status: EnvStatus,
        findings: Sequence[StoredFinding],
        hint: str,
        hashes: _Hashes,
        is_seed: bool,
        duplicate_of: str | None,
    ) -> None:
        self._db.execute(
            "INSERT INTO envs (env_id, skill, code, code_hash, fingerprint, trace_hash, parent_id, doc_id,"
            " created_step, status, findings, hint, is_seed, duplicate_of) VALUES"
            " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                source.env_id,
                source.skill,
                source.code,
                hashes.code_hash,
                hashes.fingerprint,
                hashes.trace_hash,
                source.parent_id,
                source.doc_id,
                source.created_step,
                status.value,
                json.dumps([{"code": f.code, "message": f.message} for f in findings]),
                hint,
                int(is_seed),
                duplicate_of,
            ),
        )

    def _enforce_capacity(self, step: int) -> None:
        where = " WHERE e.status = 'valid' AND e.is_seed = 0"
        excess = self._db.execute("SELECT COUNT(*) FROM envs e" + where).fetchone()[0] - self.cfg.capacity
        if excess <= 0:
            return
        columns = "e.env_id, e.created_step"
        live = self._db.execute(_SELECT.format(columns=columns) + where + " ORDER BY e.seq").fetchall()
        keys = [(r["win_rate"], r["regret"], r["created_step"]) for r in live]
        for i in eviction_order(keys, self._band)[:excess]:
            self._db.execute(
                "UPDATE envs SET status = 'evicted', evicted_step = ? WHERE env_id = ?",
                (step, live[i]["env_id"]),
            )

    def set_hint(self, env_id: str, hint: str) -> None:
        """Store the hint written for an environment."""
        with self._tx():
            if self._db.execute("UPDATE envs SET hint = ? WHERE env_id = ?", (hint, env_id)).rowcount == 0:
                raise KeyError(f"no environment {env_id!r} in {self.path}")

    def record_stats(
        self, env_id: str, step: int, win_rate: float, regret: float | None = None, plays: int = 0
    ) -> None:
        """Record (or overwrite) one environment's statistics at ``step``; regret None: not measured."""
        with self._tx():
            if self._db.execute("SELECT 1 FROM envs WHERE env_id = ?", (env_id,)).fetchone() is None:
                raise KeyError(
                    f"no environment {env_id!r} in {self.path}; add it before recording statistics"
                )
            self._db.execute(
                "INSERT OR REPLACE INTO history (env_id, step, win_rate, regret, plays)"
                " VALUES (?, ?, ?, ?, ?)",
                (env_id, step, win_rate, regret, plays),
            )

    def warm_start(self, sources: Iterable[EnvSource]) -> int:
        """Archive seed environments (e.g. :func:`seed_sources`); already present ones are skipped."""
        return sum(self.add(s, is_seed=True).outcome is AddOutcome.ADDED for s in sources)

    def rollback_to(self, step: int) -> None:
        """Forget everything written for steps after ``step`` (resume from that step's checkpoint)."""
        with self._tx():
            self._db.execute("DELETE FROM history WHERE step > ?", (step,))
            self._db.execute("DELETE FROM envs WHERE created_step > ? AND is_seed = 0", (step,))
            self._db.execute(
                "UPDATE envs SET status = 'valid', evicted_step = NULL WHERE evicted_step > ?", (step,)
            )

    # -- selection ----------------------------------------------------------------------------------------

    @property
    def _band(self) -> tuple[float, float]:
        return self.cfg.band_low, self.cfg.band_high

    def examples(self, skill: str, n: int, seed: int, exclude: Collection[str] = ()) -> list[EnvRecord]:
        """Up to ``n`` valid same-skill prompt examples (see :func:`spade.memory.select.pick_examples`)."""
        valid = [r for r in self.records(skill, EnvStatus.VALID) if r.env_id not in exclude]
        return pick_examples(valid, n, random.Random(seed), self._band, self.cfg.example_pool)

    def negatives(self, skill: str, n: int, seed: int) -> list[NegativeExample]:
        """Up to ``n`` same-skill environments to avoid: recent rejected ones, then badly calibrated ones."""
        rng = random.Random(seed)
        rejected = [
            NegativeExample(r, tuple(f"{f.code}: {f.message}" for f in r.findings) or ("rejected",))
            for r in self._query(
                "e.skill = ? AND e.status = 'rejected' AND e.duplicate_of IS NULL",
                (skill,),
                newest=max(n, self.cfg.example_pool),
            )
        ]
        rng.shuffle(rejected)
        if len(rejected) < n:
            valid = self.records(skill, EnvStatus.VALID)
            off = [r for r in valid if r.win_rate is not None and not in_band(r.win_rate, self._band)]
            rng.shuffle(off)
            rejected += [
                NegativeExample(r, (_calibration_reason(r.win_rate or 0.0, self._band),)) for r in off
            ]
        return rejected[:n]

    def replay(self, n: int, step: int, seed: int, skill: str | None = None) -> list[EnvRecord]:
        """Up to ``n`` valid played environments, PLR-style: high regret and long unplayed ones favoured."""
        valid = self.records(skill, EnvStatus.VALID)
        cfg = self.cfg
        return pick_replay(
            valid, n, step, random.Random(seed), temperature=cfg.replay_temperature, rho=cfg.replay_staleness
        )

    def metrics(self) -> dict[str, float]:
        """Counts by status, seeds, and valid records in the learnable band."""
        counts = {s.value: 0 for s in EnvStatus}
        for status, count in self._db.execute("SELECT status, COUNT(*) FROM envs GROUP BY status"):
            counts[status] = count
        valid = self.records(status=EnvStatus.VALID)
        out = {f"memory/{k}": float(v) for k, v in counts.items()}
        out["memory/seeds"] = float(sum(r.is_seed for r in valid))
        out["memory/in_band"] = float(sum(in_band(r.win_rate, self._band) for r in valid))
        return out


def _calibration_reason(win_rate: float, band: tuple[float, float]) -> str:
    if win_rate > band[1]:
        return f"too easy: the agent already wins {win_rate:.0%} of plays"
    return f"too hard: the agent wins only {win_rate:.0%} of plays"
