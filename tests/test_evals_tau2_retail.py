"""tau2-bench's retail domain from a local copy: loading, the ported tools against tau2's behaviour, scoring.

The fixture (``fixtures/tau2/retail``) is cut from tau2-bench's ``data/tau2/domains/retail`` (commit a2c0247):
three users with all their orders, the products those orders and the gold actions touch (variants trimmed),
and tasks 18, 24, 34 and 69 as published. The expected tool results and error messages are what tau2's
``RetailTools`` returns for the same calls on the same data (checked once against tau2's code; every call
left the same database hash). The scripted policy of ``test_evals_tau2`` plays both sides; each task's
marker is the zip code its scenario and its user's first line share.
"""

from __future__ import annotations

import asyncio
import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from spade.config import EvalOptions
from spade.evals.base import EvalError, ItemResult
from spade.evals.tau2 import Tau2BenchSuite, replay_gold, run_tool
from spade.evals.tau2_airline import db_hash
from spade.evals.tau2_data import load_domain
from spade.evals.tau2_eval import gold_db
from spade.evals.tau2_retail import RetailTools
from spade.types import ToolCall
from test_evals_tau2 import DATA as AIRLINE
from test_evals_tau2 import Scripts, call, scripted

DATA = Path(__file__).parent / "fixtures" / "tau2" / "retail"

USER: Scripts = {
    "80217": [
        "I'm Mei Davis, zip 80217. My office chair came broken.",
        "Yes, exchange it.",
        "Thanks ###STOP###",
    ],
    "10108": ["Noah Patel here, zip 10108. Ship order #W1845024 elsewhere.", "Yes.", "Bye ###STOP###"],
    "10192": ["I'm emma_smith_8564, zip 10192: cancel my laptop order.", "Yes.", "Thank you ###STOP###"],
}
EXCHANGE = {
    "order_id": "#W2890441",
    "item_ids": ["8069050545"],
    "new_item_ids": ["1071497737"],
    "payment_method_id": "credit_card_1061405",
}
ADDRESS = {
    "order_id": "#W1845024", "address1": "224 Elm Street", "address2": "Suite 491", "city": "New York",
    "country": "USA", "state": "NY", "zip": "10108",
}  # fmt: skip
RIGHT: Scripts = {
    "80217": [
        call("find_user_id_by_name_zip", first_name="Mei", last_name="Davis", zip="80217"),
        call("get_order_details", order_id="#W2890441"),
        "I can exchange the blue chair for the gray leather one with fixed armrests; $15.33 back. Proceed?",
        call("exchange_delivered_order_items", **EXCHANGE),
        "The exchange is requested.",
    ],
    "10108": [
        call("find_user_id_by_name_zip", first_name="Noah", last_name="Patel", zip="10108"),
        "New address: 224 Elm Street, Suite 491, New York, NY 10108, USA. Confirm (yes/no)?",
        call("modify_pending_order_address", **ADDRESS),
        "Done.",
    ],
    "10192": [
        call("get_order_details", order_id="#W2417020"),
        "Cancel #W2417020 (no longer needed) with $2674.40 back on your gift card?",
        call("cancel_pending_order", order_id="#W2417020", reason="no longer needed"),
        "Cancelled; the gift card balance is now $2736.40.",
    ],
}
HOME = {k: v for k, v in ADDRESS.items() if k != "order_id"}
WRONG: Scripts = {
    # the available blue fabric chair instead of the gray leather one the user asked for
    "80217": [
        RIGHT["80217"][2],
        call("exchange_delivered_order_items", **{**EXCHANGE, "new_item_ids": ["1793929609"]}),
        "Ok.",
    ],
    # the address goes on the user's profile, not on the order
    "10108": [RIGHT["10108"][1], call("modify_user_address", user_id="noah_patel_6952", **HOME), "Ok."],
    # the wrong cancellation reason
    "10192": [
        RIGHT["10192"][1],
        call("cancel_pending_order", order_id="#W2417020", reason="ordered by mistake"),
        "Ok.",
    ],
}


