"""The learning-curve experiment's report, from its records alone: ``summary.json`` beside the records,
``docs/results.md`` and its curve image (``docs/results/curves.png``; an SVG copy beside the records is
what ``spade report RECORDS_DIR`` shows).

Every number and verdict is computed from the records (:mod:`auc_stats`); the analysis it applies is the
one declared in :data:`curriculum_auc.ANALYSIS` before any run.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from auc_records import load_records
from auc_stats import (
    Endpoint,
    Estimate,
    arm_estimate,
    common_items,
    curve_band,
    item_areas,
    item_curves,
    paired_estimate,
)

if TYPE_CHECKING:
    from curriculum_auc import Plan

Z80 = 0.8416
Z975 = 1.96
Records = list[dict[str, Any]]


def detectable_effect(half_width: float) -> float:
    """The smallest true difference a two-sided 5% test detects with 80% power, given the 95% half-width."""
    return half_width * (Z975 + Z80) / Z975


def by_arm(records: Records) -> dict[str, Records]:
    """arm -> its records, by seed."""
    out: dict[str, Records] = {}
    for r in records:
        out.setdefault(r["arm"], []).append(r)
    return out


def paired(arms: dict[str, Records], a: str, b: str) -> tuple[Records, Records]:
    """The records of arms ``a`` and ``b`` on the seeds both have, in seed order."""
    sa, sb = ({r["seed"]: r for r in arms.get(x, [])} for x in (a, b))
    seeds = sorted(set(sa) & set(sb))
    return [sa[s] for s in seeds], [sb[s] for s in seeds]


def table(runs: Records, items: Sequence[str], endpoint: Endpoint, final: bool = False) -> np.ndarray:
    """``(seeds, items)``: each run's per-item area (marks after the warm start), or final-mark value."""
    return np.array([item_areas(_after_start(r), items, endpoint, final) for r in runs])


def _after_start(record: dict[str, Any]) -> dict[str, Any]:
    """The record without its mark 0 (the warm start, shared by every arm of a seed: not in the area)."""
    return {**record, "marks": [m for m in record["marks"] if m["mark"] > 0]}


def compare(
    arms: dict[str, Records],
    a: str,
    b: str,
    endpoint: Endpoint,
    *,
    final: bool = False,
    aggregate: str = "mean",
) -> Estimate | None:
    """``b - a`` paired within seed, or None when the arms share no seed."""
    ra, rb = paired(arms, a, b)
    if not ra:
        return None
    items = common_items([*ra, *rb])
    return paired_estimate(table(ra, items, endpoint, final), table(rb, items, endpoint, final), aggregate)


def primary(plan: Plan, arms: dict[str, Records]) -> dict[str, Any]:
    """The ``primary`` object of summary.json."""
    import curriculum_auc as exp  # noqa: PLC0415

    a, b = exp.PRIMARY
    out: dict[str, Any] = {"suite": f"envs:{plan.tasks}", "comparison": f"{b} - {a}",
                           "endpoint": f"area under the held-out curve ({exp.PRIMARY_ENDPOINT}, mean over "
                           f"{len(plan.marks) - 1} marks after the warm start)",
                           "seeds_per_arm": {arm: len(arms.get(arm, [])) for arm in plan.arms}}  # fmt: skip
    e = compare(arms, a, b, exp.PRIMARY_ENDPOINT)
    if e is None:
        return out | {"estimate": None, "ci95": None, "items": 0, "pairs": 0}
    iqm = compare(arms, a, b, exp.PRIMARY_ENDPOINT, aggregate="iqm")
    out |= {"estimate": e.value, "ci95": [e.lo, e.hi], "items": e.items, "pairs": e.seeds,
            "iqm": iqm.value if iqm else None, "iqm_ci95": [iqm.lo, iqm.hi] if iqm else None,
            "verdict": e.verdict}  # fmt: skip
    if e.half_width > exp.TARGET_HALF_WIDTH:
        out["detectable_effect"] = detectable_effect(e.half_width)
    return out


def summary(plan: Plan, records: Records, budget_hours: float) -> dict[str, Any]:
    """summary.json: arms, the primary result, the budget, the commit(s) of the code that ran."""
    commits = sorted({r["commit"] for r in records})
    return {
        "arms": list(plan.arms),
        "primary": primary(plan, by_arm(records)),
        "budget_hours": budget_hours,
        "spent_hours": round(sum(r["wall_s"] for r in records) / 3600 / max(plan.parallel, 1), 2),
        "commit": commits[0] if len(commits) == 1 else commits,
        "runs": len(records),
        "plan_hash": plan.key(),
    }


