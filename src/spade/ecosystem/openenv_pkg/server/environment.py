"""One OpenEnv session: each ``reset`` opens a fresh, single-use instance in spade's sandbox.

The environment code never runs in this process: :class:`spade.sandbox.Sandbox` forks a hardened child per
instance and validates every value it returns. A failed instance ends the episode with ``error`` set.
"""

from __future__ import annotations

import atexit
import json
import random
import threading
from pathlib import Path
from typing import Any

from openenv.core.env_server.interfaces import Environment

from spade.sandbox import EnvHandle, Sandbox, SandboxError

from ..models import SpadeAction, SpadeObservation, SpadeState

ENVS = Path(__file__).resolve().parent.parent / "envs"
"""The exported environment sources and their ``manifest.jsonl``."""

_lock = threading.Lock()
_sandbox: Sandbox | None = None


def catalogue() -> list[dict[str, str]]:
    """The package's environments: ``env_id``, ``file`` and ``skill`` of each, in export order."""
    lines = (ENVS / "manifest.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _shared_sandbox() -> Sandbox:
    """The process's sandbox (one zygote; started on first use, closed at exit)."""
    global _sandbox  # noqa: PLW0603 - one zygote per server process, shared by its sessions
    with _lock:
        if _sandbox is None:
            _sandbox = Sandbox().__enter__()
            atexit.register(_sandbox.close)
        return _sandbox


class SpadeEnvironment(Environment[SpadeAction, SpadeObservation, SpadeState]):
    """The package's environments behind OpenEnv's ``reset`` / ``step`` / ``state``."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._envs = {row["env_id"]: row for row in catalogue()}
        self._order = list(self._envs)
        self._handle: EnvHandle | None = None
        self._state = SpadeState()

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        env_id: str | None = None,
        difficulty: int | None = None,
        **kwargs: Any,
    ) -> SpadeObservation:
        """Start an episode of ``env_id`` (default: the environment at ``seed`` modulo their number)."""
        if seed is None:
            seed = random.SystemRandom().randrange(2**31)
        if env_id is None:
            env_id = self._order[seed % len(self._order)]
        if env_id not in self._envs:
            raise ValueError(f"unknown env_id {env_id!r}; this server has {', '.join(self._order)}")
        self.close()
        row = self._envs[env_id]
        self._state = SpadeState(episode_id=episode_id, step_count=0, env_id=env_id, seed=seed)
        base = {"env_id": env_id, "skill": row.get("skill", "")}
        try:
            source = (ENVS / row["file"]).read_text(encoding="utf-8")
            self._handle = _shared_sandbox().open(source, filename=row["file"])
            options = None if difficulty is None else {"difficulty": int(difficulty)}
            text, _ = self._handle.reset(seed=seed, options=options)
            tools = self._handle.tools() if self._handle.meta.is_tool_env else []
        except SandboxError as exc:
            self.close()
            return SpadeObservation(**base, error=f"{exc.kind}: {exc}", done=True, reward=0.0)
        return SpadeObservation(**base, text=text, tools=tools, done=False, reward=0.0)

    def step(self, action: SpadeAction, timeout_s: float | None = None, **kwargs: Any) -> SpadeObservation:
        """Apply one text action in the sandboxed instance."""
        if self._handle is None:
            raise ValueError("no episode in progress: call reset first")
        base = {"env_id": self._state.env_id, "skill": self._envs[self._state.env_id].get("skill", "")}
        self._state.step_count += 1
        try:
            text, reward, terminated, truncated, _ = self._handle.step(action.message)
        except SandboxError as exc:
            self.close()
            return SpadeObservation(**base, error=f"{exc.kind}: {exc}", done=True, reward=0.0)
        done = terminated or truncated
        if done:
            self.close()
        return SpadeObservation(
            **base, text=text, terminated=terminated, truncated=truncated, done=done, reward=reward
        )

    @property
    def state(self) -> SpadeState:
        """The session's current episode."""
        return self._state

    def close(self) -> None:
        """End the live instance, if any."""
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.close()
