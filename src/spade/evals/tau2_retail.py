"""tau2-bench's retail domain: its database and the agent's tools, ported to plain JSON data.

Ports (sierra-research/tau2-bench, MIT licence):

- :class:`RetailTools` follows ``src/tau2/domains/retail/tools.py`` (``RetailTools``): the same 16 tools,
  checks, error messages, refund and gift-card rules, and the upstream quirks (``modify_pending_order_items``
  gives every modified item the price and options of the *last* new item; ``modify_pending_order_address``
  and ``modify_pending_order_payment`` accept any status containing "pending", the other pending-only
  tools only ``pending``; ``return_delivered_order_items`` compares with the order's first payment).
- The records of ``data_model.py`` (``RetailDB``, ``User``, ``Order``, ``Product``...) stay JSON dicts:
  :func:`normalise_db` checks the fields the tools read and fills what ``RetailDB.model_validate`` would
  (the order's optional ``cancel_reason``, ``exchange_*`` and ``return_*`` fields; prices, balances and
  amounts as floats), so states hash as tau2's ``model_dump`` would.
- The schemas and tool types are tau2's own (:mod:`spade.evals.tau2_tools`).

Difference: ``calculate`` is the airline port's (:func:`spade.evals.tau2_airline.calculate`); pydantic's
validation of an address is worded here in one line.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from spade.errors import SpadeError
from spade.evals.tau2_airline import calculate
from spade.evals.tau2_airline_model import text_field
from spade.evals.tau2_tools import tool_schemas, tool_types

TOOL_SCHEMAS = tool_schemas("retail")
TOOL_TYPES = tool_types("retail")
ORDER_OPTIONAL = (
    "cancel_reason",
    "exchange_items",
    "exchange_new_items",
    "exchange_payment_method_id",
    "exchange_price_difference",
    "return_items",
    "return_payment_method_id",
)
"""``Order`` fields with a ``None`` default."""
RECORDS = {
    "products": ("name", "product_id", "variants"),
    "users": ("user_id", "name", "address", "email", "payment_methods", "orders"),
    "orders": ("order_id", "user_id", "address", "items", "status", "fulfillments", "payment_history"),
}
"""Per table of the retail database, the fields a record needs (checked on load)."""
ADDRESS = ("address1", "address2", "city", "country", "state", "zip")
CANCEL_REASONS = ("no longer needed", "ordered by mistake")


class RetailDataError(SpadeError, ValueError):
    """A record of the retail database is outside ``RetailDB``'s schema (the message says where)."""


def _float(record: dict[str, Any], key: str, where: str) -> None:
    value = record.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RetailDataError(f"{where}.{key} is not a number")
    record[key] = float(value)


def _need(record: Any, fields: tuple[str, ...], where: str) -> dict[str, Any]:
    missing = [f for f in fields if not isinstance(record, dict) or f not in record]
    if missing:
        raise RetailDataError(f"{where} lacks {', '.join(missing)}")
    result: dict[str, Any] = record
    return result


def _products(db: dict[str, Any]) -> None:
    for pid, product in db["products"].items():
        for vid, variant in _need(product["variants"], (), f"products {pid!r}.variants").items():
            where = f"products {pid!r} variant {vid!r}"
            _float(_need(variant, ("item_id", "options", "available", "price"), where), "price", where)


def _users(db: dict[str, Any]) -> None:
    for uid, user in db["users"].items():
        _need(user["name"], ("first_name", "last_name"), f"users {uid!r}.name")
        _need(user["address"], ADDRESS, f"users {uid!r}.address")
        for mid, method in _need(user["payment_methods"], (), f"users {uid!r}.payment_methods").items():
            where = f"users {uid!r} payment method {mid!r}"
            if _need(method, ("source", "id"), where)["source"] == "gift_card":
                _float(method, "balance", where)


def _orders(db: dict[str, Any]) -> None:
    for oid, order in db["orders"].items():
        for k, item in enumerate(order["items"]):
            where = f"orders {oid!r} item {k}"
            _float(_need(item, ("name", "product_id", "item_id", "price", "options"), where), "price", where)
        for k, payment in enumerate(order["payment_history"]):
            where = f"orders {oid!r} payment {k}"
            _float(
                _need(payment, ("transaction_type", "amount", "payment_method_id"), where), "amount", where
            )
        for key in ORDER_OPTIONAL:
            order.setdefault(key, None)


