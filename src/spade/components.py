"""The long-lived parts of a run: policy, trainer, environment runner, archive and corpus sampler.

:func:`make_components` builds them for the loop (:mod:`spade.train`); :class:`Components` also stores the
designer samples that await delayed credit and the readable transcripts of plays.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spade import cluster, transcripts
from spade.backends import make_policy
from spade.backends.batching import BatchingPolicy
from spade.checker.novelty import Fingerprints
from spade.config import TrainConfig, TranscriptConfig
from spade.corpus import CorpusSampler, SamplerState, load_corpus
from spade.ecosystem import remote as ecosystem_remote
from spade.memory import Memory
from spade.rundir import RunDir, atomic_write
from spade.sandbox import EnvRunner
from spade.seeds import derive_seed
from spade.training import make_trainer
from spade.types import Trainer, TrainSample, Trajectory

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
    keep: TranscriptConfig = dataclasses.field(default_factory=TranscriptConfig)
    """What to keep of transcripts."""
    fingerprints: Fingerprints | None = None
    """Behaviour fingerprints of archived and designed sources, played once per process (novelty metrics)."""
    progress: Callable[[str], None] = lambda _: None
    """Receives a line as each part of a long phase starts (the design phase's designs, checks and hints)."""

    @property
    def corpus(self) -> Any:
        """The corpus (for its metrics), or an object with empty metrics when grounding is off."""
        return self.sampler.corpus if self.sampler is not None else _NoCorpus()

    def corpus_state(self) -> dict[str, Any]:
        """The sampler's resumable state."""
        return self.sampler.state.to_dict() if self.sampler is not None else {}

    def restore_corpus(self, state: dict[str, Any]) -> None:
        """Continue sampling from a saved state."""
        if self.sampler is not None and state:
            self.sampler = CorpusSampler(self.sampler.corpus, state=SamplerState.from_dict(state))

    def save_design_sample(self, ref: str, sample: TrainSample) -> None:
        """Store a designer sample until its delayed credit is due."""
        data = {"tokens": sample.tokens_T, "mask": sample.mask_T, "logprobs": sample.sample_logprobs_T}
        atomic_write(self.run.root / "samples" / f"{ref}.json", json.dumps(data))

    def load_design_sample(self, ref: str) -> TrainSample | None:
        """A stored designer sample (None when it had nothing to train on)."""
        path = self.run.root / "samples" / f"{ref}.json"
        if not path.exists():
            return None
        data = json.loads(path.read_text())
        return TrainSample(
            tuple(data["tokens"]), tuple(data["mask"]), tuple(data["logprobs"]), 0.0, "designer"
        )

    def prune_design_samples(self) -> int:
        """Delete stored designer samples no kept checkpoint still awaits credit for; returns how many.

        A sample is needed while a checkpoint's delayed-credit buffer names it (resuming from that
        checkpoint releases it later); one written after the newest checkpoint is rewritten when its step
        reruns. Their text stays in the design transcripts.
        """
        folder = self.run.root / "samples"
        needed: set[str] = set()
        for checkpoint in self.run.checkpoints.glob("step_*"):
            if (checkpoint / "state.json").is_file():
                needed.update(str(e["sample_ref"]) for e in self.run.read_state(checkpoint).get("credit", []))
        gone = 0
        for path in folder.glob("*.json") if folder.is_dir() else ():
            if path.stem not in needed:
                path.unlink(missing_ok=True)
                gone += 1
        return gone

    def record_plays(self, step: int, trajectories: Sequence[Trajectory]) -> None:
        """Keep readable transcripts of some of this step's plays (retention: ``self.keep``)."""
        if not self.keep.enabled:
            return
        kept = transcripts.pick_episodes(trajectories, self.keep.episodes_per_env)
        decode = self.policy.template.decode
        transcripts.write(
            self.run.root, step, "play", [transcripts.play_record(t, step, decode) for t in kept]
        )
        transcripts.prune(self.run.root, step, self.keep)


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
        progress: receives the progress lines of long phases (:attr:`Components.progress`).
    """
    policy = BatchingPolicy(
        make_policy(cfg.model, seed=derive_seed(cfg.seed, "policy")),
        max_batch=cfg.rollout.max_concurrent_plays,
        gather_s=cfg.rollout.batch_gather_s,
    )
    trainer = make_trainer(cfg)
    sampler = None
    if mode.grounded(cfg):
        sampler = CorpusSampler(load_corpus(cfg.corpus.path), seed=derive_seed(cfg.seed, "corpus"))
    limits = mode.sandbox_limits(cfg)
    with cluster.open_runner(cfg, limits) as sandboxed, Memory.in_run_dir(run.root, cfg.memory) as memory:
        runner = ecosystem_remote.wrap_runner(cfg.pool, sandboxed)  # openenv:URL pools play on the server
        yield Components(run, policy, trainer, runner, memory, sampler, cfg.transcripts, progress=progress)
