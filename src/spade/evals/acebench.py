"""``acebench``: ACEBench tool use from a local copy (``--data PATH``), normal and special categories.

Data: the English data of the ACEBench repository (``data_all/data_en``): ``data_<category>.json`` (JSON
Lines of ``id``, ``question``, ``function``, and ``time`` or ``profile``) beside ``possible_answer/
data_<category>.json`` (``id``, ``ground_truth``). ``--data`` takes that folder (or ``data_all``, whose
``data_en`` is used), or one ``data_<category>.json`` file with its ``possible_answer`` folder beside it.

Coverage: the 12 normal categories (single and parallel calls, similar APIs, preference, the six atom
categories, the two multi-turn ones), the 3 special ones (incomplete, error_param, irrelevant) — the
categories ACEBench scores from one reply — and the 2 agent ones (``agent_multi_step``,
``agent_multi_turn``: calls run against ACEBench's scenario classes, with a simulated user in multi-turn;
:mod:`spade.evals.acebench_agent`, which also says what its ``--param user_*`` and ``max_dialog_turns``
do). Agent items ACEBench could not run are left out and counted in the workload line with their reason.

Prompt: ACEBench's English system prompt of the category (normal, preference or special, with the
functions and the item's ``time`` or ``profile``) and its user prompt ("Conversation history 1..t:" and the
question); one reply per turn. Score: :mod:`spade.evals.acebench_check`. Items are ACEBench's items, except
in the multi-turn categories, where an item is a dialogue (its ``_k`` turns share the id before the last
``_``) that scores 1 only when every turn is right: ACEBench's multi-turn "end accuracy"; the fraction of
right turns (its "process accuracy") is in ``detail``. Categories are ACEBench's; ``--tasks`` takes
categories, ``normal``, ``special``, ``agent`` or item ids (``acebench:agent``).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spade.config import EvalOptions
from spade.evals import acebench_agent as agent
from spade.evals.acebench_check import normal_valid, special_valid
from spade.evals.base import EvalError, ItemResult, Progress, Workload, plural
from spade.evals.chat import ChatEpisode, Verdict, chat_episode, gather_bounded
from spade.evals.localdata import Record, data_path, field_of, read_records, select
from spade.evals.tau2_user import POLICY_USER, UserServer, UserSimulator, make_user, probe, user_server
from spade.types import Message, Policy, SamplingParams

SUITE = "acebench"
NORMAL = (
    "normal_single_turn_single_function",
    "normal_single_turn_parallel_function",
    "normal_multi_turn_user_adjust",
    "normal_multi_turn_user_switch",
    "normal_similar_api",
    "normal_preference",
    "normal_atom_bool",
    "normal_atom_enum",
    "normal_atom_number",
    "normal_atom_list",
    "normal_atom_object_deep",
    "normal_atom_object_short",
)
SPECIAL = ("special_incomplete", "special_error_param", "special_irrelevant")
AGENT = ("agent_multi_step", "agent_multi_turn")

SYSTEM_NORMAL = """You are an AI assistant with the role name "assistant." Based on the provided API \
specifications and conversation history from steps 1 to t, generate the API requests that the assistant \
should call in step t+1. The API requests should be output in the format [ApiName(key1='value1', \
key2='value2', ...)], replacing ApiName with the actual API name, key1, key2, etc., with the actual parameter \
names, and value1, value2, etc., with the actual parameter values. The output should start with a square \
bracket "[" and end with a square bracket "]".
If there are multiple API requests, separate them with commas, for example: [ApiName(key1='value1', \
key2='value2', ...), ApiName(key1='value1', key2='value2', ...), ...]. Do not include any other explanations, \
prompts, or API call results in the output.
If the API parameter description does not specify otherwise, the parameter is optional (parameters mentioned \
in the user input need to be included in the output; if not mentioned, they do not need to be included).
If the API parameter description does not specify the required format for the value, use the user's \
original text for the parameter value.
If the API requires no parameters, output the API request directly in the format [ApiName()], and do not \
invent any nonexistent parameter names.

{time}

Role Descriptions:
user: User
assistant: The AI assistant role that makes API requests
tool: Provides the results returned from tool calls

