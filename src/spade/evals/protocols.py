"""Named evaluation protocols: each benchmark's sampling under one name (``spade eval SUITE --protocol paper``).

``default`` is spade's own options (``spade eval``'s defaults, each suite as it always ran). ``paper`` is the
sampling the paper's tables were measured with, as the release's offline evaluation configs give it
(``eval_offline/configs/games.yaml`` and ``tool_use.yaml``):

- AIME 2025/2026: 64 samples per problem, temperature 1.0, top-p 0.95, 32,768 tokens (pass@1 = mean over all).
- GPQA-Diamond: 8 samples per question, temperature 0.7 (avg@8 on the boxed-letter prompt).
- LiveCodeBench: one sample, temperature 0.2 (pass@1).
- Reasoning-Gym: the hard task parameters (the paper's A.3 table), 8 episodes, 2 turns, temperature 0.6,
  8,192 tokens.
- tau2-bench: 4 trials per task, agent temperature 0.
- BFCL: temperature 0; ACEBench: temperature 0.7.

A value the protocol does not state (GPQA's and LiveCodeBench's token budgets, for one) stays spade's
default; an option given on the command line overrides the protocol's value (:func:`apply`). Suites the
protocol does not name (``envs``, ``math``, ``code``) run with the command line's options.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from spade.config import EvalOptions

ProtocolName = Literal["default", "paper"]
"""The protocols ``spade eval --protocol`` takes (the keys of :data:`PROTOCOLS`)."""


@dataclass(frozen=True, slots=True)
class SuiteProtocol:
    """The options a protocol sets for one suite (None: the command line's value or spade's default)."""

    episodes: int | None = None
    """Samples per item."""
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_tokens: int | None = None
    max_turns: int | None = None
    preset: str | None = None
    """Reasoning-Gym task parameters (``--preset``)."""

    def values(self) -> dict[str, Any]:
        """The options set, by ``spade eval`` option name (underscores)."""
        return {f.name: v for f in dataclasses.fields(self) if (v := getattr(self, f.name)) is not None}


PROTOCOLS: Mapping[str, Mapping[str, SuiteProtocol]] = {
    "default": {},
    "paper": {
        "aime": SuiteProtocol(episodes=64, temperature=1.0, top_p=0.95, max_tokens=32768),
        "gpqa_diamond": SuiteProtocol(episodes=8, temperature=0.7),
        "livecodebench": SuiteProtocol(episodes=1, temperature=0.2),
        "reasoning_gym": SuiteProtocol(
            episodes=8, temperature=0.6, max_tokens=8192, max_turns=2, preset="hard"
        ),
        "tau2_bench": SuiteProtocol(episodes=4, temperature=0.0),
        "bfcl": SuiteProtocol(temperature=0.0),
        "acebench": SuiteProtocol(temperature=0.7),
    },
}
"""Every protocol's values per suite: the one table ``spade eval``, its ``--help`` and docs/eval.md show."""


def explicit_options(argv: Sequence[str]) -> frozenset[str]:
    """The options ``argv`` gives (``--max-tokens 8``, ``--top_p=0.9`` -> ``max_tokens``, ``top_p``), which
    a protocol leaves as given."""
    flags = (word[2:].partition("=")[0] for word in argv if word.startswith("--"))
    return frozenset(flag.replace("-", "_") for flag in flags)


def apply(protocol: str, suite: str, opts: EvalOptions, explicit: Collection[str] = ()) -> EvalOptions:
    """``opts`` with the protocol's values for ``suite``, except the options in ``explicit`` (given on the
    command line) and a preset already chosen (``--preset``, ``--param preset=``)."""
    changes = {
        k: v for k, v in PROTOCOLS[protocol].get(suite, SuiteProtocol()).values().items() if k not in explicit
    }
    preset = changes.pop("preset", None)
    params = dict(opts.params)
    if preset is not None and "preset" not in params:
        params["preset"] = preset
    return dataclasses.replace(opts, **changes, params=params)


def table(protocol: str) -> list[str]:
    """The protocol's table as Markdown lines (one row per suite; docs/eval.md shows it)."""
    names = [f.name for f in dataclasses.fields(SuiteProtocol)]
    lines = [
        "| suite | " + " | ".join(n.replace("_", "-") for n in names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    for suite, values in PROTOCOLS[protocol].items():
        cells = [_cell(getattr(values, n)) for n in names]
        lines.append(f"| `{suite}` | " + " | ".join(cells) + " |")
    return lines


def _cell(value: object) -> str:
    return "" if value is None else f"{value}"
