"""``spade export RUN``: a run's valid environments as a dataset and as a released-pool folder.

Two folders under the output (default ``<run>/export``):

* ``pool/`` — the layout of the authors' released static pool: ``games/game_XXXXX_YYY_<skill>.py`` (XXXXX: the
  index in the export, YYY: the step that created it; tool-use environments are named ``tool_…``),
  ``manifest.jsonl`` (one line per file with its provenance: run, step, parent, grounding document, checker
  findings, hint, win-rate/regret statistics, SHA-256) and ``checksums.sha256`` (``sha256sum -c`` format).
  ``spade train --mode fixed_pool --pool <out>/pool`` trains on it.
* ``dataset/`` — the same rows (with the source code) as a Hugging Face datasets folder in the Hub's Parquet
  layout: ``data/train-00000-of-00001.parquet`` and a ``README.md`` card whose ``configs`` point at it, so
  ``datasets.load_dataset("<out>/dataset")`` (or ``load_dataset("parquet", data_files=...)``) reads it; it is
  written with pyarrow, so ``datasets`` need not be installed to export.

``format="openenv"`` writes ``openenv/`` instead: an OpenEnv server and client package
(:mod:`spade.ecosystem.openenv_export`); ``format="verifiers"`` writes ``verifiers/``, a verifiers taskset
package (:mod:`spade.ecosystem.verifiers_export`).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spade.ecosystem import ExportedEnv, ExportFormat, package_name
from spade.errors import SpadeError
from spade.memory.archive import FILENAME, EnvRecord, EnvStatus, HistoryPoint, Memory
from spade.rundir import RunDir
from spade.types import plural

CARD = """---
license: other
configs:
- config_name: default
  data_files:
  - split: train
    path: data/train-*.parquet
---
# Environments of spade run `{run}`

{n} environments that passed the validation ladder, exported by `spade export` from step {step}.
Each row holds the environment's source (`code`) and its provenance: creation step, parent environment,
grounding document id, checker findings, hint, and win-rate/regret history. The same files in the released
pool layout are in `../pool` (`games/`, `manifest.jsonl`, `checksums.sha256`).
"""


class ExportError(SpadeError):
    """The export cannot be written; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class ExportSummary:
    """What :func:`export_run` wrote."""

    out: Path
    pool: Path
    dataset: Path
    environments: int
    package: Path | None = None
    """The ecosystem package (``format`` other than ``pool``)."""
    name: str = ""
    """The package's import name: its id in the ecosystem (OpenEnv's ``name``, verifiers' taskset ``id``)."""


def _file_name(index: int, record: EnvRecord, setting: str) -> str:
    prefix = "tool" if setting == "tool_use" else "game"
    return f"{prefix}_{index:05d}_{record.created_step:03d}_{record.skill}.py"


def _row(record: EnvRecord, history: list[HistoryPoint], file: str, run: str, setting: str) -> dict[str, Any]:
    return {
        "file": f"games/{file}",
        "env_id": record.env_id,
        "skill": record.skill,
        "setting": setting,
        "run": run,
        "created_step": record.created_step,
        "parent_id": record.parent_id,
        "doc_id": record.doc_id,
        "is_seed": record.is_seed,
        "sha256": hashlib.sha256(record.code.encode("utf-8")).hexdigest(),
        "hint": record.hint,
        "findings": [{"code": f.code, "message": f.message} for f in record.findings],
        "win_rate": record.win_rate,
        "regret": record.regret,
        "plays": sum(p.plays for p in history),
        "history": [
            {"step": p.step, "win_rate": p.win_rate, "regret": p.regret, "plays": p.plays} for p in history
        ],
    }


def export_run(
    run_root: Path,
    out: Path | None = None,
    *,
    include_seeds: bool = False,
    overwrite: bool = False,
    format: ExportFormat = "pool",
) -> ExportSummary:
    """Export the valid environments of a run (seed-library ones too with ``include_seeds``)."""
    run = RunDir(Path(run_root))
    if not (run.root / FILENAME).is_file():
        raise ExportError(
            f"{run.root} has no environment archive ({FILENAME}); give a run directory (`spade runs`)"
        )
    cfg = run.load_config()
    out = Path(out) if out is not None else run.root / "export"
    if out.exists() and any(out.iterdir()):
        if not overwrite:
            raise ExportError(f"{out} exists and is not empty; choose another --out or add --overwrite")
        shutil.rmtree(out)
    with Memory.in_run_dir(run.root) as memory:
        records = [r for r in memory.records(status=EnvStatus.VALID) if include_seeds or not r.is_seed]
        if not records:
            raise ExportError(
                f"{run.root} has no valid designed environments to export (add --include-seeds for the seed library)"
            )
        histories = {r.env_id: memory.history(r.env_id) for r in records}
    step = max((int(r["step"]) + 1 for r in run.read_metrics()), default=0)
    setting = cfg.designer.setting
    if format != "pool":
        envs = [
            ExportedEnv(r.env_id, _file_name(i, r, setting), r.skill, r.code)
            for i, r in enumerate(records, 1)
        ]
        package = _write_package(format, out, run.root.name, envs)
        return ExportSummary(
            out, out, out, len(envs), package, package_name(run.root.name, f"spade_{format}")
        )
    return _write_pool(out, records, histories, run_name=run.root.name, setting=setting, step=step)


