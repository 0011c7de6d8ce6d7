"""``spade report RUN``: one self-contained HTML page of what a run did.

The page holds the metric curves (:mod:`spade.cli.report_charts`, matplotlib rendered to inline SVG), the
environment archive as a browsable table (lineage, win-rate history, regret, hint, findings, highlighted
source), the rejected designs with their findings, and a few episodes per environment as chat transcripts
(:mod:`spade.transcripts`). Everything is inline (CSS, JS, SVG): the file opens offline, anywhere. The run
is only read, so a report can be made while the run is going.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from spade import transcripts
from spade.cli import report_html as page_html
from spade.cli.report_charts import all_charts
from spade.cli.runs import run_info
from spade.config import to_json
from spade.errors import SpadeError
from spade.memory.archive import FILENAME, EnvRecord, HistoryPoint, Memory
from spade.rundir import RunDir
from spade.types import plural


class ReportError(SpadeError):
    """The report cannot be made; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class ReportSummary:
    """What :func:`write_report` wrote."""

    path: Path
    charts: int
    environments: int
    rejected: int
    episodes: int
    damaged: tuple[str, ...]
    """Transcript files that could not be read (skipped)."""


def write_report(
    run_root: Path, out: Path | None = None, *, episodes_per_env: int = 3, max_rejected: int = 200
) -> ReportSummary:
    """Write the report of the run in ``run_root`` (default ``<run>/report.html``); given an experiment's
    records folder (``experiments/results/<name>``), its learning curves and primary result instead."""
    run = RunDir(Path(run_root))
    if not run.config_path.is_file() and (run.root / "summary.json").is_file():
        return _experiment_report(run.root, out)
    if not run.config_path.is_file():
        raise ReportError(f"{run.root} is not a run directory (no config.json); list runs with `spade runs`")
    info = run_info(run.root)
    rows = run.read_metrics()
    records, history = _archive(run)
    children: dict[str, list[str]] = defaultdict(list)
    for r in records:
        if r.parent_id:
            children[r.parent_id].append(r.env_id)
    plays, designs, damaged = _transcripts(run.root, episodes_per_env)
    rejected = [d for d in reversed(designs) if not d.get("valid")][:max_rejected]
    hl, hl_css = page_html.highlighter()
    episodes = {
        env_id: f'<p><a href="#eps-{escape(env_id)}">{plural(len(eps), "episode transcript")}</a></p>'
        for env_id, eps in plays.items()
    }
    charts = all_charts(rows)
    meta = (
        f"{escape(str(run.root))} · status <b>{info.status}</b> · {info.steps_done}/{info.steps_total} steps · "
        f"mode {escape(info.mode)}"
        + (f" · <span class='rejected'>unreadable: {escape(', '.join(damaged))}</span>" if damaged else "")
    )
    config = f"<details><summary>Resolved config</summary><pre>{escape(_config_text(run))}</pre></details>"
    sections = [
        ("curves", page_html.charts(charts) + config),
        (
            "archive",
            page_html.archive_table(records, history, children, episodes, hl) if records else "<p>Empty.</p>",
        ),
        ("rejected", page_html.rejected_list(rejected, hl)),
        ("episodes", _episode_section(plays)),
    ]
    html = page_html.page(f"spade report: {run.root.name}", meta, sections, hl_css)
    path = Path(out) if out is not None else run.root / "report.html"
    path.write_text(html, encoding="utf-8")
    n_eps = sum(len(v) for v in plays.values())
    return ReportSummary(path, len(charts), len(records), len(rejected), n_eps, tuple(damaged))


def _experiment_report(folder: Path, out: Path | None) -> ReportSummary:
    """The page of an experiment's records folder: the curves ``curriculum_auc.py`` drew there
    (``curves.svg``) and its ``summary.json``."""
    svg = folder / "curves.svg"
    if not svg.is_file():
        raise ReportError(
            f"{folder} holds no curves.svg: write it with experiments/curriculum_auc.py --report-only"
        )
    curves = svg.read_text(encoding="utf-8")
    summary = json.dumps(json.loads((folder / "summary.json").read_text(encoding="utf-8")), indent=1)
    runs = len(list(folder.glob("*-s*.json")))
    sections = [("curves", curves[curves.find("<svg") :]), ("summary", f"<pre>{escape(summary)}</pre>")]
    html = page_html.page(
        f"spade report: experiment {folder.name}", f"{escape(str(folder))} · {runs} runs", sections, ""
    )
    path = Path(out) if out is not None else folder / "report.html"
    path.write_text(html, encoding="utf-8")
    return ReportSummary(path, 1, 0, 0, 0, ())


def _config_text(run: RunDir) -> str:
    try:
        return to_json(run.load_config())
    except (SpadeError, ValueError, OSError) as exc:
        return f"(config.json unreadable: {exc})"


def _archive(run: RunDir) -> tuple[list[EnvRecord], dict[str, list[HistoryPoint]]]:
    if not (run.root / FILENAME).is_file():
        return [], {}
    with Memory.in_run_dir(run.root) as memory:
        records = memory.records()
        return records, {r.env_id: memory.history(r.env_id) for r in records}


def _transcripts(
    root: Path, per_env: int
) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]], list[str]]:
    """Newest ``per_env`` episodes of each environment and arm, every design record, and unreadable files."""
    plays: dict[str, list[dict[str, Any]]] = defaultdict(list)
    designs: list[dict[str, Any]] = []
    damaged: list[str] = []
    for f in reversed(transcripts.files(root)):
        try:
            records = transcripts.read(f.path)
        except transcripts.TranscriptError:
            damaged.append(f.path.name)
            continue
        if f.kind == "design":
            designs[:0] = records
            continue
        for rec in records:
            mine = plays[rec["env_id"]]
            if sum(r["hinted"] == rec["hinted"] for r in mine) < per_env:
                mine.append(rec)
    return dict(plays), designs, damaged


def _episode_section(plays: dict[str, list[dict[str, Any]]]) -> str:
    if not plays:
        return "<p>No transcripts recorded (transcripts.enabled is off, or the run predates them).</p>"
    parts = [
        f'<h3 id="eps-{escape(env_id)}"><a href="#env-{escape(env_id)}">{escape(env_id)}</a></h3>'
        + "".join(page_html.transcript(e) for e in eps)
        for env_id, eps in sorted(plays.items())
    ]
    return "".join(parts)


def summary_line(s: ReportSummary) -> str:
    """The line ``spade report`` prints."""
    skipped = f"; unreadable transcripts skipped: {', '.join(s.damaged)}" if s.damaged else ""
    return (
        f"Report: {s.path} ({plural(s.charts, 'chart')}, {plural(s.environments, 'environment')}, "
        f"{plural(s.rejected, 'rejected design')}, {plural(s.episodes, 'episode')}{skipped})"
    )
