"""ACEBench's agent categories (``agent_multi_step``, ``agent_multi_turn``): the model works a stateful scenario.

Data: ``data_agent_<kind>.json`` (``id``, ``question``, ``initial_config``, ``function``,
``involved_classes``) beside ``possible_answer/data_agent_<kind>.json`` (``ground_truth``: the end state,
``mile_stone``: the expected calls). The scenario classes are ACEBench's English ones
(:mod:`spade.evals.acebench_scenarios`, :mod:`spade.evals.acebench_travel`); execution and scoring are
:mod:`spade.evals.acebench_exec`.

The conversation follows ``model_inference/common_inference.py`` with its default ``max_dialog_turns`` 40
(``--param max_dialog_turns=``): every message (agent, user or execution) is a step, and a message after the
second step that contains "finish conversation" ends it.

- multi-step: the agent (ACEBench's ``CommonAgent_Step`` prompts) answers the question; each reply goes to
  the execution, whose results come back. As in ACEBench, the agent's history is the question and the
  execution results only ("execution result:" lines; its own replies are not in it), and every reply counts
  as a sent call for the process score.
- multi-turn: the user simulator opens with ACEBench's ``APIUSER`` prompts (its instruction is the question;
  the first message it answers is "Is there anything you need help with today?"); the agent
  (``CommonAgent`` prompts with the Travel or phone rules) writes to the execution when its reply holds
  ``[...]`` that decodes as calls, else to the user. The user sees the agent's messages only.

The user simulator is the policy under test unless ``--param user_base_url= --param user_model=`` name a
served model (:mod:`spade.evals.tau2_user`; ACEBench's default user is gpt-4o at temperature 0.001, so only
such a run is comparable with its numbers). A served user gets ACEBench's messages as they are (its own
turns as ``system`` messages); the policy as user gets its own turns as ``assistant`` messages, since chat
templates render a model's past turns so (some refuse a ``system`` message after the first).

Score: 1 when ACEBench's end-state check accepts the final state (its end-to-end accuracy); ``detail.process``
holds ACEBench's process accuracy per episode (1 for a right end state). Items ACEBench could not run are
left out and counted with their reason (an involved class it has no English scenario for, a multi-turn item
whose classes have no user prompt, an empty ``mile_stone``, on which its process score fails).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from spade.config import EvalOptions
from spade.evals.acebench_exec import (
    CALL_PATTERN,
    CLASSES,
    FINISH,
    DecodeError,
    Scenario,
    decode,
    end_state_valid,
    execute_step,
    execute_turn,
    process_score,
)
from spade.evals.base import EvalError, ItemResult
from spade.evals.localdata import field_of, read_records
from spade.evals.tau2_user import PolicyUser, UserSimulator, policy_reply
from spade.replies import strip_reasoning
from spade.types import Message, Policy, SamplingParams

SUITE = "acebench"
MAX_DIALOG_TURNS = 40
"""ACEBench's ``--max-dialog-turns`` default."""
USER_OPENING = "Is there anything you need help with today?"
DECODE_FAILED = "Please do not ask me any questions, use the known conditions to solve the problem"
"""The multi-step execution's reply to a message that does not decode."""


@cache
def prompts() -> dict[str, str]:
    """ACEBench's English agent and user prompts, verbatim (``data/acebench_agent_prompts.json``)."""
    text = resources.files("spade.evals").joinpath("data/acebench_agent_prompts.json").read_text("utf-8")
    return dict(json.loads(text))


@dataclass(frozen=True, slots=True)
class AgentItem:
    """One agent item of ACEBench."""

    item_id: str
    category: str
    question: str
    functions: list[Any]
    initial_config: dict[str, Any]
    involved: tuple[str, ...]
    ground_truth: Any
    mile_stone: list[Any]


@dataclass(slots=True)
class Episode:
    """One conversation: its messages, the calls sent, the end state, and how it ended."""

    log: list[dict[str, Any]] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)
    state: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""


def _left_out(category: str, involved: tuple[str, ...], mile_stone: Any) -> str:
    unknown = [c for c in involved if c not in CLASSES]
    if unknown:
        return f"involved class {unknown[0]} has no English scenario in ACEBench"
    if "multi_turn" in category and not {"BaseApi", "Travel"} & set(involved):
        return "no user-simulator prompt for these classes (ACEBench's APIUSER needs BaseApi or Travel)"
    if not mile_stone:
        return "empty mile_stone (ACEBench's process score fails on it)"
    return ""