API Specifications:
{function}"""
"""ACEBench's ``SYSTEM_PROMPT_FOR_NORMAL_DATA_EN``."""
SYSTEM_PREFERENCE = """You are an AI assistant, and your role is called assistant. Based on the given API \
description, dialogue history 1..t, and character profile, generate the API requests that the assistant \
should call in step t+1. The API requests should be output in the format [ApiName(key1='value1', \
key2='value2', ...)], where ApiName is replaced with the actual API name, and key1, key2, etc., are replaced \
with the actual parameter names, and value1, value2 are replaced with the actual parameter values. The output \
should start with a "[" and end with a "]".
If there are multiple API requests, they should be separated by commas, e.g., [ApiName(key1='value1', \
key2='value2', ...), ApiName(key1='value1', key2='value2', ...), ...]. Do not output any other explanations, \
hints, or results of the API calls in the output.
If the API parameter description does not specify special instructions, the parameter is optional \
(parameters mentioned in the user input or character profile should be included in the output, and if not \
mentioned, they should not be included).
If the API parameter description does not specify the format for the parameter value, the parameter value \
should be taken from the user's original text or character profile.
If the API requires no parameters, the API request should be output as [ApiName()], with no fabricated \
parameter names.

Character Profile:
{profile}

Role Description:
user: User
assistant: AI assistant performing API calls
tool: Provides the results of tool calls

API Description:
{function}"""
"""ACEBench's ``SYSTEM_PROMPT_FOR_PREFERENCE_DATA_EN``."""
SYSTEM_SPECIAL = """You are an AI assistant with the role name "assistant". Based on the provided API \
specifications and conversation history from steps 1 to t, generate the API requests that the assistant \
should call in step t+1. Below are two specific scenarios:
1. When the information provided by the user is clear and unambiguous, and the problem can be resolved using \
the list of candidate functions:
   - If the API parameter description does not specify the required format for the value, use the user's \
original text for the parameter value.
   - When multiple tools in the candidate list can satisfy the user's needs, output all API requests.
   - API requests should be output in the format [ApiName(key1='value1', key2='value2', ...), \
ApiName(key1='value1', key2='value2', ...), ...], replacing ApiName with the actual API name, key1, key2, \
etc., with the actual parameter names, and value1, value2, etc., with the actual parameter values. The output \
should start with a square bracket "[" and end with a square bracket "]". At this time, the output must not \
contain any other content.

2. When the information provided by the user is unclear, incomplete, or incorrect, or the user's question \
exceeds the capabilities of the provided functions, you need to clearly point out these issues. The following \
is your strategy:
   (1) If the user's instructions include the key details required to call the API, but the type or form of \
the parameter values does not match the API's definitions, ask in-depth questions to clarify and correct the \
details. The output format should be: ["There is incorrect value (value) for the parameters (key) in the \
conversation history."]
   (2) If the user's instructions lack the key details required by the API, ask questions to obtain the \
necessary information. The output format should be: ["Missing necessary parameters (key1, key2, ...) for the \
api (ApiName)"], replacing key1, key2 with the names of the missing parameters and ApiName with the actual \
API name.
   (3) If the user's request exceeds the current capabilities of your APIs, inform them that you cannot \
fulfill the request. The output format should be: ["Due to the limitations of the function, I cannot solve \
this problem."]
   Note: The above steps have a priority order. You need to first determine whether scenario (1) applies. If \
it does, output according to the requirements in (1). Pay attention to distinguishing between scenarios (1) \
and (2).

{time}

Role Descriptions:
user: User
assistant: The AI assistant role that makes API requests

API Specifications:
{function}"""
"""ACEBench's ``SYSTEM_PROMPT_FOR_SPECIAL_DATA_EN``."""
USER = "Conversation history 1..t:\n{question}"


@dataclass(frozen=True, slots=True)
class Turn:
    """One scored reply: the item's prompt and its possible answers."""

    turn_id: str
    messages: list[Message]
    functions: list[dict[str, Any]]
    answer: Any


@dataclass(frozen=True, slots=True)
class Item:
    """An ACEBench item (a dialogue's turns in the multi-turn categories)."""

    item_id: str
    category: str
    turns: tuple[Turn, ...]


