"""tau2-bench's airline domain from a local copy: the ported tools, the reward bases, the conversation loop.

A scripted policy plays both sides: prompts holding ``<scenario>`` are the user simulator's, the others the
agent's; each side's script is indexed by the task's marker (``TASK-n``) and by how many replies that side
has already given in the rendered conversation.
"""

from __future__ import annotations

import asyncio
import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from eval_policy_double import ReplyPolicy
from spade.config import EvalOptions
from spade.evals.base import EvalError, ItemResult
from spade.evals.registry import DATA_SUITES, make_suite
from spade.evals.tau2 import Tau2BenchSuite, replay_gold, run_tool
from spade.evals.tau2_airline import AirlineTools, db_hash
from spade.evals.tau2_data import load_domain
from spade.evals.tau2_eval import gold_db
from spade.types import ToolCall

DATA = Path(__file__).parent / "fixtures" / "tau2" / "airline"
Scripts = dict[str, list[str]]


def call(name: str, **arguments: Any) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


USER: Scripts = {
    "TASK-0": [
        "Hi, I'm Emma Kim, user id emma_kim_9957. TASK-0: please cancel EHGLP3.",
        "Yes.",
        "Thanks! ###STOP###",
    ],
    "TASK-1": ["TASK-1: how much is left on my gift card? I'm emma_kim_9957.", "Great, bye. ###STOP###"],
    "TASK-2": ["TASK-2: add one checked bag to Q69X3R, user raj_sanchez_7340.", "Yes.", "Thanks. ###STOP###"],
}
BAG = {
    "reservation_id": "Q69X3R",
    "total_baggages": 1,
    "nonfree_baggages": 1,
    "payment_id": "credit_card_3333333",
}
RIGHT: Scripts = {
    "TASK-0": [
        call("get_reservation_details", reservation_id="EHGLP3"),
        "EHGLP3 is insured, so it can be cancelled with a full refund. Shall I cancel it (yes/no)?",
        call("cancel_reservation", reservation_id="EHGLP3"),
        "Done: EHGLP3 is cancelled and 200 dollars go back to your card.",
    ],
    "TASK-1": [
        call("get_user_details", user_id="emma_kim_9957"),
        "Your gift card gift_card_2222222 has $300.00 left.",
    ],
    "TASK-2": [
        call("get_reservation_details", reservation_id="Q69X3R"),
        "One extra bag costs 50 dollars on credit_card_3333333. Proceed (yes/no)?",
        call("update_reservation_baggages", **BAG),
        "The bag is added.",
    ],
}
WRONG: Scripts = {
    # says it cancelled, never calls the tool: the database differs from the gold one
    "TASK-0": ["Shall I cancel EHGLP3 (yes/no)?", "Done, EHGLP3 is cancelled."],
    # a wrong balance: COMMUNICATE fails (the database is untouched)
    "TASK-1": [call("get_user_details", user_id="emma_kim_9957"), "Your gift card has $250 left."],
    # two paid bags: both DB and ACTION fail
    "TASK-2": [
        call("get_reservation_details", reservation_id="Q69X3R"),
        "Two bags, 100 dollars. Proceed (yes/no)?",
        call("update_reservation_baggages", **{**BAG, "total_baggages": 2, "nonfree_baggages": 2}),
        "Added.",
    ],
}


def scripted(agent: Scripts, user: Scripts = USER) -> ReplyPolicy:
    def answer(prompt: str) -> str:
        marker = next(m for m in (*agent, *user) if m in prompt)
        if "<scenario>" in prompt:  # the user simulator: its own turns are rendered as the assistant's
            return user[marker][prompt.count("<|assistant|>") - 1]
        done = prompt.count("<|assistant|>") - 2  # the greeting and the generation prompt
        return agent[marker][done] if done < len(agent[marker]) else "Anything else?"

    return ReplyPolicy(answer)


def _opts(**kw: Any) -> EvalOptions:
    params = {"data": str(DATA), **kw.pop("params", {})}
    return EvalOptions(**{"params": params, "concurrency": 3, **kw})


def _run(policy: ReplyPolicy, **kw: Any) -> dict[str, ItemResult]:
    suite, opts = Tau2BenchSuite(), _opts(**kw)
    suite.check(opts)
    results = asyncio.run(suite.run(policy, opts, lambda d, t: None))
    return {r.item_id: r for r in results}


def _reward(result: ItemResult) -> dict[str, Any]:
    reward: dict[str, Any] = result.detail["episodes"][0]["reward"]
    return reward