def _fmt(e: Estimate | None, signed: bool = False) -> str:
    if e is None:
        return "n/a"
    s = "+" if signed else ""
    return f"{e.value:{s}.3f} [{e.lo:{s}.3f}, {e.hi:{s}.3f}]"


def arm_rows(plan: Plan, arms: dict[str, Records]) -> list[str]:
    """Markdown rows: each arm's area (mean, IQM), final-mark score and win area, with intervals."""
    lines = ["| arm | seeds | area, return: mean [95% CI] | IQM [95% CI] | final mark, return | area, win |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for arm in plan.arms:
        runs = arms.get(arm, [])
        if not runs:
            lines.append(f"| {arm} | 0 | n/a | n/a | n/a | n/a |")
            continue
        items = common_items(runs)
        area = table(runs, items, "return")
        final = table(runs, items, "return", final=True)
        cells = [arm_estimate(area), arm_estimate(area, "iqm"), arm_estimate(final),
                 arm_estimate(table(runs, items, "win"))]  # fmt: skip
        lines.append(f"| {arm} | {len(runs)} | " + " | ".join(_fmt(c) for c in cells) + " |")
    return lines


def comparison_pairs(plan: Plan) -> list[tuple[str, str]]:
    """(a, b) reported as ``b - a``: the primary first, then every other arm against fixed_pool, then
    selfplay against each control."""
    import curriculum_auc as exp  # noqa: PLC0415

    pairs = [exp.PRIMARY] + [(exp.PRIMARY[0], m) for m in plan.arms if m not in exp.PRIMARY]
    return pairs + [(m, exp.PRIMARY[1]) for m in plan.arms if m not in exp.PRIMARY]


def comparison_rows(plan: Plan, arms: dict[str, Records]) -> list[str]:
    """Markdown rows: each comparison on the primary endpoint (mean and IQM) and the secondary ones."""
    lines = ["| comparison | pairs | area, return [95% CI] | IQM | final mark, return | area, win | verdict |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for a, b in comparison_pairs(plan):
        e = compare(arms, a, b, "return")
        cells = [e, compare(arms, a, b, "return", aggregate="iqm"), compare(arms, a, b, "return", final=True),
                 compare(arms, a, b, "win")]  # fmt: skip
        verdict = e.verdict if e else "n/a"
        pairs = e.seeds if e else 0
        lines.append(
            f"| {b} - {a} | {pairs} | " + " | ".join(_fmt(c, True) for c in cells) + f" | {verdict} |"
        )
    return lines


def curves(plan: Plan, arms: dict[str, Records]) -> dict[str, tuple[list[float], list[Estimate]]]:
    """arm -> (mean sampled tokens at each mark, the mean held-out return at each mark with its interval)."""
    out = {}
    for arm in plan.arms:
        runs = arms.get(arm, [])
        if not runs:
            continue
        items = common_items(runs)
        per_run = np.array([item_curves(r, items, "return") for r in runs])  # (seeds, marks, items)
        tokens = [
            float(np.mean([r["marks"][k]["sampled_tokens"] for r in runs])) for k in range(per_run.shape[1])
        ]
        out[arm] = (tokens, curve_band([per_run[:, k, :] for k in range(per_run.shape[1])]))
    return out


def draw(plan: Plan, data: dict[str, tuple[list[float], list[Estimate]]], paths: Sequence[Path]) -> None:
    """The curves (every arm, 95% bands) as PNG/SVG files (by suffix)."""
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for arm, (x, band) in data.items():
        ax.plot(x, [e.value for e in band], marker="o", label=f"{arm} ({band[0].seeds} seeds)")
        ax.fill_between(x, [e.lo for e in band], [e.hi for e in band], alpha=0.18)
    ax.set_xlabel("sampled tokens (every completion: agent, designs, hints)")
    ax.set_ylabel(f"held-out return, envs:{plan.tasks}")
    ax.set_title("held-out learning curves (mean over seeds, 95% stratified bootstrap)")
    ax.grid(alpha=0.3)
    if data:
        ax.legend(fontsize=8)
    fig.tight_layout()
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110, metadata={"Date": None} if path.suffix == ".svg" else None)
    plt.close(fig)


def run_rows(records: Records) -> list[str]:
    """Markdown rows: one per run (cost and what it did)."""
    lines = ["| run | wall min | evaluation min | steps | sampled tokens | regenerations | designer credited "
             "| agent plays/step | commit |", "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in records:
        commit = r["commit"][:10] + (" (dirty)" if r["dirty"] else "")
        lines.append(f"| {r['arm']}-s{r['seed']} | {r['wall_s'] / 60:.1f} | {r['eval_s'] / 60:.1f} | {r['steps']} "
                     f"| {r['sampled_tokens']} | {r['regenerations']} | {r['designer_credited']} "
                     f"| {r['agent_plays_per_step']} | {commit} |")  # fmt: skip
    return lines


def verdict_text(p: dict[str, Any]) -> str:
    """The verdict paragraph, whatever its sign."""
    if p.get("estimate") is None:
        return "No paired run of the primary comparison is recorded yet: there is no verdict."
    lo, hi = p["ci95"]
    what = {"better": "is better than", "worse": "is worse than"}.get(
        p["verdict"], "does not differ significantly from"
    )
    b, a = p["comparison"].split(" - ")
    text = (f"On the primary endpoint, {b} {what} {a}: {p['estimate']:+.3f} [{lo:+.3f}, {hi:+.3f}] "
            f"({p['pairs']} paired seeds, {p['items']} items; IQM {p['iqm']:+.3f}).")  # fmt: skip
    if "detectable_effect" in p:
        text += (f" The interval's half-width, {(hi - lo) / 2:.3f}, is above the 0.05 target: this design detects "
                 f"a true difference of {p['detectable_effect']:.3f} or more (80% power); smaller ones it cannot "
                 "tell from none.")  # fmt: skip
    return text


def markdown(plan: Plan, records: Records, s: dict[str, Any], image: str, command: str) -> str:
    """docs/results.md."""
    import curriculum_auc as exp  # noqa: PLC0415

    arms = by_arm(records)
    head = ["# Results: does a self-designed curriculum beat fixed environments?", "",
            f"Generated by `experiments/curriculum_auc.py` from the records in `experiments/results/{plan.name}/` "
            "alone; every number and verdict below is computed.", "", "## Pre-declared analysis", "",
            exp.ANALYSIS, "## Plan", "", f"- command: `{command}`",
            "- arms: " + ", ".join(f"`{a}` (`{shlex.join(exp.ARMS[a])}`)" for a in plan.arms),
            f"- marks (sampled tokens): {', '.join(map(str, plan.marks))}; budget {plan.budget} per run; "
            f"regeneration every {plan.regen_interval} steps, each design credited {plan.delay} steps later "
            "(`reward.delay`)",
            f"- held-out suite `envs:{plan.tasks}`, {plan.episodes} episode(s) per item at temperature "
            f"{plan.temperature}, evaluation seed 0",
            f"- records: {len(records)} runs; commit(s) {s['commit']}", ""]  # fmt: skip
    if not records:
        return "\n".join([*head, "## Verdict", "", verdict_text(s["primary"]), "", *HOW_TO.format(name=plan.name,
                          command=command).splitlines(), ""])  # fmt: skip
    body = ["## Verdict", "", verdict_text(s["primary"]), "", "## Arms", "", *arm_rows(plan, arms), "",
            "## Comparisons (paired within seed)", "", *comparison_rows(plan, arms), "",
            "## Curves", "", f"![held-out learning curves]({image})", "",
            "## Runs", "", *run_rows(records), "", *HOW_TO.format(name=plan.name, command=command).splitlines(),
            ""]  # fmt: skip
    return "\n".join(head + body)


HOW_TO = """\
## How to run and continue it

The runs of one experiment keep one commit: run the harness from a worktree at a fixed commit, with the
records going to this checkout's `experiments/results/{name}/`, and commit each record as it is written:

```bash
git worktree add ../spade-{name} HEAD        # the commit the runs keep
cd ../spade-{name}
PYTHONPATH=src nohup {command} --commit --records $OLDPWD/experiments/results/{name} > ../{name}.log 2>&1 &
```

Runs import spade from the worktree (its `src` comes first), whatever is installed. The same command on a
fresh machine skips every run whose record is there and resumes a killed one (its
run directory, under `runs/{name}/`, stays on the machine that ran it). Each record names the commit of the
code that ran it. Then `python experiments/curriculum_auc.py --name {name} --report-only` rewrites this page
from the records, `python experiments/experiment_power.py experiments/results/{name} --budget-hours 15` sizes
the full design from them, and `spade report experiments/results/{name}` shows the curves."""


def write(plan: Plan, results: Path, budget_hours: float, command: str) -> list[Path]:
    """Write summary.json, the curve images and ``results``; returns the paths written."""
    records = load_records(plan.records)
    s = summary(plan, records, budget_hours)
    plan.records.mkdir(parents=True, exist_ok=True)
    (plan.records / "summary.json").write_text(json.dumps(s, indent=1) + "\n")
    png = results.parent / "results" / "curves.png"
    drawn = [png, plan.records / "curves.svg"] if records else []  # no run yet: no curve
    draw(plan, curves(plan, by_arm(records)), drawn)
    results.write_text(markdown(plan, records, s, f"results/{png.name}", command))
    return [plan.records / "summary.json", *drawn, results]