def load_agent(category: str, data: Path, answers: Path) -> tuple[list[AgentItem], list[tuple[str, str]]]:
    """The category's items, and ``(id, reason)`` for those left out (EvalError for records without fields)."""
    truth = {str(a.get("id")): a for a in read_records(SUITE, answers, (".json",))}
    items, left = [], []
    for k, record in enumerate(read_records(SUITE, data, (".json",))):
        where = f"{data.name} record {k}"
        item_id = str(field_of(SUITE, record, ("id",), where))
        if item_id not in truth:
            raise EvalError(f"{SUITE}: {item_id} has no ground_truth in {answers}")
        answer = truth[item_id]
        involved = tuple(str(c) for c in field_of(SUITE, record, ("involved_classes",), where))
        functions = field_of(SUITE, record, ("function",), where)
        reason = _left_out(category, involved, answer.get("mile_stone"))
        if reason:
            left.append((item_id, reason))
            continue
        items.append(
            AgentItem(
                item_id=item_id,
                category=category,
                question=str(field_of(SUITE, record, ("question",), where)),
                functions=[functions] if isinstance(functions, dict | str) else list(functions),
                initial_config=dict(record.get("initial_config") or {}),
                involved=involved,
                ground_truth=answer.get("ground_truth"),
                mile_stone=list(answer["mile_stone"]),
            )
        )
    return items, left


def max_turns(opts: EvalOptions) -> int:
    """``--param max_dialog_turns=`` (default ACEBench's 40); EvalError for a bad value."""
    raw = opts.params.get("max_dialog_turns", MAX_DIALOG_TURNS)
    if isinstance(raw, bool) or not isinstance(raw, int | str) or not str(raw).isdigit() or int(raw) < 1:
        raise EvalError(f"{SUITE}: --param max_dialog_turns= must be a whole number >= 1 (got {raw!r})")
    return int(raw)


def _line(message: dict[str, Any], execution: str) -> str:
    """``Scene.get_inference_message``'s line for a message."""
    prefix = {"user": "user:", "agent": "agent:", "execution": execution}[message["sender"]]
    return prefix + str(message["message"]) + "\n"


def _finished(index: int, message: dict[str, Any]) -> bool:
    return index > 1 and FINISH in message["message"]


async def _agent(policy: Policy, sampling: SamplingParams, system: str, user: str) -> tuple[str, str | None]:
    messages: list[Message] = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    text, error = await policy_reply(policy, messages, None, sampling)
    return strip_reasoning(text), error


async def play_step(policy: Policy, sampling: SamplingParams, item: AgentItem, turns: int) -> Episode:
    """A multi-step episode (``CommonInference.multi_step_inference``)."""
    talk, scenario = Episode(), Scenario(item.involved, item.initial_config)
    log, history = talk.log, ""
    log.append({"sender": "user", "recipient": "agent", "message": item.question})
    for index in range(turns):
        if index == 0 or log[-1]["sender"] == "execution":
            history += _line(log[-1], "execution result:")
            user = prompts()["step_user"].format(functions=item.functions, history=history)
            reply, error = await _agent(policy, sampling, prompts()["step_system"], user)
            if error:
                talk.error = error
                break
            message: dict[str, Any] = {"sender": "agent", "recipient": "execution", "message": reply}
        else:
            talk.sent.append(log[-1]["message"])
            try:
                results: Any = execute_step(scenario, decode(log[-1]["message"]))
            except DecodeError:
                results = DECODE_FAILED
            message = {"sender": "execution", "recipient": "agent", "message": results}
        log.append(message)
        if _finished(index, message):
            break
    talk.state = scenario.state()
    return talk


def _agent_system(item: AgentItem) -> str:
    system = prompts()["turn_system"]
    if "Travel" in item.involved:
        system += prompts()["travel_rules"]
    if "BaseApi" in item.involved:
        system += prompts()["base_rules"]
    return system


