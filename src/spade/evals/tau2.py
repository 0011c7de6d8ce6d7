"""``tau2_bench``: tau2-bench's airline and retail domains from a local copy (``--data PATH``), agent against
simulated user.

Data: a domain folder as the tau2-bench repository publishes it (``data/tau2/domains/airline`` or
``.../retail``): ``db.json`` (airline: flights, users, reservations; retail: products, users, orders),
``policy.md`` (the agent's policy), ``tasks.json`` (a JSON list of tasks) and, when present,
``split_tasks.json`` (task ids per split; ``--param split=`` picks one, default ``base`` as tau2's
``get_tasks``). ``--data`` may also name ``data/tau2/domains``: the suite then plays the domain the task
selection names (``tau2_bench:retail``, as ``acebench:normal`` names a category), or the only ported one
there; with several and none named it asks for one.

Ports (sierra-research/tau2-bench, MIT licence): the tools and databases in :mod:`spade.evals.tau2_airline`
and :mod:`spade.evals.tau2_retail` (``src/tau2/domains/<domain>/``), the task schema and reward in
:mod:`spade.evals.tau2_eval` (``src/tau2/data_model/tasks.py``, ``src/tau2/evaluator/``), and here the
conversation:

- the agent (the policy under test) follows ``src/tau2/agent/llm_agent.py``: system prompt
  ``SYSTEM_PROMPT`` (``AGENT_INSTRUCTION`` and the domain policy), the tools as OpenAI schemas rendered by
  the policy's chat template, tool calls read from the reply with :func:`spade.replies.extract_tool_calls`;
- the user simulator follows ``src/tau2/user/user_simulator.py``: its system prompt is
  ``data/tau2/user_simulator/simulation_guidelines.md`` then the task's scenario in ``<scenario>``, and it
  sees the conversation with roles flipped (its own turns as assistant, the agent's texts as user);
- the loop follows ``src/tau2/orchestrator/orchestrator.py`` (half duplex): the agent opens with "Hi! How
  can I help you today?"; the user's ``###STOP###``, ``###TRANSFER###`` or ``###OUT-OF-SCOPE###`` ends the
  conversation; every message (agent, user, tool results) is a step, and ``max_steps`` (200, as tau2's
  CLI) steps or ``max_errors`` (10) failed tool calls end it unscored.

By default the user simulator is the policy under test, with the same sampling; tau2 runs a separate user
model (its default: gpt-4.1 at temperature 0), so such scores are not comparable with tau2's leaderboard.
``--param user_base_url= --param user_model=`` (:mod:`spade.evals.tau2_user`) put the user on a separate
model served by an OpenAI-compatible server; the workload line and each item's ``detail.user_simulator``
say which user played. Replies whose tool-call blocks are malformed (or name an unknown tool) get an
``Error: ...`` tool result and count as failed calls, as a call to an unknown tool does in tau2. A failed
model request (agent or user) ends the episode, scored 0 and counted in ``detail.errors``. Tasks this port
cannot score (``nl_assertions`` to judge or ``ENV_ASSERTION`` in their ``reward_basis``, or an
``initial_state``;
:func:`spade.evals.tau2_eval.unscored_reason`) are left out of the run and counted in the workload line;
``--tasks`` takes task ids or the domain name.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from spade.config import EvalOptions
from spade.evals import tau2_airline, tau2_retail
from spade.evals.base import EvalError, ItemResult, Progress, Workload, plural
from spade.evals.chat import REPLY_CHARS, gather_bounded
from spade.evals.localdata import data_path, select
from spade.evals.tau2_airline import AirlineTools, db_hash, to_json_str
from spade.evals.tau2_data import Domain, load_domain
from spade.evals.tau2_eval import Action, Replay, Reward, Task, Termination, evaluate, gold_db
from spade.evals.tau2_retail import RetailTools
from spade.evals.tau2_user import (
    POLICY_USER,
    USER_PARAMS,
    UserServer,
    UserSimulator,
    make_user,
    policy_reply,
    probe,
    user_server,
)
from spade.replies import extract_tool_calls, strip_reasoning
from spade.types import Message, Policy, SamplingParams, ToolCall, ToolSchema

SUITE = "tau2_bench"
MAX_STEPS = 200
MAX_ERRORS = 10
STOP, TRANSFER, OUT_OF_SCOPE = "###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###"
FIRST_AGENT_MESSAGE = "Hi! How can I help you today?"
_KNOWN_PARAMS = frozenset({"data", "split", "max_steps", "max_errors"}) | USER_PARAMS

AGENT_INSTRUCTION = """You are a customer service agent that helps the user according to the <policy> provided below.
In each turn you can either:
- Send a message to the user.
- Make a tool call.
You cannot do both at the same time.

