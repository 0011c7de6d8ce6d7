"""One way to derive every seed of a run: :func:`derive_seed` of the run seed and a purpose.

A purpose is a path of names and numbers, e.g. ``("episode", step, env_id, i)`` or ``("design", step)``. The
seed is a hash of the run seed and that path, so two purposes never share a stream by accident, adding a
new purpose changes no existing one, and a step's draws depend only on ``(run seed, step, ...)``: resuming a
run from a checkpoint replays exactly the same choices.
"""

from __future__ import annotations

import hashlib
import json
import random

SEED_BITS = 31
"""Derived seeds lie in ``[0, 2**31)``; evaluation seeds use ``[2**31, 2**32)`` (:mod:`spade.evals.base`)."""


def derive_seed(run_seed: int, *purpose: str | int) -> int:
    """A seed in ``[0, 2**31)`` that is a pure function of ``run_seed`` and ``purpose``.

    Args:
        run_seed: The run's seed (``TrainConfig.seed``).
        purpose: What the seed is for, most general first (e.g. ``"episode", step, env_id, index``). The
            path is hashed as a JSON list, so any strings are fine and ``1`` differs from ``"1"``.
    """
    digest = hashlib.sha256(json.dumps([run_seed, *purpose]).encode()).digest()
    return int.from_bytes(digest[:4], "big") & ((1 << SEED_BITS) - 1)


def derive_rng(run_seed: int, *purpose: str | int) -> random.Random:
    """A generator seeded with :func:`derive_seed` (``run_seed``, ``purpose``)."""
    return random.Random(derive_seed(run_seed, *purpose))
