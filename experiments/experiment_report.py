"""The experiment's report: docs/results.md (tables, verdicts, setup) and its curve images (PNG).

Every sentence of the summary is computed from the intervals: a difference is called better or worse only
when its 95% interval excludes 0, and a suite on which every policy scores 0 is said to measure nothing.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiment_stats import Estimate, Items, common_items, mode_score, paired_difference

START = "start"
CURVES = (
    ("designer_validity", "designer validity (fraction of designs accepted)", ("designer/valid_rate",)),
    (
        "win_rate",
        "agent win rate (solid: no hint, dashed: with hint)",
        ("agent/win_rate", "agent/win_rate_hint"),
    ),
    ("regret", "designer regret (hinted minus unhinted return)", ("designer/regret_mean",)),
)


@dataclass(frozen=True, slots=True)
class Report:
    """The rendered report: the markdown, the summary paragraph, and each run's metrics rows (for curves)."""

    markdown: str
    summary: str
    rows: dict[str, dict[str, list[dict[str, Any]]]]
    """mode -> run name -> metrics rows."""


def _fmt(e: Estimate, signed: bool = False) -> str:
    sign = "+" if signed else ""
    return f"{e.mean:{sign}.3f} [{e.lo:{sign}.3f}, {e.hi:{sign}.3f}]"


def comparisons(modes: Sequence[str]) -> list[tuple[str, str]]:
    """(a, b) pairs reported as b − a: every mode against the start model, then SPADE against each baseline."""
    pairs = [(START, m) for m in modes]
    if "selfplay" in modes:
        pairs += [(m, "selfplay") for m in modes if m != "selfplay"]
    return pairs


def score_table(items: Mapping[str, Mapping[str, Sequence[Items]]]) -> list[str]:
    """Markdown rows: suite, policy, seeds, items, mean score [95% CI]."""
    lines = ["| suite | policy | seeds | items | score [95% CI] |", "|---|---|---|---|---|"]
    for suite, groups in items.items():
        for group, runs in groups.items():
            e = mode_score(runs)
            lines.append(f"| {suite} | {group} | {e.seeds} | {e.items} | {_fmt(e)} |")
    return lines


def diff_table(items: Mapping[str, Mapping[str, Sequence[Items]]], modes: Sequence[str]) -> list[str]:
    """Markdown rows: suite, comparison b − a, paired difference [95% CI], verdict."""
    lines = ["| suite | comparison | difference [95% CI] | verdict |", "|---|---|---|---|"]
    for suite, groups in items.items():
        for a, b in comparisons(modes):
            e = paired_difference(groups[a], groups[b])
            lines.append(f"| {suite} | {b} − {a} | {_fmt(e, signed=True)} | {e.verdict} |")
    return lines


def measures_nothing(groups: Mapping[str, Sequence[Items]]) -> bool:
    """Whether the starting model scores 0 on every item: no policy can be worse, and a suite nobody can
    win cold says little about transfer. Such a suite is listed but kept out of the verdicts."""
    return all(s == 0 for run in groups.get(START, []) for v in run.values() for s in v)


def summary(items: Mapping[str, Mapping[str, Sequence[Items]]], modes: Sequence[str]) -> str:
    """The computed verdicts in words: SPADE against each baseline and the start model, per suite (suites the
    starting model never scores on are named and dropped from the verdicts)."""
    out = []
    for suite, groups in items.items():
        if measures_nothing(groups):
            out.append(f"- {suite}: the starting model scores 0 on every item; dropped from the verdicts.")
            continue
        for a, b in comparisons(modes):
            if b != "selfplay" and a != START:
                continue
            e = paired_difference(groups[a], groups[b])
            word = _verb(e)
            n_a, n_b = len(groups[a]), len(groups[b])
            seeds = f"{n_b} seeds" if n_a == n_b else f"{n_b} seeds against {n_a}"
            out.append(f"- {suite}: {b} {word} {a} ({_fmt(e, signed=True)}, {e.items} items, {seeds}).")
    return "\n".join(out)