def _opts(**kw: Any) -> EvalOptions:
    params = {"data": str(DATA), **kw.pop("params", {})}
    return EvalOptions(**{"params": params, "concurrency": 3, **kw})


def _run(agent: Scripts, **kw: Any) -> dict[str, ItemResult]:
    suite, opts = Tau2BenchSuite(), _opts(**kw)
    suite.check(opts)
    results = asyncio.run(suite.run(scripted(agent, USER), opts, lambda d, t: None))
    return {r.item_id: r for r in results}


def _tools() -> RetailTools:
    return RetailTools(copy.deepcopy(load_domain("tau2_bench", DATA).db))


def _ok(tools: RetailTools, name: str, **arguments: Any) -> Any:
    content, failed = run_tool(tools, ToolCall(name, arguments))
    assert not failed, content
    return json.loads(content) if content[:1] in "{[" else content


def _error(tools: RetailTools, name: str, **arguments: Any) -> str:
    before = db_hash(tools.db)
    content, failed = run_tool(tools, ToolCall(name, arguments))
    assert failed, content
    assert db_hash(tools.db) == before  # a refused call changes nothing
    return content


def test_loading_normalises_as_retaildb() -> None:
    domain = load_domain("tau2_bench", DATA)
    assert domain.name == "retail"
    assert [t.task_id for t in domain.tasks] == ["18", "34", "69"]
    assert domain.left_out == (
        ("24", "its reward_basis holds NL_ASSERTION (not scored here: needs an LLM judge or assertions)"),
    )
    order = domain.db["orders"]["#W2890441"]
    assert (order["cancel_reason"], order["return_items"]) == (None, None)  # Order's defaults
    assert domain.db["users"]["emma_smith_8564"]["payment_methods"]["gift_card_8541487"]["balance"] == 62.0
    assert "Retail agent policy" in domain.policy


def test_right_actions_score_one_and_wrong_ones_zero() -> None:
    right = _run(RIGHT)
    assert sorted(right) == ["18", "34", "69"]
    for task_id, result in right.items():
        reward = result.detail["episodes"][0]["reward"]
        assert result.scores == (1.0,), (task_id, reward, result.detail["episodes"][0]["messages"])
        assert result.category == "retail"
    assert right["69"].detail["episodes"][0]["reward"]["breakdown"] == {"DB": 1.0, "NL_ASSERTION": 1.0}
    assert right["34"].detail["episodes"][0]["reward"]["breakdown"] == {"DB": 1.0}
    wrong = _run(WRONG)
    for task_id, result in wrong.items():
        reward = result.detail["episodes"][0]["reward"]
        assert result.scores == (0.0,), (task_id, reward)
        assert reward["breakdown"]["DB"] == 0.0
        assert not any(
            m.get("error") for m in result.detail["episodes"][0]["messages"]
        )  # each call succeeded


def test_gold_actions_replay_on_a_copy() -> None:
    domain = load_domain("tau2_bench", DATA)
    gold, errors = gold_db(domain.tasks[2], domain.db, replay_gold("retail"))
    assert errors == []
    assert gold["orders"]["#W2417020"]["status"] == "cancelled"
    assert gold["users"]["emma_smith_8564"]["payment_methods"]["gift_card_8541487"]["balance"] == 2736.4
    assert domain.db["orders"]["#W2417020"]["status"] == "pending"