def _recipient(reply: str) -> str:
    """``CommonAgent.respond``: the execution when the reply holds ``[...]`` that decodes as calls."""
    if not CALL_PATTERN.search(reply):
        return "user"
    try:
        decode(reply)
    except DecodeError:
        return "user"
    return "execution"


class _User:
    """ACEBench's ``APIUSER`` conversation: its own turns as ``system`` messages, the agent's as ``user``."""

    def __init__(self, simulator: UserSimulator, item: AgentItem) -> None:
        self.simulator = simulator
        system = prompts()["user_base" if "BaseApi" in item.involved else "user_travel"]
        self.messages: list[Message] = [
            {"role": "system", "content": system.format(instruction=item.question)},
            {"role": "user", "content": USER_OPENING},
        ]

    async def respond(self, agent_message: str | None) -> tuple[str, str | None]:
        if agent_message is not None:  # APIUSER.step: remove_prefix, then the agent's message as "user"
            for prefix in ("user:", "agent:"):
                if agent_message.startswith(prefix):
                    agent_message = agent_message[len(prefix) :]
                    break
            self.messages.append({"role": "user", "content": agent_message})
        sent = self.messages
        if isinstance(self.simulator, PolicyUser):  # see the module docstring
            sent = [sent[0], *({**m, "role": "assistant"} if m["role"] == "system" else m for m in sent[1:])]
        text, error = await self.simulator.reply(sent)
        text = strip_reasoning(text)
        self.messages.append({"role": "system", "content": text})
        return text, error


async def _turn_step(
    policy: Policy,
    sampling: SamplingParams,
    item: AgentItem,
    user: _User,
    state: tuple[Episode, Scenario, str],
) -> tuple[dict[str, Any] | None, str]:
    """The next message of a multi-turn episode (None when a model request failed), and the agent history."""
    talk, scenario, history = state
    last = talk.log[-1]
    history += _line(last, "execution:")
    message: dict[str, Any]
    if last["recipient"] == "user":
        text, error = await user.respond(str(last["message"]))
        message = {"sender": "user", "recipient": "agent", "message": text}
    elif last["recipient"] == "agent":
        user_prompt = prompts()["turn_user"].format(functions=item.functions, history=history)
        text, error = await _agent(policy, sampling, _agent_system(item), user_prompt)
        message = {"sender": "agent", "recipient": _recipient(text), "message": text}
    else:
        talk.sent.append(last["message"])
        error, results = None, execute_turn(scenario, decode(last["message"]))
        message = {"sender": "execution", "recipient": "agent", "message": results}
    if error:
        talk.error = error
        return None, history
    return message, history


async def play_turn(
    policy: Policy, sampling: SamplingParams, simulator: UserSimulator, item: AgentItem, turns: int
) -> Episode:
    """A multi-turn episode (``CommonInference.multi_turn_inference``)."""
    talk, scenario, user = Episode(), Scenario(item.involved, item.initial_config), _User(simulator, item)
    opening, error = await user.respond(None)
    if error:
        talk.error = error
        return talk
    talk.log.append({"sender": "user", "recipient": "agent", "message": opening})
    history = ""
    for index in range(turns):
        message, history = await _turn_step(policy, sampling, item, user, (talk, scenario, history))
        if message is None:
            break
        talk.log.append(message)
        if _finished(index, message):
            break
    talk.state = scenario.state()
    return talk


def agent_result(item: AgentItem, episodes: list[Episode], user: dict[str, Any] | None) -> ItemResult:
    """The item's scores (end-to-end) and ACEBench's process accuracy per episode in ``detail``."""
    scores, process, records = [], [], []
    for talk in episodes:
        valid, why = (
            end_state_valid(talk.state, item.ground_truth) if not talk.error else (False, [talk.error])
        )
        scores.append(1.0 if valid else 0.0)
        process.append(1.0 if valid else 0.0 if talk.error else process_score(talk.sent, item.mile_stone))
        records.append(
            {"error": talk.error, "errors": why, "sent": talk.sent, "state": talk.state, "log": talk.log}
        )
    detail: dict[str, Any] = {
        "process": process,
        "errors": sum(1 for t in episodes if t.error),
        "episodes": records,
    }
    if user is not None:
        detail["user_simulator"] = user
    return ItemResult(
        SUITE, item.item_id, item.category, tuple(scores), json.loads(json.dumps(detail, default=str))
    )