def _write_pool(
    out: Path,
    records: list[EnvRecord],
    histories: dict[str, list[HistoryPoint]],
    *,
    run_name: str,
    setting: str,
    step: int,
) -> ExportSummary:
    """The ``pool`` format: the files with a manifest and checksums, and the dataset with its card."""
    rows = []
    pool = out / "pool"
    (pool / "games").mkdir(parents=True)
    for i, record in enumerate(records, start=1):
        name = _file_name(i, record, setting)
        (pool / "games" / name).write_text(record.code, encoding="utf-8")
        rows.append(_row(record, histories[record.env_id], name, run_name, setting))
    manifest = "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows)
    (pool / "manifest.jsonl").write_text(manifest, encoding="utf-8")
    sums = [(r["sha256"], r["file"]) for r in rows]
    sums.append((hashlib.sha256(manifest.encode("utf-8")).hexdigest(), "manifest.jsonl"))
    (pool / "checksums.sha256").write_text("".join(f"{h}  {f}\n" for h, f in sums), encoding="utf-8")
    dataset = out / "dataset"
    _write_parquet(dataset, rows, {r.env_id: r.code for r in records})
    (dataset / "README.md").write_text(CARD.format(run=run_name, n=len(rows), step=step), encoding="utf-8")
    return ExportSummary(out, pool, dataset, len(rows))


def _write_package(fmt: ExportFormat, out: Path, run_name: str, envs: list[ExportedEnv]) -> Path:
    from spade.ecosystem.openenv_export import write_openenv  # noqa: PLC0415 - only these formats need them
    from spade.ecosystem.verifiers_export import write_verifiers  # noqa: PLC0415

    write = write_openenv if fmt == "openenv" else write_verifiers
    return write(out / fmt, run_name, envs)


def _write_parquet(folder: Path, rows: list[dict[str, Any]], code: dict[str, str]) -> None:
    import pyarrow as pa  # noqa: PLC0415 - only exports need it
    import pyarrow.parquet as pq  # noqa: PLC0415

    finding = pa.struct([("code", pa.string()), ("message", pa.string())])
    point = pa.struct([("step", pa.int64()), ("win_rate", pa.float64()), ("regret", pa.float64()),
                       ("plays", pa.int64())])  # fmt: skip
    schema = pa.schema(
        [
            ("env_id", pa.string()), ("skill", pa.string()), ("setting", pa.string()), ("code", pa.string()),
            ("file", pa.string()), ("run", pa.string()), ("created_step", pa.int64()),
            ("parent_id", pa.string()), ("doc_id", pa.string()), ("is_seed", pa.bool_()),
            ("sha256", pa.string()), ("hint", pa.string()), ("findings", pa.list_(finding)),
            ("win_rate", pa.float64()), ("regret", pa.float64()), ("plays", pa.int64()),
            ("history", pa.list_(point)),
        ]
    )  # fmt: skip
    table = pa.Table.from_pylist([{**r, "code": code[r["env_id"]]} for r in rows], schema=schema)
    (folder / "data").mkdir(parents=True)
    pq.write_table(table, folder / "data" / "train-00000-of-00001.parquet")


def summary_line(s: ExportSummary, fmt: ExportFormat) -> str:
    """What ``spade export`` prints: what was written and the commands that use it. Every format keeps the
    run's environment ids (the manifests' ``env_id``; the OpenEnv server's ``reset(env_id=...)``, the
    verifiers tasks ``<env_id>#<seed>``)."""
    what = plural(s.environments, "environment")
    if fmt == "openenv":
        return (
            f"Exported {what} as the OpenEnv package {s.package} (id {s.name}); serve it with "
            f"`cd {s.package} && python -m {s.name}.server.app --port 8000`, then train on it with "
            "`spade train --mode fixed_pool --pool openenv:http://127.0.0.1:8000`"
        )
    if fmt == "verifiers":
        return (
            f"Exported {what} as the verifiers taskset package {s.package} (id {s.name}); install it with "
            f"`pip install {s.package}`, then train on it with `spade train --mode fixed_pool --pool "
            f"verifiers:{s.name}`"
        )
    return (
        f"Exported {what}: {s.pool} (games/, manifest.jsonl, checksums.sha256) and {s.dataset} (Parquet); "
        f"train on them with `spade train --mode fixed_pool --pool {s.pool}`, or score a run's policy on them "
        f"with `spade eval envs {s.pool} --run RUN`"
    )


def verify_checksums(pool: Path) -> list[str]:
    """Files of an exported pool whose SHA-256 differs from ``checksums.sha256`` (empty: all match)."""
    bad = []
    for line in (Path(pool) / "checksums.sha256").read_text().splitlines():
        digest, _, name = line.partition("  ")
        path = Path(pool) / name
        if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            bad.append(name)
    return bad
