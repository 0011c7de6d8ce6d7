"""``--mode selfplay``, SPADE itself: the model designs the environments it plays, and both roles are trained.

Each regeneration runs the design phase (:class:`spade.design.DesignPhase`) and plays the new valid
environments, topped up from the archive by PLR replay when there are too few (without memory, the
no-memory ablation: only the new ones, or seed games when none is valid). Each designer sample waits in the
delayed-credit buffer (:mod:`spade.scoring.credit`) until ``reward.delay`` steps of plays measured its environment.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, get_args

from spade import stopping
from spade.config import TrainConfig
from spade.config.errors import require
from spade.config.types import DesignerReward
from spade.design import DesignOutcome
from spade.memory.archive import EnvStatus, Memory
from spade.modes.base import Mode, Regeneration, top_up
from spade.modes.registry import register
from spade.run import preflight
from spade.run.components import Components
from spade.run.state import LoopState
from spade.scoring import credit as cr
from spade.scoring.samples import pending, score_designer
from spade.scoring.stats import EnvStats
from spade.types import TrainSample

SPURIOUS = get_args(DesignerReward)
"""``designer/reward_spurious`` is the index of ``designer.reward`` here: 0 regret, 1 shuffled, 2 random."""


class SelfPlay(Mode):
    """Design, check and hint environments, play them, and credit the designer for their regret."""

    name = "selfplay"
    regen_line = "design environments"
    designs = True

    def check_config(self, cfg: TrainConfig) -> None:
        """Hinted plays for a reward that needs them; a server for the openai backend."""
        r, m = cfg.reward, cfg.model
        require(
            r.variant == "learning_potential" or cfg.rollout.hint_plays_per_env >= 1,
            f"reward.variant={r.variant!r} needs hinted plays: set rollout.hint_plays_per_env >= 1",
        )
        require(
            m.backend != "openai" or bool(m.openai.base_urls),
            "model.backend='openai' needs model.openai.base_urls "
            "(e.g. --model.openai.base-urls http://127.0.0.1:8000/v1)",
        )

    def preflight(self, cfg: TrainConfig) -> None:
        """The warm-start pool (with ``memory.warm_start``) and the corpus (when grounded) can be read."""
        super().preflight(cfg)
        if cfg.corpus.enabled and cfg.corpus.path:
            preflight.check_corpus(cfg.corpus.path)

    def run_name(self, name: str) -> str:
        """The preset's name itself (``runs/cpu-tiny``, which ``make train`` and the docs use)."""
        return name

    def grounded(self, cfg: TrainConfig) -> bool:
        """Designs draw documents from the corpus unless ``corpus.enabled`` is off."""
        return cfg.corpus.enabled

    def start(self, cfg: TrainConfig, memory: Memory) -> dict[str, Any]:
        """Archive the pool only with ``memory.warm_start``: the designer's seeds are archived anyway."""
        if cfg.memory.warm_start:
            memory.warm_start(self.sources(cfg))
        return {}

    async def regenerate(self, cfg: TrainConfig, c: Components, state: LoopState, step: int) -> Regeneration:
        """Design one regeneration of environments; play the valid ones, topped up from the archive."""
        assert c.design is not None  # built for every mode that designs
        designed, metrics = await c.design.run(step)
        stopping.check()  # designs cut by a stop request are no designs to play
        if not (cfg.memory.enabled and cfg.memory.top_up):  # play only this regeneration's designs
            current = fresh_only(cfg, c.memory, designed, step)
        else:
            current = top_up(cfg, c.memory, [d.env_id for d in designed if d.valid], step)
        return Regeneration(current, tuple(designed), metrics)

    def credit(
        self,
        cfg: TrainConfig,
        c: Components,
        state: LoopState,
        regen: Regeneration | None,
        per_env: Mapping[str, EnvStats],
        *,
        step: int,
        n_agent: int,
        final: bool,
    ) -> tuple[list[TrainSample], dict[str, Any]]:
        """Add this step's designs to the buffer, extend every window with the step's plays, and score the
        designer samples due at ``step`` (all of them at the run's ``final`` step)."""
        designed = regen.designed if regen is not None else ()
        if not cfg.designer.train_rejected:  # rejection sampling, as released: only accepted designs train
            designed = tuple(d for d in designed if d.valid)
        new = [pending(d, per_env, step) for d in designed]
        buffer = cr.add_plays([*state.credit, *new], per_env)
        due, rest = cr.release_due(buffer, step, cfg.reward.delay, final=final)
        state.credit = list(rest)
        if not due:
            return [], {}
        rewards, state.lp_ema = cr.credit_rewards(due, cfg.reward, state.lp_ema)
        # the one place designer credit is assigned: the spurious-reward control replaces it here
        regens = [d.entry.created_step for d in due]
        credited = cr.spurious_rewards(rewards, regens, cfg.designer.reward, cfg.seed)
        assert c.design is not None
        samples, metrics = score_designer(cfg, due, credited, n_agent, c.design.samples.load)
        metrics["designer/reward_spurious"] = float(SPURIOUS.index(cfg.designer.reward))
        if cfg.designer.reward != "regret":
            metrics["designer/reward_real_mean"] = sum(rewards) / len(rewards)
        return samples, metrics

    def metrics(self, cfg: TrainConfig, memory: Memory) -> dict[str, float]:
        """None of its own (the archive's are every mode's)."""
        del cfg, memory
        return {}


def fresh_only(cfg: TrainConfig, memory: Memory, designed: Sequence[DesignOutcome], step: int) -> list[str]:
    """The environments to play under the no-memory ablation (``memory.enabled=False``) or without top-up
    (``memory.top_up=False``, as released).

    Only this regeneration's valid designs; designed environments are never replayed. When none is valid
    the seed library (never designed) fills in, so the agent still has something to train on.
    """
    current = [d.env_id for d in designed if d.valid]
    if current:
        return current
    seeds = sorted(r.env_id for r in memory.records(status=EnvStatus.VALID) if r.is_seed)
    random.Random(f"{cfg.seed}/{step}/seed-fill").shuffle(seeds)
    return seeds[: cfg.designer.envs_per_regen]


register(SelfPlay.name, SelfPlay)
