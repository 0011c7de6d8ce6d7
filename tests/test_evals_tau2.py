"""tau2-bench's airline domain from a local copy: the ported tools, the reward bases, the conversation loop.

A scripted policy plays both sides: prompts holding ``<scenario>`` are the user simulator's, the others the
agent's; each side's script is indexed by the task's marker (``TASK-n``) and by how many replies that side
has already given in the rendered conversation. With ``--param user_base_url=`` the user is a loopback
OpenAI-compatible server in a thread (``fake_user_server``), scripted the same way and recording requests.
"""

from __future__ import annotations

import asyncio
import copy
import json
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from eval_policy_double import ReplyPolicy
from spade.backends.vllm_server import free_port
from spade.config import EvalOptions
from spade.evals.base import EvalError, ItemResult
from spade.evals.registry import DATA_SUITES, make_suite
from spade.evals.tau2 import FIRST_AGENT_MESSAGE, Tau2BenchSuite, replay_gold, run_tool
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
    assert results["0"].detail["user_simulator"] == {"kind": "policy"}


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
    gold, errors = gold_db(task, domain.db, replay_gold("airline"))
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
    assert line == (
        "3 tasks of airline from --data; 1 left out as not scorable here; user simulator: the policy under test"
    )
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
    bags = tools.use_tool("update_reservation_baggages", {**BAG, "total_baggages": 3, "nonfree_baggages": 2})
    assert bags["payment_history"][1:] == [{"payment_id": "credit_card_3333333", "amount": 100}]  # $50 a bag
    same = tools.use_tool("update_reservation_baggages", {**BAG, "total_baggages": 3, "nonfree_baggages": 2})
    assert len(same["payment_history"]) == 2  # nothing added: nothing charged


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
    shutil.copytree(DATA, tmp_path / "banking_knowledge")
    with pytest.raises(EvalError, match="not a tau2-bench domain folder of a ported domain"):
        Tau2BenchSuite().check(_opts(params={"data": str(tmp_path / "banking_knowledge")}))
    with pytest.raises(EvalError, match="pass --data PATH"):
        Tau2BenchSuite().check(EvalOptions())


# -- a separate user model on an OpenAI-compatible server ------------------------------------------------------

Request = dict[str, Any]


@contextmanager
def fake_user_server(answer: Callable[[list[Request]], str]) -> Iterator[tuple[str, list[Request]]]:
    """A loopback OpenAI-compatible server in a thread: ``/chat/completions`` answers ``answer(messages)``;
    yields (base URL, the requests it took, each with its Authorization header)."""
    requests: list[Request] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            del format, args

        def _send(self, data: dict[str, Any]) -> None:
            body = json.dumps(data).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._send({"data": [{"id": "fake-user"}]})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            requests.append({**body, "path": self.path, "authorization": self.headers.get("Authorization")})
            message = {"role": "assistant", "content": answer(body["messages"])}
            self._send({"choices": [{"index": 0, "finish_reason": "stop", "message": message}]})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", requests
    finally:
        server.shutdown()
        server.server_close()


SERVER_USER: Scripts = {
    "TASK-0": ["[server] TASK-0: cancel EHGLP3, emma_kim_9957", "[server] yes", "[server] ###STOP###"],
    "TASK-1": ["[server] TASK-1: gift card balance? emma_kim_9957", "[server] bye ###STOP###"],
    "TASK-2": ["[server] TASK-2: a bag on Q69X3R, raj_sanchez_7340", "[server] yes", "[server] ###STOP###"],
}
DEAD = {"user_base_url": "http://127.0.0.1:9/v1", "user_model": "m"}


def server_user(messages: list[Request]) -> str:
    """The scripted user model: the probe gets 'ok'; a conversation, its task's next line."""
    if messages[0]["role"] != "system":
        return "ok"
    assert "<scenario>" in messages[0]["content"]
    marker = next(m for m in SERVER_USER if m in messages[0]["content"])
    return SERVER_USER[marker][sum(1 for m in messages if m["role"] == "assistant")]


def _user_params(url: str, **more: str) -> dict[str, str]:
    return {"user_base_url": url, "user_model": "fake-user-model", **more}