Try to be helpful and always follow the policy. Always make sure you generate valid JSON only."""
"""``llm_agent.AGENT_INSTRUCTION``."""
AGENT_SYSTEM = "<instructions>\n{agent_instruction}\n</instructions>\n<policy>\n{domain_policy}\n</policy>"
"""``llm_agent.SYSTEM_PROMPT``."""
USER_GUIDELINES = "\n".join(
    (
        "# User Simulation Guidelines",
        "You are playing the role of a customer contacting a customer service representative. ",
        "Your goal is to simulate realistic customer interactions while following specific scenario instructions.",
        "",
        "## Core Principles",
        "- Generate one message at a time, maintaining natural conversation flow.",
        "- Strictly follow the scenario instructions you have received.",
        "- Never make up or hallucinate information not provided in the scenario instructions. Information that "
        "is not provided in the scenario instructions should be considered unknown or unavailable.",
        "- Avoid repeating the exact instructions verbatim. Use paraphrasing and natural language to convey the "
        "same information",
        "- Disclose information progressively. Wait for the agent to ask for specific information before "
        "providing it.",
        "",
        "## Task Completion",
        "- The goal is to continue the conversation until the task is complete.",
        "- If the instruction goal is satisified, generate the '###STOP###' token to end the conversation.",
        "- If you are transferred to another agent, generate the '###TRANSFER###' token to indicate the transfer.",
        "- If you find yourself in a situation in which the scenario does not provide enough information for you "
        "to continue the conversation, generate the '###OUT-OF-SCOPE###' token to end the conversation.",
        "Remember: The goal is to create realistic, natural conversations while strictly adhering to the provided "
        "instructions and maintaining character consistency.",
    )
)
"""``data/tau2/user_simulator/simulation_guidelines.md`` (no persona guidelines: tau2's default)."""
USER_SYSTEM = "{guidelines}\n\n<scenario>\n{instructions}\n</scenario>"
"""``user_simulator.SYSTEM_PROMPT``."""


class Toolkit(Protocol):
    """A domain's agent tools over one in-memory database (``AirlineTools``, ``RetailTools``)."""

    db: dict[str, Any]

    def use_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """Call tool ``name``; raises what the tool raises."""
        ...


TOOLKITS: dict[str, tuple[Callable[[dict[str, Any]], Toolkit], tuple[ToolSchema, ...]]] = {
    "airline": (AirlineTools, tau2_airline.TOOL_SCHEMAS),
    "retail": (RetailTools, tau2_retail.TOOL_SCHEMAS),
}
"""Domain -> (its toolkit over a database, the agent's tool schemas)."""


@dataclass(frozen=True, slots=True)
class Rules:
    """How one conversation runs."""

    sampling: SamplingParams
    max_steps: int
    max_errors: int


@dataclass(slots=True)
class Conversation:
    """One conversation in progress: the two sides' views, the database, and what the reward reads."""

    tools: Toolkit
    schemas: tuple[ToolSchema, ...]
    agent: list[Message]
    user: list[Message]
    log: list[dict[str, Any]] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)
    steps: int = 0
    errors: int = 0
    termination: Termination | None = None
    error: str = ""

    def step(self, rules: Rules, *, to_env: bool = False) -> None:
        """Count one step; off the way to the tools, apply the step and error limits (tau2 checks them
        after every step and they override a stop in the same step)."""
        self.steps += 1
        if to_env:
            return
        if self.steps >= rules.max_steps:
            self.termination = "max_steps"
        if self.errors >= rules.max_errors:
            self.termination = "too_many_errors"


def is_stop(text: str) -> bool:
    """``UserSimulator.is_stop``: the message holds a stop, transfer or out-of-scope token."""
    return STOP in text or TRANSFER in text or OUT_OF_SCOPE in text


async def user_turn(
    user: UserSimulator, system: str, talk: Conversation, agent_text: str, rules: Rules
) -> str:
    """The user simulator answers the agent's message (roles flipped, as ``UserState.flip_roles``)."""
    talk.user.append({"role": "user", "content": agent_text})
    text, error = await user.reply([{"role": "system", "content": system}, *talk.user])
    if error is not None:
        talk.termination, talk.error = "user_error", error
        return ""
    content = strip_reasoning(text)
    talk.user.append({"role": "assistant", "content": content})
    talk.agent.append({"role": "user", "content": content})
    talk.log.append({"role": "user", "content": content[:REPLY_CHARS]})
    if is_stop(content):
        talk.termination = "user_stop"
    talk.step(rules)
    return content