def _language_folder(path: Path) -> Path:
    if path.is_dir() and (path / "data_en").is_dir():
        return path / "data_en"
    return path


def _category_files(path: Path, categories: Sequence[str]) -> list[tuple[str, Path, Path]]:
    """``(category, data file, answer file)`` for the categories present under ``path``."""
    if path.is_file():
        category = path.stem.removeprefix("data_")
        pairs = [(category, path, path.parent / "possible_answer" / path.name)]
    else:
        pairs = [
            (c, path / f"data_{c}.json", path / "possible_answer" / f"data_{c}.json") for c in categories
        ]
        pairs = [p for p in pairs if p[1].exists()]
        if not pairs:
            raise EvalError(
                f"{SUITE}: {path} holds no data_<category>.json of ACEBench (give data_all/data_en of its repository)"
            )
    for category, data, answers in pairs:
        if category not in NORMAL + SPECIAL + AGENT:
            raise EvalError(f"{SUITE}: {data.name} is not an ACEBench category file (data_<category>.json)")
        if not answers.exists():
            raise EvalError(f"{SUITE}: {answers} is missing (ACEBench keeps answers in possible_answer/)")
    return pairs


def _turn(category: str, record: Record, answer: Any, where: str) -> Turn:
    question = str(field_of(SUITE, record, ("question",), where))
    functions = field_of(SUITE, record, ("function",), where)
    if "special" in category:
        system = SYSTEM_SPECIAL.format(time=record.get("time", ""), function=functions)
    elif "preference" in category:
        system = SYSTEM_PREFERENCE.format(profile=record.get("profile", ""), function=functions)
    else:
        system = SYSTEM_NORMAL.format(time=record.get("time", ""), function=functions)
    messages: list[Message] = [
        {"role": "system", "content": system},
        {"role": "user", "content": USER.format(question=question)},
    ]
    return Turn(str(record["id"]), messages, list(functions), answer)


def _items(category: str, data: Path, answers: Path) -> list[Item]:
    records = read_records(SUITE, data, (".json",))
    truth = {str(a.get("id")): a.get("ground_truth") for a in read_records(SUITE, answers, (".json",))}
    groups: dict[str, list[Turn]] = {}
    for k, record in enumerate(records):
        where = f"{data.name} record {k}"
        turn_id = str(field_of(SUITE, record, ("id",), where))
        if turn_id not in truth:
            raise EvalError(f"{SUITE}: {turn_id} has no ground_truth in {answers}")
        item_id = turn_id.rsplit("_", 1)[0] if "multi_turn" in category else turn_id
        groups.setdefault(item_id, []).append(_turn(category, record, truth[turn_id], where))
    return [Item(i, category, tuple(turns)) for i, turns in groups.items()]


@dataclass(frozen=True, slots=True)
class Selection:
    """The selected items, and the agent items left out as ACEBench could not run them (id, reason)."""

    items: list[Item | agent.AgentItem]
    left_out: list[tuple[str, str]]


def load_items(opts: EvalOptions) -> Selection:
    """The selected items (EvalError for a bad path, a missing answer file, records without the fields)."""
    path = _language_folder(data_path(SUITE, opts))
    items: list[Item | agent.AgentItem] = []
    left_out: list[tuple[str, str]] = []
    for category, data, answers in _category_files(path, NORMAL + SPECIAL + AGENT):
        if category in AGENT:
            scored, left = agent.load_agent(category, data, answers)
            items += scored
            left_out += left
        else:
            items += _items(category, data, answers)

    def key(item: Item | agent.AgentItem) -> tuple[str, ...]:
        return (item.item_id, item.category, item.category.split("_")[0])

    return Selection(select(SUITE, items, opts, key), left_out)


def judge(category: str, turn: Turn, reply: str) -> Verdict:
    """ACEBench's verdict on one reply (``answer`` holds why it is wrong, None when it is right)."""
    if category.startswith("special"):
        valid, why = special_valid(category, reply, turn.answer)
    else:
        valid, why = normal_valid(turn.functions, reply, turn.answer, category)
    return Verdict(1.0 if valid else 0.0, why or None, None)