@pytest.mark.timeout(60)
def test_a_user_server_plays_the_user_and_the_policy_the_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAU2_TEST_USER_KEY", "sekret")
    policy = scripted(RIGHT)  # its own user lines (USER) would show if it were asked to play the user
    with fake_user_server(server_user) as (url, requests):
        params = _user_params(url, user_api_key_env="TAU2_TEST_USER_KEY")
        line = Tau2BenchSuite().workload(_opts(params=params)).counted
        results = _run(policy, params=params)
    assert line.endswith(f"; user simulator: fake-user-model at {url} (temperature 0)")
    assert all(r.scores == (1.0,) for r in results.values()), {k: _reward(r) for k, r in results.items()}
    # (1) the user's turns are the server's, and the policy never rendered a user-simulator prompt
    for task_id, result in results.items():
        said = [m["content"] for m in result.detail["episodes"][0]["messages"] if m["role"] == "user"]
        assert said == SERVER_USER[f"TASK-{task_id}"]
        assert result.detail["user_simulator"] == {
            "kind": "server", "model": "fake-user-model", "base_url": url, "temperature": 0.0,
            "api_key_env": "TAU2_TEST_USER_KEY",
        }  # fmt: skip
    assert policy.prompts
    assert not any("<scenario>" in p for p in policy.prompts)
    probe, *turns = requests
    assert probe["messages"] == [{"role": "user", "content": "Hi"}]
    assert probe["max_tokens"] == 1
    assert len(turns) == sum(len(v) for v in SERVER_USER.values())
    for sent in requests:
        assert (sent["path"], sent["model"], sent["authorization"]) == (
            "/v1/chat/completions", "fake-user-model", "Bearer sekret",
        )  # fmt: skip
    for sent in turns:  # roles flipped: the agent's greeting is the user model's "user" message; no tools
        assert sent["messages"][1] == {"role": "user", "content": FIRST_AGENT_MESSAGE}
        assert sent["temperature"] == 0.0
        assert "tools" not in sent
    # (2) the agent's side is the policy's script, tool calls included
    agent = [m for m in results["2"].detail["episodes"][0]["messages"] if m["role"] == "assistant"]
    assert [m["tool_calls"][0]["name"] for m in agent if m["tool_calls"]] == [
        "get_reservation_details",
        "update_reservation_baggages",
    ]
    assert agent[-1]["content"] == RIGHT["TASK-2"][-1]


@pytest.mark.timeout(60)
def test_user_temperature_reaches_the_user_server() -> None:
    with fake_user_server(server_user) as (url, requests):
        result = _run(scripted(RIGHT), tasks=("1",), params=_user_params(url, user_temperature="0.7"))["1"]
    assert result.scores == (1.0,)
    assert [r["temperature"] for r in requests] == [0.0, 0.7, 0.7]  # the probe is greedy


@pytest.mark.timeout(60)
def test_an_unreachable_user_server_is_one_line_before_any_conversation() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    opts = _opts(params=_user_params(url))
    with pytest.raises(
        EvalError, match=r"the user simulator cannot answer \(fake-user-model at .*ConnectError"
    ):
        Tau2BenchSuite().check(opts)
    policy = scripted(RIGHT)
    with pytest.raises(EvalError, match="the user simulator cannot answer") as caught:
        asyncio.run(Tau2BenchSuite().run(policy, opts, lambda d, t: None))  # run() probes without check()
    assert "\n" not in str(caught.value)
    assert url in str(caught.value)
    assert policy.prompts == []  # no episode started


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"user_model": "m"}, r"--param user_model needs --param user_base_url="),
        ({"user_base_url": DEAD["user_base_url"]}, r"needs --param user_model=NAME"),
        ({"user_base_url": "ftp://x", "user_model": "m"}, r"is not an http\(s\) URL"),
        ({"user_api_key": "sk-123"}, r"no API key on the command line"),
        ({**DEAD, "user_temperature": "hot"}, r"user_temperature= must be a number >= 0"),
        (
            {**DEAD, "user_api_key_env": "TAU2_UNSET_KEY"},
            r"variable TAU2_UNSET_KEY \(--param user_api_key_env\)",
        ),
    ],
)
def test_bad_user_params_are_one_clear_error(
    params: dict[str, str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TAU2_UNSET_KEY", raising=False)
    with pytest.raises(EvalError, match=message):
        Tau2BenchSuite().check(_opts(params=params))
