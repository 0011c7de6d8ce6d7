"""Gathers concurrent single-prompt requests into batched policy calls.

Episodes run concurrently and each asks for one reply at a time; an engine is far faster on a batch.
:class:`BatchingPolicy` queues requests and, whenever the engine is free, sends everything queued with the
same sampling parameters as one call (up to ``max_batch``). The engine therefore always works on the
largest batch available without any fixed wait. With ``gather_s`` > 0 an idle engine first waits while
requests keep arriving (each new one within ``QUIET_S`` of the last, ``gather_s`` at most): after a batch,
episodes step their environments and ask again a few milliseconds apart, and without the wait the first of
them would go alone and the rest wait out a whole call behind it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from spade.backends import policy_metrics, release_memory
from spade.types import ChatTemplate, Completion, Policy, SamplingParams

_Request = tuple[Sequence[int], SamplingParams, "asyncio.Future[Completion]"]
QUIET_S = 0.01
"""With ``gather_s`` > 0: a batch is sent once no request has arrived for this long."""


class BatchingPolicy:
    """A Policy wrapper that batches concurrent ``sample`` calls (one engine call at a time)."""

    def __init__(self, policy: Policy, max_batch: int = 32, gather_s: float = 0.0) -> None:
        self.policy = policy
        self.template: ChatTemplate = policy.template
        self.max_batch = max_batch
        self.gather_s = gather_s
        self._queue: list[_Request] = []
        self._worker: asyncio.Task[None] | None = None
        self.calls = 0
        self.completions = 0

    async def sample(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        """Queue the prompts and wait for their completions."""
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in prompts]
        self._queue.extend((p, params, f) for p, f in zip(prompts, futures, strict=True))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain())
        return list(await asyncio.gather(*futures))

    async def _drain(self) -> None:
        await asyncio.sleep(0)  # let every episode that is ready queue its request first
        while self._queue:
            await self._gather()
            params = self._queue[0][1]
            batch = [r for r in self._queue if r[1] == params][: self.max_batch]
            taken = {id(r) for r in batch}
            self._queue = [r for r in self._queue if id(r) not in taken]
            try:
                results = await self.policy.sample([r[0] for r in batch], params)
            except BaseException as exc:
                for _, _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                if not isinstance(exc, Exception):
                    raise
                continue
            self.calls += 1
            self.completions += len(results)
            for (_, _, future), result in zip(batch, results, strict=True):
                if not future.done():
                    future.set_result(result)
            await asyncio.sleep(0)

    async def _gather(self) -> None:
        """Wait (at most ``gather_s``) while requests keep arriving."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.gather_s
        seen = 0
        while seen != len(self._queue) < self.max_batch and loop.time() < deadline:
            seen = len(self._queue)
            await asyncio.sleep(QUIET_S)

    def load_weights(self, path: Path) -> None:
        """Forward to the wrapped policy."""
        self.policy.load_weights(path)

    def release_memory(self) -> None:
        """Forward to the wrapped policy."""
        release_memory(self.policy)

    def metrics(self) -> dict[str, float]:
        """Engine calls and requests so far, and the wrapped policy's own metrics."""
        own = {
            "engine/calls": float(self.calls),
            "engine/requests": float(self.completions),
            "engine/batch_mean": self.completions / max(self.calls, 1),
        }
        return {**own, **policy_metrics(self.policy)}