def normalise_db(db: dict[str, Any]) -> dict[str, Any]:
    """Check ``db`` and fill what ``RetailDB.model_validate`` would (in place; RetailDataError naming the
    record)."""
    for table, fields in RECORDS.items():
        if not isinstance(db.get(table), dict):
            raise RetailDataError(f"no {table!r} object (a retail db.json maps ids to records)")
        for key, record in db[table].items():
            _need(record, fields, f"{table} {key!r}")
    extra = sorted(set(db) - set(RECORDS))
    if extra:
        raise RetailDataError(f"fields a retail db.json has not: {', '.join(extra)}")
    _products(db)
    _users(db)
    _orders(db)
    return db


def _address(values: dict[str, Any]) -> dict[str, str]:
    """``UserAddress(...)``: every field a string (pydantic does not turn numbers into strings)."""
    return {k: text_field(values[k], f"UserAddress.{k}") for k in ADDRESS}


def _count_check(order: dict[str, Any], item_ids: list[str], message: str) -> None:
    """Each id (duplicates counted) is in the order at least as often as listed; else ``message``."""
    all_item_ids = [item["item_id"] for item in order["items"]]
    for item_id in item_ids:
        if item_ids.count(item_id) > all_item_ids.count(item_id):
            raise ValueError(message.format(item_id=item_id))


