"""``spade check PATH...``: run the validation ladder on files (and the files of folders) in the sandbox and
report per file."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TextIO

from spade.checker.findings import CheckReport
from spade.checker.ladder import check_env
from spade.checker.novelty import Fingerprints, Novelty
from spade.checker.static import parse
from spade.config import CheckerConfig, WinRule
from spade.envs import env_files
from spade.memory.archive import MemoryStoreError, archive_sources
from spade.sandbox import Limits, Sandbox, SandboxError
from spade.sandbox.api import EnvRunner


def _check_one(
    path: Path, runner: EnvRunner, cfg: CheckerConfig, seed: int | None, win: WinRule
) -> CheckReport | str:
    """The report for one file, or why it could not be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return f"cannot read {path}: {exc}"
    return check_env(text, runner, cfg, seed=seed, filename=path.name, win=win)


def format_report(path: str, report: CheckReport, novelty: Novelty | None = None) -> str:
    """Human-readable lines for one file: verdict, findings, the main figures and its novelty, if measured."""
    verdict = "PASS" if report.ok else "FAIL"
    lines = [f"{verdict} {path}  ({report.total_s:.2f} s, seed {report.seed})"]
    lines += [f"  {f}" for f in report.findings]
    shown = (
        "solution_win_rate", "min_turns", "random_win_rate", "guess_win_rate", "degenerate_win_rate",
        "constant_win_rate", "episodes",
    )  # fmt: skip
    figures = [f"{k}={report.stats[k]:g}" for k in shown if k in report.stats]
    if figures:
        lines.append("  " + "  ".join(figures))
    if novelty is not None:
        near = f"nearest {novelty.nearest}" if novelty.nearest else "empty archive"
        lines.append(f"  novelty={novelty.distance:.3f}  ({near}, {novelty.archived} archived)")
    return "\n".join(lines)


def _novelties(
    prints: Fingerprints, cfg: CheckerConfig, against: str, checked: Sequence[tuple[Path, CheckReport | str]]
) -> list[Novelty | None]:
    """Each accepted file's novelty against the valid environments of the run ``against``."""
    archive = [(s.env_id.removeprefix("pool_"), s.code) for s in archive_sources(against)]
    out: list[Novelty | None] = []
    for path, result in checked:
        code = (
            parse(path.read_text(encoding="utf-8"), cfg.max_source_chars)[0]
            if isinstance(result, CheckReport)
            else None
        )
        out.append(
            prints.novelty(code, archive) if code and isinstance(result, CheckReport) and result.ok else None
        )
    return out


def check_files(
    paths: Sequence[str | Path],
    jobs: int = 2,
    as_json: bool = False,
    *,
    seed: int | None = None,
    difficulty: int | None = None,
    config: CheckerConfig | None = None,
    runner: EnvRunner | None = None,
    out: TextIO | None = None,
    against: str | None = None,
) -> int:
    """Check every file in the sandbox, ``jobs`` files at a time, and print a report per file.

    A folder in ``paths`` stands for its environment files (:func:`spade.envs.env_files`: the official
    layout ``games/*.py`` and ``tools/*.py``, else its ``*.py`` files), as in ``spade eval envs``. Files may
    hold environment code or a model reply with a fenced code block. With ``as_json`` each file
    prints one JSON object per line (``{"path": ..., "report": {...}}`` or ``{"path": ..., "error": ...}``).
    ``difficulty`` resets every instance at that level (None: each environment's default). With ``against``
    (a run directory), each accepted file's novelty against that run's archive is reported too (the
    ``novelty`` key in JSON).

    Returns:
        The exit code: 0 when every file passes, 1 when any is rejected, 2 when a file cannot be read, a
        folder holds no environment file or the sandbox cannot start.
    """
    out = out or sys.stdout
    cfg = config or CheckerConfig()
    try:
        files = [f for p in paths for f in env_files(Path(p))]
    except ValueError as exc:
        print(f"spade check: {exc}", file=sys.stderr)
        return 2
    own = runner is None
    try:
        sandbox = runner if runner is not None else Sandbox(Limits()).start()
    except SandboxError as exc:
        print(f"spade check: the sandbox cannot start: {exc}", file=sys.stderr)
        return 2
    try:
        results, novelties = _check_all(
            files, sandbox, cfg, jobs=jobs, seed=seed, difficulty=difficulty, against=against
        )
    except MemoryStoreError as exc:
        print(f"spade check: --against: {exc}", file=sys.stderr)
        return 2
    finally:
        if own:
            sandbox.close()
    return _print_reports(files, results, novelties, as_json, out)


def _check_all(
    files: list[Path],
    sandbox: EnvRunner,
    cfg: CheckerConfig,
    *,
    jobs: int,
    seed: int | None,
    difficulty: int | None,
    against: str | None,
) -> tuple[list[CheckReport | str], list[Novelty | None]]:
    """Each file's report (or why it could not be read) and, with ``against``, its novelty."""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        win = WinRule(difficulty=difficulty)
        results = list(pool.map(lambda p: _check_one(p, sandbox, cfg, seed, win), files))
    if not against:
        return results, [None] * len(files)
    fingerprints = Fingerprints(sandbox, max(cfg.novelty_seeds, 1), difficulty)
    return results, _novelties(fingerprints, cfg, against, list(zip(files, results, strict=True)))


def _print_reports(
    files: Sequence[Path],
    results: Sequence[CheckReport | str],
    novelties: Sequence[Novelty | None],
    as_json: bool,
    out: TextIO,
) -> int:
    """Print one report per file (a result is a report or why the file could not be checked); the exit code."""
    code = 0
    for path, result, novelty in zip(files, results, novelties, strict=True):
        if isinstance(result, str):
            code = 2
            print(
                json.dumps({"path": str(path), "error": result}) if as_json else f"ERROR {result}", file=out
            )
            continue
        if not result.ok:
            code = max(code, 1)
        if as_json:
            row = {"path": str(path), "report": json.loads(result.to_json())}
            print(json.dumps(row | ({"novelty": novelty.to_dict()} if novelty else {})), file=out)
        else:
            print(format_report(str(path), result, novelty), file=out)
    if not as_json and len(files) > 1:
        passed = sum(isinstance(r, CheckReport) and r.ok for r in results)
        print(f"{passed}/{len(files)} passed", file=out)
    return code
