"""BatchingPolicy: concurrent requests become one engine call, also when they arrive a few ticks apart."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from spade.backends.batching import BatchingPolicy
from spade.scripted.policy import ByteTemplate
from spade.types import Completion, SamplingParams

PARAMS = SamplingParams(temperature=0.7, max_tokens=8)


class Recorder:
    """An engine that records the size of every batch it is given."""

    def __init__(self) -> None:
        self.template = ByteTemplate()
        self.batches: list[int] = []

    async def sample(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        self.batches.append(len(prompts))
        await asyncio.sleep(0)
        return [Completion("ok", (1,), (0.0,), "stop") for _ in prompts]

    def load_weights(self, path: Path) -> None:
        del path


def _staggered(gather_s: float, n: int = 8) -> tuple[list[int], dict[str, float]]:
    engine = Recorder()
    policy = BatchingPolicy(engine, max_batch=32, gather_s=gather_s)

    async def one(i: int) -> None:
        for _ in range(i):  # plays finish stepping their environments a few loop ticks apart
            await asyncio.sleep(0)
        await policy.sample([[i]], PARAMS)

    async def run() -> None:
        await asyncio.gather(*(one(i) for i in range(n)))

    asyncio.run(run())
    return engine.batches, policy.metrics()


def test_without_gathering_the_first_arrivals_go_alone() -> None:
    batches, metrics = _staggered(gather_s=0.0)
    assert sum(batches) == 8
    assert len(batches) > 1
    assert metrics["engine/calls"] == len(batches)


def test_gathering_waits_for_the_stragglers_and_makes_one_call() -> None:
    batches, metrics = _staggered(gather_s=5.0)  # a cap only: it ends once requests stop arriving
    assert batches == [8]
    assert metrics == {"engine/calls": 1.0, "engine/requests": 8.0, "engine/batch_mean": 8.0}