def test_lookups_as_tau2() -> None:
    tools = _tools()
    assert _ok(tools, "find_user_id_by_name_zip", first_name="noah", last_name="PATEL", zip="10108") == (
        "noah_patel_6952"
    )
    assert _error(tools, "find_user_id_by_name_zip", first_name="Noah", last_name="Patel", zip="1") == (
        "Error: User not found"
    )
    assert _error(tools, "find_user_id_by_email", email="x@example.com") == "Error: User not found"
    assert _error(tools, "get_order_details", order_id="W1845024") == "Error: Order not found"
    assert _ok(tools, "get_item_details", item_id="1071497737")["price"] == 483.95
    assert _error(tools, "get_item_details", item_id="0") == "Error: Item not found"
    assert _error(tools, "get_product_details", product_id="0") == "Error: Product not found"
    assert _error(tools, "get_user_details", user_id="nobody") == "Error: User not found"
    products = _ok(tools, "list_all_product_types")
    assert list(products) == sorted(products)
    assert products["Office Chair"] == "4794339885"
    assert _ok(tools, "calculate", expression="2674.4 + 62") == "2736.4"
    assert _error(tools, "calculate", expression="2 ** x") == "Error: Invalid characters in expression"
    assert _ok(tools, "transfer_to_human_agents", summary="x") == "Transfer successful"
    assert _error(tools, "get_order_details") == (
        "Error: RetailTools.get_order_details() missing 1 required positional argument: 'order_id'"
    )
    assert _error(tools, "think", thought="x") == "Error: Tool 'think' not found."


def test_cancel_exchange_and_return_as_tau2() -> None:
    tools = _tools()
    cancel = {"order_id": "#W2417020"}
    assert _error(tools, "cancel_pending_order", **cancel, reason="because") == "Error: Invalid reason"
    assert _error(tools, "cancel_pending_order", order_id="#W5605613", reason="no longer needed") == (
        "Error: Non-pending order cannot be cancelled"
    )
    done = _ok(tools, "cancel_pending_order", **cancel, reason="no longer needed")
    assert done["payment_history"][-1] == {
        "transaction_type": "refund", "amount": 2674.4, "payment_method_id": "gift_card_8541487",
    }  # fmt: skip
    exchange = dict(EXCHANGE)
    assert _error(
        tools, "exchange_delivered_order_items", **{**exchange, "new_item_ids": ["3609437808"]}
    ) == ("Error: New item 3609437808 not found or available")
    twice = {**exchange, "item_ids": ["8069050545"] * 2}
    assert (
        _error(tools, "exchange_delivered_order_items", **twice) == "Error: Number of 8069050545 not found."
    )
    assert _error(tools, "exchange_delivered_order_items", **{**exchange, "new_item_ids": ["1", "2"]}) == (
        "Error: The number of items to be exchanged should match."
    )
    exchanged = _ok(tools, "exchange_delivered_order_items", **exchange)
    assert (exchanged["status"], exchanged["exchange_price_difference"]) == ("exchange requested", -15.33)
    back = {"order_id": "#W5605613", "item_ids": ["7195021808"]}
    assert _error(tools, "return_delivered_order_items", **back, payment_method_id="paypal_6228291") == (
        "Error: Payment method should be the original payment method"
    )
    unknown = {**back, "item_ids": ["1"]}
    assert _error(
        tools, "return_delivered_order_items", **unknown, payment_method_id="gift_card_8541487"
    ) == ("Error: Some item not found")
    returned = _ok(tools, "return_delivered_order_items", **back, payment_method_id="gift_card_8541487")
    assert (returned["status"], returned["return_items"]) == ("return requested", ["7195021808"])