def run_tool(tools: Toolkit, call: ToolCall) -> tuple[str, bool]:
    """``Environment.get_response``: the tool's JSON result, or ``Error: ...`` and True when it raised."""
    try:
        return to_json_str(tools.use_tool(call.name, call.arguments)), False
    except Exception as exc:  # boundary: any failure of a model-chosen call is its result, as in tau2
        return f"Error: {exc}", True


async def agent_turn(policy: Policy, system: str, talk: Conversation, rules: Rules) -> str:
    """The agent replies, calling tools until it writes to the user; returns that message ('' when the
    conversation ended meanwhile)."""
    while talk.termination is None:
        text, error = await policy_reply(
            policy, [{"role": "system", "content": system}, *talk.agent], talk.schemas, rules.sampling
        )
        if error is not None:
            talk.termination, talk.error = "agent_error", error
            return ""
        parsed = extract_tool_calls(strip_reasoning(text), list(talk.schemas))
        talk.agent.append({"role": "assistant", "content": text})
        if parsed.content:
            talk.texts.append(parsed.content)
        calls = [{"name": c.name, "arguments": c.arguments} for c in parsed.calls]
        talk.log.append({"role": "assistant", "content": parsed.content[:REPLY_CHARS], "tool_calls": calls})
        if not parsed.calls and not parsed.errors:
            talk.step(rules)
            return parsed.content
        talk.step(rules, to_env=True)
        _tool_results(talk, parsed.calls, parsed.errors)
        talk.step(rules)
    return ""


def _tool_results(talk: Conversation, calls: Sequence[ToolCall], problems: Sequence[str]) -> None:
    results = [(c.name, *run_tool(talk.tools, c)) for c in calls]
    results += [("", f"Error: {p}", True) for p in problems]
    talk.calls.extend(calls)
    for k, (name, content, failed) in enumerate(results):
        talk.errors += failed
        call_id = calls[k].id if k < len(calls) and calls[k].id else f"call_{talk.steps}_{k}"
        talk.agent.append({"role": "tool", "name": name, "content": content, "tool_call_id": call_id})
        talk.log.append({"role": "tool", "name": name, "content": content[:REPLY_CHARS], "error": failed})


async def converse(
    policy: Policy, user: UserSimulator, domain: Domain, task: Task, rules: Rules
) -> Conversation:
    """Play one conversation of ``task`` (the agent: ``policy``) on a fresh copy of the domain's database."""
    agent_system = AGENT_SYSTEM.format(agent_instruction=AGENT_INSTRUCTION, domain_policy=domain.policy)
    user_system = USER_SYSTEM.format(guidelines=USER_GUIDELINES, instructions=task.scenario)
    make, schemas = TOOLKITS[domain.name]
    greeting: Message = {"role": "assistant", "content": FIRST_AGENT_MESSAGE}
    talk = Conversation(make(copy.deepcopy(domain.db)), schemas, [greeting], [])
    talk.texts.append(FIRST_AGENT_MESSAGE)
    talk.log.append({"role": "assistant", "content": FIRST_AGENT_MESSAGE, "tool_calls": []})
    message = FIRST_AGENT_MESSAGE
    while talk.termination is None:
        await user_turn(user, user_system, talk, message, rules)
        if talk.termination is None:
            message = await agent_turn(policy, agent_system, talk, rules)
    return talk


def replay_gold(domain: str) -> Replay:
    """How a gold action runs on a database of ``domain`` (``Environment.make_tool_call``; airline and
    retail have no user tools)."""
    make = TOOLKITS[domain][0]

    def replay(db: dict[str, Any], action: Action) -> object:
        if action.requestor != "assistant":
            raise ValueError("User tools not available")
        return make(db).use_tool(action.name, dict(action.arguments))

    return replay


def score(task: Task, talk: Conversation, gold_hash: str) -> Reward:
    """tau2's reward of a finished conversation."""
    termination = talk.termination or "max_steps"
    return evaluate(task, termination, lambda: db_hash(talk.tools.db) == gold_hash, talk.texts, talk.calls)


# -- the suite -------------------------------------------------------------------------------------------------


def _whole_param(opts: EvalOptions, name: str, default: int) -> int:
    raw = opts.params.get(name, default)
    try:
        value = int(raw)
    except (TypeError, ValueError):
        value = 0
    if value < 1:
        raise EvalError(f"{SUITE}: --param {name}= must be a whole number >= 1 (got {raw!r})")
    return value