def primary_result(
    items: Mapping[str, Mapping[str, Sequence[Items]]], suite: str, pair: tuple[str, str]
) -> str:
    """The pre-declared comparison's outcome in one sentence (or why it cannot be computed)."""
    a, b = pair
    groups = items.get(suite, {})
    if a not in groups or b not in groups:
        return f"**Primary result**: not available ({suite} or a mode of {b} − {a} was not run)."
    e = paired_difference(groups[a], groups[b])
    half = (e.hi - e.lo) / 2
    return (f"**Primary result** ({suite}, {b} − {a}): {_fmt(e, signed=True)}, half-width {half:.3f}, "
            f"{e.items} items, {e.seeds} seeds: {b} {_verb(e)} {a}.")  # fmt: skip


def warm_start_table(finals: Mapping[str, Sequence[Items]], warm: Mapping[str, Sequence[Items]]) -> list[str]:
    """Markdown rows: each mode's final policies against their own warm start, on the items both scored."""
    lines = ["| mode | seeds | items | warm start | final | final − warm start [95% CI] | verdict |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for mode, starts in warm.items():
        ids = set(common_items(starts, finals[mode]))
        e = paired_difference(starts, finals[mode])
        before, after = (mode_score([{k: v for k, v in run.items() if k in ids} for run in g])
                         for g in (starts, finals[mode]))  # fmt: skip
        lines.append(f"| {mode} | {e.seeds} | {e.items} | {before.mean:.3f} | {after.mean:.3f} | "
                     f"{_fmt(e, signed=True)} | {e.verdict} |")  # fmt: skip
    return lines


def warm_start_summary(
    finals: Mapping[str, Sequence[Items]], warm: Mapping[str, Sequence[Items]], suite: str
) -> str:
    """The verdict of each mode against its warm start, in words."""
    out = []
    for mode, starts in warm.items():
        e = paired_difference(starts, finals[mode])
        out.append(f"\n- {suite}: {mode} {_verb(e)} its own warm start ({_fmt(e, signed=True)}, {e.items} items, "
                   f"{e.seeds} seeds; the warm start scored by the in-training evaluation at step 0).")  # fmt: skip
    return "".join(out)


def _verb(e: Estimate) -> str:
    return {"better": "beats", "worse": "is worse than"}.get(e.verdict, "does not differ significantly from")


def read_rows(run: Path) -> list[dict[str, Any]]:
    """A run's metrics.jsonl rows (empty when it has none)."""
    path = run / "metrics.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def machine() -> str:
    """Cores, CPU model and memory of this machine."""
    model, mem_kb = platform.processor() or "unknown CPU", 0
    cpuinfo, meminfo = Path("/proc/cpuinfo"), Path("/proc/meminfo")
    if cpuinfo.is_file():
        names = [
            ln.split(":", 1)[1].strip()
            for ln in cpuinfo.read_text().splitlines()
            if ln.startswith("model name")
        ]
        model = names[0] if names else model
    if meminfo.is_file():
        total = [ln.split()[1] for ln in meminfo.read_text().splitlines() if ln.startswith("MemTotal")]
        mem_kb = int(total[0]) if total else 0
    return f"{os.cpu_count()} cores, {model}, {mem_kb / 2**20:.1f} GiB RAM"


def git_commit() -> str:
    """HEAD's commit (``-dirty`` when the tree has changes), or 'unknown' outside a git checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout
        dirty = subprocess.run(
            ["git", "status", "--porcelain"], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.strip() + ("-dirty" if dirty.strip() else "")


def run_table(rows: Mapping[str, Mapping[str, list[dict[str, Any]]]], budget: int) -> list[str]:
    """Markdown rows: each run's steps, sampled tokens, training time, first/last win rate, and whether any
    sample was trained on (a run with none has no policy of its own and is evaluated as the start)."""
    lines = ["| run | steps | sampled tokens | ended by | train time (min) | win rate first → last | model updated |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for runs in rows.values():
        for name, rs in runs.items():
            kept = sum(r.get("agent/samples_kept", 0.0) + r.get("designer/samples_kept", 0.0) for r in rs)
            steps = [r for r in rs if "agent/plays" in r]
            tokens = steps[-1].get("budget/sampled_tokens", 0.0) if steps else 0.0
            minutes = sum(r.get("time/step_s", 0.0) + r.get("time/eval_s", 0.0) for r in rs) / 60
            win = f"{steps[0]['agent/win_rate']:.2f} → {steps[-1]['agent/win_rate']:.2f}" if steps else "-"
            updated = "yes" if kept else "no (evaluated as the starting model)"
            ended = "budget" if tokens >= budget else "step cap (below the budget: not an equal-cost run)"
            lines.append(
                f"| {name} | {len(steps)} | {tokens:.0f} | {ended} | {minutes:.1f} | {win} | {updated} |"
            )
    return lines


def curves(images: Path, rows: Mapping[str, Mapping[str, list[dict[str, Any]]]]) -> list[tuple[str, Path]]:
    """Draw every curve image; returns (title, path) pairs."""
    from experiment_charts import draw, eval_keys  # noqa: PLC0415 - matplotlib only when drawing

    out = [(title, draw(images / f"{name}.png", title, rows, keys)) for name, title, keys in CURVES]
    keys = eval_keys(rows) or ["eval/none/score"]
    title = "held-out score against sampled tokens (in-training evaluation)"
    out.append((title, draw(images / "heldout.png", title, rows, keys, x="tokens")))
    return out


def build(plan: Any, items: Mapping[str, Mapping[str, Sequence[Items]]], train_times: Mapping[str, float],
          eval_s: float, wall_s: float, *, warm: Mapping[str, Sequence[Items]] | None = None) -> Report:  # fmt: skip
    """The report of a finished experiment (``plan``: the script's Plan; ``items``: its loaded evaluations;
    ``warm``: each mode's in-training ``rg`` scores at step 0, its warm start, compared on the ``rg`` suite)."""
    from selfplay_vs_baselines import PRIMARY, PRIMARY_SUITE, run_dir  # noqa: PLC0415 - the script's layout

    rows = {
        m: {run_dir(plan, m, s).name: read_rows(run_dir(plan, m, s)) for s in plan.seeds} for m in plan.modes
    }
    warm = warm if warm and PRIMARY_SUITE in items else {}
    text = (
        primary_result(items, PRIMARY_SUITE, PRIMARY)
        + "\n\n"
        + summary(items, plan.modes)
        + warm_start_summary(items.get(PRIMARY_SUITE, {}), warm, PRIMARY_SUITE)
        + _short_runs(rows, plan.budget)
    )
    against_warm = [
        "## Against the warm start",
        "",
        "`start` above is the model as shipped; every mode begins from a supervised warm start of it (the same "
        "per seed). Here each mode's final policies face that warm start, as scored by the runs' in-training "
        f"evaluation at step 0 (before any RL update, one episode per item), on the `{PRIMARY_SUITE}` items.",
        "",
        *warm_start_table(items[PRIMARY_SUITE], warm),
        "",
    ] if warm else []  # fmt: skip
    suites = [
        f"| {s.label} | {s.note} | `spade eval {' '.join(s.args)} {' '.join(plan.eval_args)}` |"
        for s in plan.suites
    ]
    trained = sum(train_times.values())
    md = [
        "# Results: SPADE against the baselines at an equal sampled-token budget",
        "",
        "Generated by `experiments/selfplay_vs_baselines.py`; every number and verdict below is computed, "
        "nothing is written by hand. Verdicts: a difference is *better*/*worse* only when its 95% interval "
        "excludes 0.",
        "",
        *declared(PRIMARY_SUITE, PRIMARY, plan.out / POWER_FILE),
        "## Summary",
        "",
        text,
        "",
        *_notes(plan.notes),
        "## Setup",
        "",
        f"- command: `{plan.command}`",
        f"- commit: `{git_commit()}`",
        f"- machine: {machine()}",
        f"- preset `{plan.preset}`, modes {', '.join(plan.modes)}, seeds {', '.join(map(str, plan.seeds))}",
        f"- budget: {plan.budget} sampled tokens per run (agent replies of both arms, designs and hints: every "
        f"completion token the model samples); a run ends after the step that reaches it, so it overshoots by "
        f"less than one step (the Runs table has the exact count); step cap {plan.max_steps}",
        f"- wall time of this invocation: {wall_s / 60:.1f} min (training {trained / 60:.1f} min of runs "
        f"started or resumed now, evaluation {eval_s / 60:.1f} min)",
        "",
        "Held-out suites (the starting model and every final policy, same items and seeds):",
        "",
        "| suite | held out | command |",
        "|---|---|---|",
        *suites,
        "",
        "## Scores",
        "",
        "Mean over seeds of the mean item score; 95% interval: bootstrap over items, seeds and episodes.",
        "",
        *score_table(items),
        "",
        "## Paired differences",
        "",
        "b − a on the items both scored; the same resampled items for both modes in each bootstrap draw.",
        "",
        *diff_table(items, plan.modes),
        "",
        *against_warm,
        "## Runs",
        "",
        *run_table(rows, plan.budget),
        "",
        "## Curves",
        "",
    ]
    return Report("\n".join(md), text, rows)


POWER_FILE = "power.json"
"""The pilot's power estimate (``experiments/experiment_power.py --write``), in the experiment's folder."""


def declared(suite: str, pair: tuple[str, str], power: Path) -> list[str]:
    """The analysis fixed before the numbers: primary suite and comparison, and the pilot's projection of
    the interval the run reaches (when ``power`` exists)."""
    a, b = pair
    lines = ["## Pre-declared analysis", "",
             f"Declared before the run, in the script (`PRIMARY_SUITE`, `PRIMARY`): the primary suite is "
             f"`{suite}` and the primary comparison is `{b} − {a}`; every other row is secondary.", ""]  # fmt: skip
    if power.is_file():
        p = json.loads(power.read_text())
        lines += [f"Power, from the pilot `{p['pilot']}` ({p['pilot_seeds']} seeds per mode, {p['pilot_episodes']} "
                  f"episodes per item): with {p['seeds']} seeds per mode and {p['episodes']} episodes per item "
                  f"the 95% interval of `{b} − {a}` was projected to a half-width of {p['half_width']:.3f} "
                  f"(target ≤ {p['target']}); {p['method']}.", ""]  # fmt: skip
    return lines


def _short_runs(rows: Mapping[str, Mapping[str, list[dict[str, Any]]]], budget: int) -> str:
    """A warning naming the runs the step cap ended before the budget (their comparison is not equal-cost)."""
    short = [
        name
        for runs in rows.values()
        for name, rs in runs.items()
        if max((r.get("budget/sampled_tokens", 0.0) for r in rs), default=0.0) < budget
    ]
    if not short:
        return ""
    return (f"\n- {', '.join(short)} reached the step cap before the budget of {budget} tokens: raise "
            "--max-steps (or lower --budget) for an equal-cost comparison.")  # fmt: skip


def _notes(path: Path | None) -> list[str]:
    """The hand-written interpretation section (``--notes``), or nothing."""
    if path is None:
        return []
    return [
        "## Interpretation",
        "",
        f"(written by hand in `{path}`, not computed)",
        "",
        path.read_text().strip(),
        "",
    ]


def write(plan: Any, report: Report) -> None:
    """Write the curve images and the markdown (with the images linked relative to it)."""
    links = []
    for title, path in curves(plan.images, report.rows):
        rel = os.path.relpath(path, plan.results.parent)
        links += [f"![{title}]({rel})", ""]
    plan.results.parent.mkdir(parents=True, exist_ok=True)
    plan.results.write_text(report.markdown + "\n" + "\n".join(links) + REPRODUCE)


REPRODUCE = """
## How to reproduce

```bash
# the embedded model on CPU with the defaults (this table's exact command is under Setup): resumable,
# runs in runs/experiment/<mode>-s<seed>
nice -n 19 python experiments/selfplay_vs_baselines.py --preset cpu-tiny
# a smoke run: small budget, one episode, few items
python experiments/selfplay_vs_baselines.py --quick --seeds 0 --modes fixed_pool --results /tmp/r.md
# paper scale on GPUs: only the preset, the backend and the budget change
python experiments/selfplay_vs_baselines.py --preset paper --budget N -- \\
    --model.backend vllm --model.model /models/Qwen3-8B
python experiments/selfplay_vs_baselines.py --preset paper --budget N -- \\
    --model.backend openai --model.openai.base-urls http://127.0.0.1:8000/v1 --model.model /models/Qwen3-8B
```

N: the `budget/sampled_tokens` a SPADE run of the paper preset reaches at the step count to match (runs keep
the budget they started with; a new budget needs a new `--out`). Rerunning the command skips finished runs
and evaluations and resumes killed runs (`spade train --resume`). Options after `--` go to every `spade
train`; the starting model is evaluated with the same model options (read back from the runs' saved config).
See the script's docstring for the choice of budget, held-out suites and statistics.
"""
