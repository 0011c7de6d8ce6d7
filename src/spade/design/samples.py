"""Designer samples awaiting delayed credit, stored in the run directory until their credit is due."""

from __future__ import annotations

import json
from dataclasses import dataclass

from spade.rundir import RunDir, atomic_write
from spade.types import TrainSample


@dataclass(frozen=True, slots=True)
class DesignSamples:
    """The run's stored designer samples (``samples/<env id>.json``), by environment id."""

    run: RunDir

    def save(self, ref: str, sample: TrainSample) -> None:
        """Store a designer sample until its delayed credit is due."""
        data = {"tokens": sample.tokens_T, "mask": sample.mask_T, "logprobs": sample.sample_logprobs_T}
        atomic_write(self.run.root / "samples" / f"{ref}.json", json.dumps(data))

    def load(self, ref: str) -> TrainSample | None:
        """A stored designer sample (None when it had nothing to train on)."""
        path = self.run.root / "samples" / f"{ref}.json"
        if not path.exists():
            return None
        data = json.loads(path.read_text())
        return TrainSample(
            tuple(data["tokens"]), tuple(data["mask"]), tuple(data["logprobs"]), 0.0, "designer"
        )

    def prune(self) -> int:
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
