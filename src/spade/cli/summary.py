"""What changed over a run, in a few lines: printed when ``spade train`` finishes (a pure function of metrics)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from spade.types import plural

Played = tuple[str, int, float, int]
"""An environment's unhinted plays at one step: (env id, step, win rate, plays)."""


def _mean(rows: Sequence[dict[str, Any]], key: str) -> float | None:
    values = [float(r[key]) for r in rows if key in r]
    return float(np.mean(values)) if values else None


def _fmt(value: float | None, spec: str = ".2f") -> str:
    return "n/a" if value is None else format(value, spec)


def _regret_range(rows: Sequence[dict[str, Any]]) -> str:
    """The measured environments' regrets as ", from LOW to HIGH" (a mean of 0 may be +x and -x)."""
    lows = [float(r["designer/regret_min"]) for r in rows if "designer/regret_min" in r]
    highs = [float(r["designer/regret_max"]) for r in rows if "designer/regret_max" in r]
    return f", from {min(lows):+.2f} to {max(highs):+.2f}" if lows and highs else ""


def thirds(rows: Sequence[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The first and the last third of the rows (at least one row each when there are rows)."""
    k = max(1, len(rows) // 3)
    return list(rows[:k]), list(rows[-k:])


def _seed_wins(first: Sequence[dict[str, Any]], last: Sequence[dict[str, Any]]) -> str:
    """The win rate on the seed games (the same games at every step), when both thirds played them."""
    a, b = _mean(first, "agent/win_rate_seeds"), _mean(last, "agent/win_rate_seeds")
    return "" if a is None or b is None else f"; on the seed games {_fmt(a)} -> {_fmt(b)}"


def _matched_wins(
    first: Sequence[dict[str, Any]], last: Sequence[dict[str, Any]], plays: Sequence[Played]
) -> str:
    """The win rate on the environments played in both thirds: what the agent learned, apart from the
    curriculum (new designs change the win rate too, and the designer aims them at a band of it)."""
    steps = [{int(r["step"]) for r in third} for third in (first, last)]
    both = set.intersection(*({p[0] for p in plays if p[1] in s} for s in steps))
    if not both:
        return ""
    rates = []
    for s in steps:
        mine = [p for p in plays if p[0] in both and p[1] in s]
        rates.append(sum(p[2] * p[3] for p in mine) / max(1, sum(p[3] for p in mine)))
    return f"; on the {plural(len(both), 'environment')} played in both thirds {_fmt(rates[0])} -> {_fmt(rates[1])}"


def _constant_groups(rows: Sequence[dict[str, Any]]) -> str:
    """The share of groups dropped for equal returns: plays that taught the agent nothing."""
    share = _mean(rows, "agent/constant_group_share")
    return "" if share is None else f"; groups with equal returns (no gradient) {_fmt(share)}"


def _score(row: dict[str, Any], suite: str) -> str:
    p = f"eval/{suite}"
    return f"{row[p + '/score']:.3f} [{row.get(p + '/ci95_lo', 0.0):.3f}, {row.get(p + '/ci95_hi', 0.0):.3f}]"


def eval_suites(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The in-training evaluation suites whose overall score (``eval/<suite>/score``) some row logged."""
    keys = {
        k for r in rows for k in r if k.startswith("eval/") and k.count("/") == 2 and k.endswith("/score")
    }
    return sorted(k.split("/")[1] for k in keys)


def heldout(rows: Sequence[dict[str, Any]]) -> list[str]:
    """One line per in-training evaluation suite: its score with 95% interval at the first and the last
    evaluation (``eval.*``: the held-out score before and after training), when it was evaluated twice."""
    out = []
    for suite in eval_suites(rows):
        mine = [r for r in rows if f"eval/{suite}/score" in r]
        if len(mine) > 1:
            first, last = mine[0], mine[-1]
            out.append(f"  held-out {suite} ({int(last.get(f'eval/{suite}/n', 0))} episodes): "
                       f"{_score(first, suite)} at step {int(first['step'])} -> {_score(last, suite)} after "
                       f"{int(last['step'])} steps")  # fmt: skip
    return out


def _designer_line(rows: Sequence[dict[str, Any]]) -> str:
    """Designs, validity, samples trained and regret over the run."""
    regen = [r for r in rows if "designer/envs" in r]
    credited = [r for r in rows if "designer/credited" in r]
    designs = sum(int(r["designer/envs"]) for r in regen)
    valid = sum(round(r["designer/valid_rate"] * r["designer/envs"]) for r in regen)
    kept = [int(r.get("designer/samples_kept", 0)) for r in credited]
    return (
        f"  designer: {valid}/{designs} designs valid ({_fmt(valid / designs if designs else None)}) over "
        f"{plural(len(regen), 'regeneration')}; samples trained per regeneration {kept or 'none'}; "
        f"mean regret {_fmt(_mean(credited, 'designer/regret_mean'), '+.3f')} "
        f"({sum(int(r.get('designer/regret_measured', 0)) for r in credited)} environments measured"
        + _regret_range(credited)
        + ")"
    )


def run_summary(
    rows: Sequence[dict[str, Any]], plays: Sequence[Played] = (), *, mode: str = "selfplay"
) -> list[str]:
    """Lines saying how validity, wins, regret, designer learning signal, speed and memory went (over the
    steps' rows: a row of the run's final evaluation alone is not a step); ``plays``: the archive's per
    environment and step win rates (:func:`spade.memory.archive.Memory.played`). The agent-only modes
    (``fixed_pool``, ``procedural``) design and hint nothing: their summary has no designer line and no
    hinted win rate."""
    evals = heldout(rows)
    rows = [r for r in rows if "agent/plays" in r]
    if not rows:
        return ["No step finished: nothing to summarise."]
    first, last = thirds(rows)
    selfplay = mode == "selfplay"
    hint = (
        f"; with hint {_fmt(_mean(rows, 'agent/win_rate_hint'))} vs without {_fmt(_mean(rows, 'agent/win_rate'))}"
        if selfplay
        else ""
    )
    return [
        f"Summary of {plural(len(rows), 'step')}:",
        *([_designer_line(rows)] if selfplay else []),
        f"  agent: win rate {_fmt(_mean(first, 'agent/win_rate'))} in the first third -> "
        f"{_fmt(_mean(last, 'agent/win_rate'))} in the last third"
        + hint
        + _seed_wins(first, last)
        + _matched_wins(first, last, plays)
        + _constant_groups(rows),
        f"  return {_fmt(_mean(first, 'agent/return_mean'))} -> {_fmt(_mean(last, 'agent/return_mean'))}; "
        f"sampling {_fmt(_mean(rows, 'speed/sampled_tokens_per_s'), '.0f')} tok/s; peak memory "
        f"{_fmt(max((float(r.get('resources/peak_rss_gb', 0.0)) for r in rows), default=None), '.2f')} GB",
        *evals,
    ]
