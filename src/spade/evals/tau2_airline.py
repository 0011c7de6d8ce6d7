"""tau2-bench's airline domain: its database and the agent's tools, ported to plain JSON data.

Ports (sierra-research/tau2-bench, MIT licence):

- :class:`AirlineTools` follows ``src/tau2/domains/airline/tools.py`` (``AirlineTools``): the same 14 tools,
  checks, prices, fees, id choices (``HATHAT``/``HATHAU``/``HATHAV``, ``certificate_3221322``...), the fixed
  clock ``2024-05-15T15:00:00`` and the upstream quirks (cancelling releases no seats, changing flights
  does not touch seat counts, one-stop searches name the next day ``2024-05-{day + 1}`` unpadded).
- The database and the tool arguments follow ``data_model.py`` as :mod:`spade.evals.tau2_airline_model`
  ports it (records kept as JSON dicts, checked as the pydantic models check them).
- :func:`to_json_str` follows ``Environment.to_json_str`` (``src/tau2/environment/environment.py``); tool
  errors read ``Error: <message>`` as ``Environment.get_response`` writes them.

Difference: ``calculate`` evaluates the arithmetic with a small expression walker (tau2 calls ``eval`` on
the filtered string), with exponents capped so a reply cannot stall the evaluation; pydantic's validation
messages are worded here in one line.
"""

from __future__ import annotations

import ast
import copy
import json
import operator
from collections.abc import Callable
from typing import Any

from spade.evals.tau2_airline_model import (
    CABINS,
    DB,
    FLIGHT_INFO,
    PASSENGER,
    PAYMENT,
    TOOL_SCHEMAS,
    TOOL_TYPES,
    choice_field,
    db_hash,
    models_of,
    normalise_db,
    number_field,
    text_field,
    whole_field,
)

__all__ = [
    "TOOL_SCHEMAS", "TOOL_TYPES", "AirlineTools", "calculate", "db_hash", "normalise_db", "to_json_str",
]  # fmt: skip

NOW = "2024-05-15T15:00:00"
"""``AirlineTools._get_datetime``: the fixed present of every task."""
AIRPORTS = (
    ("SFO", "San Francisco"), ("JFK", "New York"), ("LAX", "Los Angeles"), ("ORD", "Chicago"),
    ("DFW", "Dallas"), ("DEN", "Denver"), ("SEA", "Seattle"), ("ATL", "Atlanta"), ("MIA", "Miami"),
    ("BOS", "Boston"), ("PHX", "Phoenix"), ("IAH", "Houston"), ("LAS", "Las Vegas"), ("MCO", "Orlando"),
    ("EWR", "Newark"), ("CLT", "Charlotte"), ("MSP", "Minneapolis"), ("DTW", "Detroit"),
    ("PHL", "Philadelphia"), ("LGA", "LaGuardia"),
)  # fmt: skip
MAX_EXPONENT = 64


def to_json_str(resp: Any) -> str:
    """``Environment.to_json_str``: strings as they are, numbers as text, everything else as JSON."""
    if isinstance(resp, str):
        return resp
    if isinstance(resp, bool | int | float):
        return json.dumps(str(resp))
    return json.dumps(resp, default=str)


# -- calculate ---------------------------------------------------------------------------------------------

_OPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
}


