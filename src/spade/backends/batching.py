"""Gathers concurrent single-prompt requests into batched policy calls.

Episodes run concurrently and each asks for one reply at a time; an engine is far faster on a batch.
:class:`BatchingPolicy` queues requests and, whenever the engine is free, sends everything queued with the
same sampling parameters as one call (up to ``max_batch``). The engine therefore always works on the
largest batch available without any fixed wait.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from spade.backends import policy_metrics
from spade.types import ChatTemplate, Completion, Policy, SamplingParams

_Request = tuple[Sequence[int], SamplingParams, "asyncio.Future[Completion]"]


class BatchingPolicy:
    """A Policy wrapper that batches concurrent ``sample`` calls (one engine call at a time)."""

    def __init__(self, policy: Policy, max_batch: int = 32) -> None:
        self.policy = policy
        self.template: ChatTemplate = policy.template
        self.max_batch = max_batch
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

    def load_weights(self, path: Path) -> None:
        """Forward to the wrapped policy."""
        self.policy.load_weights(path)

    def metrics(self) -> dict[str, float]:
        """The wrapped policy's own metrics (see :func:`spade.backends.policy_metrics`)."""
        return policy_metrics(self.policy)
