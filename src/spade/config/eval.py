"""How to evaluate a policy on held-out suites: one definition of the options, for `spade eval`, for the
evaluation during training and for the suites themselves.

:class:`EvalSettings` defines each option once (name, type, meaning and `spade eval`'s default);
:class:`EvalOptions` is what a suite runs with (plus the suite's tasks and parameters), :class:`EvalConfig` the
training config's section (plus when to evaluate). ``spade eval``'s flags are :class:`EvalSettings`' fields.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass, field
from typing import Any, Self

from spade.config.errors import require
from spade.types import SamplingParams


@dataclass(frozen=True, slots=True)
class EvalSettings:
    """The options every suite reads, with the defaults of ``spade eval``."""

    episodes: int = 1
    """Scored episodes per item."""
    limit: int | None = None
    """Items per task for reasoning_gym and math (None: 8; math has 32 tasks, so --limit 2 scores 64 items),
    per category for bfcl (None: 20), in all for envs and code (None: all). The count is printed first."""
    fewshot: int = 0
    """Worked examples from the same generator before each item (seeds disjoint from scored items)."""
    temperature: float = 0.0
    """Sampling temperature (0: greedy; set > 0 when episodes > 1)."""
    max_tokens: int = 512
    """Generation budget per reply."""
    max_turns: int = 2
    """Tries per Q&A item (feedback after a wrong answer); turns per episode where a suite is multi-turn."""
    concurrency: int = 32
    """Episodes in flight at once (the backend batches their requests)."""
    seed: int = 0
    """Evaluation seed: with suite, item and episode it fixes every instance (seeds >= 2**31: not training's)."""


@dataclass(frozen=True, slots=True)
class EvalOptions(EvalSettings):
    """How to evaluate: the same fields mean the same thing in every suite."""

    top_p: float = 1.0
    """Sampling nucleus (1.0: off)."""
    top_k: int = 0
    """Sample among the K likeliest tokens only (0: off)."""
    tasks: tuple[str, ...] = ()
    """Suite-specific selection: task names, categories, environment names or paths (empty: the default)."""
    params: dict[str, Any] = field(default_factory=dict)
    """Suite-specific task parameters (e.g. ``{"difficulty": "hard"}`` or a generator config)."""

    @classmethod
    def of(cls, settings: EvalSettings, **changes: Any) -> Self:
        """The options of ``settings`` (a section, the command line's arguments), with ``changes`` on top."""
        values = {f.name: getattr(settings, f.name) for f in dataclasses.fields(EvalSettings)}
        return cls(**{**values, **changes})

    def sampling(self, **changes: Any) -> SamplingParams:
        """The sampling parameters every suite's replies use (temperature, top-p, top-k, max tokens), with
        ``changes`` (a suite's stop strings) on top."""
        values = {"temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k}
        return SamplingParams(**{**values, "max_tokens": self.max_tokens, **changes})


@dataclass(frozen=True, slots=True)
class EvalConfig(EvalSettings):
    """Held-out evaluation during training (spade.evals): at step 0, every ``every`` steps and at the end.

    The options mean what `spade eval`'s mean; two defaults differ from its, as they always have: limit 8
    (every suite scores a few items, so an evaluation every few steps stays short) and max_tokens 256.
    """

    limit: int | None = 8
    """Items per task (procedural suites) or in all (envs); `spade eval`'s default is each suite's own."""
    max_tokens: int = 256
    """Generation budget per reply (256 in training; `spade eval`: 512)."""
    every: int = 0
    """Steps between evaluations (0: never). Results go to <run>/eval/step_N and eval/<suite>/... metrics."""
    at_tokens: tuple[int, ...] = ()
    """Sampled-token marks (increasing; the count ``sampled_token_budget`` uses): the policy is evaluated at the
    top of the first step whose sampled tokens reach each mark (mark 0: the warm start), and after the last
    step for marks the run's end reached. Results go to <run>/eval/mark_M; replaces ``every``."""
    suites: tuple[str, ...] = ("reasoning_gym:basic_arithmetic,leg_counting",)
    """Suites, each 'name' or 'name:task1,task2' (as `spade eval`)."""
    preset: str = "default"
    """Reasoning-Gym task parameters: default, hard (the paper's A.3 table) or easy."""
    data: tuple[str, ...] = ()
    """Local copies of the benchmarks no package ships, each 'suite=PATH' (what `spade eval SUITE --data PATH`
    reads; docs/eval.md says where to get each): ``--eval.data aime=data/aime_2024 gpqa_diamond=gpqa.csv``."""

    def data_paths(self) -> dict[str, str]:
        """``data`` as suite -> path."""
        return dict(entry.split("=", 1) for entry in self.data)

    def validate(self) -> None:
        """Checks of the counts; the suite names are checked against the registry by
        :func:`spade.run.preflight.check_names`."""
        require(self.every >= 0, f"eval.every must be >= 0 (0 disables evaluation; got {self.every})")
        require(
            self.episodes >= 1 and self.concurrency >= 1 and self.max_tokens >= 1,
            "eval.episodes, eval.concurrency and eval.max_tokens must be >= 1",
        )
        marks = self.at_tokens
        require(
            all(m >= 0 for m in marks) and all(a < b for a, b in itertools.pairwise(marks)),
            f"eval.at_tokens must be increasing sampled-token counts >= 0 (got {list(marks)})",
        )
        require(not (marks and self.every), "eval.at_tokens replaces eval.every: set eval.every to 0")
        bad = [d for d in self.data if not all(d.partition("=")[::2])]
        require(not bad, f"eval.data entries are 'suite=PATH' (got {bad})")
        suites = [d.partition("=")[0] for d in self.data]
        require(len(set(suites)) == len(suites), f"eval.data names a suite twice: {suites}")