def _arith(node: ast.AST) -> Any:
    if isinstance(node, ast.Expression):
        return _arith(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
        value = _arith(node.operand)
        return value if isinstance(node.op, ast.UAdd) else -value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _arith(node.left), _arith(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ValueError("Exponent too large")
        return _OPS[type(node.op)](left, right)
    raise ValueError("Invalid expression")


def calculate(expression: str) -> str:
    """The ``calculate`` tool of airline and retail: arithmetic on digits, ``+ - * /``, parentheses and
    spaces, rounded to 2 places."""
    if not all(char in "0123456789+-*/(). " for char in expression):
        raise ValueError("Invalid characters in expression")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"invalid syntax ({exc.msg})") from None
    return str(round(float(_arith(tree)), 2))


# -- the tools ---------------------------------------------------------------------------------------------


class AirlineTools:
    """The airline agent's tools over one in-memory database (``AirlineTools`` of tau2)."""

    def __init__(self, db: DB) -> None:
        self.db = db

    def use_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        """Call tool ``name`` (``ToolKitBase.use_tool``); raises what the tool raises."""
        if name not in TOOL_TYPES:
            raise ValueError(f"Tool '{name}' not found.")
        return getattr(self, name)(**arguments)

    def _get_user(self, user_id: str) -> dict[str, Any]:
        if user_id not in self.db["users"]:
            raise ValueError(f"User {user_id} not found")
        user: dict[str, Any] = self.db["users"][user_id]
        return user

    def _get_reservation(self, reservation_id: str) -> dict[str, Any]:
        if reservation_id not in self.db["reservations"]:
            raise ValueError(f"Reservation {reservation_id} not found")
        reservation: dict[str, Any] = self.db["reservations"][reservation_id]
        return reservation

    def _get_flight(self, flight_number: str) -> dict[str, Any]:
        if flight_number not in self.db["flights"]:
            raise ValueError(f"Flight {flight_number} not found")
        flight: dict[str, Any] = self.db["flights"][flight_number]
        return flight

    def _get_flight_instance(self, flight_number: str, date: str) -> dict[str, Any]:
        flight = self._get_flight(flight_number)
        if date not in flight["dates"]:
            raise ValueError(f"Flight {flight_number} not found on date {date}")
        day: dict[str, Any] = flight["dates"][date]
        return day

    def _get_new_reservation_id(self) -> str:
        for reservation_id in ("HATHAT", "HATHAU", "HATHAV"):
            if reservation_id not in self.db["reservations"]:
                return reservation_id
        raise ValueError("Too many reservations")

    def _search_direct_flight(
        self,
        date: str,
        origin: str | None = None,
        destination: str | None = None,
        leave_after: str | None = None,
    ) -> list[dict[str, Any]]:
        results = []
        for flight in self.db["flights"].values():
            day = flight["dates"].get(date)
            if (
                (origin is None or flight["origin"] == origin)
                and (destination is None or flight["destination"] == destination)
                and day is not None
                and day["status"] == "available"
                and (leave_after is None or flight["scheduled_departure_time_est"] >= leave_after)
            ):
                results.append(
                    {
                        **{k: flight[k] for k in ("flight_number", "origin", "destination")},
                        "status": "available",
                        "scheduled_departure_time_est": flight["scheduled_departure_time_est"],
                        "scheduled_arrival_time_est": flight["scheduled_arrival_time_est"],
                        "date": None,
                        "available_seats": copy.deepcopy(day["available_seats"]),
                        "prices": copy.deepcopy(day["prices"]),
                    }
                )
        return results

    def _pay_for_update(
        self, reservation: dict[str, Any], user: dict[str, Any], payment_id: str, total_price: int
    ) -> None:
        """Charge (or refund, below zero) an update to the reservation's payment history."""
        if payment_id not in user["payment_methods"]:
            raise ValueError("Payment method not found")
        method = user["payment_methods"][payment_id]
        if method["source"] == "certificate":
            raise ValueError("Certificate cannot be used to update reservation")
        if method["source"] == "gift_card" and method["amount"] < total_price:
            raise ValueError("Gift card balance is not enough")
        if method["source"] == "gift_card":
            method["amount"] -= total_price
        if total_price != 0:
            reservation["payment_history"].append({"payment_id": payment_id, "amount": total_price})

    def book_reservation(
        self,
        *,
        user_id: str,
        origin: str,
        destination: str,
        flight_type: str,
        cabin: str,
        flights: list[Any],
        passengers: list[Any],
        payment_methods: list[Any],
        total_baggages: int,
        nonfree_baggages: int,
        insurance: str,
    ) -> dict[str, Any]:
        """Book a reservation (checks, price, payments, then the db update, as upstream)."""
        flight_infos = models_of("FlightInfo", flights, FLIGHT_INFO)
        people = models_of("Passenger", passengers, PASSENGER)
        payments = models_of("Payment", payment_methods, PAYMENT)
        user = self._get_user(user_id)
        reservation: dict[str, Any] = {
            "reservation_id": self._get_new_reservation_id(),
            "user_id": user_id,
            "origin": text_field(origin, "origin"),
            "destination": text_field(destination, "destination"),
            "flight_type": choice_field(flight_type, ("round_trip", "one_way"), "flight_type"),
            "cabin": choice_field(cabin, CABINS, "cabin"),
            "flights": [],
            "passengers": people,
            "payment_history": copy.deepcopy(payments),
            "created_at": NOW,
            "total_baggages": whole_field(total_baggages, "total_baggages"),
            "nonfree_baggages": whole_field(nonfree_baggages, "nonfree_baggages"),
            "insurance": choice_field(insurance, ("yes", "no"), "insurance"),
            "status": None,
        }
        total_price, days = self._price_flights(reservation, flight_infos, cabin, len(people))
        total_price += 30 * len(people) if insurance == "yes" else 0
        total_price += 50 * reservation["nonfree_baggages"]
        self._check_payments(user, payments, total_price)
        self._charge(user, payments)
        for day in days:
            day["available_seats"][cabin] -= len(people)
        self.db["reservations"][reservation["reservation_id"]] = reservation
        user["reservations"].append(reservation["reservation_id"])
        return reservation

    def _price_flights(
        self, reservation: dict[str, Any], flight_infos: list[dict[str, Any]], cabin: str, people: int
    ) -> tuple[int, list[dict[str, Any]]]:
        total_price, days = 0, []
        for info in flight_infos:
            number = info["flight_number"]
            flight = self._get_flight(number)
            day = self._get_flight_instance(number, info["date"])
            if day["status"] != "available":
                raise ValueError(f"Flight {number} not available on date {info['date']}")
            if day["available_seats"][cabin] < people:
                raise ValueError(f"Not enough seats on flight {number}")
            price = day["prices"][cabin]
            reservation["flights"].append(
                {
                    "flight_number": number,
                    "origin": flight["origin"],
                    "destination": flight["destination"],
                    "date": info["date"],
                    "price": price,
                }
            )
            days.append(day)
            total_price += price * people
        return total_price, days

    @staticmethod
    def _check_payments(user: dict[str, Any], payments: list[dict[str, Any]], total_price: int) -> None:
        for payment in payments:
            payment_id, amount = payment["payment_id"], payment["amount"]
            if payment_id not in user["payment_methods"]:
                raise ValueError(f"Payment method {payment_id} not found")
            method = user["payment_methods"][payment_id]
            if method["source"] in {"gift_card", "certificate"} and method["amount"] < amount:
                raise ValueError(f"Not enough balance in payment method {payment_id}")
        paid = sum(p["amount"] for p in payments)
        if paid != total_price:
            raise ValueError(f"Payment amount does not add up, total price is {total_price}, but paid {paid}")

    @staticmethod
    def _charge(user: dict[str, Any], payments: list[dict[str, Any]]) -> None:
        """Deduct gift card payments; a used certificate is gone."""
        for payment in payments:
            method = user["payment_methods"][payment["payment_id"]]
            if method["source"] == "gift_card":
                method["amount"] -= payment["amount"]
            elif method["source"] == "certificate":
                user["payment_methods"].pop(payment["payment_id"])

    def calculate(self, expression: str) -> str:
        """Arithmetic on digits, ``+ - * /``, parentheses and spaces, rounded to 2 places."""
        return calculate(expression)

    def cancel_reservation(self, reservation_id: str) -> dict[str, Any]:
        """Refund every payment and mark the reservation cancelled (upstream releases no seats)."""
        reservation = self._get_reservation(reservation_id)
        refunds = [
            {"payment_id": p["payment_id"], "amount": -p["amount"]} for p in reservation["payment_history"]
        ]
        reservation["payment_history"].extend(refunds)
        reservation["status"] = "cancelled"
        return reservation

    def get_reservation_details(self, reservation_id: str) -> dict[str, Any]:
        """The reservation."""
        return self._get_reservation(reservation_id)

    def get_user_details(self, user_id: str) -> dict[str, Any]:
        """The user, with their reservation ids."""
        return self._get_user(user_id)

    def list_all_airports(self) -> list[dict[str, str]]:
        """The 20 airports."""
        return [{"iata": iata, "city": city} for iata, city in AIRPORTS]

    def search_direct_flight(self, origin: str, destination: str, date: str) -> list[dict[str, Any]]:
        """Available direct flights on a date."""
        return self._search_direct_flight(date=date, origin=origin, destination=destination)

    def search_onestop_flight(self, origin: str, destination: str, date: str) -> list[list[dict[str, Any]]]:
        """Pairs of available flights through one airport (the second may leave the next day)."""
        results = []
        for first in self._search_direct_flight(date=date, origin=origin):
            first["date"] = date
            arrival = first["scheduled_arrival_time_est"]
            date2 = f"2024-05-{int(date[-2:]) + 1}" if "+1" in arrival else date
            for second in self._search_direct_flight(
                date=date2, origin=first["destination"], destination=destination, leave_after=arrival
            ):
                second["date"] = date2
                results.append([first, second])
        return results

    def send_certificate(self, user_id: str, amount: int) -> str:
        """Add a certificate (at most three per task) to the user's payment methods."""
        user = self._get_user(user_id)
        for payment_id in (f"certificate_{n}" for n in (3221322, 3221323, 3221324)):
            if payment_id not in user["payment_methods"]:
                value = number_field(amount, "amount")
                user["payment_methods"][payment_id] = {
                    "source": "certificate",
                    "id": payment_id,
                    "amount": value,
                }
                return f"Certificate {payment_id} added to user {user_id} with amount {amount}."
        raise ValueError("Too many certificates")

    def transfer_to_human_agents(self, summary: str) -> str:
        """The transfer message (the user simulator then ends the call)."""
        return "Transfer successful"

    def update_reservation_baggages(
        self, reservation_id: str, total_baggages: int, nonfree_baggages: int, payment_id: str
    ) -> dict[str, Any]:
        """Set the bag counts; $50 per added non-free bag."""
        reservation = self._get_reservation(reservation_id)
        user = self._get_user(reservation["user_id"])
        total_price = 50 * max(0, nonfree_baggages - reservation["nonfree_baggages"])
        self._pay_for_update(reservation, user, payment_id, total_price)
        reservation["total_baggages"] = total_baggages
        reservation["nonfree_baggages"] = nonfree_baggages
        return reservation

    def update_reservation_flights(
        self, reservation_id: str, cabin: str, flights: list[Any], payment_id: str
    ) -> dict[str, Any]:
        """Replace the flights (kept segments keep their price); pay or refund the difference."""
        infos = models_of("FlightInfo", flights, FLIGHT_INFO)
        reservation = self._get_reservation(reservation_id)
        user = self._get_user(reservation["user_id"])
        people = len(reservation["passengers"])
        total_price, new_flights = 0, []
        for info in infos:
            kept = next(
                (
                    f
                    for f in reservation["flights"]
                    if f["flight_number"] == info["flight_number"]
                    and f["date"] == info["date"]
                    and cabin == reservation["cabin"]
                ),
                None,
            )
            if kept is None:
                probe: dict[str, Any] = {"flights": []}
                self._price_flights(probe, [info], cabin, people)
                kept = probe["flights"][0]
            total_price += kept["price"] * people
            new_flights.append(kept)
        total_price -= sum(f["price"] for f in reservation["flights"]) * people
        self._pay_for_update(reservation, user, payment_id, total_price)
        reservation["flights"] = new_flights
        reservation["cabin"] = cabin
        return reservation

    def update_reservation_passengers(self, reservation_id: str, passengers: list[Any]) -> dict[str, Any]:
        """Replace the passengers (the count must stay the same)."""
        people = models_of("Passenger", passengers, PASSENGER)
        reservation = self._get_reservation(reservation_id)
        if len(people) != len(reservation["passengers"]):
            raise ValueError("Number of passengers does not match")
        reservation["passengers"] = people
        return reservation

    def get_flight_status(self, flight_number: str, date: str) -> str:
        """The flight's status on a date."""
        return str(self._get_flight_instance(flight_number, date)["status"])