def test_right_trajectories_score_one() -> None:
    results = _run(scripted(RIGHT))
    assert sorted(results) == ["0", "1", "2"]  # task 3 (NL_ASSERTION) is left out
    assert all(r.scores == (1.0,) for r in results.values()), {k: _reward(r) for k, r in results.items()}
    assert _reward(results["0"])["breakdown"] == {"DB": 1.0, "COMMUNICATE": 1.0}
    assert _reward(results["2"])["breakdown"] == {"DB": 1.0, "ACTION": 1.0}
    assert _reward(results["2"])["actions"] == [True, True]
    episode = results["0"].detail["episodes"][0]
    assert episode["termination"] == "user_stop"
    assert [m["role"] for m in episode["messages"]][:4] == ["assistant", "user", "assistant", "tool"]
    assert json.loads(episode["messages"][3]["content"])["reservation_id"] == "EHGLP3"


def test_wrong_trajectories_score_zero_by_the_failing_basis() -> None:
    results = _run(scripted(WRONG))
    assert all(r.scores == (0.0,) for r in results.values())
    assert _reward(results["0"])["breakdown"] == {"DB": 0.0, "COMMUNICATE": 1.0}
    assert _reward(results["1"])["breakdown"] == {"DB": 1.0, "COMMUNICATE": 0.0}
    assert _reward(results["2"])["breakdown"] == {"DB": 0.0, "ACTION": 0.0}
    assert _reward(results["2"])["actions"] == [True, False]


def test_action_basis_needs_the_gold_calls_even_when_the_db_matches() -> None:
    skipped_lookup = {"TASK-2": [RIGHT["TASK-2"][1], call("update_reservation_baggages", **BAG), "Added."]}
    result = _run(scripted(skipped_lookup), tasks=("2",))["2"]
    assert result.scores == (0.0,)
    assert _reward(result)["breakdown"] == {"DB": 1.0, "ACTION": 0.0}


def test_db_check_replays_the_gold_actions_on_a_fresh_db() -> None:
    domain = load_domain("tau2_bench", DATA)
    task = domain.tasks[0]
    gold, errors = gold_db(task, domain.db, replay_gold)
    assert errors == []
    assert gold["reservations"]["EHGLP3"]["status"] == "cancelled"
    assert domain.db["reservations"]["EHGLP3"]["status"] is None  # the loaded copy is never touched
    live = AirlineTools(copy.deepcopy(domain.db))
    live.use_tool("get_user_details", {"user_id": "emma_kim_9957"})  # reads change nothing
    assert db_hash(live.db) == db_hash(domain.db) != db_hash(gold)
    live.use_tool("cancel_reservation", {"reservation_id": "EHGLP3"})
    assert db_hash(live.db) == db_hash(gold)


def test_the_users_stop_token_ends_the_episode() -> None:
    policy = scripted(RIGHT, {**USER, "TASK-1": ["TASK-1: never mind. ###STOP###"]})
    result = _run(policy, tasks=("1",))["1"]
    episode = result.detail["episodes"][0]
    assert episode["termination"] == "user_stop"
    assert episode["steps"] == 1
    assert not any("<scenario>" not in p for p in policy.prompts)  # the agent was never asked
    assert result.scores == (0.0,)  # the balance was never communicated
    assert _reward(result)["breakdown"] == {"DB": 1.0, "COMMUNICATE": 0.0}


def test_step_and_error_limits_end_the_episode_unscored() -> None:
    # task 1 has communicated the balance by step 4 (user, tool call, tool result, answer), which is the cap:
    # ended by the limit and not by the user, the conversation scores 0 (tau2: terminated prematurely)
    cut = _run(scripted(RIGHT), tasks=("1",), params={"max_steps": 4})["1"]
    assert cut.detail["episodes"][0]["termination"] == "max_steps"
    assert cut.detail["episodes"][0]["messages"][-1]["content"] == RIGHT["TASK-1"][1]
    assert cut.scores == (0.0,)
    assert "terminated prematurely" in _reward(cut)["note"]
    # the stop comes at step 5; as in tau2 the limit is checked after it and wins when reached (5), not at 6
    assert _run(scripted(RIGHT), tasks=("1",), params={"max_steps": 5})["1"].scores == (0.0,)
    assert _run(scripted(RIGHT), tasks=("1",), params={"max_steps": 6})["1"].scores == (1.0,)
    flailing = {"TASK-1": [call("no_such_tool")] * 5 + ["<tool_call>{oops</tool_call>"] * 5}
    failed = _run(scripted(flailing), tasks=("1",), params={"max_errors": 3})["1"]
    episode = failed.detail["episodes"][0]
    assert (episode["termination"], episode["tool_errors"], failed.scores) == ("too_many_errors", 3, (0.0,))
    assert episode["messages"][3]["content"].startswith("Error: ")


def test_selection_splits_and_the_workload_count() -> None:
    assert isinstance(make_suite("tau2_bench"), Tau2BenchSuite)
    assert "tau2_bench" in DATA_SUITES
    suite = Tau2BenchSuite()
    line = suite.workload(_opts()).counted
    assert line == "3 tasks of airline from --data; 1 left out as not scorable here"
    assert sorted(_run(scripted(RIGHT), params={"split": "train"})) == ["0", "1"]
    assert sorted(_run(scripted(RIGHT), tasks=("2",))) == ["2"]
    with pytest.raises(
        EvalError, match="task 3 is not scored by this port: its reward_basis holds NL_ASSERTION"
    ):
        suite.check(_opts(tasks=("3",)))
    with pytest.raises(EvalError, match="unknown --param judge"):
        suite.check(_opts(params={"judge": "x"}))


