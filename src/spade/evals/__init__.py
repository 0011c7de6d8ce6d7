"""Held-out evaluation: suites (environments, Reasoning-Gym, BFCL, math, code) scored the same way."""

from spade.evals.base import EvalError, EvalOptions, ItemResult, Suite, eval_seed

__all__ = ["EvalError", "EvalOptions", "ItemResult", "Suite", "eval_seed"]
