"""The taskset (one task per environment and seed) and the env whose ``run`` plays one in spade's sandbox.

The environment plays the user: its first observation opens the exchange, each reply of the agent is one
``step`` in a fresh sandboxed instance, and the episode's return is recorded as the reward ``spade_return``
(the last reward when the episode terminated, else 0, as spade scores a play).
"""

from __future__ import annotations

import atexit
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import verifiers.v1 as vf

from spade.sandbox import Sandbox

ENVS = Path(__file__).resolve().parent / "envs"
"""The exported environment sources and their ``manifest.jsonl``."""

SYSTEM_PROMPT = (
    "You are playing a multi-turn text environment. Read each observation and reply with your next action "
    "in the format it asks for."
)

_lock = threading.Lock()
_sandbox: Sandbox | None = None


def catalogue() -> list[dict[str, str]]:
    """The package's environments: ``env_id``, ``file`` and ``skill`` of each, in export order."""
    lines = (ENVS / "manifest.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _shared_sandbox() -> Sandbox:
    """The process's sandbox (one zygote; started on first use, closed at exit)."""
    global _sandbox  # noqa: PLW0603 - one zygote per process, shared by concurrent episodes
    with _lock:
        if _sandbox is None:
            _sandbox = Sandbox().__enter__()
            atexit.register(_sandbox.close)
        return _sandbox


class SpadeTasksetConfig(vf.TasksetConfig):
    """Which instances load: ``seeds`` episodes of every environment, optionally at one ``difficulty``."""

    seeds: int = 8
    difficulty: int | None = None


class SpadeData(vf.TaskData):
    """One instance: the environment's file and the seed its sandboxed reset uses."""

    info: dict[str, Any]


class SpadeTask(vf.Task[SpadeData, vf.State, vf.TaskConfig]):
    """One instance of one environment."""


class SpadeEnvConfig(vf.EnvConfig):
    """The single seat: the agent playing the environment."""

    player: vf.AgentConfig = vf.AgentConfig()


async def play(task: Any, agents: Any) -> float:
    """One episode of ``task`` in a fresh sandboxed instance; returns (and records) its return."""
    info = task.data.info
    source = (ENVS / info["file"]).read_text(encoding="utf-8")
    options = None if info.get("difficulty") is None else {"difficulty": int(info["difficulty"])}
    episode_return = 0.0
    env = await _shared_sandbox().aopen(source, filename=info["file"])
    try:
        observation, _ = await env.areset(seed=int(info["seed"]), options=options)
        async with agents.player.interaction(task) as interaction:
            segment = await interaction.turn(observation)
            while not segment.terminated:
                observation, reward, terminated, truncated, _ = await env.astep(segment.last_reply)
                if terminated or truncated:
                    episode_return = float(reward) if terminated else 0.0
                    break
                segment = await interaction.turn(observation)
        interaction.trace.record_reward("spade_return", episode_return, 1.0)
    finally:
        await env.aclose()
    return episode_return


class SpadeEnv(vf.Env[SpadeEnvConfig]):
    """Plays a task's environment with the ``player`` seat (see :func:`play`)."""

    async def run(self, task: Any, agents: Any) -> None:
        """One episode."""
        await play(task, agents)


class SpadeTaskset(vf.Taskset[SpadeTask, SpadeTasksetConfig]):
    """Every environment of the package at seeds ``0 .. seeds-1``."""

    def load(self) -> Iterator[SpadeTask]:
        """The tasks, environment by environment."""
        for row in catalogue():
            for seed in range(self.config.seeds):
                data = SpadeData(
                    name=f"{row['env_id']}#{seed}",
                    prompt=None,
                    system_prompt=SYSTEM_PROMPT,
                    info={**row, "seed": seed, "difficulty": self.config.difficulty},
                )
                yield SpadeTask(data, self.config.task)
