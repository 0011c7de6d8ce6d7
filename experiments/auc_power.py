"""Power of the learning-curve experiment from its pilot records (``experiment_power.py RECORDS_DIR``).

From the records of ``curriculum_auc.py`` it measures, for the primary comparison (``selfplay -
fixed_pool``, the area under the held-out return curve, paired within seed):

- the spread between seeds of a seed's paired difference, and the part of it that episode noise explains
  (from the spread of an item's episodes, when the pilot played two or more per item; with one, episode
  noise cannot be told from the seed spread and stays in it, so more episodes are credited nothing);
- the cost of a run per arm (wall time from the records, evaluation apart: evaluation scales with episodes).

A design (seeds per arm, episodes per item) is projected a half-width of ``t(0.975, n-1) * sqrt((seed
variance + episode variance at e episodes) / n)`` (a t interval: wider than the report's bootstrap at few
seeds, so the projection errs on the safe side) and a cost of its runs not yet recorded (a pilot's runs count
when the design keeps the pilot's episodes), ``--parallel`` at once, plus what the pilot spent. The smallest
design within the target and the budget is chosen; when none is within the target, the narrowest that fits
the budget, with the smallest effect it detects (80% power, 5% two-sided).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from auc_records import load_records
from auc_report import Z80, Z975, by_arm, paired, table
from auc_stats import common_items

T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042)  # fmt: skip
"""The 97.5% quantile of Student's t with 1..30 degrees of freedom."""


def t975(df: int) -> float:
    """Student's t 97.5% quantile (above 30 degrees of freedom: 1.96 + 2.5 / df, within 0.003)."""
    return T975[df - 1] if df <= len(T975) else Z975 + 2.5 / df


@dataclass(frozen=True, slots=True)
class Pilot:
    """What the pilot measured for the primary comparison."""

    pairs: int
    episodes: int
    items: int
    marks: int
    seed_var: float
    """Variance between seeds of the paired difference, episode noise taken out."""
    episode_var: float
    """Variance of one episode's return within an item (mean over cells; 0 when unmeasured)."""
    observed_sd: float
    run_hours: dict[str, tuple[float, float]]
    """arm -> mean (training, evaluation) wall hours of one run."""
    spent_hours: float
    seeds_done: dict[str, int]


def measure(records_dir: Path, pair: tuple[str, str], parallel: int) -> Pilot:
    """The pilot's figures (SystemExit when it has fewer than two paired seeds)."""
    records = load_records(records_dir)
    arms = by_arm(records)
    ra, rb = paired(arms, *pair)
    if len(ra) < 2:
        raise SystemExit(f"{records_dir} holds {len(ra)} paired seeds of {pair[1]} - {pair[0]}: the pilot "
                         "needs at least 2 (4 per arm are planned)")  # fmt: skip
    items = common_items([*ra, *rb])
    marks = [m for m in ra[0]["marks"] if m["mark"] > 0]
    diffs = table(rb, items, "return").mean(axis=1) - table(ra, items, "return").mean(axis=1)
    episodes = min(len(m["items"][i]["return"]) for r in [*ra, *rb] for m in r["marks"] for i in items)
    cells = [np.var(m["items"][i]["return"], ddof=1) for r in [*ra, *rb] for m in r["marks"] if m["mark"] > 0
             for i in items] if episodes >= 2 else []  # fmt: skip
    episode_var = float(np.mean(cells)) if cells else 0.0
    observed = float(np.var(diffs, ddof=1))
    seed_var = max(observed - 2 * episode_var / (episodes * len(items) * len(marks)), 0.0)
    hours = {arm: (float(np.mean([(r["wall_s"] - r["eval_s"]) / 3600 for r in runs])),
                   float(np.mean([r["eval_s"] / 3600 for r in runs]))) for arm, runs in arms.items()}  # fmt: skip
    spent = sum(r["wall_s"] for r in records) / 3600 / max(parallel, 1)
    return Pilot(len(ra), episodes, len(items), len(marks), seed_var, episode_var, math.sqrt(observed), hours,
                 spent, {arm: len(runs) for arm, runs in arms.items()})  # fmt: skip


def half_width(p: Pilot, seeds: int, episodes: int) -> float:
    """The projected 95% half-width of the primary difference at ``seeds`` pairs, ``episodes`` per item."""
    noise = 2 * p.episode_var / (episodes * p.items * p.marks)
    return t975(max(seeds - 1, 1)) * math.sqrt((p.seed_var + noise) / seeds)


