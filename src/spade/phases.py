"""The pieces the loop is made of: its components.

:func:`make_components` builds the policy, trainer, sandbox, archive and corpus of a run; the design phase
that uses them lives in :mod:`spade.design`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spade import cluster, procedural, transcripts
from spade.backends.batching import BatchingPolicy
from spade.config import TrainConfig, TranscriptConfig
from spade.corpus import CorpusSampler, SamplerState, load_corpus
from spade.memory import FILENAME as MEMORY_FILE
from spade.memory import Memory, archive_sources, seed_sources
from spade.rundir import RunDir, atomic_write
from spade.sandbox import EnvRunner
from spade.seeds import derive_seed
from spade.skills import skills_for
from spade.training import make_trainer
from spade.types import EnvSource, Trainer, TrainSample, Trajectory


@dataclass
class Components:
    """The long-lived parts of a run."""

    run: RunDir
    policy: BatchingPolicy
    trainer: Trainer
    runner: EnvRunner
    memory: Memory
    sampler: CorpusSampler | None
    pool: list[EnvSource]
    keep: TranscriptConfig = dataclasses.field(default_factory=TranscriptConfig)
    """What to keep of transcripts."""

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
def make_components(cfg: TrainConfig, run: RunDir) -> Iterator[Components]:
    """Build every component of a run; closes the sandbox and the archive on exit."""
    from spade.backends import make_policy  # noqa: PLC0415 - heavy imports on demand

    policy = BatchingPolicy(
        make_policy(cfg.model, seed=derive_seed(cfg.seed, "policy")),
        max_batch=cfg.rollout.max_concurrent_plays,
        gather_s=cfg.rollout.batch_gather_s,
    )
    trainer = make_trainer(cfg)
    sampler = None
    if cfg.mode == "selfplay" and cfg.corpus.enabled:
        sampler = CorpusSampler(load_corpus(cfg.corpus.path), seed=derive_seed(cfg.seed, "corpus"))
    with cluster.open_runner(cfg) as runner, Memory.in_run_dir(run.root, cfg.memory) as memory:
        yield Components(run, policy, trainer, runner, memory, sampler, _pool(cfg), cfg.transcripts)


def _pool(cfg: TrainConfig) -> list[EnvSource]:
    """The warm-start / fixed-pool environments: the seed library (``designer.seeds``, else the seeds of
    ``designer.skills``), a run's archive, or a folder of files; in procedural mode the Reasoning-Gym task
    environments."""
    if cfg.mode == "procedural":
        return procedural.sources(cfg.procedural)
    if not cfg.pool:
        d = cfg.designer
        return seed_sources(d.setting, d.skills, d.seeds)
    folder = Path(cfg.pool)
    if (folder / MEMORY_FILE).exists():
        return archive_sources(folder)
    files = sorted((folder / "games").glob("*.py")) or sorted(folder.glob("*.py"))
    if not files:
        raise FileNotFoundError(f"no environment files (*.py or games/*.py) in pool folder {folder}")
    known = {**skills_for("games"), **skills_for("tool_use")}
    out = []
    for f in files:
        skill = next((s for s in known if f.stem.endswith(s)), "")
        out.append(EnvSource(code=f.read_text(), skill=skill, env_id=f"pool_{f.stem}"))
    return out
