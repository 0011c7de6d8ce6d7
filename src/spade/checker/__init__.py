"""Validation ladder for environment sources: named checks that return typed findings (SPEC §5).

``Checker(config, win).check(source, sandbox)`` (or ``check_env(source, sandbox, config)``) climbs the rungs
parse → static → load → determinism → steps → termination → tools → feasibility → reuse → turns → exploit and
stops after the first rung with a fatal finding. Every finding has a :class:`FindingCode`, a severity and a
message that says what is wrong, the likely cause and the fix (a model reply's code is taken out by
:func:`spade.replies.extract_code`); the ``spade check`` command is :mod:`spade.cli.check`.
"""

from spade.checker.findings import (
    DEFAULT_SEVERITY,
    CheckReport,
    Finding,
    FindingCode,
    Severity,
    Stage,
)
from spade.checker.ladder import RUNGS, STAGES, Checker, Evidence, acheck_env, check_env
from spade.checker.probes import Policy

__all__ = [
    "DEFAULT_SEVERITY",
    "RUNGS",
    "STAGES",
    "CheckReport",
    "Checker",
    "Evidence",
    "Finding",
    "FindingCode",
    "Policy",
    "Severity",
    "Stage",
    "acheck_env",
    "check_env",
]
