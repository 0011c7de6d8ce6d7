"""Curve images of the experiment (PNG): one line per mode (mean over its seeds at each step)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from spade.cli.report_charts import tokens_before
from spade.cli.summary import eval_suites

Rows = list[dict[str, Any]]
MARKERS = ("o", "s", "^", "D", "v")


def mode_curve(runs: Sequence[Rows], key: str, x: str = "step") -> tuple[list[float], list[float]]:
    """Positions and the mean over runs of ``key`` at each step some run logged it; ``x`` 'step', or
    'tokens': the mean over those runs of the sampled tokens spent before it."""
    by_step: dict[int, list[float]] = {}
    at: dict[int, list[float]] = {}
    for rows in runs:
        spent = tokens_before(rows)
        for r in rows:
            if isinstance(r.get(key), int | float):
                step = int(r["step"])
                by_step.setdefault(step, []).append(float(r[key]))
                at.setdefault(step, []).append(spent.get(step, float("nan")) if x == "tokens" else step)
    steps = sorted(by_step)
    return [float(np.mean(at[s])) for s in steps], [float(np.mean(by_step[s])) for s in steps]


def eval_keys(rows: Mapping[str, Mapping[str, Rows]]) -> list[str]:
    """Every ``eval/<suite>/score`` key any run logged."""
    every = [r for runs in rows.values() for rs in runs.values() for r in rs]
    return [f"eval/{suite}/score" for suite in eval_suites(every)]


def draw(
    path: Path, title: str, rows: Mapping[str, Mapping[str, Rows]], keys: Sequence[str], x: str = "step"
) -> Path:
    """One chart of ``keys`` (first solid, second dashed) per mode against ``x`` ('step' or 'tokens':
    sampled tokens spent); says so when nothing was logged."""
    import matplotlib as mpl  # noqa: PLC0415 - heavy; only the report needs it

    mpl.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(6.4, 3.4), dpi=100)
    drawn = 0
    for i, (mode, runs) in enumerate(rows.items()):
        # modes start from the same warm start, so their first points coincide: a small shift along the
        # step axis and a marker per mode keep every line visible
        shift = (i - (len(rows) - 1) / 2) * 0.08 if x == "step" else 0.0
        for key, style in zip(keys, ("-", "--", ":"), strict=False):
            steps, values = mode_curve(list(runs.values()), key, x)
            if steps:
                label = mode if key == keys[0] else f"{mode} ({key.rsplit('/', 1)[-1]})"
                ax.plot([s + shift for s in steps], values, style, color=f"C{i}", marker=MARKERS[i % len(MARKERS)],
                        markersize=4, alpha=0.85, label=label)  # fmt: skip
                drawn += 1
    if drawn:
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, frameon=False)
    else:
        ax.text(0.5, 0.5, "no run logged this metric", ha="center", va="center", transform=ax.transAxes)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("step" if x == "step" else "sampled tokens (agent, designs and hints)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