def cost_hours(p: Pilot, arms: Sequence[str], seeds: int, episodes: int, parallel: int) -> float:
    """Machine hours of the runs a design adds to the pilot's (its seeds, at its episodes)."""
    total = 0.0
    for arm in arms:
        train, evaluation = p.run_hours.get(arm, max(p.run_hours.values()))
        new = seeds - p.seeds_done.get(arm, 0) if episodes == p.episodes else seeds
        total += max(new, 0) * (train + evaluation * episodes / p.episodes)
    return total / max(parallel, 1)


@dataclass(frozen=True, slots=True)
class Design:
    """One candidate design and its projection."""

    seeds: int
    episodes: int
    half_width: float
    hours: float
    """Machine hours in all: the pilot's and the runs the design adds."""

    @property
    def detectable_effect(self) -> float:
        """The smallest true difference detected with 80% power at 5% two-sided."""
        return self.half_width * (Z975 + Z80) / Z975


def designs(
    p: Pilot, arms: Sequence[str], seeds: Sequence[int], episodes: Sequence[int], parallel: int
) -> list[Design]:
    """Every candidate design with its projected half-width and total hours."""
    return [Design(s, e, half_width(p, s, e), p.spent_hours + cost_hours(p, arms, s, e, parallel))
            for s in seeds for e in episodes]  # fmt: skip


def choose(rows: Sequence[Design], target: float, budget: float) -> tuple[Design | None, bool]:
    """(the design, whether it reaches the target): the cheapest within the target and the budget, else the
    narrowest within the budget (None when nothing fits the budget)."""
    fits = [d for d in rows if d.hours <= budget]
    within = [d for d in fits if d.half_width <= target]
    if within:
        return min(within, key=lambda d: (d.hours, d.half_width)), True
    return (min(fits, key=lambda d: (d.half_width, d.hours)), False) if fits else (None, False)


def report(records_dir: Path, arms: Sequence[str], a: Any) -> dict[str, Any]:
    """Print the pilot's figures, the grid and the choice; returns what ``power.json`` holds."""
    p = measure(records_dir, a.pair, a.parallel)
    episode_part = 2 * p.episode_var / (p.episodes * p.items * p.marks)
    print(f"pilot {records_dir}: {p.pairs} paired seeds, {p.items} items x {p.episodes} episodes, {p.marks} marks; "
          f"spent {p.spent_hours:.2f} machine hours of {a.budget_hours}")  # fmt: skip
    unmeasured = (
        "" if p.episodes >= 2 else ", not measurable with one episode per item: kept in the seed spread"
    )
    print(f"between-seed sd of the paired difference: {p.observed_sd:.4f} (episode noise: variance "
          f"{episode_part:.5f}{unmeasured})")  # fmt: skip
    for arm, (train, evaluation) in sorted(p.run_hours.items()):
        print(f"  {arm}: a run takes {60 * train:.1f} min training + {60 * evaluation:.1f} min evaluation")
    rows = designs(p, arms, a.seeds, a.episodes, a.parallel)
    for d in rows:
        flag = "  <= target" if d.half_width <= a.target else ""
        print(f"  {d.seeds} seeds x {d.episodes} episodes: half-width {d.half_width:.3f}, {d.hours:.1f} h{flag}"
              f"{'' if d.hours <= a.budget_hours else ' (over budget)'}")  # fmt: skip
    chosen, reached = choose(rows, a.target, a.budget_hours)
    seed_share = p.seed_var / (p.seed_var + episode_part) if p.seed_var + episode_part > 0 else 0.0
    out: dict[str, Any] = {"pilot": asdict(p), "target": a.target, "budget_hours": a.budget_hours,
                           "seed_share_of_variance": seed_share, "grid": [asdict(d) for d in rows]}  # fmt: skip
    if chosen is None:
        print(f"no design fits {a.budget_hours} h: the pilot alone spent {p.spent_hours:.1f}")
        return out | {"chosen": None}
    out |= {"chosen": asdict(chosen), "reaches_target": reached}
    print(f"chosen: {chosen.seeds} seeds per arm x {chosen.episodes} episodes per item: half-width "
          f"{chosen.half_width:.3f}, {chosen.hours:.1f} h in all")  # fmt: skip
    if not reached:
        out["detectable_effect"] = chosen.detectable_effect
        print(f"no design within {a.budget_hours} h reaches +/-{a.target}: the best detects a true difference of "
              f"{chosen.detectable_effect:.3f} or more (80% power)")  # fmt: skip
    if seed_share > 0.5:
        print(f"the seed spread is {seed_share:.0%} of the projected variance: reduce it first (learning rate, "
              "group size, batch, warm start) rather than adding seeds")  # fmt: skip
    return out


def write(records_dir: Path, result: dict[str, Any]) -> Path:
    """``power.json`` beside the records."""
    path = records_dir / "power.json"
    path.write_text(json.dumps(result, indent=1) + "\n")
    return path
