"""Novelty of a design against an archive: the distance between behaviour fingerprints.

A behaviour fingerprint is what an agent would see and get from an environment on fixed seeds (0, 1, ...):
the word trigrams of every observation of its scripted solution and of seeded random play (numbers
masked, so a changed constant reads as the same game), and each step's reward and end flags. Every
environment is played on the same seeds with the same random actions, so two sources that behave alike
have equal fingerprints whatever their code looks like. The distance is the Jaccard distance of the two
sets (0: the same behaviour, 1: nothing in common); a design's novelty is its distance to the nearest
archived environment.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from spade.checker.episodes import Episode, Job, Prober
from spade.checker.feasibility import solution_actions
from spade.checker.probes import RandomActions
from spade.sandbox.api import EnvRunner

_WORD = re.compile(r"[a-z]+|\d+|[^\sa-z\d]")
_MAX_STEPS = 30
"""Steps each fingerprint episode may take (enough to show a game's rules and feedback)."""


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """The set of behaviour features of one environment (see the module doc)."""

    features: frozenset[str]

    def distance(self, other: Fingerprint) -> float:
        """Jaccard distance in [0, 1]; two empty fingerprints are the same (0)."""
        union = self.features | other.features
        return 1.0 - len(self.features & other.features) / len(union) if union else 0.0


@dataclass(frozen=True, slots=True)
class Novelty:
    """A design's distance to the nearest environment of an archive."""

    distance: float
    """1.0 against an empty archive."""
    nearest: str | None
    """Id of the nearest archived environment (None: the archive is empty)."""
    archived: int
    """How many archived environments were compared."""

    def to_dict(self) -> dict[str, float | str | int | None]:
        """JSON-safe form."""
        return {"distance": self.distance, "nearest": self.nearest, "archived": self.archived}


def features(episodes: Sequence[Episode]) -> Fingerprint:
    """The fingerprint of recorded episodes (pure)."""
    out: set[str] = set()
    for ep in episodes:
        for text in (ep.first_obs, *(s.observation for s in ep.steps)):
            words = ["0" if w.isdigit() else w for w in _WORD.findall(text.lower())]
            out.update(" ".join(words[i : i + 3]) for i in range(max(len(words) - 2, 1 if words else 0)))
        out.update(
            f"{ep.policy}|{i}|{s.reward:.2g}|{int(s.terminated)}{int(s.truncated)}"
            for i, s in enumerate(ep.steps)
        )
        out.add(f"{ep.policy}|steps {len(ep.steps)}")
    return Fingerprint(frozenset(out))


def fingerprint(
    runner: EnvRunner, source: str, *, seeds: int, difficulty: int | None = None, filename: str = "<env>"
) -> Fingerprint:
    """Play ``source``'s solution and seeded random play on seeds ``0 .. seeds-1`` and fingerprint them."""
    prober = Prober(runner, source, filename, 1, difficulty)
    jobs: list[Job] = []
    for seed in range(seeds):
        jobs.append(Job("solution", seed, None, _MAX_STEPS, lambda s: solution_actions(s)[0]))
        jobs.append(Job("random", seed, RandomActions(random.Random(seed)), _MAX_STEPS))
    return features(prober.play_all(jobs))


def nearest(print_: Fingerprint, archive: Mapping[str, Fingerprint]) -> Novelty:
    """Distance to the nearest fingerprint of ``archive`` (ties: the smallest id)."""
    if not archive:
        return Novelty(1.0, None, 0)
    best = min(archive, key=lambda k: (print_.distance(archive[k]), k))
    return Novelty(print_.distance(archive[best]), best, len(archive))


@dataclass
class Fingerprints:
    """Fingerprints of sources played in one runner, each computed once (keyed by the source's SHA-256).

    Not thread-safe: use one instance from one thread at a time.
    """

    runner: EnvRunner
    seeds: int
    difficulty: int | None = None
    _known: dict[str, Fingerprint] = field(default_factory=dict)

    def of(self, source: str, filename: str = "<env>") -> Fingerprint:
        """The fingerprint of ``source`` (played once, then remembered)."""
        key = hashlib.sha256(source.encode("utf-8", errors="surrogatepass")).hexdigest()
        if key not in self._known:
            self._known[key] = fingerprint(
                self.runner, source, seeds=self.seeds, difficulty=self.difficulty, filename=filename
            )
        return self._known[key]

    def novelty(self, source: str, archive: Sequence[tuple[str, str]]) -> Novelty:
        """``source``'s novelty against ``archive``, a list of ``(env id, source)``."""
        return nearest(self.of(source), {env_id: self.of(code, f"<{env_id}>") for env_id, code in archive})
