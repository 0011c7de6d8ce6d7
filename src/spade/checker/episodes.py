"""Playing probe episodes in a runner and recording what happened (the checks are pure functions of these).

One fresh instance per episode (only the reuse rung plays a series of episodes on one instance), and a failure
is recorded (not raised), so a later rung can still judge what an earlier episode saw.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from spade.checker.probes import Policy
from spade.sandbox.api import EnvMeta, EnvRunner
from spade.sandbox.errors import SandboxError
from spade.sandbox.validate import InvalidValueError


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One step as the harness saw it (validated values)."""

    action: str
    observation: str
    reward: float
    terminated: bool
    truncated: bool


@dataclass(frozen=True, slots=True)
class Failure:
    """A SandboxError raised during an episode (``field``/``problem`` for invalid values)."""

    op: str
    kind: str
    message: str
    field: str = ""
    problem: str = ""

    @classmethod
    def of(cls, exc: SandboxError, op: str) -> Failure:
        """Record ``exc`` raised by the call ``op``."""
        if isinstance(exc, InvalidValueError):
            return cls(exc.op or op, exc.kind, exc.message, exc.field, exc.problem)
        return cls(exc.op or op, exc.kind, exc.message)


@dataclass(frozen=True, slots=True)
class Episode:
    """One probe episode: the policy's name, the seed, the steps and the failure that ended it, if any."""

    policy: str
    seed: int
    first_obs: str = ""
    steps: tuple[StepRecord, ...] = ()
    failure: Failure | None = None
    solution: list[str] | str | None = None
    tools: tuple[dict[str, Any], ...] = ()
    meta: EnvMeta | None = None
    failed_action: str | None = None
    """The action whose step failed, when a step failed."""

    @property
    def ended(self) -> bool:
        """Terminated or truncated by the environment."""
        return bool(self.steps) and (self.steps[-1].terminated or self.steps[-1].truncated)

    @property
    def terminated(self) -> bool:
        """Terminated (win or loss) by the environment."""
        return bool(self.steps) and self.steps[-1].terminated

    def episode_return(self, mode: str) -> float:
        """``final``: the last reward if terminated, else 0; ``sum``: all rewards summed. Clipped to ±1."""
        if mode == "sum":
            total = sum(s.reward for s in self.steps)
        else:
            total = self.steps[-1].reward if self.terminated else 0.0
        return max(-1.0, min(1.0, total))

    def won(self, threshold: float, mode: str) -> bool:
        """Terminated with a return of at least ``threshold`` and no failure."""
        return self.failure is None and self.terminated and self.episode_return(mode) >= threshold - 1e-9

    def trace(self) -> tuple[object, ...]:
        """What determinism compares: observations, rewards, flags and how the episode failed."""
        steps = tuple((s.action, s.observation, s.reward, s.terminated, s.truncated) for s in self.steps)
        failure = None if self.failure is None else (self.failure.op, self.failure.kind, self.failure.field)
        return (self.first_obs, repr(self.solution), steps, failure)


@dataclass(frozen=True, slots=True)
class Job:
    """One episode to play: see :meth:`Prober.play`."""

    label: str
    seed: int
    policy: Policy | None
    max_steps: int
    solve: Callable[[list[str] | str], Sequence[str]] | None = None
    want_tools: bool = False
    peek_solution: bool = False
    """Record ``solution()`` after reset (it reveals hidden state) but play ``policy``."""


