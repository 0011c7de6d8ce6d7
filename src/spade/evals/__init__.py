"""Held-out evaluation: suites (environments, Reasoning-Gym, math, BFCL, code) scored the same way.

``evaluate(["reasoning_gym:basic_arithmetic"], PolicySource(...), opts=EvalOptions(...), out=Path(...))``
is the Python API of ``spade eval``; see docs/eval.md. The runner is imported on first use, so importing
this package (as the config does, to check suite names) stays cheap.
"""

from typing import Any

from spade.config import EvalOptions
from spade.evals.base import EvalError, ItemResult, Suite, eval_seed

__all__ = ["EvalError", "EvalOptions", "ItemResult", "PolicySource", "Suite", "eval_seed", "evaluate"]


def __getattr__(name: str) -> Any:
    if name == "evaluate":
        from spade.evals.runner import evaluate  # noqa: PLC0415 - lazy: the runner imports the config

        return evaluate
    if name == "PolicySource":
        from spade.evals.policies import PolicySource  # noqa: PLC0415

        return PolicySource
    raise AttributeError(f"module 'spade.evals' has no attribute {name!r}")
