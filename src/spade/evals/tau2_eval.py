"""tau2-bench tasks and their reward: the task schema, and the DB, ACTION and COMMUNICATE checks.

Ports (sierra-research/tau2-bench, MIT licence):

- :func:`parse_task` reads a record of a domain's ``tasks.json`` as ``src/tau2/data_model/tasks.py``
  (``Task``, ``UserScenario``, ``StructuredUserInstructions``, ``EvaluationCriteria``, ``Action``) defines it;
  :func:`scenario_text` is ``str(UserScenario)``, the text the user simulator's prompt holds.
- :func:`evaluate` follows ``src/tau2/evaluator/evaluator.py`` (``evaluate_simulation`` with
  ``EvaluationType.ALL``): 0 unless the user (or agent) ended the conversation; 1 without criteria;
  otherwise the product of the components in ``reward_basis``:
  DB (``evaluator_env.py``: the gold actions replayed on a fresh database, their errors ignored, and the
  final database compared by hash with the one the conversation left), ACTION (``evaluator_action.py``:
  every gold action matched by some tool call, by name and the ``compare_args`` — all the call's
  arguments when unset), COMMUNICATE (``evaluator_communicate.py``: every ``communicate_info`` string found,
  case-insensitively, in an agent message with commas removed).

NL_ASSERTION scores 1 when the task lists no ``nl_assertions`` (``evaluator_nl_assertions.py`` does so
without asking its judge; most retail tasks are such); tasks that list some are not scored here (tau2 asks
an LLM judge), nor ENV_ASSERTION (domain assertion functions; airline and retail have none).
:func:`unscored_reason` names why a task is left out; the suite leaves such tasks out of the run and
counts them. Tasks with an ``initial_state`` are left out too: this port does not
replay initialisation data, actions or a message history.
"""

from __future__ import annotations

import copy
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from spade.errors import SpadeError
from spade.types import ToolCall

REWARD_TYPES = ("DB", "ENV_ASSERTION", "NL_ASSERTION", "ACTION", "COMMUNICATE")
SCORED = frozenset({"DB", "ACTION", "COMMUNICATE"})
"""Reward components this port computes."""

Termination = Literal["user_stop", "agent_stop", "max_steps", "too_many_errors", "agent_error", "user_error"]
"""How a conversation ended (tau2's ``TerminationReason``); only the first two are scored."""


class TaskError(SpadeError, ValueError):
    """A task record is not in tau2's schema (the message says which field)."""


@dataclass(frozen=True, slots=True)
class Action:
    """A gold tool call (``Action``)."""

    action_id: str
    name: str
    arguments: dict[str, Any]
    requestor: str = "assistant"
    compare_args: tuple[str, ...] | None = None

    def matches(self, call: ToolCall) -> bool:
        """``Action.compare_with_tool_call``."""
        if self.name != call.name:
            return False
        keys = list(call.arguments) if self.compare_args is None else list(self.compare_args)
        if not keys:
            return True
        mine = {k: v for k, v in self.arguments.items() if k in keys}
        return {k: v for k, v in call.arguments.items() if k in keys} == mine


@dataclass(frozen=True, slots=True)
class Criteria:
    """``EvaluationCriteria``: ``None`` lists are fields the task leaves unset."""

    actions: tuple[Action, ...] | None
    env_assertions: tuple[Any, ...] | None
    communicate_info: tuple[str, ...]
    nl_assertions: tuple[str, ...]
    reward_basis: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Task:
    """One task of a domain."""

    task_id: str
    scenario: str
    """``str(UserScenario)``: what the user simulator is told."""
    criteria: Criteria | None
    initial_state: bool = False
    """The task sets an initial state (data, actions or a message history)."""