def test_ported_tool_rules() -> None:
    tools = AirlineTools(copy.deepcopy(load_domain("tau2_bench", DATA).db))
    flights = [
        {"flight_number": "HAT002", "date": "2024-05-20"},
        {"flight_number": "HAT003", "date": "2024-05-20"},
    ]
    people = [{"first_name": "Emma", "last_name": "Kim", "dob": "1990-04-05", "extra": "dropped"}]
    booking = {
        "user_id": "emma_kim_9957", "origin": "JFK", "destination": "LAX", "flight_type": "one_way",
        "cabin": "economy", "flights": flights, "passengers": people, "total_baggages": 1,
        "nonfree_baggages": 1, "insurance": "yes",
    }  # fmt: skip
    underpaid = [{"payment_id": "gift_card_2222222", "amount": 100}]
    short = run_tool(tools, ToolCall("book_reservation", {**booking, "payment_methods": underpaid}))
    assert short == ("Error: Payment amount does not add up, total price is 310, but paid 100", True)
    paid = [
        {"payment_id": "gift_card_2222222", "amount": 300.0},
        {"payment_id": "credit_card_1111111", "amount": "10"},
    ]
    made = tools.use_tool("book_reservation", {**booking, "payment_methods": paid})
    assert made["reservation_id"] == "HATHAT"
    assert made["passengers"] == [{"first_name": "Emma", "last_name": "Kim", "dob": "1990-04-05"}]
    assert made["payment_history"] == [
        {"payment_id": "gift_card_2222222", "amount": 300},
        {"payment_id": "credit_card_1111111", "amount": 10},
    ]
    assert tools.db["users"]["emma_kim_9957"]["payment_methods"]["gift_card_2222222"]["amount"] == 0.0
    assert tools.db["users"]["emma_kim_9957"]["reservations"] == ["EHGLP3", "HATHAT"]
    assert tools.db["flights"]["HAT002"]["dates"]["2024-05-20"]["available_seats"]["economy"] == 4
    pairs = tools.use_tool(
        "search_onestop_flight", {"origin": "JFK", "destination": "LAX", "date": "2024-05-20"}
    )
    assert [[f["flight_number"] for f in p] for p in pairs] == [["HAT002", "HAT003"]]
    assert run_tool(tools, ToolCall("calculate", {"expression": "(200 + 110) * 2 / 3"})) == ("206.67", False)
    assert run_tool(tools, ToolCall("calculate", {"expression": "9 ** 9 ** 9"}))[1] is True
    assert run_tool(
        tools, ToolCall("get_flight_status", {"flight_number": "HAT001", "date": "2024-05-10"})
    ) == (
        "landed",
        False,
    )
    assert run_tool(tools, ToolCall("nope", {})) == ("Error: Tool 'nope' not found.", True)


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "airline"
    shutil.copytree(DATA, folder)
    return folder


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda f: (f / "db.json").write_text("{not json"), r"cannot read .*airline/db\.json"),
        (
            lambda f: (f / "db.json").write_text('{"flights": {}, "users": []}'),
            r"db\.json has no 'users' object",
        ),
        (
            lambda f: (f / "tasks.json").write_text('[{"id": "9"}]'),
            r"tasks\.json task 0: task\.user_scenario is",
        ),
        (lambda f: (f / "tasks.json").write_text('{"id": "9"}'), r"tasks\.json is not a JSON list of tasks"),
        (lambda f: (f / "policy.md").unlink(), r"airline has no policy\.md"),
        (
            lambda f: (f / "split_tasks.json").write_text('{"base": "0"}'),
            r"split_tasks\.json is not an object",
        ),
    ],
)
def test_malformed_files_are_one_clear_error(tmp_path: Path, damage: Any, message: str) -> None:
    folder = _copy(tmp_path)
    damage(folder)
    with pytest.raises(EvalError, match=message) as caught:
        Tau2BenchSuite().check(_opts(params={"data": str(folder)}))
    assert "\n" not in str(caught.value)


def test_data_path_forms(tmp_path: Path) -> None:
    domains = tmp_path / "domains"
    shutil.copytree(DATA, domains / "airline")
    assert sorted(_run(scripted(RIGHT), params={"data": str(domains)})) == ["0", "1", "2"]
    shutil.copytree(DATA, tmp_path / "retail")
    with pytest.raises(EvalError, match="not a tau2-bench domain folder of a ported domain"):
        Tau2BenchSuite().check(_opts(params={"data": str(tmp_path / "retail")}))
    with pytest.raises(EvalError, match="pass --data PATH"):
        Tau2BenchSuite().check(EvalOptions())
