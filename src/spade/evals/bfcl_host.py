"""The sandboxed host of one BFCL multi-turn episode: the simulated APIs and the package's checker.

This file is environment *source*: :mod:`spade.evals.bfcl` reads its text and loads it in a fresh sandbox
instance (``Sandbox.aopen``), so everything below runs in the hardened instance process, never in the
evaluating one. That matters because BFCL executes the model's function calls with ``eval`` (its
``execute_multi_turn_func_call``), and a model can write any Python in a call's arguments.

Protocol (a :class:`~spade.env.TextEnv`; ``bfcl_eval`` is imported at ``reset``, inside the instance):

- ``reset(options={"id", "initial_config", "involved_classes"})`` builds the API instances from the
  entry's initial configuration, as BFCL's inference does before the first turn;
- ``step('{"op": "execute", "calls": [...]}')`` executes one step's call strings against those instances and
  returns the JSON list of their results (BFCL's inference-time execution);
- ``step('{"op": "check", "decoded": [...], "ground_truth": [...]}')`` runs the package's
  ``multi_turn_checker`` on the decoded calls of every turn: it replays them and the ground truth from the
  initial configuration on fresh instances, compares the instances' state after each turn (state check) and
  requires every ground-truth execution result among the model's (response check). Reward 1.0 when valid;
  ``info`` holds ``valid``, ``error_type`` and ``error_message``.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

from spade.env import StepResult, TextEnv

MODEL_NAME = "spade"
"""The model name BFCL's executor uses to name the instances it keeps between calls."""
_UTILS = "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils"
_CHECKER = "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker"
_DETAIL_CHARS = 2000


class BFCLHostEnv(TextEnv):
    """One BFCL multi-turn entry: execute the model's calls, then check them against the ground truth."""

    max_turns = 10_000

    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        self.entry = {k: options[k] for k in ("id", "initial_config", "involved_classes")}
        self.category = str(self.entry["id"]).rsplit("_", 1)[0]
        self.long_context = "long_context" in self.category or "composite" in self.category
        self._execute([])
        return "ready", {}

    def _execute(self, calls: list[str]) -> list[str]:
        utils = importlib.import_module(_UTILS)
        results, _ = utils.execute_multi_turn_func_call(
            calls,
            self.entry["initial_config"],
            self.entry["involved_classes"],
            MODEL_NAME,
            self.entry["id"],
            long_context=self.long_context,
            is_evaL_run=False,
        )
        return [str(r) for r in results]

    def step(self, action: str) -> StepResult:
        """Run one request of the protocol (see module docstring)."""
        request = json.loads(action)
        if request["op"] == "execute":
            calls = [str(c) for c in request["calls"]]
            return json.dumps(self._execute(calls)), 0.0, False, False, {}
        if request["op"] == "check":
            verdict = self._check(request["decoded"], request["ground_truth"])
            reward = 1.0 if verdict["valid"] else 0.0
            return "valid" if verdict["valid"] else "invalid", reward, True, False, verdict
        raise ValueError(f"unknown request {request['op']!r}")

    def _check(self, decoded: list[list[list[str]]], ground_truth: list[list[str]]) -> dict[str, Any]:
        checker = importlib.import_module(_CHECKER)
        try:
            result = checker.multi_turn_checker(
                decoded, ground_truth, dict(self.entry), self.category, MODEL_NAME
            )
        except AssertionError as exc:  # the checker's own consistency assertions (instance sets differ)
            result = {"valid": False, "error_type": "multi_turn:checker_assertion", "error_message": str(exc)}
        return {
            "valid": bool(result.get("valid")),
            "error_type": str(result.get("error_type", "")),
            "error_message": str(result.get("error_message", ""))[:_DETAIL_CHARS],
            "details": repr(result.get("details", ""))[:_DETAIL_CHARS],
        }


ENV = BFCLHostEnv
