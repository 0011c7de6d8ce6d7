"""The environment contract: what a generated (or hand-written) environment subclasses.

This module is imported inside the sandbox, so it depends on the standard library only.

A native environment file defines one subclass of :class:`TextEnv` (or :class:`ToolEnv`) and registers it
with a module-level ``ENV = ClassName``. Semantics follow Gymnasium: ``reset`` returns ``(observation,
info)`` and ``step`` returns ``(observation, reward, terminated, truncated, info)`` with text observations
and text actions. All randomness comes from ``self.rng`` (or ``self.np_random``), seeded by ``reset``, so
``reset(seed=s)`` reproduces the same instance exactly.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

StepResult = tuple[str, float, bool, bool, dict[str, Any]]
"""``(observation, reward, terminated, truncated, info)``."""


class TextEnv:
    """Base class of a multi-turn text environment.

    Subclasses implement ``_reset`` and ``step`` (calling :meth:`end_turn` to build the result) and may
    implement ``solution``. ``max_turns`` bounds an episode: the turn that reaches it is ``truncated``
    unless it terminated.
    """

    max_turns: int = 10
    """Turn budget of one episode."""
    skill: ClassVar[str] = ""
    """Target skill slug (see ``spade.config.skills``); the first docstring line is the one-line description."""
    difficulty_levels: ClassVar[int] = 1
    """Number of difficulty levels accepted by ``reset(options={"difficulty": k})``, ``k`` in ``[0, n)``."""
    default_difficulty: ClassVar[int] = 0

    def __init__(self, max_turns: int | None = None) -> None:
        if max_turns is not None:
            if max_turns < 1:
                raise ValueError(f"max_turns must be >= 1, got {max_turns}")
            self.max_turns = max_turns
        self._max_turns_override = max_turns
        self.rng = random.Random(0)
        self.turn = 0
        self.difficulty = self.default_difficulty
        self._seed: int | None = None
        self._np_random: Any = None

    # -- Gymnasium-style API ------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start a new episode; the same ``seed`` (and options) gives the same instance."""
        self._seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
        self.rng = random.Random(self._seed)
        self._np_random = None
        self.turn = 0
        options = dict(options or {})
        level = int(options.get("difficulty", self.default_difficulty))
        if not 0 <= level < self.difficulty_levels:
            raise ValueError(f"difficulty must be in [0, {self.difficulty_levels}), got {level}")
        self.difficulty = level
        return self._reset(options)

    def turn_budget(self, level_budget: int) -> int:
        """An episode's turn budget: the constructor's ``max_turns`` when one was given, else ``level_budget``.

        Environments whose levels set their own budget in ``_reset`` assign ``self.max_turns`` through this,
        so an explicit budget (``spade play --max-turns``) is honoured.
        """
        return level_budget if self._max_turns_override is None else self._max_turns_override

    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """Build the instance from ``self.rng`` and return the first observation and info."""
        raise NotImplementedError

    def step(self, action: str) -> StepResult:
        """Apply one action (text) and return the Gymnasium 5-tuple."""
        raise NotImplementedError

    def solution(self) -> list[str] | str:
        """A scripted action sequence that wins the current instance (optional)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release resources (nothing by default)."""

    # -- helpers for subclasses ---------------------------------------------------------------------
    @property
    def np_random(self) -> Any:
        """A ``numpy.random.Generator`` seeded from the episode seed (created on first use)."""
        if self._np_random is None:
            import numpy as np  # noqa: PLC0415 - numpy is optional for environments that never use it

            self._np_random = np.random.default_rng(self._seed)
        return self._np_random

    def end_turn(
        self,
        observation: str,
        reward: float = 0.0,
        terminated: bool = False,
        info: dict[str, Any] | None = None,
    ) -> StepResult:
        """Count one turn and build the step result, truncating when the turn budget runs out."""
        self.turn += 1
        truncated = not terminated and self.turn >= self.max_turns
        if truncated:
            observation += f"\nOut of turns ({self.max_turns})."
        return observation, float(reward), terminated, truncated, dict(info or {})

    @property
    def turns_left(self) -> int:
        """Turns remaining in the current episode."""
        return self.max_turns - self.turn


_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_TOOL_CALL_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def tool_call_action(name: str, **arguments: Any) -> str:
    """Render one tool call as the text action ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``."""
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def answer_action(answer: str) -> str:
    """Render a final answer as the text action ``<answer>...</answer>``."""
    return f"<answer>{answer}</answer>"


