"""Question-and-answer episodes for held-out suites, and running many of them at once.

An episode is a chat: the prompt messages, then up to ``max_turns`` replies; after each reply a judge
scores it and either ends the episode or returns feedback that becomes the next user message (the
Reasoning-Gym evaluation of the SPADE authors: a second try after a wrong first answer). Each turn
re-renders the whole conversation with the policy's chat template, so every backend works, and every
request of every episode carries the same sampling parameters, so a batching backend serves all episodes
in flight with one batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from spade.evals.base import Progress
from spade.replies import strip_reasoning
from spade.types import Message, Policy, SamplingParams

T = TypeVar("T")
REPLY_CHARS = 1500
"""Replies are kept up to this many characters in the per-item results."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """A judge's view of one reply."""

    score: float
    """In [0, 1]; the episode is won when a turn scores >= 1."""
    answer: str | None
    """What the judge read as the answer (None: no answer found)."""
    feedback: str | None = None
    """The next user message when another try is allowed; None ends the episode."""


Judge = Callable[[str], Verdict]


@dataclass(frozen=True, slots=True)
class ChatEpisode:
    """The outcome of one episode."""

    score: float
    """1.0 when some turn scored >= 1, else the best partial score times 0 (a win is all or nothing)."""
    best: float
    """Best judge score over the turns (partial credit, for the record)."""
    turns: tuple[dict[str, Any], ...]
    error: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe record for the per-item results."""
        return {"score": self.score, "best": self.best, "turns": list(self.turns), "error": self.error}


async def chat_episode(
    policy: Policy, messages: Sequence[Message], params: SamplingParams, judge: Judge, max_turns: int
) -> ChatEpisode:
    """Play one Q&A episode; a failed model request ends it with ``error`` set (score 0), never a raise."""
    conversation = list(messages)
    turns: list[dict[str, Any]] = []
    best = 0.0
    for turn in range(max(1, max_turns)):
        prompt = policy.template.render(conversation, add_generation_prompt=True)
        completion = (await policy.sample([prompt], params))[0]
        if completion.finish_reason == "error":
            return ChatEpisode(0.0, best, tuple(turns), completion.error or "the policy failed to reply")
        verdict = judge(strip_reasoning(completion.text))
        best = max(best, verdict.score)
        turns.append(
            {
                "reply": completion.text[:REPLY_CHARS],
                "answer": verdict.answer,
                "score": verdict.score,
                "finish": completion.finish_reason,
            }
        )
        if verdict.score >= 1.0 or verdict.feedback is None or turn + 1 >= max_turns:
            break
        conversation += [
            {"role": "assistant", "content": completion.text},
            {"role": "user", "content": verdict.feedback},
        ]
    return ChatEpisode(1.0 if best >= 1.0 else 0.0, best, tuple(turns))


async def gather_bounded(
    jobs: Sequence[Callable[[], Awaitable[T]]], concurrency: int, progress: Progress
) -> list[T]:
    """Run every job with at most ``concurrency`` in flight; results in job order; progress after each."""
    gate = asyncio.Semaphore(max(1, concurrency))
    done = 0

    async def one(job: Callable[[], Awaitable[T]]) -> T:
        nonlocal done
        async with gate:
            result = await job()
        done += 1
        progress(done, len(jobs))
        return result

    progress(0, len(jobs))
    return list(await asyncio.gather(*(one(j) for j in jobs)))