def _need(record: Mapping[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    value = record.get(key)
    if not isinstance(value, kind):
        raise TaskError(f"{what}.{key} is missing or not a {getattr(kind, '__name__', 'valid value')}")
    return value


def _instructions_text(instructions: Any) -> str:
    if isinstance(instructions, str):
        return instructions
    if not isinstance(instructions, dict):
        raise TaskError("user_scenario.instructions is neither text nor an object")
    lines = [f"Domain: {_need(instructions, 'domain', str, 'instructions')}"]
    reason = _need(instructions, "reason_for_call", str, "instructions")
    lines.append(f"Reason for call:\n{textwrap.indent(reason, chr(9))}")
    for key, label in (("known_info", "Known info"), ("unknown_info", "Unknown info")):
        if instructions.get(key) is not None:
            lines.append(f"{label}:\n{textwrap.indent(str(instructions[key]), chr(9))}")
    steps = _need(instructions, "task_instructions", str, "instructions")
    lines.append(f"Task instructions:\n{textwrap.indent(steps, chr(9))}")
    return "\n".join(lines)


def scenario_text(scenario: Mapping[str, Any]) -> str:
    """``str(UserScenario)``: the persona (when set), then the instructions, each tab-indented."""
    lines = []
    if scenario.get("persona") is not None:
        lines += ["Persona:", textwrap.indent(str(scenario["persona"]), "\t")]
    lines += ["Instructions:", textwrap.indent(_instructions_text(scenario.get("instructions")), "\t")]
    return "\n".join(lines)


def _action(record: Any) -> Action:
    if not isinstance(record, dict):
        raise TaskError("an action is not an object")
    compare = record.get("compare_args")
    if compare is not None and not isinstance(compare, list):
        raise TaskError("action.compare_args is not a list")
    return Action(
        action_id=str(record.get("action_id", "")),
        name=_need(record, "name", str, "action"),
        arguments=_need(record, "arguments", dict, "action"),
        requestor=str(record.get("requestor") or "assistant"),
        compare_args=None if compare is None else tuple(str(c) for c in compare),
    )


def _criteria(record: Any) -> Criteria | None:
    if record is None:
        return None
    if not isinstance(record, dict):
        raise TaskError("evaluation_criteria is not an object")
    basis = record.get("reward_basis", ["DB", "COMMUNICATE"])
    if not isinstance(basis, list) or not all(b in REWARD_TYPES for b in basis):
        raise TaskError(f"evaluation_criteria.reward_basis must list some of {', '.join(REWARD_TYPES)}")
    lists = {k: record.get(k) for k in ("actions", "env_assertions", "communicate_info", "nl_assertions")}
    if not all(v is None or isinstance(v, list) for v in lists.values()):
        raise TaskError(
            "evaluation_criteria: actions, env_assertions, communicate_info, nl_assertions are lists"
        )
    actions = lists["actions"]
    return Criteria(
        actions=None if actions is None else tuple(_action(a) for a in actions),
        env_assertions=None if lists["env_assertions"] is None else tuple(lists["env_assertions"]),
        communicate_info=tuple(str(s) for s in lists["communicate_info"] or ()),
        nl_assertions=tuple(str(s) for s in lists["nl_assertions"] or ()),
        reward_basis=tuple(basis),
    )


def parse_task(record: Any) -> Task:
    """A ``tasks.json`` record as a :class:`Task` (TaskError saying which field is wrong)."""
    if not isinstance(record, dict):
        raise TaskError("a task is not a JSON object")
    task_id = record.get("id")
    if not isinstance(task_id, str | int) or isinstance(task_id, bool):
        raise TaskError("task.id is missing")
    scenario = _need(record, "user_scenario", dict, "task")
    state = record.get("initial_state")
    has_state = isinstance(state, dict) and any(state.get(k) for k in state)
    return Task(
        str(task_id), scenario_text(scenario), _criteria(record.get("evaluation_criteria")), has_state
    )


def unscored_reason(task: Task) -> str:
    """Why this port cannot score ``task`` ('' when it can)."""
    if task.initial_state:
        return "it sets an initial_state (not replayed here)"
    missing = set(task.criteria.reward_basis) - SCORED if task.criteria else set()
    if task.criteria and not task.criteria.nl_assertions:
        missing.discard("NL_ASSERTION")  # scores 1 without a judge
    if missing:
        return (
            f"its reward_basis holds {', '.join(sorted(missing))} "
            "(not scored here: needs an LLM judge or assertions)"
        )
    return ""


# -- the reward ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reward:
    """tau2's ``RewardInfo``, the parts this port computes."""

    reward: float
    breakdown: dict[str, float] = field(default_factory=dict)
    db_match: bool | None = None
    actions: tuple[bool, ...] = ()
    communicated: tuple[bool, ...] = ()
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe record for the per-item results."""
        return {
            "reward": self.reward,
            "breakdown": self.breakdown,
            "db_match": self.db_match,
            "actions": list(self.actions),
            "communicated": list(self.communicated),
            "note": self.note,
        }


Replay = Callable[[dict[str, Any], Action], object]
"""Calls one gold action on a database (raises what the tool raises)."""


def gold_db(task: Task, fresh: dict[str, Any], replay: Replay) -> tuple[dict[str, Any], list[str]]:
    """The database after the gold actions, on a copy of ``fresh``; errors are noted and skipped (as tau2)."""
    db = copy.deepcopy(fresh)
    errors = []
    for action in (task.criteria.actions or ()) if task.criteria else ():
        try:
            replay(db, action)
        except Exception as exc:  # boundary: tau2 logs a failing gold action and goes on
            errors.append(f"{action.name}: {exc}")
    return db, errors


def communicated(texts: Sequence[str], info: Sequence[str]) -> tuple[bool, ...]:
    """``CommunicateEvaluator``: each string found, lower-cased, in some agent text without commas."""
    lowered = [t.lower().replace(",", "") for t in texts]
    return tuple(any(s.lower() in t for t in lowered) for s in info)


def evaluate(
    task: Task,
    termination: Termination,
    db_matches: Callable[[], bool],
    texts: Sequence[str],
    calls: Sequence[ToolCall],
) -> Reward:
    """tau2's reward of one conversation (``evaluate_simulation``, ``EvaluationType.ALL``).

    Args:
        db_matches: whether the final database equals the gold one (called only when DB is scored).
        texts: the agent's text messages; calls: every tool call made.
    """
    if termination not in ("user_stop", "agent_stop"):
        return Reward(0.0, note=f"Simulation terminated prematurely. Termination reason: {termination}")
    criteria = task.criteria
    if criteria is None:
        return Reward(1.0, note="No evaluation criteria")
    basis = set(criteria.reward_basis)
    breakdown: dict[str, float] = {}
    match: bool | None = None
    if "DB" in basis:
        no_target = criteria.actions is None and criteria.env_assertions is None
        match = True if no_target else db_matches()
        breakdown["DB"] = 1.0 if match else 0.0
    found = tuple(any(a.matches(c) for c in calls) for a in criteria.actions or ())
    if "ACTION" in basis:
        breakdown["ACTION"] = 1.0 if all(found) else 0.0
    if "NL_ASSERTION" in basis and not criteria.nl_assertions:
        breakdown["NL_ASSERTION"] = 1.0  # no assertions to judge (unscored_reason leaves the others out)
    said = communicated(texts, criteria.communicate_info)
    if "COMMUNICATE" in basis:
        breakdown["COMMUNICATE"] = 1.0 if all(said) else 0.0
    reward = 1.0
    for value in breakdown.values():
        reward *= value
    return Reward(reward, breakdown, match, found, said)