class ToolEnv(TextEnv):
    """Base class of a multi-turn tool-use environment.

    Subclasses define ``tools`` (OpenAI function schemas), one ``tool_<name>(**kwargs) -> str`` method per
    tool, and ``check_answer(answer) -> bool`` that verifies the final answer and/or the final state. An
    agent turn is either tool calls (native, through :meth:`call_tool`, or as ``<tool_call>{json}</tool_call>``
    text through ``step``) or a final ``<answer>...</answer>`` that ends the episode.

    Multi-turn protocol (optional, the authors' tool-use contract): ``_reset`` sets ``self.instructions`` (3-5
    atomic user instructions) and ``self.criteria`` (one zero-argument check of the state per instruction,
    false at reset) and returns the first instruction. After every tool call :meth:`advance_instruction`
    checks the current criterion and, when it holds, appends the next instruction to the tool's output; after
    the last one the agent is asked to answer ``done``, which ``check_answer`` accepts once
    :attr:`instructions_done`.
    """

    tools: ClassVar[list[dict[str, Any]]] = []
    """OpenAI function-format schemas: ``{"type": "function", "function": {name, description, parameters}}``."""
    instructions: Sequence[str] = ()
    """Multi-turn protocol (optional): the user's atomic instructions, revealed one at a time (set in
    ``_reset``, which returns ``instructions[0]`` as the first observation)."""
    criteria: Sequence[Callable[[], bool]] = ()
    """Multi-turn protocol: one zero-argument check per instruction, true once the state satisfies it."""
    current_instruction: int = 0
    """Multi-turn protocol: index of the instruction being worked on (``len(instructions)``: all done)."""

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start a new episode; the multi-turn protocol restarts at the first instruction."""
        self.instructions, self.criteria, self.current_instruction = (), (), 0
        return super().reset(seed=seed, options=options)

    @property
    def instructions_done(self) -> bool:
        """Multi-turn protocol: whether every instruction's criterion has held (False without instructions)."""
        return bool(self.instructions) and self.current_instruction >= len(self.instructions)

    def advance_instruction(self) -> str:
        """Multi-turn protocol: after a tool call, move on when the current instruction's criterion holds.

        Returns the text appended to the tool's output: the next instruction, or (after the last one) the
        request to answer ``done``; empty when nothing changed. A criterion that raises counts as false.
        """
        i = self.current_instruction
        if i >= min(len(self.instructions), len(self.criteria)) or not _holds(self.criteria[i]):
            return ""
        self.current_instruction = i = i + 1
        if i < len(self.instructions):
            n = len(self.instructions)
            return f"\n\n[STEP {i} COMPLETE - NEXT INSTRUCTION {i + 1}/{n}] {self.instructions[i]}"
        return "\n\n[ALL STEPS COMPLETE] Submit <answer>done</answer>."

    def tool_schemas(self) -> list[dict[str, Any]]:
        """The tools offered now, in OpenAI function format (override to compute them per instance)."""
        return list(self.tools)

    def tool_names(self) -> list[str]:
        """Names of the tools this environment offers."""
        return [t["function"]["name"] for t in self.tool_schemas()]

    def call_tool(self, name: str, arguments: dict[str, Any]) -> str:
        """Run one tool; bad names and bad arguments come back as error text, never as exceptions."""
        if name not in self.tool_names():
            return f"Error: unknown tool {name!r}. Available tools: {', '.join(self.tool_names())}."
        if not isinstance(arguments, dict):
            return f"Error: arguments of {name} must be a JSON object."
        method = getattr(self, f"tool_{name}", None)
        if method is None:
            return f"Error: tool {name!r} is declared but not implemented."
        try:
            output = str(method(**arguments))
        except TypeError as exc:
            output = f"Error: bad arguments for {name}: {exc}"
        except (KeyError, ValueError, IndexError, LookupError) as exc:
            output = f"Error: {name} failed: {exc}"
        return output + self.advance_instruction()

    def check_answer(self, answer: str) -> bool:
        """Whether the final answer (and the state it leaves) completes the task."""
        raise NotImplementedError

    def step(self, action: str) -> StepResult:
        """Dispatch ``<tool_call>`` text or check an ``<answer>``; anything else costs a turn."""
        answers = _ANSWER_RE.findall(action)
        if answers:
            ok = self.check_answer(answers[-1].strip())
            return self.end_turn("Correct!" if ok else "Incorrect.", 1.0 if ok else 0.0, terminated=True)
        calls = _TOOL_CALL_RE.findall(action)
        if calls:
            outputs = [self._text_tool_call(raw) for raw in calls]
            return self.end_turn("\n".join(outputs))
        return self.end_turn(
            'No tool call or answer found. Call a tool as <tool_call>{"name": ..., "arguments": {...}}'
            "</tool_call> or finish with <answer>...</answer>."
        )

    def _text_tool_call(self, raw: str) -> str:
        try:
            call = json.loads(raw)
        except json.JSONDecodeError:
            return "Error: tool call is not valid JSON."
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            return 'Error: a tool call needs {"name": str, "arguments": {...}}.'
        return self.call_tool(call["name"], call.get("arguments") or {})


def _holds(criterion: Callable[[], bool]) -> bool:
    try:
        return bool(criterion())
    except (KeyError, ValueError, TypeError, IndexError, AttributeError, LookupError):
        return False


def function_schema(name: str, description: str, /, **params: tuple[str, str]) -> dict[str, Any]:
    """Build one OpenAI function schema; ``params`` map a name to ``(json_type, description)``, all required."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {k: {"type": t, "description": d} for k, (t, d) in params.items()},
                "required": list(params),
            },
        },
    }
