"""The airline domain's data model and the tools as the agent sees them (OpenAI schemas, tool types).

Ports (sierra-research/tau2-bench, MIT licence):

- :data:`TOOL_SCHEMAS`: tau2 builds each schema from the tool's signature and docstring
  (``src/tau2/environment/tool.py``, ``Tool.openai_schema``: the docstring's summary, plus its long
  description when there is one, and a pydantic model of the parameters with each ``Args:`` line as the
  description). The table below writes those schemas out for ``src/tau2/domains/airline/tools.py``, in its
  order; nested argument types (``FlightInfo``, ``Passenger``, ``Payment``) are the ``$defs`` pydantic emits
  from ``src/tau2/domains/airline/data_model.py``. :data:`TOOL_TYPES` are the tools' ``@is_tool`` types.
- The records of ``data_model.py`` (``FlightDB``, ``User``, ``Reservation``, ...) stay JSON dicts: nested
  tool arguments are checked and trimmed to their fields as the pydantic models do (:func:`model_of`, with
  pydantic's lax ``int``/``float``; messages worded in one line), and :func:`normalise_db` fills the defaults
  (``Reservation.status``, ``Address.address2``) and floats (gift card and certificate ``amount``) that
  ``FlightDB.model_validate`` would, so states compare as tau2's ``model_dump`` would.
- :func:`db_hash` is ``tau2.utils.get_dict_hash`` (sorted-key JSON, then SHA-256).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from spade.types import ToolSchema

DB = dict[str, Any]
CABINS = ("business", "economy", "basic_economy")

TOOL_TYPES: dict[str, str] = {
    "book_reservation": "write",
    "calculate": "generic",
    "cancel_reservation": "write",
    "get_reservation_details": "read",
    "get_user_details": "read",
    "list_all_airports": "read",
    "search_direct_flight": "read",
    "search_onestop_flight": "read",
    "send_certificate": "write",
    "transfer_to_human_agents": "generic",
    "update_reservation_baggages": "write",
    "update_reservation_flights": "write",
    "update_reservation_passengers": "write",
    "get_flight_status": "read",
}
"""Tool name -> ``ToolType`` (read, write, generic); only write tools change the database."""

_S = {"type": "string"}
_I = {"type": "integer"}
_CABIN = {"enum": ["business", "economy", "basic_economy"], "type": "string"}


def _obj(title: str, fields: dict[str, tuple[dict[str, Any], str]]) -> dict[str, Any]:
    return {
        "properties": {
            name: {"description": desc, "title": name.replace("_", " ").title(), **kind}
            for name, (kind, desc) in fields.items()
        },
        "required": list(fields),
        "title": title,
        "type": "object",
    }


_DEFS: dict[str, dict[str, Any]] = {
    "FlightInfo": _obj(
        "FlightInfo",
        {
            "flight_number": (_S, "Flight number, such as 'HAT001'."),
            "date": (_S, "The date for the flight in the format 'YYYY-MM-DD', such as '2024-05-01'."),
        },
    ),
    "Passenger": _obj(
        "Passenger",
        {
            "first_name": (_S, "Passenger's first name"),
            "last_name": (_S, "Passenger's last name"),
            "dob": (_S, "Date of birth in YYYY-MM-DD format"),
        },
    ),
    "Payment": _obj(
        "Payment",
        {
            "payment_id": (_S, "Unique identifier for the payment"),
            "amount": (_I, "Payment amount in dollars"),
        },
    ),
}


def _list_of(model: str) -> dict[str, Any]:
    item = {"anyOf": [{"$ref": f"#/$defs/{model}"}, {"additionalProperties": True, "type": "object"}]}
    return {"items": item, "type": "array"}


_PAYMENT_ID = (
    "The payment id stored in user profile, such as 'credit_card_7815826', 'gift_card_7815826', "
    "'certificate_7815826'."
)
_ORIGIN3 = "The origin city airport in three letters, such as 'JFK'."
_DEST3 = "The destination city airport in three letters, such as 'LAX'."
_TOOLS: tuple[tuple[str, str, dict[str, tuple[dict[str, Any], str]]], ...] = (
    (
        "book_reservation",
        "Book a reservation.",
        {
            "user_id": (_S, "The ID of the user to book the reservation such as 'sara_doe_496'`."),
            "origin": (_S, "The IATA code for the origin city such as 'SFO'."),
            "destination": (_S, "The IATA code for the destination city such as 'JFK'."),
            "flight_type": (
                {"enum": ["round_trip", "one_way"], "type": "string"},
                "The type of flight such as 'one_way' or 'round_trip'.",
            ),
            "cabin": (_CABIN, "The cabin class such as 'basic_economy', 'economy', or 'business'."),
            "flights": (
                _list_of("FlightInfo"),
                "An array of objects containing details about each piece of flight.",
            ),
            "passengers": (
                _list_of("Passenger"),
                "An array of objects containing details about each passenger.",
            ),
            "payment_methods": (
                _list_of("Payment"),
                "An array of objects containing details about each payment method.",
            ),
            "total_baggages": (_I, "The total number of baggage items to book the reservation."),
            "nonfree_baggages": (_I, "The number of non-free baggage items to book the reservation."),
            "insurance": (
                {"enum": ["yes", "no"], "type": "string"},
                "Whether the reservation has insurance.",
            ),
        },
    ),
    (
        "calculate",
        "Calculate the result of a mathematical expression.",
        {
            "expression": (
                _S,
                "The mathematical expression to calculate, such as '2 + 2'. The expression can contain "
                "numbers, operators (+, -, *, /), parentheses, and spaces.",
            )
        },
    ),
    (
        "cancel_reservation",
        "Cancel the whole reservation.",
        {"reservation_id": (_S, "The reservation ID, such as 'ZFA04Y'.")},
    ),
    (
        "get_reservation_details",
        "Get the details of a reservation.",
        {"reservation_id": (_S, "The reservation ID, such as '8JX2WO'.")},
    ),
    (
        "get_user_details",
        "Get the details of a user, including their reservations.",
        {"user_id": (_S, "The user ID, such as 'sara_doe_496'.")},
    ),
    ("list_all_airports", "Returns a list of all available airports.", {}),
    (
        "search_direct_flight",
        "Search for direct flights between two cities on a specific date.",
        {
            "origin": (_S, _ORIGIN3),
            "destination": (_S, _DEST3),
            "date": (_S, "The date of the flight in the format 'YYYY-MM-DD', such as '2024-01-01'."),
        },
    ),
    (
        "search_onestop_flight",
        "Search for one-stop flights between two cities on a specific date.",
        {
            "origin": (_S, _ORIGIN3),
            "destination": (_S, _DEST3),
            "date": (_S, "The date of the flight in the format 'YYYY-MM-DD', such as '2024-05-01'."),
        },
    ),
    (
        "send_certificate",
        "Send a certificate to a user. Be careful!",
        {
            "user_id": (_S, "The ID of the user to book the reservation, such as 'sara_doe_496'."),
            "amount": (_I, "The amount of the certificate to send."),
        },
    ),
    (
        "transfer_to_human_agents",
        "Transfer the user to a human agent, with a summary of the user's issue.\n\nOnly transfer if\n"
        " -  the user explicitly asks for a human agent\n"
        " -  given the policy and the available tools, you cannot solve the user's issue.",
        {"summary": (_S, "A summary of the user's issue.")},
    ),
    (
        "update_reservation_baggages",
        "Update the baggage information of a reservation.",
        {
            "reservation_id": (_S, "The reservation ID, such as 'ZFA04Y'"),
            "total_baggages": (_I, "The updated total number of baggage items included in the reservation."),
            "nonfree_baggages": (
                _I,
                "The updated number of non-free baggage items included in the reservation.",
            ),
            "payment_id": (_S, _PAYMENT_ID),
        },
    ),
    (
        "update_reservation_flights",
        "Update the flight information of a reservation.",
        {
            "reservation_id": (_S, "The reservation ID, such as 'ZFA04Y'."),
            "cabin": (_CABIN, "The cabin class of the reservation"),
            "flights": (
                _list_of("FlightInfo"),
                "An array of objects containing details about each piece of flight in the ENTIRE new "
                "reservation. Even if the a flight segment is not changed, it should still be included in the array.",
            ),
            "payment_id": (_S, _PAYMENT_ID),
        },
    ),
    (
        "update_reservation_passengers",
        "Update the passenger information of a reservation.",
        {
            "reservation_id": (_S, "The reservation ID, such as 'ZFA04Y'."),
            "passengers": (
                _list_of("Passenger"),
                "An array of objects containing details about each passenger.",
            ),
        },
    ),
    (
        "get_flight_status",
        "Get the status of a flight.",
        {"flight_number": (_S, "The flight number."), "date": (_S, "The date of the flight.")},
    ),
)


def _schema(name: str, description: str, params: dict[str, tuple[dict[str, Any], str]]) -> ToolSchema:
    parameters = _obj("parameters", params)
    refs = [m for m in _DEFS if any(f"#/$defs/{m}" in str(kind) for kind, _ in params.values())]
    if refs:
        parameters = {"$defs": {m: _DEFS[m] for m in refs}, **parameters}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


TOOL_SCHEMAS: tuple[ToolSchema, ...] = tuple(_schema(*tool) for tool in _TOOLS)
"""The agent's tools, in tau2's order."""


# -- the data model's checks ---------------------------------------------------------------------------------


def text_field(value: Any, where: str) -> str:
    """A string field (pydantic does not turn numbers into strings)."""
    if not isinstance(value, str):
        raise ValueError(f"{where}: expected a string, got {value!r}")
    return value


def whole_field(value: Any, where: str) -> int:
    """pydantic's lax ``int``: integers, integral floats, and strings of an integer."""
    if isinstance(value, bool | int):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value.strip())
    raise ValueError(f"{where}: expected an integer, got {value!r}")


