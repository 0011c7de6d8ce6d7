"""Compatibility with environment files written for the authors' implementation.

Two shapes load unchanged:

* games: a class whose name ends in ``Env`` with ``__init__(self, max_turns=N, **kw)``, ``reset(seed=None)``
  returning ``(str, dict)`` (or a bare ``str``), ``step(action) -> 5-tuple`` parsing ``\\boxed{...}`` itself,
  and an optional ``solution()``;
* tool use: a subclass of :class:`ToolUseBaseEnv` (importable as ``tool_use_base_env.ToolUseBaseEnv`` or used
  unimported) with ``self._tools``, ``tool_<name>`` methods, ``self._expected_answer`` and, optionally, the
  multi-turn ``_user_messages`` / ``_message_criteria`` / ``_current_msg`` protocol.

:class:`OfficialEnv` adapts either to the native :class:`~spade.env.ToolEnv` interface, so the harness has
one code path. Imported inside the sandbox: standard library only.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from spade.env import StepResult, ToolEnv
from spade.pyast import parse_expression
from spade.replies import wrap_boxed

_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_TOOL_CALL_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_TAGGED_RE = re.compile(r"\s*(<tool_call>.*?</tool_call>|<answer>.*?</answer>)\s*", re.DOTALL | re.IGNORECASE)
_PROSE_CALL_RE = re.compile(r"\b([A-Za-z_]\w*)\(((?:[^()'\"]|'[^']*'|\"[^\"]*\")*)\)")
_PROSE_ANSWER_RE = re.compile(r"\banswer\b\s*[:=]?\s*(.+?)[\s.;]*$", re.IGNORECASE | re.DOTALL)

PLAN_MARKER = "\n[spade: plan interpreted from the prose solution]\n"
"""Separates a tool environment's prose ``solution()`` from the plan :func:`interpret_plan` bound to this
instance (``<tool_call>``/``<answer>`` actions, one a line); the checker plays the plan as evidence of
feasibility, not as the author's script."""


