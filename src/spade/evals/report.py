"""Readable terminal output of evaluations and comparisons (rich tables)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from spade.evals.compare import Comparison
from spade.evals.runner import SuiteReport
from spade.evals.stats import PairedDiff, Score

NOTHING = (
    "measures nothing: the policy scores 0 on every item (try --preset easy, --fewshot 1, a stronger model)"
)


def _score(s: Score) -> str:
    return f"{s.score:.3f}  [{s.ci95[0]:.3f}, {s.ci95[1]:.3f}]"


def eval_table(reports: Sequence[SuiteReport]) -> Table:
    """One row per suite, then its categories and tasks (indented)."""
    table = Table(title="spade eval", show_lines=False)
    for column in ("suite / group", "n", "items", "score  [95% CI]", "errors", "note"):
        table.add_column(column, justify="right" if column in ("n", "items", "errors") else "left")
    for r in reports:
        s = r.summary
        note = NOTHING if s.measures_nothing else ""
        sampled = r.generation_s > 0  # the scripted solver samples nothing
        if sampled and r.opts.episodes > 1 and r.opts.temperature == 0.0 and not note:
            note = "greedy decoding: episodes of an item are identical (set --temperature)"
        table.add_row(
            f"[bold]{r.name}[/bold]", str(s.total.n), str(s.total.items), _score(s.total), str(s.errors), note
        )
        groups = list(s.by_category.items())
        if len(s.by_task) > len(s.by_category):  # tasks add something only when categories group them
            groups += [(f"task {k}", v) for k, v in s.by_task.items() if k not in s.by_category]
        if len(groups) > 1 or (groups and groups[0][0] != r.name):
            for name, score in groups:
                table.add_row(f"  {name}", str(score.n), str(score.items), _score(score), "", "")
        for name, score in s.measures.items():
            table.add_row(f"  ({name})", str(score.n), str(score.items), _score(score), "", "secondary score")
    return table


def footer(reports: Sequence[SuiteReport]) -> str:
    """Options and speed of each suite, one line each."""
    lines = []
    for r in reports:
        o = r.opts
        lines.append(
            f"{r.name}: episodes {o.episodes}, fewshot {o.fewshot}, T {o.temperature}, top_p {o.top_p}, "
            f"{f'top_k {o.top_k}, ' if o.top_k else ''}"
            f"max_tokens {o.max_tokens}, {_turns(r)}, seed {o.seed}, params {o.params or {}}; "
            f"{r.time_s:.1f}s, requests in flight {r.in_flight_share:.0%} of the time"
        )
    return "\n".join(lines)


def _turns(r: SuiteReport) -> str:
    """The turn budget the suite played with: the envs suite reads its own (``--param max_turns``, each
    environment's limit may end an episode sooner), not ``--max-turns`` (the tries of a Q&A item)."""
    if r.name != "envs":
        return f"max_turns {r.opts.max_turns}"
    from spade.evals.envs import play_config  # noqa: PLC0415 - the suite's own reading of its parameters

    return f"max_turns {play_config(r.opts).max_turns} (or the environment's own limit)"


def _diff(d: PairedDiff) -> str:
    return f"{d.diff:+.3f}  [{d.ci95[0]:+.3f}, {d.ci95[1]:+.3f}]"


def compare_table(comparisons: Sequence[Comparison]) -> Table:
    """One row per suite and pair, then per category (indented)."""
    table = Table(title="spade compare (B − A over paired items)")
    for column in ("suite / category", "A", "B", "paired", "A score", "B score", "B − A  [95% CI]"):
        table.add_column(column, justify="right" if column == "paired" else "left")
    for c in comparisons:
        table.add_row(
            f"[bold]{c.suite}[/bold]",
            c.a,
            c.b,
            str(c.total.paired),
            f"{c.total.a:.3f}",
            f"{c.total.b:.3f}",
            _diff(c.total),
        )
        if len(c.by_category) > 1:
            for name, d in c.by_category.items():
                table.add_row(f"  {name}", "", "", str(d.paired), f"{d.a:.3f}", f"{d.b:.3f}", _diff(d))
    return table


def print_table(table: Table) -> None:
    """Print to stdout, wide enough not to wrap the figures."""
    Console(width=max(160, Console().width)).print(table)
