"""Where evaluation time goes: a Policy wrapper that measures the wall time spent in generation."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from spade.types import ChatTemplate, Completion, Policy, SamplingParams


class TimedPolicy:
    """Forwards to a policy and adds up the wall time during which at least one ``sample`` is in flight.

    ``generation_s / wall`` is the in-flight share: the fraction of an evaluation's wall time with a request
    running or queued at the policy. It bounds the engine's busy share from above (``bench/eval.py`` measures
    that one inside the hf engine).
    """

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.generation_s = 0.0
        self.requests = 0
        self._in_flight = 0
        self._busy_since = 0.0

    @property
    def template(self) -> ChatTemplate:
        """The wrapped policy's template."""
        return self.policy.template

    async def sample(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        """Sample through the wrapped policy, timing the busy intervals."""
        if self._in_flight == 0:
            self._busy_since = time.perf_counter()
        self._in_flight += 1
        self.requests += len(prompts)
        try:
            return await self.policy.sample(prompts, params)
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self.generation_s += time.perf_counter() - self._busy_since

    def load_weights(self, path: Path) -> None:
        """Forward to the wrapped policy."""
        self.policy.load_weights(path)