async def _episode(policy: Policy, params: SamplingParams, item: Item) -> list[ChatEpisode]:
    return [
        await chat_episode(policy, t.messages, params, functools.partial(judge, item.category, t), 1)
        for t in item.turns
    ]


class ACEBenchSuite:
    """ACEBench's normal, special and agent categories from ``--data`` (see the module docstring)."""

    name = SUITE

    def __init__(self) -> None:
        self._probed: set[UserServer] = set()

    def check(self, opts: EvalOptions) -> None:
        """Read the local copy and the parameters (EvalError for a missing path, missing answers, unknown
        categories, bad ``--param``); probe a user server the multi-turn items would talk to."""
        chosen = load_items(opts).items
        agent.max_turns(opts)
        server = user_server(SUITE, opts)
        if server is not None and _talks(chosen) and not _loop_running():
            asyncio.run(self._probe(server))

    async def _probe(self, server: UserServer) -> None:
        if server not in self._probed:
            await probe(SUITE, server)
            self._probed.add(server)

    def workload(self, opts: EvalOptions) -> Workload:
        """The selected items (a multi-turn dialogue is one item), the agent items left out, who plays the user."""
        selection = load_items(opts)
        n = len(selection.items)
        cap = f" (--limit {opts.limit})" if opts.limit is not None else ""
        left = "".join(f"; left out {i}: {why}" for i, why in selection.left_out)
        server = user_server(SUITE, opts)
        who = (
            f"; user simulator: {server.label() if server else POLICY_USER}"
            if _talks(selection.items)
            else ""
        )
        return Workload.of(n, f"{plural(n, 'item')} from --data{cap}{left}{who}", opts)

    async def run(self, policy: Policy, opts: EvalOptions, progress: Progress) -> list[ItemResult]:
        """One reply per turn (an item scores 1 when every turn is right); agent items play their scenario."""
        items = load_items(opts).items
        params = opts.sampling()
        turns, server = agent.max_turns(opts), user_server(SUITE, opts)
        if server is not None and _talks(items):
            await self._probe(server)  # before any conversation (check() could not when a loop was running)
        user = make_user(server, policy, params, opts)
        jobs = [item for item in items for _ in range(opts.episodes)]
        try:
            outcomes = await gather_bounded(
                [functools.partial(_play, policy, params, user, item, turns) for item in jobs],
                opts.concurrency,
                progress,
            )
        finally:
            await user.aclose()
        by_item: dict[str, list[Any]] = {}
        for item, outcome in zip(jobs, outcomes, strict=True):
            by_item.setdefault(item.item_id, []).append(outcome)
        who = user.describe() if _talks(items) else None
        return [
            agent.agent_result(item, by_item[item.item_id], _who(item, who))
            if isinstance(item, agent.AgentItem)
            else _result(item, by_item[item.item_id])
            for item in items
        ]


def _talks(items: Sequence[Item | agent.AgentItem]) -> bool:
    return any(i.category == "agent_multi_turn" for i in items)


def _who(item: agent.AgentItem, user: dict[str, Any] | None) -> dict[str, Any] | None:
    return user if item.category == "agent_multi_turn" else None


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def _play(
    policy: Policy, params: SamplingParams, user: UserSimulator, item: Item | agent.AgentItem, turns: int
) -> Any:
    if not isinstance(item, agent.AgentItem):
        return await _episode(policy, params, item)
    if item.category == "agent_multi_turn":
        return await agent.play_turn(policy, params, user, item, turns)
    return await agent.play_step(policy, params, item, turns)


def _result(item: Item, episodes: list[list[ChatEpisode]]) -> ItemResult:
    scores = tuple(1.0 if all(t.score >= 1.0 for t in turns) else 0.0 for turns in episodes)
    return ItemResult(
        suite=SUITE,
        item_id=item.item_id,
        category=item.category,
        scores=scores,
        detail={
            "turns": [t.turn_id for t in item.turns],
            "process": [sum(t.score for t in turns) / len(turns) for turns in episodes],
            "errors": sum(1 for turns in episodes if any(t.error for t in turns)),
            "episodes": [[t.to_dict() for t in turns] for turns in episodes],
        },
    )