def number_field(value: Any, where: str) -> float:
    """pydantic's lax ``float``: numbers and numeric strings."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: expected a number, got {value!r}") from None


def choice_field(value: Any, choices: tuple[str, ...], where: str) -> str:
    """A ``Literal`` field."""
    if value not in choices:
        raise ValueError(f"{where}: expected one of {', '.join(choices)}, got {value!r}")
    return str(value)


Fields = dict[str, Callable[[Any, str], Any]]
FLIGHT_INFO: Fields = {"flight_number": text_field, "date": text_field}
PASSENGER: Fields = {"first_name": text_field, "last_name": text_field, "dob": text_field}
PAYMENT: Fields = {"payment_id": text_field, "amount": whole_field}


def model_of(kind: str, value: Any, fields: Fields) -> dict[str, Any]:
    """``Model(**value)``: the fields checked and converted, other keys dropped."""
    if not isinstance(value, dict):
        raise ValueError(f"{kind}: expected an object, got {value!r}")
    missing = [name for name in fields if name not in value]
    if missing:
        raise ValueError(f"{kind}: missing field(s) {', '.join(missing)}")
    return {name: check(value[name], f"{kind}.{name}") for name, check in fields.items()}


def models_of(kind: str, values: Any, fields: Fields) -> list[dict[str, Any]]:
    """A list of ``Model(**value)``."""
    if not isinstance(values, list):
        raise ValueError(f"{kind}: expected a list, got {values!r}")
    return [model_of(kind, v, fields) for v in values]


def normalise_db(db: DB) -> DB:
    """Fill the defaults and floats ``FlightDB.model_validate`` would (in place; returns ``db``)."""
    for user in db["users"].values():
        user.get("address", {}).setdefault("address2", None)
        for method in user.get("payment_methods", {}).values():
            if method.get("source") in {"gift_card", "certificate"} and "amount" in method:
                method["amount"] = float(method["amount"])
    for reservation in db["reservations"].values():
        reservation.setdefault("status", None)
    return db


def db_hash(db: DB) -> str:
    """``get_dict_hash``: SHA-256 of the sorted-key JSON."""
    return hashlib.sha256(json.dumps(db, sort_keys=True, default=str).encode()).hexdigest()