def rules_of(opts: EvalOptions) -> Rules:
    """The conversation rules of ``opts`` (EvalError for unknown or bad parameters)."""
    user_server(SUITE, opts)
    unknown = sorted(set(opts.params) - _KNOWN_PARAMS - {"preset"})
    if unknown:
        raise EvalError(
            f"{SUITE}: unknown --param {', '.join(unknown)}; known: {', '.join(sorted(_KNOWN_PARAMS))}"
        )
    sampling = opts.sampling()
    return Rules(
        sampling, _whole_param(opts, "max_steps", MAX_STEPS), _whole_param(opts, "max_errors", MAX_ERRORS)
    )


def selected(opts: EvalOptions) -> tuple[Domain, list[Task]]:
    """The domain and its selected, scorable tasks (EvalError when ``--tasks`` names a left-out one)."""
    rules_of(opts)
    domain = load_domain(SUITE, data_path(SUITE, opts), opts.params.get("split"), opts.tasks)
    left_out = dict(domain.left_out)
    asked = sorted(set(opts.tasks) & set(left_out))
    if asked:
        raise EvalError(f"{SUITE}: task {asked[0]} is not scored by this port: {left_out[asked[0]]}")
    tasks = select(SUITE, list(domain.tasks), opts, lambda t: (t.task_id, domain.name))
    return domain, tasks


class Tau2BenchSuite:
    """tau2-bench's airline or retail domain from ``--data`` (see the module docstring)."""

    name = SUITE

    def __init__(self) -> None:
        self._probed: set[UserServer] = set()

    def check(self, opts: EvalOptions) -> None:
        """Read the domain folder and the parameters (EvalError naming the file or parameter); probe the user
        server, when one is given, so that a dead one fails before the policy is loaded."""
        selected(opts)
        server = user_server(SUITE, opts)
        if server is not None and not _loop_running():
            asyncio.run(self._probe(server))

    async def _probe(self, server: UserServer) -> None:
        if server not in self._probed:
            await probe(SUITE, server)
            self._probed.add(server)

    def workload(self, opts: EvalOptions) -> Workload:
        """The selected tasks; tasks left out (NL_ASSERTION / ENV_ASSERTION / initial_state) are counted;
        and who plays the user."""
        domain, tasks = selected(opts)
        cap = f" (--limit {opts.limit})" if opts.limit is not None else ""
        left = f"; {len(domain.left_out)} left out as not scorable here" if domain.left_out else ""
        server = user_server(SUITE, opts)
        user = f"; user simulator: {server.label() if server else POLICY_USER}"
        return Workload.of(
            len(tasks), f"{plural(len(tasks), 'task')} of {domain.name} from --data{cap}{left}{user}", opts
        )

    async def run(self, policy: Policy, opts: EvalOptions, progress: Progress) -> list[ItemResult]:
        """Each task ``opts.episodes`` times; an episode scores tau2's reward (0 or 1)."""
        domain, tasks = selected(opts)
        rules = rules_of(opts)
        server = user_server(SUITE, opts)
        if server is not None:
            await self._probe(server)  # before any conversation (check() could not when a loop was running)
        gold = {t.task_id: gold_db(t, domain.db, replay_gold(domain.name)) for t in tasks}
        jobs = [t for t in tasks for _ in range(opts.episodes)]
        user = make_user(server, policy, rules.sampling, opts)
        try:
            outcomes = await gather_bounded(
                [functools.partial(converse, policy, user, domain, t, rules) for t in jobs],
                opts.concurrency,
                progress,
            )
        finally:
            await user.aclose()
        by_task: dict[str, list[tuple[Conversation, Reward]]] = {}
        for task, talk in zip(jobs, outcomes, strict=True):
            reward = score(task, talk, db_hash(gold[task.task_id][0]))
            by_task.setdefault(task.task_id, []).append((talk, reward))
        who = user.describe()
        return [_result(domain, t, by_task[t.task_id], gold[t.task_id][1], who) for t in tasks]


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _result(
    domain: Domain,
    task: Task,
    episodes: list[tuple[Conversation, Reward]],
    gold_errors: list[str],
    user: dict[str, Any],
) -> ItemResult:
    return ItemResult(
        suite=SUITE,
        item_id=task.task_id,
        category=domain.name,
        scores=tuple(r.reward for _, r in episodes),
        detail={
            "reward_basis": list(task.criteria.reward_basis) if task.criteria else [],
            "gold_action_errors": gold_errors,
            "user_simulator": user,
            "errors": sum(1 for talk, _ in episodes if talk.error),
            "episodes": [
                {
                    "termination": talk.termination,
                    "error": talk.error,
                    "steps": talk.steps,
                    "tool_errors": talk.errors,
                    "reward": reward.to_dict(),
                    "messages": json.loads(json.dumps(talk.log, default=str)),
                }
                for talk, reward in episodes
            ],
        },
    )
