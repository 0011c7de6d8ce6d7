"""How often the checker's rate-judged probes (random play, number guessing) reject a file, by the file's
true win rate for that probe: the verdict band that ``checker.exploit_confidence`` and
``checker.exploit_max_episodes`` leave (docs/architecture.md, "The validation ladder").

Each trial is one check seed: the probe plays its first ``checker.guess_episodes`` episodes, then
:func:`spade.checker.rates.top_up` plays on while the Wilson interval holds ``checker.exploit_max_success``,
and the file is rejected as :func:`spade.checker.feasibility.exploit_findings` rejects it. Episodes are
drawn as Bernoulli wins of the given rate (no environment is played), so the figures are exact up to the
trials' sampling error.

    python bench/checker_verdicts.py [--trials 2000] [--rates 0.1,0.15,0.2] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics

from spade.checker.episodes import Episode, StepRecord
from spade.checker.rates import top_up
from spade.config import CheckerConfig

RATES = (0.0, 0.05, 0.1, 0.15, 0.16, 0.17, 0.18, 0.19, 0.2, 0.21, 0.22, 0.23, 0.24, 0.25, 0.267, 0.3)


def _episode(won: bool) -> Episode:
    return Episode("guess", 0, "start", (StepRecord("x", "end", 1.0 if won else 0.0, True, False),))


def trial(rate: float, cfg: CheckerConfig, rng: random.Random) -> tuple[bool, int]:
    """One check of a file whose probe wins ``rate`` of its episodes: (rejected, episodes played)."""

    def more(n: int) -> list[Episode]:
        return [_episode(rng.random() < rate) for _ in range(n)]

    played = top_up(
        more(cfg.guess_episodes), more, won=lambda e: e.steps[-1].reward >= 1.0, limit=cfg.exploit_max_success,
        confidence=cfg.exploit_confidence, cap=cfg.exploit_max_episodes, batch=cfg.guess_episodes,
    )  # fmt: skip
    wins = sum(e.steps[-1].reward >= 1.0 for e in played)
    return wins / len(played) > cfg.exploit_max_success and wins >= cfg.exploit_min_wins, len(played)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=2000, help="check seeds per rate")
    parser.add_argument("--rates", default=",".join(map(str, RATES)), help="true win rates, comma-separated")
    parser.add_argument("--json", action="store_true", help="one JSON object per rate")
    args = parser.parse_args()
    cfg = CheckerConfig()
    rng = random.Random(0)
    print(
        f"limit {cfg.exploit_max_success:.0%}, {cfg.exploit_confidence:.0%} Wilson interval, batches of "
        f"{cfg.guess_episodes}, at most {cfg.exploit_max_episodes} episodes; {args.trials} check seeds per rate"
    )
    for rate in (float(r) for r in args.rates.split(",")):
        results = [trial(rate, cfg, rng) for _ in range(args.trials)]
        rejected = sum(r for r, _ in results) / len(results)
        episodes = [n for _, n in results]
        row = {"rate": rate, "rejected": rejected, "median_episodes": statistics.median(episodes)}
        row |= {"max_episodes": max(episodes)}
        if args.json:
            print(json.dumps(row))
        else:
            print(
                f"true rate {rate:6.1%}: rejected by {rejected:6.1%} of check seeds, episodes median "
                f"{row['median_episodes']:.0f}, max {row['max_episodes']}"
            )


if __name__ == "__main__":
    main()
