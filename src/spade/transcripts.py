"""Readable transcripts of what the agent and the designer did, kept compactly in the run directory.

Layout: ``<run>/transcripts/step_000012.play.jsonl.gz`` (agent episodes) and ``step_000012.design.jsonl.gz``
(designer replies), one JSON object per line, each file written whole through a rename (a kill never leaves
half a file). An agent record holds the decoded conversation as ``segments`` — alternating ``context``
(what the model was shown: system prompt, observations with the hint when hinted, tool results, in the chat
template's own markup) and ``assistant`` (what it sampled) — plus env id, seed, hinted, return, success,
status, the parsed action and reward of every turn, and the environment's last observation. A designer
record holds the prompt messages, the reply, the extracted environment id, whether it was accepted, the
checker's findings and the hint.

Designer samples (token ids for delayed credit, ``<run>/samples/``) are pruned by
:meth:`spade.design.samples.DesignSamples.prune` once no kept checkpoint awaits their credit.

Retention (:class:`~spade.config.TranscriptConfig`): a few plays per environment and arm per step; the
newest ``keep_last`` steps, and older steps divisible by ``keep_every``.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from spade.errors import SpadeError
from spade.types import Trajectory

Kind = Literal["play", "design"]
FOLDER = "transcripts"
_NAME = re.compile(r"^step_(\d+)\.(play|design)\.jsonl\.gz$")


@dataclass(frozen=True, slots=True)
class TranscriptFile:
    """One stored file of transcripts."""

    step: int
    kind: Kind
    path: Path


def segments(
    tokens_T: Sequence[int], mask_T: Sequence[int], decode: Callable[[Sequence[int]], str]
) -> list[dict[str, str]]:
    """The conversation as alternating runs: ``context`` (mask 0) and ``assistant`` (mask 1), decoded."""
    out: list[dict[str, str]] = []
    start = 0
    for i in range(1, len(tokens_T) + 1):
        if i == len(tokens_T) or mask_T[i] != mask_T[start]:
            role = "assistant" if mask_T[start] else "context"
            out.append({"role": role, "content": decode(tokens_T[start:i])})
            start = i
    return out


def play_record(traj: Trajectory, step: int, decode: Callable[[Sequence[int]], str]) -> dict[str, Any]:
    """The transcript of one episode."""
    return {
        "step": step,
        "env_id": traj.env_id,
        "seed": traj.seed,
        "hinted": traj.hinted,
        "return": traj.episode_return,
        "success": traj.success,
        "status": traj.status.value,
        "error": traj.error,
        "turns": [{"action": t.action, "reward": t.reward} for t in traj.transitions],
        "segments": segments(traj.tokens_T, traj.mask_T, decode),
        "final_observation": _final_observation(traj),
    }


def _final_observation(traj: Trajectory) -> str:
    """What the environment answered to the last action when that ended the episode (not in the tokens)."""
    last = traj.transitions[-1] if traj.transitions else None
    return last.observation if last is not None and (last.terminated or last.truncated) else ""


def pick_episodes(trajectories: Sequence[Trajectory], per_env: int) -> list[Trajectory]:
    """The first ``per_env`` plays of every environment and arm (all when ``per_env`` is 0).

    Both arms draw from the same seed list, so the kept hinted and unhinted plays are paired instances.
    """
    if per_env == 0:
        return list(trajectories)
    counts: dict[tuple[str, bool], int] = {}
    kept = []
    for t in trajectories:
        key = (t.env_id, t.hinted)
        if counts.get(key, 0) < per_env:
            counts[key] = counts.get(key, 0) + 1
            kept.append(t)
    return kept


def path_of(run_root: Path, step: int, kind: Kind) -> Path:
    """Where the transcripts of ``step`` and ``kind`` live."""
    return run_root / FOLDER / f"step_{step:06d}.{kind}.jsonl.gz"


def write(run_root: Path, step: int, kind: Kind, records: Sequence[dict[str, Any]]) -> Path:
    """Write one step's records (replacing a file of the same step, e.g. a step rerun after resume)."""
    path = path_of(run_root, step, kind)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("wb") as f:
        f.write(gzip.compress(text.encode("utf-8"), compresslevel=6, mtime=0))
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)
    return path


def files(run_root: Path, kind: Kind | None = None) -> list[TranscriptFile]:
    """Stored transcript files, oldest step first."""
    folder = run_root / FOLDER
    out = []
    for p in folder.iterdir() if folder.is_dir() else ():
        m = _NAME.match(p.name)
        if m and (kind is None or m.group(2) == kind):
            out.append(TranscriptFile(int(m.group(1)), m.group(2), p))  # type: ignore[arg-type]
    return sorted(out, key=lambda f: (f.step, f.kind))


class TranscriptError(SpadeError):
    """A transcript file cannot be read; the message names it."""


def read(path: Path) -> list[dict[str, Any]]:
    """The records of one file; a damaged file raises TranscriptError naming it."""
    try:
        text = gzip.decompress(path.read_bytes()).decode("utf-8")
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TranscriptError(f"{path} is damaged ({exc}); delete it, the run does not need it") from exc


def prune(run_root: Path, current_step: int, *, keep_last: int, keep_every: int) -> list[Path]:
    """Delete files outside the retention window (``transcripts.keep_last``, ``transcripts.keep_every``);
    returns what was deleted."""
    gone = []
    for f in files(run_root):
        recent = f.step > current_step - keep_last
        milestone = keep_every > 0 and f.step % keep_every == 0
        if not (recent or milestone):
            f.path.unlink(missing_ok=True)
            gone.append(f.path)
    return gone


def iter_records(run_root: Path, kind: Kind, env_id: str | None = None) -> Iterator[dict[str, Any]]:
    """Every readable record of ``kind`` (newest step last), optionally of one environment."""
    for f in files(run_root, kind):
        for record in read(f.path):
            if env_id is None or record.get("env_id") == env_id:
                yield record
