"""Worked demonstrations: the agent sees one solved episode of the same game before it plays.

A small model imitates far better than it follows instructions (SPEC §7): with one short worked exchange
before the task it answers in the action format and wins games it otherwise never wins. A demonstration is
an episode of the *same* environment at a different seed, played by the environment's own scripted
``solution()`` in the sandbox, and kept only when that script wins. Demonstration seeds are at least
``2**31`` while every played seed is below it (:func:`spade.play.rollout.episode_seeds`), so a demonstration
never shows an instance the agent is scored on. The demonstration goes into the prompt (mask 0): the agent
is trained on its own replies only.

Only game environments get demonstrations; a tool-use environment, one without ``solution()``, one whose
script does not win, or one whose script is longer than ``max_actions`` gets none (counted, never raised).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from spade.checker.feasibility import solution_actions
from spade.sandbox import EnvRunner, SandboxError
from spade.types import Message

DEMO_SEED_BASE = 2**31
"""Demonstration seeds are >= this; played seeds are below it."""
DEMO_INTRO = "Here is an example game, played well:"
NEXT_GAME = "That was the example. Now a new game. Play it the same way, one action per turn in \\boxed{}."


@dataclass(frozen=True, slots=True)
class Demo:
    """One solved episode: ``(observation, action)`` per turn and the observation after the last action."""

    turns: tuple[tuple[str, str], ...]
    final: str


def demo_seed(env_id: str, played: Sequence[int], index: int = 0) -> int:
    """A demonstration seed (>= ``DEMO_SEED_BASE``) derived from the environment and its played seeds."""
    key = f"{env_id}/{min(played, default=0)}/{len(played)}/{index}"
    digest = hashlib.sha256(key.encode()).digest()
    return DEMO_SEED_BASE + (int.from_bytes(digest[:4], "big") & 0x7FFFFFFF)


async def record_demo(
    runner: EnvRunner,
    source: str,
    *,
    seed: int,
    options: dict[str, Any] | None,
    max_actions: int,
    filename: str = "<demo>",
) -> Demo | None:
    """Play the scripted solution of one instance; the episode if it wins within ``max_actions``, else None."""
    try:
        env = await runner.aopen(source, filename=filename)
    except SandboxError:
        return None
    try:
        if env.meta.is_tool_env:
            return None
        if options and env.meta.difficulty_levels <= int(options.get("difficulty", 0)):
            options = None
        obs, _ = await env.areset(seed=seed, options=options)
        try:
            actions, scripted = solution_actions(await env.asolution())
        except NotImplementedError:
            return None
        if not scripted or not actions or len(actions) > max_actions:
            return None
        turns = []
        for action in actions:
            next_obs, reward, terminated, truncated, _ = await env.astep(action)
            turns.append((obs, action))
            obs = next_obs
            if terminated or truncated:
                return Demo(tuple(turns), obs) if terminated and reward > 0 else None
        return None
    except SandboxError:
        return None
    finally:
        await env.aclose()


async def same_instance_demos(
    runner: EnvRunner, parent: str, child: str, *, seed: int, options: dict[str, Any] | None, max_actions: int
) -> tuple[Demo | None, Demo | None]:
    """The scripted solution of one instance (``seed``, ``options``) of a game and of an edit of it. Equal
    demos mean the edit left the game the agent plays as it was (a comment, a level not played)."""
    before, after = await asyncio.gather(
        record_demo(runner, parent, seed=seed, options=options, max_actions=max_actions, filename="<parent>"),
        record_demo(runner, child, seed=seed, options=options, max_actions=max_actions, filename="<child>"),
    )
    return before, after


def demo_messages(demos: Sequence[Demo]) -> list[Message]:
    """The demonstrations as a conversation prefix: observation (user), ``\\boxed{action}`` (assistant), ...

    The prefix ends with an assistant turn; the caller's next user message must start with
    :func:`next_game_intro` (it carries the last demonstration's final observation).
    """
    messages: list[Message] = []
    for k, demo in enumerate(demos):
        for i, (obs, action) in enumerate(demo.turns):
            content = obs
            if i == 0:
                intro = DEMO_INTRO if k == 0 else f"{demo_outro(demos[k - 1])}\n\n{DEMO_INTRO}"
                content = f"{intro}\n\n{obs}"
            messages.append({"role": "user", "content": content})
            messages.append({"role": "assistant", "content": f"\\boxed{{{action}}}"})
    return messages


def demo_outro(demo: Demo) -> str:
    """The final observation of a demonstration (the win)."""
    return demo.final


def next_game_intro(demos: Sequence[Demo], observation: str) -> str:
    """The first user message of the real game after the demonstrations."""
    if not demos:
        return observation
    return f"{demo_outro(demos[-1])}\n\n{NEXT_GAME}\n\n{observation}"


async def demos_by_env(
    runner: EnvRunner,
    plays: Sequence[tuple[str, str, int]],
    *,
    n: int,
    options: dict[str, Any] | None,
    max_actions: int,
) -> dict[str, tuple[Demo, ...]]:
    """Up to ``n`` demonstrations per environment of ``plays`` (``(env_id, source, played seed)`` items).

    Seeds derive from each environment's played seeds (see :func:`demo_seed`), so they change with them.
    An environment whose script wins no demonstration gets an empty tuple.
    """
    sources: dict[str, str] = {}
    seeds: dict[str, list[int]] = {}
    for env_id, source, seed in plays:
        sources.setdefault(env_id, source)
        seeds.setdefault(env_id, []).append(seed)
    out: dict[str, tuple[Demo, ...]] = {}
    for env_id, source in sources.items():
        found = []
        for k in range(n):
            seed = demo_seed(env_id, seeds[env_id], k)
            demo = await record_demo(
                runner, source, seed=seed, options=options, max_actions=max_actions, filename=f"<{env_id}>"
            )
            if demo is not None:
                found.append(demo)
        out[env_id] = tuple(found)
    return out
