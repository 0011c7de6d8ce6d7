"""The ``envs`` suite plays all its episodes as one group: their turns reach the policy together, each episode
still in its own fresh instance; a run's or model's in-process engine is wrapped so those turns share batches."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from spade.backends.batching import BatchingPolicy
from spade.config import CPU_TINY, EvalOptions
from spade.evals import envs as envs_suite
from spade.evals.base import eval_seed
from spade.evals.policies import PolicySource, load_policy
from spade.evals.runner import evaluate
from spade.sandbox import EnvHandle, Sandbox
from spade.scripted.policy import ByteTemplate
from spade.types import Completion, SamplingParams

TASKS = ("variants:combination_lock",)
LENIENT = {"action_mode": "lenient", "on_length": "act", "max_turns": 4}


class GatePolicy:
    """Answers ``\\boxed{1}`` and records how many requests were waiting together when it answered.

    The first ``expect`` requests are held until all of them are waiting (or ``wait_s`` passes, so a suite
    that never has them in flight together fails the test instead of hanging); later ones are answered at once.
    """

    def __init__(self, expect: int, wait_s: float = 60.0) -> None:
        self.template = ByteTemplate()
        self.expect, self.wait_s = expect, wait_s
        self.batches: list[int] = []
        self._held: list[asyncio.Future[None]] = []

    async def sample(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        """One reply per prompt, after the gate opens."""
        if self.expect > 0:
            future = asyncio.get_running_loop().create_future()
            self._held.append(future)
            if len(self._held) >= self.expect:
                self._open()
            try:
                await asyncio.wait_for(asyncio.shield(future), self.wait_s)
            except TimeoutError:
                self._open()
        else:
            self.batches.append(len(prompts))
        reply = "\\boxed{1}"
        return [Completion(reply, tuple(reply.encode()), (0.0,) * len(reply), "stop") for _ in prompts]

    def _open(self) -> None:
        if self.expect > 0:
            self.batches.append(len(self._held))
            self.expect = 0
            for future in self._held:
                if not future.done():
                    future.set_result(None)

    def load_weights(self, path: Path) -> None:
        """Nothing to load."""


class CountingSandbox(Sandbox):
    """The real sandbox, counting the instances it starts."""

    opened = 0

    async def aopen(self, source: str, *, filename: str = "<env>", max_turns: int | None = None) -> EnvHandle:
        """Count, then open as the sandbox does."""
        CountingSandbox.opened += 1
        return await super().aopen(source, filename=filename, max_turns=max_turns)


def _run(policy: Any, opts: EvalOptions, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], int]:
    monkeypatch.setattr(envs_suite, "Sandbox", CountingSandbox)
    CountingSandbox.opened = 0
    items = asyncio.run(envs_suite.EnvsSuite().run(policy, opts, lambda done, total: None))
    return items, CountingSandbox.opened


def test_every_episodes_first_turn_reaches_the_policy_together(monkeypatch: pytest.MonkeyPatch) -> None:
    opts = EvalOptions(episodes=3, limit=4, concurrency=32, tasks=TASKS, params=LENIENT)
    policy = GatePolicy(expect=12)
    items, opened = _run(policy, opts, monkeypatch)
    assert policy.batches[0] == 12  # 4 variants x 3 episodes: every first turn in one batch
    assert opened == 12  # a fresh instance per episode, none reused
    for item in items:
        episodes = item.detail["episodes"]
        assert [e["seed"] for e in episodes] == [eval_seed(0, "envs", item.item_id, k) for k in range(3)]
        for e in episodes:
            assert {"won", "return", "turns", "status"} <= set(e)
            assert e["turns"] >= 1
            assert e["actions"][0] == "1"
        assert item.scores == tuple(1.0 if e["won"] else 0.0 for e in episodes)


def test_the_concurrency_option_still_caps_the_episodes_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    opts = EvalOptions(episodes=3, limit=4, concurrency=5, tasks=TASKS, params=LENIENT)
    policy = GatePolicy(expect=6, wait_s=2.0)  # never 6 together: the gate gives up and answers those held
    items, opened = _run(policy, opts, monkeypatch)
    assert 1 <= policy.batches[0] <= 5
    assert opened == 12
    assert sum(len(i.scores) for i in items) == 12


def test_each_episode_draws_its_demonstrations_from_its_own_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    opts = EvalOptions(episodes=3, limit=2, concurrency=32, tasks=TASKS, params=LENIENT | {"demos": 1})
    policy = GatePolicy(expect=6)
    _, opened = _run(policy, opts, monkeypatch)
    assert policy.batches[0] == 6
    assert opened == 6 * 2  # per episode: its own instance and its own demonstration (as if played alone)


@pytest.mark.slow
@pytest.mark.xdist_group("vllm")
def test_a_models_in_process_engine_batches_the_episodes_turns() -> None:
    model = dataclasses.replace(CPU_TINY.model, threads=1, max_concurrency=8)
    policy = load_policy(PolicySource(model=model), concurrency=8)
    assert isinstance(policy, BatchingPolicy)
    try:
        opts = EvalOptions(
            episodes=2, limit=3, concurrency=8, max_tokens=12, temperature=0.7, tasks=TASKS, params=LENIENT
        )
        report = evaluate(["envs"], policy, opts=opts)[0]
        metrics = policy.metrics()
    finally:
        policy.policy.close()  # type: ignore[attr-defined]
    episodes = [e for item in report.items for e in item.detail["episodes"]]
    assert len(episodes) == 6
    assert all(e["status"] != "model_error" and e["turns"] >= 1 for e in episodes)
    assert all(isinstance(e["return"], float) and isinstance(e["won"], bool) for e in episodes)
    # the preflight request and the turns of 6 episodes, with 8 in flight: fewer engine calls than requests
    assert metrics["engine/calls"] < metrics["engine/requests"]
    assert metrics["engine/batch_mean"] > 1.0
