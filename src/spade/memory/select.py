"""Pure selection policies of the environment archive (``spade.memory.archive``).

Prompt examples (learnable band, ranked by regret, diverse), PLR-style replay weights with seeded weighted
sampling without replacement, fixed-pool batches that play the whole pool epoch after epoch, and the
eviction order used when the archive is over capacity. Functions work on any record with the
:class:`Candidate` attributes (or on plain ids) and never touch the database.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol, TypeVar


class Candidate(Protocol):
    """The attributes of an archived environment that selection looks at."""

    @property
    def env_id(self) -> str: ...
    @property
    def parent_id(self) -> str | None: ...
    @property
    def fingerprint(self) -> str: ...
    @property
    def win_rate(self) -> float | None: ...
    @property
    def regret(self) -> float | None: ...
    @property
    def last_step(self) -> int | None: ...


C = TypeVar("C", bound=Candidate)


def in_band(win_rate: float | None, band: tuple[float, float]) -> bool:
    """Whether a (measured) win rate lies in the learnable band, ends included."""
    return win_rate is not None and band[0] <= win_rate <= band[1]


def diverse(candidates: Sequence[C], n: int) -> list[C]:
    """Up to ``n`` candidates in order: distinct fingerprints always, distinct lineages while enough exist.

    A lineage is a record's parent (or itself when it has none); a parent and its children share one.
    """
    picked: list[C] = []
    for strict in (True, False):
        for r in candidates:
            if len(picked) == n:
                return picked
            if any(p.env_id == r.env_id or p.fingerprint == r.fingerprint for p in picked):
                continue
            lineage = {p.parent_id or p.env_id for p in picked} | {p.env_id for p in picked}
            if strict and (r.parent_id or r.env_id) in lineage:
                continue
            picked.append(r)
    return picked


def _regret_key(r: Candidate) -> float:
    return -(r.regret or 0.0)


def pick_examples(
    valid: Sequence[C], n: int, rng: random.Random, band: tuple[float, float], pool: int
) -> list[C]:
    """Prompt examples: ``n`` drawn from the top ``max(n, pool)`` in-band candidates by regret, diverse.

    Lower-ranked in-band candidates are taken only when the top lacks distinct lineages or fingerprints;
    unplayed candidates (e.g. the seed library) fill any shortfall. Returned best regret first.
    """
    ranked = sorted((r for r in valid if in_band(r.win_rate, band)), key=_regret_key)
    top = ranked[: max(n, pool)]
    rng.shuffle(top)
    # the rest of the ranking only serves when the top lacks diversity
    picked = sorted(diverse(top + ranked[len(top) :], n), key=_regret_key)
    if len(picked) < n:
        fresh = [r for r in valid if r.win_rate is None]
        rng.shuffle(fresh)
        picked = diverse(picked + fresh, n)
    return picked


def pick_replay(
    valid: Sequence[C], n: int, step: int, rng: random.Random, *, temperature: float, rho: float
) -> list[C]:
    """Up to ``n`` played candidates drawn with :func:`plr_weights` (score: regret floored at 0)."""
    played = [r for r in valid if r.last_step is not None]
    weights = plr_weights(
        [max(0.0, r.regret or 0.0) for r in played],
        [max(0, step - (r.last_step or 0)) for r in played],
        temperature,
        rho,
    )
    return [played[i] for i in weighted_sample_without_replacement(weights, n, rng)]


def pool_batch(
    ids: Sequence[str], size: int, index: int, epoch_rng: Callable[[int], random.Random]
) -> list[str]:
    """The ``index``-th batch when a fixed pool is played without replacement, epoch after epoch.

    Epoch ``e`` visits every id once, in ``ids`` order shuffled by ``epoch_rng(e)``; consecutive batches
    take ``min(size, len(ids))`` distinct ids from that stream. A batch that spans two epochs and would hold
    an id twice defers the repeat to the start of the next batch. So the first ``ceil(len(ids) / size)``
    batches play every id, and the result depends only on the arguments (nothing to checkpoint).
    """
    if not ids or size <= 0:
        return []
    batches = _pool_batches(ids, min(size, len(ids)), epoch_rng)
    return next(itertools.islice(batches, index, None))


def _pool_batches(
    ids: Sequence[str], size: int, epoch_rng: Callable[[int], random.Random]
) -> Iterator[list[str]]:
    def stream() -> Iterator[str]:
        for epoch in itertools.count():
            order = list(ids)
            epoch_rng(epoch).shuffle(order)
            yield from order

    ahead = stream()
    deferred: list[str] = []
    while True:
        batch, deferred = deferred, []
        while len(batch) < size:
            env_id = next(ahead)
            (deferred if env_id in batch else batch).append(env_id)
        yield batch


def plr_weights(
    scores: Sequence[float], staleness: Sequence[int], temperature: float, rho: float
) -> list[float]:
    """Prioritised Level Replay sampling probabilities (Jiang et al., 2021).

    ``P = (1 - rho) * P_score + rho * P_stale`` where ``P_score ∝ (1 / rank) ** (1 / temperature)`` (rank 1 =
    highest score; ties keep input order) and ``P_stale ∝ staleness`` (uniform when nothing is stale).

    Args:
        scores: Replay score of each candidate (e.g. regret floored at 0).
        staleness: Steps since each candidate was last played.
        temperature: Rank temperature; small values concentrate on the top scores.
        rho: Weight of the staleness term, in [0, 1].
    """
    if len(scores) != len(staleness):
        raise ValueError(f"{len(scores)} scores but {len(staleness)} staleness values")
    if temperature <= 0 or not 0.0 <= rho <= 1.0:
        raise ValueError(f"need temperature > 0 and rho in [0, 1] (got {temperature}, {rho})")
    n = len(scores)
    if n == 0:
        return []
    order = sorted(range(n), key=lambda i: -scores[i])
    h = [0.0] * n
    for rank, i in enumerate(order, start=1):
        h[i] = (1.0 / rank) ** (1.0 / temperature)
    total_h = sum(h)
    total_c = float(sum(staleness))
    p_stale = [c / total_c for c in staleness] if total_c > 0 else [1.0 / n] * n
    return [(1.0 - rho) * h[i] / total_h + rho * p_stale[i] for i in range(n)]


def weighted_sample_without_replacement(weights: Sequence[float], n: int, rng: random.Random) -> list[int]:
    """``min(n, len(weights))`` distinct indices drawn one by one in proportion to ``weights``.

    Zero-weight items are drawn (uniformly) only once every positive-weight item is taken.
    """
    remaining = list(range(len(weights)))
    chosen: list[int] = []
    while remaining and len(chosen) < n:
        total = sum(weights[i] for i in remaining)
        if total <= 0:
            pick = rng.randrange(len(remaining))
        else:
            x, pick = rng.random() * total, len(remaining) - 1
            for k, i in enumerate(remaining):
                x -= weights[i]
                if x < 0:
                    pick = k
                    break
        chosen.append(remaining.pop(pick))
    return chosen


def eviction_order(
    keys: Sequence[tuple[float | None, float | None, int]], band: tuple[float, float]
) -> list[int]:
    """Indices from first-to-evict to last, given ``(win_rate, regret, created_step)`` per record.

    Played records outside the learnable ``band`` go first, then played records inside it, then records never
    played (new ones deserve a measurement); within each group lowest regret first, then oldest first.
    """
    low, high = band

    def group(win_rate: float | None) -> int:
        if win_rate is None:
            return 2
        return 1 if low <= win_rate <= high else 0

    return sorted(range(len(keys)), key=lambda i: (group(keys[i][0]), keys[i][1] or 0.0, keys[i][2], i))