def test_modifications_as_tau2() -> None:
    tools = _tools()
    same = {"order_id": "#W1845024", "payment_method_id": "paypal_3169710"}
    swap = {"item_ids": ["8323284863"], "new_item_ids": ["8323284863"]}
    assert _error(tools, "modify_pending_order_items", **same, **swap) == (
        "Error: The new item id should be different from the old item id"
    )
    # a refused second pair changes nothing, not even the first
    pair = {"item_ids": ["8323284863", "3358616356"], "new_item_ids": ["1793929609", "3358616356"]}
    assert _error(tools, "modify_pending_order_items", **same, **pair) == (
        "Error: The new item id should be different from the old item id"
    )
    swap = {"item_ids": ["8323284863"], "new_item_ids": ["1793929609"]}
    modified = _ok(tools, "modify_pending_order_items", **same, **swap)
    assert modified["status"] == "pending (item modified)"
    assert modified["payment_history"][-1] == {
        "transaction_type": "payment", "amount": pytest.approx(3.1), "payment_method_id": "paypal_3169710",
    }  # fmt: skip
    swap = {"item_ids": ["1793929609"], "new_item_ids": ["1071497737"]}
    assert _error(tools, "modify_pending_order_items", **same, **swap) == (
        "Error: Non-pending order cannot be modified"
    )
    pay = {"order_id": "#W3614011"}
    assert _error(tools, "modify_pending_order_payment", **pay, payment_method_id="gift_card_8541487") == (
        "Error: The new payment method should be different from the current one"
    )
    moved = _ok(tools, "modify_pending_order_payment", **pay, payment_method_id="paypal_6228291")
    assert [p["transaction_type"] for p in moved["payment_history"]] == ["payment", "payment", "refund"]
    gift = tools.db["users"]["emma_smith_8564"]["payment_methods"]["gift_card_8541487"]
    assert gift["balance"] == 1333.94  # 62 + the 1271.94 refunded to the gift card
    assert _ok(tools, "modify_pending_order_address", **ADDRESS)["address"]["address1"] == "224 Elm Street"
    assert _error(tools, "modify_pending_order_address", **{**ADDRESS, "order_id": "#W5605613"}) == (
        "Error: Non-pending order cannot be modified"
    )
    assert (
        _ok(tools, "modify_user_address", user_id="noah_patel_6952", **HOME)["address"]["city"] == "New York"
    )
    assert _error(tools, "modify_user_address", user_id="nobody", **HOME) == "Error: User not found"


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda db: db.pop("orders"), r"retail/db\.json: no 'orders' object"),
        (lambda db: db["users"]["mei_davis_8935"].pop("email"), r"users 'mei_davis_8935' lacks email"),
        (
            lambda db: db["orders"]["#W2417020"]["payment_history"][0].update(amount="lots"),
            r"orders '#W2417020' payment 0\.amount is not a number",
        ),
        (lambda db: db.update(flights={}), r"fields a retail db\.json has not: flights"),
    ],
)
def test_bad_retail_data_is_one_clear_error(tmp_path: Path, damage: Any, message: str) -> None:
    folder = tmp_path / "retail"
    shutil.copytree(DATA, folder)
    db = json.loads((folder / "db.json").read_text())
    damage(db)
    (folder / "db.json").write_text(json.dumps(db))
    with pytest.raises(EvalError, match=message):
        Tau2BenchSuite().check(_opts(params={"data": str(folder)}))


def test_the_domains_folder_needs_a_choice_when_it_holds_several(tmp_path: Path) -> None:
    shutil.copytree(DATA, tmp_path / "retail")
    shutil.copytree(AIRLINE, tmp_path / "airline")
    suite = Tau2BenchSuite()
    with pytest.raises(
        EvalError, match=r"holds the domains airline, retail: choose one, e\.g\. tau2_bench:retail"
    ):
        suite.check(_opts(params={"data": str(tmp_path)}))
    line = suite.workload(_opts(params={"data": str(tmp_path)}, tasks=("retail",))).counted
    assert line.startswith("3 tasks of retail from --data; 1 left out")
    assert sorted(_run(RIGHT, params={"data": str(tmp_path)}, tasks=("retail",))) == ["18", "34", "69"]


def test_telecom_is_refused_with_the_reason(tmp_path: Path) -> None:
    (tmp_path / "telecom").mkdir()
    shutil.copytree(DATA, tmp_path / "retail")
    for data, tasks in ((tmp_path / "telecom", ()), (tmp_path, ("telecom",))):
        with pytest.raises(EvalError, match=r"the telecom domain is not ported: .*device tools"):
            Tau2BenchSuite().check(_opts(params={"data": str(data)}, tasks=tasks))
