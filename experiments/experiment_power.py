"""How wide the primary comparison's interval will be: a projection from a pilot experiment.

A pilot is a small run of the experiment (``selfplay_vs_baselines.py`` with few seeds, episodes and a small
budget, its own ``--out``) whose final evaluations hold the primary suite. For each candidate design (seeds
per mode × episodes per item) this draws synthetic experiments from the pilot's own scores: seeds of each mode
with replacement, then episodes of each (seed, item) with replacement; it computes the paired bootstrap
interval of ``b − a`` exactly as the report does (:func:`experiment_stats.paired_difference`) and averages its
half-width over draws. With few pilot seeds the spread between seeds is itself uncertain, so the projection
is an estimate, not a bound.

    python experiments/experiment_power.py runs/pilot --seeds 3 4 6 --episodes 2 4 8 --write runs/experiment

prints the grid and, with ``--write OUT``, stores the smallest design within ``--target`` (or the best one)
in ``OUT/power.json``, which the experiment's report quotes under "Pre-declared analysis".

Given the records folder of ``curriculum_auc.py`` instead (``experiments/results/<name>``), it projects the
learning-curve experiment's primary comparison within a machine-hour budget (:mod:`auc_power`)::

    python experiments/experiment_power.py experiments/results/pilot --budget-hours 15 --write
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from experiment_stats import Items, mode_score, paired_difference
from selfplay_vs_baselines import PRIMARY, PRIMARY_SUITE

DRAWS = 8
RESAMPLES = 500
METHOD = (f"mean over {DRAWS} synthetic experiments drawn from the pilot's scores (seeds, then episodes, with "
          "replacement), each with the report's paired bootstrap")  # fmt: skip


def pilot_items(out: Path, suite: str) -> dict[str, list[dict[str, list[float]]]]:
    """mode -> per pilot seed, ``item -> episode scores`` on ``suite`` (from ``out/eval/<mode>-s<seed>``)."""
    from spade.evals.results import read_results  # noqa: PLC0415

    found: dict[str, list[dict[str, list[float]]]] = {}
    for folder in sorted((out / "eval").glob(f"*-s*/{suite}")):
        mode = folder.parent.name.rsplit("-s", 1)[0]
        stored = read_results(folder)
        found.setdefault(mode, []).append(
            {k: list(r.scores) for per in stored.items.values() for k, r in per.items()}
        )
    return found


def synthetic(
    runs: Sequence[Items],
    seeds: int,
    episodes: int,
    rng: np.random.Generator,
    items: Sequence[str] | None = None,
) -> list[Items]:
    """``seeds`` evaluations drawn from the pilot's: a seed with replacement, then ``episodes`` of each item
    (of ``items``, pilot item ids that may repeat, each repeat its own item; default: the pilot's)."""
    out: list[Items] = []
    for s in rng.integers(0, len(runs), size=seeds):
        run = runs[int(s)]
        ids = list(run) if items is None else items
        out.append({f"{n}:{k}": list(rng.choice(np.asarray(run[k]), size=episodes))
                    for n, k in enumerate(ids) if len(run[k])})  # fmt: skip
    return out


def project(
    a: Sequence[Items],
    b: Sequence[Items],
    seeds: int,
    episodes: int,
    *,
    items: int | None = None,
    draws: int = DRAWS,
    seed: int = 0,
) -> float:
    """The mean half-width of the 95% interval of ``b − a`` over ``draws`` synthetic experiments; with
    ``items``, on a suite of that many items drawn (with replacement, the same for both modes) from the
    pilot's, i.e. a larger suite whose items vary as the pilot's do."""
    rng = np.random.default_rng(seed)
    ids = sorted(set.intersection(*(set(r) for r in [*a, *b])))
    widths = []
    for d in range(draws):
        chosen = None if items is None else [str(k) for k in rng.choice(ids, size=items)]
        e = paired_difference(
            synthetic(a, seeds, episodes, rng, chosen),
            synthetic(b, seeds, episodes, rng, chosen),
            RESAMPLES,
            seed=d,
        )
        widths.append((e.hi - e.lo) / 2)
    return float(np.mean(widths))


def seed_spread(runs: Sequence[Items]) -> float:
    """The standard deviation, across the pilot's seeds, of a seed's mean item score (0 with one seed)."""
    means = [np.mean([np.mean(v) for v in run.values() if len(v)]) for run in runs]
    return float(np.std(means, ddof=1)) if len(means) > 1 else 0.0


def seeds_needed(a: Sequence[Items], b: Sequence[Items], target: float) -> int:
    """Seeds per mode for a normal-approximation 95% half-width of ``b − a`` within ``target`` from the seeds'
    spread alone (items and episodes unlimited): a lower bound on any design's seeds."""
    variance = seed_spread(a) ** 2 + seed_spread(b) ** 2
    return max(1, int(np.ceil(variance * (1.96 / target) ** 2)))


def policy_half_width(runs: Sequence[Items], episodes: int, *, draws: int = DRAWS, seed: int = 0) -> float:
    """The mean half-width of one policy's score interval (one seed, ``episodes`` per item), drawn from the
    pilot evaluations ``runs`` as :func:`project` draws them."""
    rng = np.random.default_rng(seed)
    widths = []
    for d in range(draws):
        e = mode_score(synthetic(runs, 1, episodes, rng), RESAMPLES, seed=d)
        widths.append((e.hi - e.lo) / 2)
    return float(np.mean(widths))


def grid(
    items: Mapping[str, Sequence[Items]],
    pair: tuple[str, str],
    seeds: Sequence[int],
    episodes: Sequence[int],
    suite_items: int | None = None,
) -> list[tuple[int, int, float]]:
    """(seeds, episodes, projected half-width) for every candidate design (on ``suite_items`` items)."""
    a, b = (items[m] for m in pair)
    return [(s, e, project(a, b, s, e, items=suite_items)) for s in seeds for e in episodes]


def choose(rows: Sequence[tuple[int, int, float]], target: float) -> tuple[int, int, float]:
    """The cheapest design (seeds × episodes) within ``target``, else the narrowest."""
    within = [r for r in rows if r[2] <= target]
    return min(within, key=lambda r: (r[0] * r[1], r[2])) if within else min(rows, key=lambda r: r[2])


def records_main(argv: Sequence[str]) -> int:
    """``experiment_power.py RECORDS_DIR``: the design of the learning-curve experiment (:mod:`auc_power`)."""
    import auc_power  # noqa: PLC0415 - sibling modules
    import curriculum_auc  # noqa: PLC0415

    p = argparse.ArgumentParser(description=auc_power.__doc__.split("\n\n")[0] if auc_power.__doc__ else None)
    p.add_argument("records", type=Path, help="experiments/results/<name>: the pilot's records")
    p.add_argument("--budget-hours", type=float, default=15.0, help="machine hours in all, pilot included")
    p.add_argument("--target", type=float, default=curriculum_auc.TARGET_HALF_WIDTH)
    p.add_argument("--arms", nargs="+", default=None, help="arms of the full design (default: the pilot's)")
    p.add_argument("--seeds", nargs="+", type=int, default=list(range(2, 65)))
    p.add_argument("--episodes", nargs="+", type=int, default=[1, 2, 4, 8])
    p.add_argument("--parallel", type=int, default=2, help="runs at once (2 on 2 cores)")
    p.add_argument("--write", action="store_true", help="store the projection as RECORDS/power.json")
    a = p.parse_args(list(argv))
    a.pair = curriculum_auc.PRIMARY
    from auc_records import load_records  # noqa: PLC0415

    arms = a.arms or sorted({r["arm"] for r in load_records(a.records)})
    result = auc_power.report(a.records, arms, a)
    if a.write:
        print(f"wrote {auc_power.write(a.records, result)}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Print the projection grid; with ``--write``, store the chosen design's projection. Given a records
    folder of ``curriculum_auc.py``, the learning-curve experiment's design (:func:`records_main`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and not argv[0].startswith("-") and any(Path(argv[0]).glob("*-s*.json")):
        return records_main(argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("pilot", type=Path, help="the pilot experiment's --out folder")
    p.add_argument("--seeds", nargs="+", type=int, default=[3, 4, 6])
    p.add_argument("--episodes", nargs="+", type=int, default=[2, 4, 8])
    p.add_argument("--target", type=float, default=0.05, help="half-width the full run must reach")
    p.add_argument(
        "--items", type=int, default=None, help="project a suite of this many items like the pilot's"
    )
    p.add_argument("--write", type=Path, default=None, help="the full experiment's --out: writes power.json")
    a = p.parse_args(sys.argv[1:] if argv is None else list(argv))
    items = pilot_items(a.pilot, PRIMARY_SUITE)
    missing = [m for m in PRIMARY if m not in items]
    if missing:
        raise SystemExit(
            f"{a.pilot} has no {PRIMARY_SUITE} evaluation of {', '.join(missing)}: run the pilot first"
        )
    rows = grid(items, PRIMARY, a.seeds, a.episodes, a.items)
    print(f"pilot {a.pilot}: {', '.join(f'{m} {len(v)} seeds' for m, v in items.items())}")
    spreads = ", ".join(f"{m} {seed_spread(v):.3f}" for m, v in items.items())
    need = seeds_needed(items[PRIMARY[0]], items[PRIMARY[1]], a.target)
    print(
        f"seed spread (sd of a seed's mean score): {spreads}; seeds per mode for ±{a.target} from it alone: {need}"
    )
    suite = f"{a.items} items like those of {PRIMARY_SUITE}" if a.items else PRIMARY_SUITE
    print(f"projected half-width of {PRIMARY[1]} − {PRIMARY[0]} on {suite}:")
    for s, e, w in rows:
        print(f"  {s} seeds × {e} episodes per item: {w:.3f}{'  <= target' if w <= a.target else ''}")
    for m, runs in items.items():
        widths = ", ".join(f"{e} episodes {policy_half_width(runs, e):.3f}" for e in a.episodes)
        print(f"  one {m} policy's score, half-width: {widths}")
    s, e, w = choose(rows, a.target)
    print(f"chosen: {s} seeds × {e} episodes ({w:.3f}{'' if w <= a.target else ', above the target'})")
    if a.write is not None:
        a.write.mkdir(parents=True, exist_ok=True)
        record = {"pilot": str(a.pilot), "pilot_seeds": min(len(items[m]) for m in PRIMARY),
                  "pilot_episodes": max(len(v) for v in items[PRIMARY[0]][0].values()), "seeds": s,
                  "episodes": e, "half_width": w, "target": a.target, "grid": rows, "method": METHOD,
                  "items": a.items, "seeds_needed": need}  # fmt: skip
        (a.write / "power.json").write_text(json.dumps(record, indent=1))
        print(f"wrote {a.write / 'power.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
