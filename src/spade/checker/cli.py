"""``spade check FILE...``: run the validation ladder on files in the sandbox and report per file."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TextIO

from spade.checker.findings import CheckReport
from spade.checker.ladder import check_env
from spade.config import CheckerConfig, WinRule
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


def format_report(path: str, report: CheckReport) -> str:
    """Human-readable lines for one file: verdict, findings, and the main figures."""
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
    return "\n".join(lines)


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
) -> int:
    """Check every file in the sandbox, ``jobs`` files at a time, and print a report per file.

    Files may hold environment code or a model reply with a fenced code block. With ``as_json`` each file
    prints one JSON object per line (``{"path": ..., "report": {...}}`` or ``{"path": ..., "error": ...}``).
    ``difficulty`` resets every instance at that level (None: each environment's default).

    Returns:
        The exit code: 0 when every file passes, 1 when any is rejected, 2 when a file cannot be read or the
        sandbox cannot start.
    """
    out = out or sys.stdout
    cfg = config or CheckerConfig()
    files = [Path(p) for p in paths]
    own = runner is None
    try:
        sandbox = runner if runner is not None else Sandbox(Limits()).start()
    except SandboxError as exc:
        print(f"spade check: the sandbox cannot start: {exc}", file=sys.stderr)
        return 2
    try:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            win = WinRule(difficulty=difficulty)
            results = list(pool.map(lambda p: _check_one(p, sandbox, cfg, seed, win), files))
    finally:
        if own:
            sandbox.close()
    code = 0
    for path, result in zip(files, results, strict=True):
        if isinstance(result, str):
            code = 2
            print(
                json.dumps({"path": str(path), "error": result}) if as_json else f"ERROR {result}", file=out
            )
            continue
        if not result.ok:
            code = max(code, 1)
        if as_json:
            print(json.dumps({"path": str(path), "report": json.loads(result.to_json())}), file=out)
        else:
            print(format_report(str(path), result), file=out)
    if not as_json and len(files) > 1:
        passed = sum(isinstance(r, CheckReport) and r.ok for r in results)
        print(f"{passed}/{len(files)} passed", file=out)
    return code
