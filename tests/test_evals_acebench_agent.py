"""ACEBench's agent categories: the ported scenarios, execution, ACEBench's scoring, and scored episodes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from eval_policy_double import ReplyPolicy
from spade.config import EvalOptions
from spade.evals.acebench import ACEBenchSuite
from spade.evals.acebench_agent import load_agent, max_turns
from spade.evals.acebench_exec import (
    DecodeError,
    NestedCall,
    Scenario,
    decode,
    end_state_valid,
    execute_step,
    execute_turn,
    process_score,
)
from spade.evals.acebench_scenarios import BaseApi, FoodPlatform, MessageApi, ReminderApi
from spade.evals.acebench_travel import Travel
from spade.evals.base import EvalError, ItemResult
from spade.types import SamplingParams

DATA = Path(__file__).parent / "fixtures" / "benchdata" / "acebench_agent" / "data_en"
ITEMS = ["agent_multi_step_0", "agent_multi_step_4", "agent_multi_turn_0", "agent_multi_turn_20"]
USER_MARK = "You are a user interacting with an agent."


def _fail(message: str) -> dict[str, Any]:
    return {"status": False, "message": message}


def _ok(message: str) -> dict[str, Any]:
    return {"status": True, "message": message}


def _made(cls: Callable[[], Any], config: dict[str, Any]) -> Any:
    instance = cls()
    instance._load_scenario(config)
    return instance


ON = {"wifi": True, "logged_in": True}
OFF = {"wifi": False, "logged_in": False}
# (class, scenario, method, arguments, ACEBench's result), read from ACEBench's scenariosen source.
CASES: list[tuple[Any, dict[str, Any], str, dict[str, Any], Any]] = [
    (BaseApi, OFF, "turn_on_wifi", {}, _ok("Wi-Fi has been turned on")),
    (BaseApi, OFF, "login_device", {}, _ok("Device has been logged in")),
    (MessageApi, ON, "send_message", {"sender_name": "Eve", "receiver_name": "Frank", "message": "hi"},
     _fail("Inbox capacity is full. You need to ask the user which message to delete.")),
    (MessageApi, {"wifi": False}, "send_message", {"sender_name": "Eve", "receiver_name": "Frank", "message": "hi"},
     _fail("Wi-Fi is turned off, cannot send messages at this time")),
    (MessageApi, {"logged_in": False}, "send_message", {"sender_name": "E", "receiver_name": "F", "message": "hi"},
     _fail("Device not logged in, unable to send message")),
    (MessageApi, ON, "delete_message", {"message_id": 3}, _ok("Message ID 3 has been successfully deleted.")),
    (MessageApi, ON, "delete_message", {"message_id": 9}, _fail("Message ID does not exist")),
    (MessageApi, OFF, "delete_message", {"message_id": 3}, _fail("Device not logged in, unable to delete message")),
    (MessageApi, ON, "view_messages_between_users", {"sender_name": "Eve", "receiver_name": "Frank"},
     {"status": True, "messages": [{"id": 1, "sender": "Eve", "receiver": "Frank", "message":
      "Hey Frank, don't forget about our meeting on 2024-06-11 at 4 PM in Conference Room 1."}]}),
    (MessageApi, ON, "view_messages_between_users", {"sender_name": "Frank", "receiver_name": "Eve"},
     _fail("No related message records found")),
    (MessageApi, ON, "view_messages_between_users", {"sender_name": "Zed", "receiver_name": "Eve"},
     _fail("Sender does not exist")),
    (MessageApi, ON, "search_messages", {"user_name": "Isaac", "keyword": "CALL"},
     {"status": True, "messages": [{"id": 5, "sender_id": "USR104", "receiver_id": "USR105",
                                    "message": "Isaac, are you available for a call?"}]}),
    (MessageApi, ON, "search_messages", {"user_name": "Zed", "keyword": "x"}, _fail("User does not exist")),
    (MessageApi, ON, "get_latest_message_id", {},
     {"status": True, "message": "The latest message ID is 4", "message_id": 4}),
    (MessageApi, ON, "get_earliest_message_id", {},
     {"status": True, "message": "The earliest message ID is 3", "message_id": 3}),
    (MessageApi, OFF, "get_earliest_message_id", {},
     _fail("Device not logged in, unable to retrieve the earliest sent message ID.")),
    (MessageApi, ON, "get_all_message_times_with_ids", {},
     {1: "2024-06-09", 2: "2024-03-09", 3: "2023-12-05", 4: "2024-09-09", 5: "2024-06-06", 6: "2024-01-15"}),
    (ReminderApi, ON, "add_reminder", {"title": "T", "description": "D", "time": "2024-07-15 09:30"},
     _ok("Reminder 'T' was successfully added.")),
    (ReminderApi, OFF, "add_reminder", {"title": "T", "description": "D", "time": "x"},
     _fail("Device not logged in. Unable to add a new reminder.")),
    (ReminderApi, ON, "view_reminder_by_title", {"title": "Nope"}, _fail("No reminder found with the title 'Nope'.")),
    (ReminderApi, ON, "delete_reminder", {"reminder_id": 2}, _ok("Reminder ID 2 was successfully deleted.")),
    (ReminderApi, ON, "delete_reminder", {"reminder_id": 1002}, _fail("Reminder ID does not exist.")),
    (FoodPlatform, ON, "login_food_platform", {"username": "Eve", "password": "password123"},
     _ok("User Eve has successfully logged in!")),
    (FoodPlatform, ON, "login_food_platform", {"username": "Eve", "password": "nope"}, _fail("Incorrect password")),
    (FoodPlatform, {"wifi": False}, "login_food_platform", {"username": "Eve", "password": "password123"},
     _fail("Wi-Fi is not enabled, unable to login")),
    (FoodPlatform, ON | {"logged_in_users": ["Eve"]}, "add_food_delivery_order",
     {"username": "Eve", "merchant_name": "Heytea", "items": [{"product": "Cheese Milk Tea", "quantity": 2}]},
     _ok("Food delivery order successfully placed with Heytea. Total amount: 50.0 yuan")),
    (FoodPlatform, ON | {"logged_in_users": ["Jack"]}, "add_food_delivery_order",
     {"username": "Jack", "merchant_name": "Jiutian BBQ", "items": [{"product": "Korean Grilled Beef"}]},
     _fail("Insufficient balance to place the order")),
    (FoodPlatform, ON | {"logged_in_users": ["Eve"]}, "add_food_delivery_order",
     {"username": "Eve", "merchant_name": "Heytea", "items": [{"product": "Cola"}]},
     _fail("Product Cola does not exist in Heytea's menu")),
    (FoodPlatform, ON | {"logged_in_users": ["Eve"]}, "add_food_delivery_order",
     {"username": "Eve", "merchant_name": "Heytea", "items": [{"product": "Cheese Milk Tea", "quantity": 0}]},
     _fail("Invalid quantity 0 for product Cheese Milk Tea")),
    (FoodPlatform, ON, "add_food_delivery_order", {"username": "Eve", "merchant_name": "Heytea", "items": []},
     _fail("User Eve is not logged in to the food platform")),
    (FoodPlatform, ON, "check_balance", {"user_name": "Frank"}, 300.0),
    (FoodPlatform, ON, "check_balance", {"user_name": "Zed"}, 0.0),
    (FoodPlatform, ON, "get_products", {"merchant_name": "Nope"}, _fail("Merchant 'Nope' does not exist")),
    (FoodPlatform, ON, "view_orders", {"user_name": "Eve"}, _fail("User has no order records")),
    (FoodPlatform, ON, "search_orders", {"keyword": "tea"}, _fail("No matching orders found")),
    (FoodPlatform, ON, "view_logged_in_users", {}, _fail("No users are currently logged in to the food platform")),
    (Travel, {}, "get_flight_details", {"origin": "Beijing", "destination": "Xiamen"},
     "There are no direct flights that meet the criteria."),
    (Travel, {}, "get_user_details", {"user_id": "user3", "password": "password789"},
     {"user_name": "Grace", "cash_balance": 1000.0, "bank_balance": 5000.0, "membership_level": "gold"}),
    (Travel, {}, "get_user_details", {"user_id": "user3", "password": "x"},
     {"status": "error", "message": "Incorrect username or password."}),
    (Travel, {}, "get_reservation_details", {},
     {"status": "error", "message": "Please provide a valid reservation ID or user ID"}),
    (Travel, {}, "get_baggage_allowance", {"membership_level": "silver", "cabin_class": "Business Class"}, 3),
    (Travel, {}, "calculate_baggage_fee",
     {"membership_level": "regular", "cabin_class": "Economy Class", "baggage_count": 3}, 100),
    (Travel, {}, "find_transfer_flights",
     {"origin_city": "Beijing", "transfer_city": "Shanghai", "destination_city": "Nanjing"},
     "No connecting flights that meet the criteria were found."),
    (Travel, {}, "reserve_flight", {"user_id": "user3", "password": "password789", "flight_no": "MU1566",
                                    "cabin": "Business Class", "payment_method": "cash", "baggage_count": 1},
     "Your cash balance is insufficient. Please consider using another payment method."),
    (Travel, {}, "reserve_flight", {"user_id": "user2", "password": "password456", "flight_no": "CA1234",
                                    "cabin": "Economy Class", "payment_method": "bank", "baggage_count": 1},
     "Booking successful. Reservation ID: res_5. Total cost: 1200 yuan (including baggage fees)."),
    (Travel, {}, "modify_flight", {"user_id": "user1", "reservation_id": "res_2", "new_flight_no": "CA1234"},
     "Flight change failed: Invalid new flight number or destination does not match."),
    (Travel, {}, "modify_flight", {"user_id": "user1", "reservation_id": "res_2", "new_cabin": "Economy Class"},
     "Cabin change successful. Price difference refunded: 1100."),
    (Travel, {}, "modify_flight", {"user_id": "user2", "reservation_id": "res_1"},
     "Reservation not found or user ID does not match."),
    (Travel, {}, "cancel_reservation", {"user_id": "user1", "reservation_id": "res_1", "reason": "plans"},
     "More than 24 hours before departure. Free cancellation successful, 1200 yuan has been refunded."),
    (Travel, {}, "cancel_reservation", {"user_id": "user9", "reservation_id": "res_1", "reason": "x"},
     "Invalid user ID."),
]  # fmt: skip


@pytest.mark.parametrize(("cls", "config", "method", "kwargs", "expected"), CASES)
def test_scenario_functions_reply_as_acebench(
    cls: Any, config: dict[str, Any], method: str, kwargs: dict[str, Any], expected: Any
) -> None:
    assert getattr(_made(cls, config), method)(**kwargs) == expected


def test_scenario_errors_read_as_pythons_in_acebench() -> None:
    travel = _made(Travel, {})
    with pytest.raises(KeyError, match="membership_level"):  # a wrong password: ACEBench's truthy error dict
        travel.reserve_flight("user1", "bad", "CA1234", "Economy Class", "bank", 1)
    with pytest.raises(TypeError, match="not subscriptable"):  # an unknown flight
        travel.reserve_flight("user1", "password123", "XX1", "Economy Class", "bank", 1)
    messages = _made(MessageApi, ON)
    messages.delete_message(message_id=1)
    messages.send_message(sender_name="Eve", receiver_name="Frank", message="hi")
    with pytest.raises(KeyError, match="time"):  # a sent message has no time in ACEBench
        messages.get_latest_message_id()
    with pytest.raises(
        TypeError, match=r"MessageApi.send_message\(\) missing 1 required positional argument"
    ):
        messages.send_message(sender_name="Eve", receiver_name="Frank")


def test_decoding_follows_acebench() -> None:
    assert decode("[turn_on_wifi()]") == [("turn_on_wifi", {})]
    assert decode(" f(a=1, b=-2)") == [("f", {"a": 1, "b": -2})]  # brackets added, a leading space dropped
    assert decode("[f(x=2*3+1, y=Eve, z=g(), w=a[0])]") == [
        ("f", {"x": 7, "y": "Eve", "z": "g()", "w": "a[0]"})
    ]
    assert decode("[f(x={'g': {'k': 1}})]") == [("f", {"x": NestedCall("g")})]
    assert decode("finish") == []  # a name: no call, but it decodes
    for bad in ("", "[f(x=1)] done", "[f(x=1), 3]", "[f(x={'a': 1})]", "[f(x=lambda: 1)]", "[f(x=2**99)]"):
        with pytest.raises(DecodeError):
            decode(bad)


def test_execution_writes_results_as_acebench() -> None:
    scenario = Scenario(("BaseApi", "MessageApi"), {"BaseApi": {"wifi": False}})
    results = execute_step(scenario, decode("[turn_on_wifi(), nope(), get_latest_message_id(x=1)]"))
    assert results[0] == {"status": True, "message": "Wi-Fi has been turned on"}
    assert results[1] == results[0]  # ACEBench's loop repeats the last result for an unknown name
    assert results[2].startswith(
        "Error during execution: MessageApi.get_latest_message_id() got an unexpected"
    )
    assert scenario.instances["BaseApi"].wifi  # both instances with the method ran it
    assert scenario.instances["MessageApi"].wifi
    assert execute_step(Scenario(("BaseApi",), {}), decode("[nope()]"))[0].startswith(
        "Error during execution: cannot access local variable"
    )
    turn = Scenario(("BaseApi",), {})
    assert execute_turn(turn, decode("[login_device(x=1)]")) == list("Error during execution: {str(e)}")
    assert turn.state() == []  # no execution finished: ACEBench records no end state
    assert execute_turn(turn, decode("[login_device()]")) == [
        {"status": True, "message": "Device has been logged in"}
    ]
    assert turn.state() == [{"BaseApi": {"wifi": False, "logged_in": True}}]


def test_end_state_and_process_scores_as_acebench() -> None:
    truth = [{"BaseApi": {"wifi": True}}, {"MessageApi": {"inbox": {"1": {"m": "a"}}}}]
    assert end_state_valid(
        [{"BaseApi": {"wifi": True}}, {"MessageApi": {"inbox": {"1": {"m": "a"}}}}], truth
    )[0]
    assert not end_state_valid([{"BaseApi": {"wifi": False}}, {"MessageApi": {"inbox": {}}}], truth)[0]
    assert end_state_valid([{"BaseApi": {"wifi": True}}], truth) == (False, ["wrong number of class"])
    # An answer class no end-state class matches keeps the previous verdict (ACEBench's "ReminderAPI").
    assert end_state_valid(
        [{"BaseApi": {"wifi": True}}, {"ReminderApi": {"x": 1}}], [truth[0], {"ReminderAPI": {}}]
    )[0]
    assert process_score(["[a()]", "[x()]", " [c()] "], ["[a()]", "[b()]", "[c()]"]) == 0.333
    assert process_score(["[a()]", "[c()]"], ["[a()]", "[c()]", "[b()]"]) == 0.667
    assert process_score(["[b()]"], [["[a()]"], ["[b()]", "[c()]"]]) == 0.5  # the best of several lists


def test_loading_the_agent_categories_and_selecting_them() -> None:
    step, left = load_agent(
        "agent_multi_step",
        DATA / "data_agent_multi_step.json",
        DATA / "possible_answer/data_agent_multi_step.json",
    )
    assert [i.item_id for i in step] == ITEMS[:2]
    assert left == []
    assert step[1].involved == ("BaseApi", "MessageApi")
    assert step[1].initial_config == {"BaseApi": {"wifi": False, "logged_in": True}}
    assert step[1].functions[0]["name"] == "turn_on_wifi"
    assert len(step[1].mile_stone) == 4
    opts = EvalOptions(params={"data": str(DATA)}, tasks=("agent",))
    assert [i.item_id for i in _suite_items(opts)] == ITEMS
    assert [
        i.item_id for i in _suite_items(EvalOptions(params={"data": str(DATA)}, tasks=("agent_multi_turn",)))
    ] == (ITEMS[2:])
    with pytest.raises(EvalError, match="max_dialog_turns"):
        max_turns(EvalOptions(params={"max_dialog_turns": 0}))


def _suite_items(opts: EvalOptions) -> list[Any]:
    from spade.evals.acebench import load_items  # noqa: PLC0415 - beside the suite's own test above

    return load_items(opts).items


def test_items_acebench_could_not_run_are_left_out_with_a_reason(tmp_path: Path) -> None:
    (tmp_path / "possible_answer").mkdir()
    records = [json.loads(line) for line in (DATA / "data_agent_multi_turn.json").read_text().splitlines()]
    records[0]["involved_classes"] = ["Finance"]
    records[1]["involved_classes"] = ["MessageApi"]
    (tmp_path / "data_agent_multi_turn.json").write_text("".join(json.dumps(r) + "\n" for r in records))
    answers = (DATA / "possible_answer" / "data_agent_multi_turn.json").read_text()
    (tmp_path / "possible_answer" / "data_agent_multi_turn.json").write_text(answers)
    work = ACEBenchSuite().workload(EvalOptions(params={"data": str(tmp_path)}))
    assert work.items == 0
    assert "left out agent_multi_turn_0: involved class Finance has no English scenario" in work.counted
    assert "left out agent_multi_turn_20: no user-simulator prompt" in work.counted


def _scripted(agent_lines: list[str], user_lines: list[str]) -> ReplyPolicy:
    agent: Iterator[str] = iter(agent_lines)
    user: Iterator[str] = iter(user_lines)
    return ReplyPolicy(
        lambda prompt: next(user, "finish conversation") if USER_MARK in prompt else next(agent)
    )


def _run(policy: ReplyPolicy, task: str) -> ItemResult:
    opts = EvalOptions(params={"data": str(DATA)}, tasks=(task,))
    suite = ACEBenchSuite()
    suite.check(opts)
    (result,) = asyncio.run(suite.run(policy, opts, lambda d, t: None))
    return result


SEND = "[send_message(sender_name='Eve', receiver_name='Frank', message=\"Don't forget tomorrow afternoon's meeting\")]"


def test_multi_step_gold_calls_score_one_and_a_wrong_call_zero() -> None:
    gold = ["[turn_on_wifi()]", "[get_latest_message_id()]", "[delete_message(message_id=4)]", SEND]
    right = _run(_scripted([*gold, "finish conversation"], []), "agent_multi_step_4")
    assert right.scores == (1.0,), right.detail["episodes"][0]["errors"]
    assert right.detail["process"] == [1.0]
    assert right.detail["episodes"][0]["sent"] == gold
    wrong = _run(_scripted([SEND, "finish conversation"], []), "agent_multi_step_4")  # Wi-Fi is off
    assert wrong.scores == (0.0,)
    assert wrong.detail["process"] == [0.0]
    assert "Wi-Fi is turned off" in str(wrong.detail["episodes"][0]["log"])
    pizza = (
        "[add_food_delivery_order(username='Eve', merchant_name=\"Domino's\", "
        "items=[{'product': 'Super Supreme Pizza'}])]"
    )
    food = ["[login_food_platform(username='Eve', password='password123')]", pizza, "finish conversation"]
    assert _run(_scripted(food, []), "agent_multi_step_0").scores == (
        1.0,
    )  # its ReminderAPI is never compared


def test_multi_turn_gold_calls_score_one_and_a_wrong_call_zero() -> None:
    send = (
        "[send_message(sender_name='Grace', receiver_name='Frank', "
        "message='Are you free tomorrow to have lunch with me?')]"
    )
    gold = ["[turn_on_wifi()]", "[get_earliest_message_id()]", "[delete_message(message_id=3)]", send]
    user = ["I want to send Frank a message.", "finish conversation"]
    right = _run(_scripted([*gold, "Sent."], user), "agent_multi_turn_0")
    assert right.scores == (1.0,), right.detail["episodes"][0]["errors"]
    assert right.detail["user_simulator"] == {"kind": "policy"}
    log = right.detail["episodes"][0]["log"]
    assert [m["recipient"] for m in log[:3]] == ["agent", "execution", "agent"]
    assert log[-1] == {"sender": "user", "recipient": "agent", "message": "finish conversation"}
    wrong = _run(
        _scripted(["[turn_on_wifi()]", send, "Sent."], user), "agent_multi_turn_0"
    )  # the inbox is full
    assert wrong.scores == (0.0,)
    assert wrong.detail["process"] == [0.25]
    book = (
        "[reserve_flight(user_id='user2', password='password456', flight_no='CA1234', cabin='Economy Class', "
        "payment_method='bank', baggage_count=1)]"
    )
    assert _run(_scripted([book, "Booked."], ["Book a flight."]), "agent_multi_turn_20").scores == (1.0,)


def test_spade_eval_acebench_agent_from_the_command_line(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable, "-m", "spade.cli", "eval", "acebench:agent", "--data", str(DATA), "--model.backend",
            "scripted", "--json", "--out", str(tmp_path / "r"), "--param", "max_dialog_turns=4",
        ],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    last = json.loads(out.stdout.strip().splitlines()[-1])
    assert (last["suite"], last["n"], last["score"]) == (
        "acebench",
        4,
        0.0,
    )  # the scripted model calls no API
    assert set(last["by_category"]) == {"agent_multi_step", "agent_multi_turn"}
    assert last["measures"]["process"]["items"] == 4  # ACEBench's process accuracy beside its end state


class _Recorder:
    """A served-user stand-in: records the messages it is sent."""

    def __init__(self) -> None:
        self.sent: list[list[dict[str, Any]]] = []

    async def reply(self, messages: list[dict[str, Any]]) -> tuple[str, str | None]:
        self.sent.append([dict(m) for m in messages])
        return "user line", None

    def describe(self) -> dict[str, Any]:
        return {"kind": "server"}

    async def aclose(self) -> None:
        """Nothing held."""


def test_a_served_user_gets_acebenchs_messages_and_the_policy_its_own_turns_as_assistant() -> None:
    from spade.evals.acebench_agent import _User, prompts  # noqa: PLC0415 - the conversation's private helper
    from spade.evals.tau2_user import PolicyUser  # noqa: PLC0415 - only this test builds one

    (item,) = [i for i in _suite_items(EvalOptions(params={"data": str(DATA)})) if i.item_id == ITEMS[2]]
    served = _Recorder()
    user = _User(served, item)
    asyncio.run(user.respond(None))
    asyncio.run(user.respond("agent:Which message?"))
    assert [m["role"] for m in served.sent[-1]] == ["system", "user", "system", "user"]
    assert served.sent[-1][0]["content"] == prompts()["user_base"].format(instruction=item.question)
    assert served.sent[-1][1]["content"] == "Is there anything you need help with today?"
    assert served.sent[-1][3]["content"] == "Which message?"  # ACEBench's remove_prefix
    policy = ReplyPolicy(lambda prompt: "user line")
    as_policy = _User(PolicyUser(policy, SamplingParams()), item)
    asyncio.run(as_policy.respond(None))
    asyncio.run(as_policy.respond("Which message?"))
    assert [m["role"] for m in as_policy.messages] == ["system", "user", "system", "user", "system"]
    assert "<|assistant|>user line\n<|user|>Which message?" in policy.prompts[-1]  # its own turn as assistant