class ToolUseBaseEnv:
    """The authors' tool-use base class, re-implemented with the same observable behaviour."""

    def __init__(self, max_turns: int = 10, **kwargs: Any) -> None:
        self.max_turns = max_turns
        self.turn_count = 0
        self._tools: dict[str, dict[str, Any]] = {}
        self._state: dict[str, Any] = {}
        self._expected_answer: Any = None
        self._call_history: list[dict[str, Any]] = []
        self.reset()  # as the authors' base does: files may rely on the world existing after __init__

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError

    def solution(self) -> str:
        raise NotImplementedError

    def _obs_suffix(self) -> str:
        """Deprecated upstream (tools travel as schemas now) but still called by older generated files."""
        return ""

    def get_tools(self) -> list[dict[str, Any]]:
        """``self._tools`` in OpenAI function format."""
        return [
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": spec.get("description", ""),
                    "parameters": spec.get("parameters", {"type": "object", "properties": {}}),
                },
            }
            for name, spec in self._tools.items()
        ]

    def execute_tool(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        """Run ``tool_<name>(**args)``; errors come back as text with ``returncode`` 1."""
        self._call_history.append({"name": name, "arguments": args})
        method = getattr(self, f"tool_{name}", None)
        if name not in self._tools or method is None:
            return {"output": f"Error calling {name}: unknown tool", "returncode": 1}
        try:
            return {"output": str(method(**(args or {}))), "returncode": 0}
        except Exception as exc:  # boundary: the authors' contract turns any tool error into text
            return {"output": f"Error calling {name}: {exc}", "returncode": 1}

    def _check_answer(self, answer: str) -> bool:
        """Case-insensitive equality, else numeric equality within 0.01 ignoring ``$`` and ``,``."""
        expected = str(self._expected_answer).strip()
        if str(answer).strip().lower() == expected.lower():
            return True
        try:
            given = float(str(answer).replace("$", "").replace(",", "").strip())
            return abs(given - float(expected.replace("$", "").replace(",", "").strip())) < 0.01
        except ValueError:
            return False

    def _advance_if_done(self) -> str:
        """Multi-turn protocol: reveal the next instruction once the current one's criterion holds."""
        messages = getattr(self, "_user_messages", None)
        criteria = getattr(self, "_message_criteria", None)
        if not messages or not criteria:
            return ""
        current = getattr(self, "_current_msg", 0)
        if current < len(criteria) and criteria[current](self._state):
            self._current_msg = current = current + 1
            if current < len(messages):
                return f"\n\n[NEXT STEP] {messages[current]}"
            return "\n\n[ALL STEPS COMPLETE] Submit <answer>done</answer>."
        return ""

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.turn_count += 1
        answers = _ANSWER_RE.findall(action)
        if answers:
            if self._check_answer(answers[-1].strip()):
                return "Correct!", 1.0, True, False, {}
            return self._incorrect_answer_feedback(), 0.0, False, self._out_of_turns(), {}
        calls = _TOOL_CALL_RE.findall(action)
        if calls:
            outputs = []
            for raw in calls:
                try:
                    call = json.loads(raw)
                    outputs.append(self.execute_tool(call["name"], call.get("arguments") or {})["output"])
                except (json.JSONDecodeError, KeyError, TypeError):
                    outputs.append("Error: malformed tool call")
            return "\n".join(outputs), 0.0, False, self._out_of_turns(), {}
        return (
            "Use <tool_call>...</tool_call> or <answer>...</answer>.",
            -0.1,
            False,
            self._out_of_turns(),
            {},
        )

    def _incorrect_answer_feedback(self) -> str:
        """Feedback on a wrong answer; multi-turn files name the pending step (subclasses may override)."""
        messages = getattr(self, "_user_messages", None)
        current = getattr(self, "_current_msg", None)
        if isinstance(messages, list | tuple) and isinstance(current, int) and 0 <= current < len(messages):
            return (
                f"Incorrect. Keep using tools. Not all steps are complete: you are still on step "
                f"{current + 1}/{len(messages)}: {messages[current]!r}."
            )
        return "Incorrect. Keep using tools."

    def _out_of_turns(self) -> bool:
        return self.turn_count >= self.max_turns

    def close(self) -> None:
        """Nothing to release."""


class OfficialEnv(ToolEnv):
    """Adapts an official-format game or tool-use environment to the native interface."""

    def __init__(self, inner: Any, max_turns: int | None = None) -> None:
        super().__init__(max_turns=max_turns or getattr(inner, "max_turns", None) or 10)
        self.inner = inner
        self.is_tool_env = isinstance(inner, ToolUseBaseEnv) or hasattr(inner, "execute_tool")
        if hasattr(inner, "max_turns"):
            inner.max_turns = self.max_turns

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        self.turn = 0
        if self.is_tool_env:  # files often forget these; a reused instance must not inherit the last episode
            self.inner.turn_count = 0
            self.inner._call_history = []
        result = self.inner.reset(seed=seed)
        if isinstance(result, str):
            return result, {}
        obs, info = result
        return obs, dict(info or {})

    def step(self, action: str) -> StepResult:
        if not self.is_tool_env and "\\boxed" not in action:
            action = wrap_boxed(action)
        obs, reward, terminated, truncated, info = self.inner.step(action)
        self.turn += 1
        truncated = bool(truncated) or (not terminated and self.turn >= self.max_turns)
        return obs, reward, terminated, truncated, info

    def tool_schemas(self) -> list[dict[str, Any]]:
        return list(self.inner.get_tools()) if self.is_tool_env else []

    def call_tool(self, name: str, arguments: dict[str, Any]) -> str:
        if not self.is_tool_env:
            return "Error: this environment has no tools."
        return str(self.inner.execute_tool(name, arguments)["output"])

    def check_answer(self, answer: str) -> bool:
        return bool(self.inner._check_answer(answer))

    def solution(self) -> list[str] | str:
        """The inner ``solution()``; a tool environment's prose also carries the plan bound to this instance.

        A tool-use solution that is not already a script of ``<tool_call>``/``<answer>`` actions is prose
        (``"create_event(review, day, hour); invite(review, dana); ..."``). It comes back as one string; when
        :func:`interpret_plan` can bind it here, the plan follows :data:`PLAN_MARKER`.
        """
        if not hasattr(self.inner, "solution"):
            raise NotImplementedError
        result = self.inner.solution()
        items = [str(r) for r in result] if isinstance(result, list | tuple) else None
        if not self.is_tool_env:
            return items if items is not None else str(result)
        if items is not None and all(_TAGGED_RE.fullmatch(i) for i in items):
            return items
        prose = "; ".join(items) if items is not None else str(result)
        plan = interpret_plan(prose, self.inner)
        return prose + PLAN_MARKER + "\n".join(plan) if plan else prose

    def close(self) -> None:
        if hasattr(self.inner, "close"):
            self.inner.close()


# -- prose solutions ---------------------------------------------------------------------------------------


def interpret_plan(text: str, env: Any) -> list[str]:
    """Bind a prose tool-use plan to ``env``'s instance; [] when it names no tool of the environment.

    Every ``tool(arg, ...)`` whose name is one of ``env._tools`` becomes a ``<tool_call>``: positional
    arguments take the schema's parameter order, literals stay literals, and a bare name is bound from the
    instance (:func:`plan_namespace`); a name bound nowhere is taken as the word itself (prose writes
    ``invite(review, dana)``). Multi-turn files end with ``<answer>done</answer>``; single-task files with the
    ``answer X`` the prose gives (X bound the same way), if any. Runs inside the instance, after ``reset``.
    """
    tools = getattr(env, "_tools", None)
    if not isinstance(tools, dict):
        return []
    names = plan_namespace(env)
    actions = []
    for match in _PROSE_CALL_RE.finditer(text):
        spec = tools.get(match.group(1))
        if isinstance(spec, dict):
            args = _bind_arguments(match.group(2), spec, names)
            if args is not None:
                actions.append(
                    "<tool_call>" + json.dumps({"name": match.group(1), "arguments": args}) + "</tool_call>"
                )
    if not actions:
        return []
    if getattr(env, "_user_messages", None):
        return [*actions, "<answer>done</answer>"]
    answer = _PROSE_ANSWER_RE.search(text.rsplit(")", maxsplit=1)[-1])
    if answer:
        value = names.get(answer.group(1), answer.group(1))
        actions.append(f"<answer>{value}</answer>")
    return actions


def plan_namespace(env: Any) -> dict[str, Any]:
    """Names a prose plan may use: ``_state`` keys, then instance attributes, then the variables the
    ``_message_criteria`` closures captured in ``reset`` (the most specific, so they win)."""
    names: dict[str, Any] = {}
    state = getattr(env, "_state", None)
    if isinstance(state, dict):
        names.update({k: v for k, v in state.items() if isinstance(k, str)})
    names.update({k: v for k, v in vars(env).items() if not k.startswith("__")})
    for criterion in getattr(env, "_message_criteria", None) or []:
        code, cells = getattr(criterion, "__code__", None), getattr(criterion, "__closure__", None) or ()
        for name, cell in zip(getattr(code, "co_freevars", ()), cells, strict=False):
            try:
                names[name] = cell.cell_contents
            except ValueError:  # an empty cell
                continue
    return names


def _bind_arguments(text: str, spec: dict[str, Any], names: dict[str, Any]) -> dict[str, Any] | None:
    params = list((spec.get("parameters") or {}).get("properties") or {})
    try:
        call = parse_expression(f"f({text})")
    except SyntaxError:
        return None
    if not isinstance(call, ast.Call) or len(call.args) > len(params):
        return None
    args: dict[str, Any] = {}
    pairs = [*zip(params, call.args, strict=False), *((k.arg, k.value) for k in call.keywords if k.arg)]
    for param, node in pairs:
        value = _bind_value(node, names)
        if value is _UNBOUND:
            return None
        args[param] = value
    return args


_UNBOUND = object()


def _bind_value(node: ast.expr, names: dict[str, Any]) -> Any:
    if isinstance(node, ast.Name):
        return _json_safe(names.get(node.id, node.id))
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return _json_safe(names.get(node.attr, _UNBOUND))
    try:
        return ast.literal_eval(node)
    except ValueError:
        return _UNBOUND


def _json_safe(value: Any) -> Any:
    if value is _UNBOUND or isinstance(value, str | int | float | bool) or value is None:
        return value
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return _UNBOUND
    return value
