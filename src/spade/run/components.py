"""The long-lived parts of a run: policy, trainer, environment runner, archive, corpus sampler, player and
design phase.

:func:`make_components` builds them for the loop (:mod:`spade.run.loop`), resolving the run's settings once:
the step hands them no config. :class:`Components` also keeps the readable transcripts of plays.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spade import cluster, design, stopping, transcripts
from spade.backends import make_policy, set_threads
from spade.backends.batching import BatchingPolicy
from spade.config import TrainConfig, TranscriptConfig
from spade.design import DesignPhase
from spade.design.corpus import CorpusSampler, SamplerState, load_corpus
from spade.ecosystem import remote as ecosystem_remote
from spade.memory.archive import Memory
from spade.play.plays import Player
from spade.rundir import RunDir
from spade.sandbox import EnvRunner
from spade.scoring.stats import EnvStats
from spade.seeds import derive_seed
from spade.training import make_trainer
from spade.types import Trainer, Trajectory

if TYPE_CHECKING:
    from spade.modes import Mode


@dataclass
class Components:
    """The long-lived parts of a run."""

    run: RunDir
    policy: BatchingPolicy
    trainer: Trainer
    runner: EnvRunner
    memory: Memory
    sampler: CorpusSampler | None
    player: Player
    keep: TranscriptConfig = dataclasses.field(default_factory=TranscriptConfig)
    """What to keep of transcripts."""
    progress: Callable[[str], None] = lambda _: None
    """Receives a line as each part of a long phase starts (the design phase's designs, checks and hints)."""
    design: DesignPhase | None = None
    """The design phase (a mode that designs: :attr:`spade.modes.Mode.designs`)."""

    @property
    def corpus(self) -> Any:
        """The corpus (for its metrics), or an object with empty metrics when grounding is off."""
        return self.sampler.corpus if self.sampler is not None else _NoCorpus()

    def remember(self, per_env: Mapping[str, EnvStats], step: int) -> dict[str, float]:
        """Record each played environment's statistics in the archive; returns the archive's metrics."""
        for env_id, s in per_env.items():
            regret = s.regret.regret if s.regret is not None and s.regret.se is not None else None
            self.memory.record_stats(env_id, step, s.win_rate, regret, s.plays)
        metrics = self.memory.metrics()
        metrics["memory/size"] = metrics.get("memory/valid", 0.0)
        return metrics

    def corpus_state(self) -> dict[str, Any]:
        """The sampler's resumable state."""
        return self.sampler.state.to_dict() if self.sampler is not None else {}

    def restore_corpus(self, state: dict[str, Any]) -> None:
        """Continue sampling from a saved state."""
        if self.sampler is not None and state:
            self.sampler.restore(SamplerState.from_dict(state))

    def record_plays(self, step: int, trajectories: Sequence[Trajectory]) -> None:
        """Keep readable transcripts of some of this step's plays (retention: ``self.keep``)."""
        if not self.keep.enabled:
            return
        kept = transcripts.pick_episodes(trajectories, self.keep.episodes_per_env)
        decode = self.policy.template.decode
        transcripts.write(
            self.run.root, step, "play", [transcripts.play_record(t, step, decode) for t in kept]
        )
        transcripts.prune(self.run.root, step, keep_last=self.keep.keep_last, keep_every=self.keep.keep_every)


class _NoCorpus:
    def metrics(self) -> dict[str, float]:
        return {}


@contextlib.contextmanager
def make_components(
    cfg: TrainConfig,
    run: RunDir,
    mode: Mode,
    *,
    progress: Callable[[str], None] = lambda _: None,
) -> Iterator[Components]:
    """Build every component of a run; closes the sandbox and the archive on exit.

    Args:
        cfg: the run's config.
        run: its run directory.
        mode: the run's mode: the limits of every sandbox that plays its environments, and whether designs
            draw documents from the corpus (``corpus.enabled`` in a designing mode).
        progress: receives the progress lines of long phases (:attr:`Components.progress`), and first the
            torch thread count (:mod:`spade.backends.threads`).

    Raises:
        spade.stopping.Interrupted: a stop was requested while a start-up stage ran (checked after each).
    """
    if cfg.model.backend != "scripted":  # torch's threads: the free cores unless --model.threads says
        progress(set_threads(cfg.model.threads).line())
        stopping.check()
        progress(f"starting the model ({cfg.model.backend} engine, {cfg.model.model}) and the trainer")
    policy = BatchingPolicy(
        make_policy(cfg.model, seed=derive_seed(cfg.seed, "policy")),
        max_batch=cfg.rollout.max_concurrent_plays,
        gather_s=cfg.rollout.batch_gather_s,
    )
    stopping.check()  # a stop requested while the model loaded: the trainer is not built (spade.run.loop)
    trainer = make_trainer(cfg)
    stopping.check()
    sampler = None
    if mode.grounded(cfg):
        sampler = CorpusSampler(load_corpus(cfg.corpus.path), seed=derive_seed(cfg.seed, "corpus"))
    limits = mode.sandbox_limits(cfg)
    with cluster.open_runner(cfg, limits) as sandboxed, Memory.in_run_dir(run.root, cfg.memory) as memory:
        runner = ecosystem_remote.wrap_runner(cfg.pool, sandboxed)  # openenv:URL pools play on the server
        player = Player(
            runner, policy, memory, cfg.rollout, cfg.play, cfg.seed,
            envs_per_regen=cfg.designer.envs_per_regen, capacity=cluster.instance_capacity(cfg.cluster, limits),
        )  # fmt: skip
        c = Components(run, policy, trainer, runner, memory, sampler, player, cfg.transcripts, progress)
        if mode.designs:
            c.design = design.build(
                cfg, run=run, policy=policy, runner=runner, memory=memory, sampler=sampler,
                keep_transcripts=cfg.transcripts.enabled, progress=progress,
            )  # fmt: skip
        stopping.check()
        yield c