@dataclass(slots=True)
class Prober:
    """Plays episodes of one source in a runner and keeps them.

    ``workers`` > 1 plays a batch of episodes at once; only use it with a runner whose instances are
    separate processes (each policy owns its RNG, so results do not depend on the interleaving).
    """

    runner: EnvRunner
    source: str
    filename: str = "<env>"
    workers: int = 1
    difficulty: int | None = None
    """The level every instance is reset at (None, or more than the environment has: its default)."""
    log: list[Episode] = field(default_factory=list)
    calls: int = 0

    @property
    def episodes(self) -> int:
        """Instances opened so far."""
        return len(self.log) + self.calls

    @property
    def steps(self) -> int:
        """Steps played so far."""
        return sum(len(e.steps) for e in self.log)

    def play(
        self,
        label: str,
        seed: int,
        policy: Policy | None,
        *,
        max_steps: int,
        solve: Callable[[list[str] | str], Sequence[str]] | None = None,
        want_tools: bool = False,
    ) -> Episode:
        """Open an instance, reset it with ``seed`` and play ``policy`` (or the script ``solve`` makes from
        ``solution()``) until the episode ends, the policy stops or ``max_steps`` steps were played."""
        return self._keep(self._play(Job(label, seed, policy, max_steps, solve, want_tools)))

    def play_all(self, jobs: Sequence[Job]) -> list[Episode]:
        """Play ``jobs`` (concurrently when ``workers`` > 1); results come back in job order."""
        if self.workers <= 1 or len(jobs) <= 1:
            episodes = [self._play(job) for job in jobs]
        else:
            with ThreadPoolExecutor(max_workers=min(self.workers, len(jobs))) as pool:
                episodes = list(pool.map(self._play, jobs))
        return [self._keep(ep) for ep in episodes]

    def play_series(self, jobs: Sequence[Job]) -> list[Episode]:
        """Play ``jobs`` one after the other on one instance, each after its own ``reset(seed)``, as servers
        and trainers that reuse an instance do; stops after the first episode that failed."""
        return [self._keep(ep) for ep in self._series(jobs)]

    def _play(self, job: Job) -> Episode:
        return self._series([job])[0]

    def _series(self, jobs: Sequence[Job]) -> list[Episode]:
        try:
            instance = self.runner.open(self.source, filename=self.filename)
        except SandboxError as exc:
            return [Episode(jobs[0].label, jobs[0].seed, failure=Failure.of(exc, "load"))]
        episodes: list[Episode] = []
        with instance:
            for job in jobs:
                episodes.append(self._episode(instance, job))
                if episodes[-1].failure is not None:
                    break
        return episodes

    def _episode(self, instance: Any, job: Job) -> Episode:
        label, seed, policy = job.label, job.seed, job.policy
        meta = instance.meta
        obs, phase = "", "reset"
        tools: tuple[dict[str, Any], ...] = ()
        solution: list[str] | str | None = None
        try:
            obs, _ = self._reset(instance, seed)
            if job.want_tools:
                phase = "tools"
                tools = tuple(instance.tools())
            if job.solve is not None or job.peek_solution:
                phase = "solution"
                try:
                    solution = instance.solution()
                except NotImplementedError:
                    if job.solve is not None:
                        return Episode(label, seed, obs, tools=tools, meta=meta)
                if job.solve is not None and solution is not None:
                    policy = _script(job.solve(solution))
        except SandboxError as exc:
            return Episode(label, seed, obs, failure=Failure.of(exc, phase), tools=tools, meta=meta)
        ep = Episode(label, seed, obs, solution=solution, tools=tools, meta=meta)
        return self._steps(instance, ep, policy, job.max_steps)

    def call_tools(
        self, seed: int, calls: Sequence[tuple[str, dict[str, Any]]]
    ) -> tuple[list[str], Failure | None]:
        """Reset a fresh instance and make ``calls`` natively; stops at the first failure."""
        self.calls += 1
        outputs: list[str] = []
        try:
            instance = self.runner.open(self.source, filename=self.filename)
        except SandboxError as exc:
            return outputs, Failure.of(exc, "load")
        with instance:
            try:
                self._reset(instance, seed)
                for name, args in calls:
                    outputs.append(instance.call_tool(name, args))
            except SandboxError as exc:
                return outputs, Failure.of(exc, "call_tool")
        return outputs, None

    def _reset(self, instance: Any, seed: int) -> tuple[str, dict[str, Any]]:
        level = self.difficulty
        if level is None or instance.meta.difficulty_levels <= level:
            return instance.reset(seed=seed)  # type: ignore[no-any-return]
        return instance.reset(seed=seed, options={"difficulty": level})  # type: ignore[no-any-return]

    def _steps(self, instance: Any, ep: Episode, policy: Policy | None, max_steps: int) -> Episode:
        records: list[StepRecord] = []
        obs = ep.first_obs
        for turn in range(max_steps):
            action = policy(obs, turn) if policy is not None else None
            if action is None:
                break
            try:
                obs, reward, terminated, truncated, _ = instance.step(action)
            except SandboxError as exc:
                failure = Failure.of(exc, "step")
                return dataclasses.replace(ep, steps=tuple(records), failure=failure, failed_action=action)
            records.append(StepRecord(action, obs, reward, terminated, truncated))
            if terminated or truncated:
                break
        return _with_steps(ep, records)

    def _keep(self, ep: Episode) -> Episode:
        self.log.append(ep)
        return ep


def _script(actions: Sequence[str]) -> Policy:
    script = list(actions)
    return lambda observation, turn: script[turn] if turn < len(script) else None


def _with_steps(ep: Episode, records: list[StepRecord]) -> Episode:
    return dataclasses.replace(ep, steps=tuple(records))


def rate(flags: Sequence[bool]) -> float:
    """Fraction of true values (0 for none); NaN never leaves here."""
    return sum(flags) / len(flags) if flags else 0.0
