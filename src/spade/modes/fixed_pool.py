"""``--mode fixed_pool``: the agent alone on a fixed pool of environments (the seed library, a run's archive
or a folder), the baseline that isolates what designing adds.

Each regeneration plays the pool's next batch (``memory.pool_order``): 'epochs' plays every environment of
the pool once per epoch, in a new seeded order each epoch (as released); 'replay' spends half of each batch
on environments not played yet and the rest on PLR replay.
"""

from __future__ import annotations

from spade.config import TrainConfig
from spade.memory.archive import EnvStatus, Memory
from spade.memory.select import pool_batch
from spade.modes.base import Mode, Regeneration, top_up
from spade.modes.registry import register
from spade.run import preflight
from spade.run.components import Components
from spade.run.state import LoopState
from spade.seeds import derive_rng


class FixedPool(Mode):
    """Train the agent on the next batch of a fixed pool at each regeneration; nothing is designed."""

    name = "fixed_pool"
    regen_line = "next batch of the fixed pool (agent only: nothing is designed)"

    def preflight(self, cfg: TrainConfig) -> None:
        """The pool folder (when one is given) holds environment files (read with or without warm start)."""
        preflight.check_pool(cfg.pool)

    async def regenerate(self, cfg: TrainConfig, c: Components, state: LoopState, step: int) -> Regeneration:
        """The pool's batch for the regeneration at ``step``."""
        del state
        return Regeneration(next_batch(cfg, c.memory, step))


def next_batch(cfg: TrainConfig, memory: Memory, step: int) -> list[str]:
    """The pool's batch for the regeneration at ``step`` (``memory.pool_order``)."""
    want = cfg.designer.envs_per_regen
    records = memory.records(status=EnvStatus.VALID)
    if cfg.memory.pool_order == "epochs":
        ids = sorted(r.env_id for r in records)
        index = step // cfg.designer.regen_interval
        return pool_batch(ids, want, index, lambda epoch: derive_rng(cfg.seed, "pool", epoch))
    fresh = sorted(r.env_id for r in records if r.last_step is None)
    derive_rng(cfg.seed, "explore", step).shuffle(fresh)
    return top_up(cfg, memory, fresh[: want - want // 2], step)


register(FixedPool.name, FixedPool)