class RetailTools:
    """The retail agent's tools over one in-memory database (``RetailTools`` of tau2)."""

    def __init__(self, db: dict[str, Any]) -> None:
        self.db = db

    def use_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """Call tool ``name`` (``ToolKitBase.use_tool``); raises what the tool raises."""
        if name not in TOOL_TYPES:
            raise ValueError(f"Tool '{name}' not found.")
        return getattr(self, name)(**arguments)

    # -- lookups ------------------------------------------------------------------------------------------

    def _get_order(self, order_id: str) -> dict[str, Any]:
        if order_id not in self.db["orders"]:
            raise ValueError("Order not found")
        order: dict[str, Any] = self.db["orders"][order_id]
        return order

    def _get_user(self, user_id: str) -> dict[str, Any]:
        if user_id not in self.db["users"]:
            raise ValueError("User not found")
        user: dict[str, Any] = self.db["users"][user_id]
        return user

    def _get_product(self, product_id: str) -> dict[str, Any]:
        if product_id not in self.db["products"]:
            raise ValueError("Product not found")
        product: dict[str, Any] = self.db["products"][product_id]
        return product

    def _get_item(self, item_id: str) -> dict[str, Any]:
        for product in self.db["products"].values():
            if item_id in product["variants"]:
                variant: dict[str, Any] = product["variants"][item_id]
                return variant
        raise ValueError("Item not found")

    def _get_variant(self, product_id: str, variant_id: str) -> dict[str, Any]:
        product = self._get_product(product_id)
        if variant_id not in product["variants"]:
            raise ValueError("Variant not found")
        variant: dict[str, Any] = product["variants"][variant_id]
        return variant

    def _get_payment_method(self, user_id: str, payment_method_id: str) -> dict[str, Any]:
        user = self._get_user(user_id)
        if payment_method_id not in user["payment_methods"]:
            raise ValueError("Payment method not found")
        method: dict[str, Any] = user["payment_methods"][payment_method_id]
        return method

    def _price_difference(
        self, order: dict[str, Any], item_ids: list[str], new_item_ids: list[str], *, modify: bool
    ) -> tuple[float, dict[str, Any] | None]:
        """The summed new-minus-old price of the pairs, and the last new variant (upstream's loop)."""
        diff_price, variant = 0.0, None
        for item_id, new_item_id in zip(item_ids, new_item_ids, strict=False):
            if modify and item_id == new_item_id:
                raise ValueError("The new item id should be different from the old item id")
            item = next((i for i in order["items"] if i["item_id"] == item_id), None)
            if item is None:
                raise ValueError(f"Item {item_id} not found")
            variant = self._get_variant(item["product_id"], new_item_id)
            if not variant["available"]:
                raise ValueError(f"New item {new_item_id} not found or available")
            diff_price += variant["price"] - item["price"]
        return diff_price, variant

    # -- the tools ----------------------------------------------------------------------------------------

    def calculate(self, expression: str) -> str:
        """Arithmetic on digits, ``+ - * /``, parentheses and spaces, rounded to 2 places."""
        return calculate(expression)

    def cancel_pending_order(self, order_id: str, reason: str) -> dict[str, Any]:
        """Cancel a pending order; refunds go to gift cards at once."""
        order = self._get_order(order_id)
        if order["status"] != "pending":
            raise ValueError("Non-pending order cannot be cancelled")
        if reason not in set(CANCEL_REASONS):
            raise ValueError("Invalid reason")
        refunds = []
        for payment in order["payment_history"]:
            payment_id = payment["payment_method_id"]
            refunds.append(
                {"transaction_type": "refund", "amount": payment["amount"], "payment_method_id": payment_id}
            )
            user = self._get_user(order["user_id"])
            method = self._get_payment_method(user["user_id"], payment_id)
            if method["source"] == "gift_card":
                method["balance"] = round(method["balance"] + payment["amount"], 2)
        order["status"] = "cancelled"
        order["cancel_reason"] = reason
        order["payment_history"].extend(refunds)
        return order

    def exchange_delivered_order_items(
        self, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
    ) -> dict[str, Any]:
        """Request an exchange of delivered items for items of the same products."""
        order = self._get_order(order_id)
        if order["status"] != "delivered":
            raise ValueError("Non-delivered order cannot be exchanged")
        _count_check(order, item_ids, "Number of {item_id} not found.")
        if len(item_ids) != len(new_item_ids):
            raise ValueError("The number of items to be exchanged should match.")
        diff_price = round(self._price_difference(order, item_ids, new_item_ids, modify=False)[0], 2)
        method = self._get_payment_method(order["user_id"], payment_method_id)
        if method["source"] == "gift_card" and method["balance"] < diff_price:
            raise ValueError("Insufficient gift card balance to pay for the price difference")
        order["status"] = "exchange requested"
        order["exchange_items"] = sorted(item_ids)
        order["exchange_new_items"] = sorted(new_item_ids)
        order["exchange_payment_method_id"] = payment_method_id
        order["exchange_price_difference"] = diff_price
        return order

    def find_user_id_by_name_zip(self, first_name: str, last_name: str, zip: str) -> str:
        """The id of the user with this name (any case) and zip code."""
        for user_id, user in self.db["users"].items():
            if (
                user["name"]["first_name"].lower() == first_name.lower()
                and user["name"]["last_name"].lower() == last_name.lower()
                and user["address"]["zip"] == zip
            ):
                return str(user_id)
        raise ValueError("User not found")

    def find_user_id_by_email(self, email: str) -> str:
        """The id of the user with this email (any case)."""
        for user_id, user in self.db["users"].items():
            if user["email"].lower() == email.lower():
                return str(user_id)
        raise ValueError("User not found")

    def get_order_details(self, order_id: str) -> dict[str, Any]:
        """The order."""
        return self._get_order(order_id)

    def get_product_details(self, product_id: str) -> dict[str, Any]:
        """The product with its variants."""
        return self._get_product(product_id)

    def get_item_details(self, item_id: str) -> dict[str, Any]:
        """The variant with this item id."""
        return self._get_item(item_id)

    def get_user_details(self, user_id: str) -> dict[str, Any]:
        """The user, with their order ids."""
        return self._get_user(user_id)

    def list_all_product_types(self) -> str:
        """Product names -> product ids, as sorted-key JSON."""
        products = {p["name"]: p["product_id"] for p in self.db["products"].values()}
        return json.dumps(products, sort_keys=True)

    def modify_pending_order_address(  # noqa: PLR0917 (tau2's signature: its TypeErrors name positional arguments)
        self,
        order_id: str,
        address1: str,
        address2: str,
        city: str,
        state: str,
        country: str,
        zip: str,
    ) -> dict[str, Any]:
        """Set the shipping address of a pending order."""
        order = self._get_order(order_id)
        if "pending" not in order["status"]:
            raise ValueError("Non-pending order cannot be modified")
        fields = {"address1": address1, "address2": address2, "city": city, "state": state}
        order["address"] = _address({**fields, "country": country, "zip": zip})
        return order

    def modify_pending_order_items(
        self, order_id: str, item_ids: list[str], new_item_ids: list[str], payment_method_id: str
    ) -> dict[str, Any]:
        """Swap items of a pending order for items of the same products; pay or refund the difference."""
        order = self._get_order(order_id)
        if order["status"] != "pending":
            raise ValueError("Non-pending order cannot be modified")
        _count_check(order, item_ids, "{item_id} not found")
        if len(item_ids) != len(new_item_ids):
            raise ValueError("The number of items to be exchanged should match")
        diff_price, variant = self._price_difference(order, item_ids, new_item_ids, modify=True)
        method = self._get_payment_method(order["user_id"], payment_method_id)
        if method["source"] == "gift_card" and method["balance"] < diff_price:
            raise ValueError("Insufficient gift card balance to pay for the new item")
        order["payment_history"].append(
            {
                "transaction_type": "payment" if diff_price > 0 else "refund",
                "amount": abs(diff_price),
                "payment_method_id": payment_method_id,
            }
        )
        if method["source"] == "gift_card":
            method["balance"] = round(method["balance"] - diff_price, 2)
        for item_id, new_item_id in zip(item_ids, new_item_ids, strict=False):
            item = next((i for i in order["items"] if i["item_id"] == item_id), None)
            if item is None or variant is None:
                raise ValueError(f"Item {item_id} not found")
            item["item_id"] = new_item_id
            item["price"] = variant["price"]  # upstream: the last new item's price and options for all
            item["options"] = copy.deepcopy(variant["options"])
        order["status"] = "pending (item modified)"
        return order

    def modify_pending_order_payment(self, order_id: str, payment_method_id: str) -> dict[str, Any]:
        """Move a pending order's single payment to another method (gift cards charged and refunded)."""
        order = self._get_order(order_id)
        if "pending" not in order["status"]:
            raise ValueError("Non-pending order cannot be modified")
        method = self._get_payment_method(order["user_id"], payment_method_id)
        history = order["payment_history"]
        if len(history) != 1 or history[0]["transaction_type"] != "payment":
            raise ValueError("There should be exactly one payment for a pending order")
        old_id = history[0]["payment_method_id"]
        if old_id == payment_method_id:
            raise ValueError("The new payment method should be different from the current one")
        amount = history[0]["amount"]
        if method["source"] == "gift_card" and method["balance"] < amount:
            raise ValueError("Insufficient gift card balance to pay for the order")
        history.extend(
            [
                {"transaction_type": "payment", "amount": amount, "payment_method_id": payment_method_id},
                {"transaction_type": "refund", "amount": amount, "payment_method_id": old_id},
            ]
        )
        if method["source"] == "gift_card":
            method["balance"] = round(method["balance"] - amount, 2)
        old_method = self._get_payment_method(order["user_id"], old_id)
        if old_method["source"] == "gift_card":
            old_method["balance"] = round(old_method["balance"] + amount, 2)
        return order

    def modify_user_address(  # noqa: PLR0917 (tau2's signature: its TypeErrors name positional arguments)
        self,
        user_id: str,
        address1: str,
        address2: str,
        city: str,
        state: str,
        country: str,
        zip: str,
    ) -> dict[str, Any]:
        """Set the user's default address."""
        user = self._get_user(user_id)
        fields = {"address1": address1, "address2": address2, "city": city, "state": state}
        user["address"] = _address({**fields, "country": country, "zip": zip})
        return user

    def return_delivered_order_items(
        self, order_id: str, item_ids: list[str], payment_method_id: str
    ) -> dict[str, Any]:
        """Request a return of delivered items, refunded to the original method or a gift card."""
        order = self._get_order(order_id)
        if order["status"] != "delivered":
            raise ValueError("Non-delivered order cannot be returned")
        user = self._get_user(order["user_id"])
        method = self._get_payment_method(user["user_id"], payment_method_id)
        if (
            method["source"] != "gift_card"
            and payment_method_id != order["payment_history"][0]["payment_method_id"]
        ):
            raise ValueError("Payment method should be the original payment method")
        _count_check(order, item_ids, "Some item not found")
        order["status"] = "return requested"
        order["return_items"] = sorted(item_ids)
        order["return_payment_method_id"] = payment_method_id
        return order

    def transfer_to_human_agents(self, summary: str) -> str:
        """The transfer message (the user simulator then ends the call)."""
        return "Transfer successful"
