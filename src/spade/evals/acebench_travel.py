"""ACEBench's English ``Travel`` scenario (``model_inference/multi_turn/scenariosen/travel.py``), ported.

Flights, users and reservations as ACEBench starts them; every public method is one the model may call (the
helpers too, as in ACEBench, which exposes every method without a leading underscore). Return values and
messages are ACEBench's, and so are its quirks: ``authenticate_user`` returns an error dict (truthy) for a
wrong password, so ``reserve_flight`` then fails on ``user["membership_level"]`` (a ``KeyError`` the
execution reports); an unknown flight number fails on ``None``; ``cancel_reservation`` refunds to cash
without removing the reservation, at ACEBench's fixed clock (2024-07-14 06:00); a new reservation's id is
``res_<count + 1>``. ``_load_scenario`` ignores the item's ``initial_config``, as ACEBench's does.
"""

from __future__ import annotations

import copy
from datetime import datetime, timedelta
from typing import Any

USERS: dict[str, dict[str, Any]] = {
    "user1": {"user_name": "Eve", "password": "password123", "cash_balance": 2000.0, "bank_balance": 50000.0,
              "membership_level": "regular"},
    "user2": {"user_name": "Frank", "password": "password456", "cash_balance": 8000.0, "bank_balance": 8000.0,
              "membership_level": "silver"},
    "user3": {"user_name": "Grace", "password": "password789", "cash_balance": 1000.0, "bank_balance": 5000.0,
              "membership_level": "gold"},
}  # fmt: skip
_FLIGHTS = (
    ("CA1234", "Beijing", "Shanghai", "2024-07-15 08:00:00", "2024-07-15 10:30:00", 5, 1200, 3000),
    ("MU5678", "Shanghai", "Beijing", "2024-07-16 09:00:00", "2024-07-16 11:30:00", 3, 1900, 3000),
    ("CZ4321", "Shanghai", "Beijing", "2024-07-16 20:00:00", "2024-07-16 22:00:00", 8, 2500, 4000),
    ("CZ4352", "Shanghai", "Beijing", "2024-07-17 20:00:00", "2024-07-17 22:00:00", 8, 1600, 2500),
    ("MU3561", "Beijing", "Nanjing", "2024-07-18 08:00:00", "2024-07-18 10:00:00", 8, 1500, 4000),
    ("MU1566", "Beijing", "Nanjing", "2024-07-18 20:00:00", "2024-07-18 22:00:00", 8, 1500, 4000),
    ("CZ1765", "Nanjing", "Shenzhen", "2024-07-17 20:30:00", "2024-07-17 22:00:00", 8, 1500, 2500),
    ("CZ1765", "Nanjing", "Shenzhen", "2024-07-18 12:30:00", "2024-07-18 15:00:00", 8, 1500, 2500),
    ("MH1765", "Xiamen", "Chengdu", "2024-07-17 12:30:00", "2024-07-17 15:00:00", 8, 1500, 2500),
    ("MH2616", "Chengdu", "Xiamen", "2024-07-18 18:30:00", "2024-07-18 21:00:00", 8, 1500, 2500),
    ("MH2616", "Chengdu", "Fuzhou", "2024-07-16 18:30:00", "2024-07-16 21:00:00", 8, 1500, 2500),
)
FLIGHT_KEYS = ("flight_no", "origin", "destination", "depart_time", "arrival_time", "status", "seats_available",
               "economy_price", "business_price")  # fmt: skip
FLIGHTS: list[dict[str, Any]] = [
    dict(zip(FLIGHT_KEYS, (no, a, b, dep, arr, "available", seats, eco, bus), strict=True))
    for no, a, b, dep, arr, seats, eco, bus in _FLIGHTS
]
_RESERVATIONS = (
    ("res_1", "user1", "CA1234", "Economy Class", "Beijing", "Shanghai"),
    ("res_2", "user1", "MU5678", "Business Class", "Shanghai", "Beijing"),
    ("res_3", "user2", "MH1765", "Business Class", "Xiamen", "Chengdu"),
    ("res_4", "user2", "MU2616", "Business Class", "Chengdu", "Xiamen"),
)
RESERVATIONS: list[dict[str, Any]] = [
    {"reservation_id": r, "user_id": u, "flight_no": f, "payment_method": "bank", "cabin": c, "baggage": 1,
     "origin": a, "destination": b}
    for r, u, f, c, a, b in _RESERVATIONS
]  # fmt: skip
FREE_BAGS = {
    "regular": {"Economy Class": 1, "Business Class": 2},
    "silver": {"Economy Class": 2, "Business Class": 3},
    "gold": {"Economy Class": 3, "Business Class": 3},
}
CLOCK = datetime(2024, 7, 14, 6, 0, 0)
"""``cancel_reservation``'s fixed current time."""
AIRLINE_CANCELLED = "The airline has canceled the flight."
_STAMP = "%Y-%m-%d %H:%M:%S"


class Travel:
    """Flight booking: users, flights, reservations (ACEBench's ``Travel``)."""

    def __init__(self) -> None:
        self.users = copy.deepcopy(USERS)
        self.flights = copy.deepcopy(FLIGHTS)
        self.reservations = copy.deepcopy(RESERVATIONS)

    def _load_scenario(self, scenario: dict[str, Any], long_context: bool = False) -> None:
        """Nothing: ACEBench's Travel always starts from its built-in state."""

    def get_flight_details(self, origin: Any = None, destination: Any = None) -> Any:
        """Flights filtered by origin and destination (a sentence when none)."""
        flights = self.flights
        if origin:
            flights = [f for f in flights if f["origin"] == origin]
        if destination:
            flights = [f for f in flights if f["destination"] == destination]
        if len(flights) == 0:
            return "There are no direct flights that meet the criteria."
        return [{k: f[k] for k in FLIGHT_KEYS} for f in flights]

    def get_user_details(self, user_id: Any, password: Any) -> dict[str, Any]:
        """A user's profile without the password."""
        user = self.users.get(user_id)
        if user and user["password"] == password:
            return {k: v for k, v in user.items() if k != "password"}
        return {"status": "error", "message": "Incorrect username or password."}

    def get_reservation_details(self, reservation_id: Any = None, user_id: Any = None) -> Any:
        """Reservations by id, else by user, each with its flight's record."""
        if reservation_id:
            found = [r for r in self.reservations if r["reservation_id"] == reservation_id]
        elif user_id:
            found = [r for r in self.reservations if r["user_id"] == user_id]
        else:
            return {"status": "error", "message": "Please provide a valid reservation ID or user ID"}
        return [
            {**r, "flight_info": next((f for f in self.flights if f["flight_no"] == r["flight_no"]), None)}
            for r in found
        ]

    def authenticate_user(self, user_id: Any, password: Any) -> dict[str, Any]:
        """The user's record, or an error dict."""
        user = self.users.get(user_id)
        if user and user["password"] == password:
            return user
        return {"status": "error", "message": "Incorrect username or password."}

    def get_baggage_allowance(self, membership_level: Any, cabin_class: Any) -> int:
        """Free checked bags for a membership level and cabin (0 when unknown)."""
        return FREE_BAGS.get(membership_level, {}).get(cabin_class, 0)

    def find_transfer_flights(self, origin_city: Any, transfer_city: Any, destination_city: Any) -> Any:
        """Available two-leg connections whose first leg lands before the second departs."""
        first = [
            f
            for f in self.flights
            if f["origin"] == origin_city and f["destination"] == transfer_city and f["status"] == "available"
        ]
        second = [
            f
            for f in self.flights
            if f["origin"] == transfer_city
            and f["destination"] == destination_city
            and f["status"] == "available"
        ]
        pairs = [
            {"first_leg": a, "second_leg": b}
            for a in first
            for b in second
            if datetime.strptime(a["arrival_time"], _STAMP) < datetime.strptime(b["depart_time"], _STAMP)
        ]
        return pairs or "No connecting flights that meet the criteria were found."

    def calculate_baggage_fee(self, membership_level: Any, cabin_class: Any, baggage_count: Any) -> Any:
        """50 per bag above the free allowance (KeyError for an unknown level or cabin, as ACEBench)."""
        return max(baggage_count - FREE_BAGS[membership_level][cabin_class], 0) * 50

    def update_balance(self, user: Any, payment_method: Any, amount: Any) -> bool:
        """Add ``amount`` to the user's cash or bank balance; False when it would go negative."""
        if payment_method in ("cash", "bank"):
            key = f"{payment_method}_balance"
            if user[key] + amount < 0:
                return False
            user[key] += amount
        return True

    def reserve_flight(  # noqa: PLR0917 - ACEBench's signature (its TypeError texts name these)
        self, user_id: Any, password: Any, flight_no: Any, cabin: Any, payment_method: Any, baggage_count: Any
    ) -> str:
        """Book a flight, paying fare and baggage fee from cash or bank."""
        user = self.authenticate_user(user_id, password)
        if not user:
            return "Authentication failed. Please check your user ID and password."
        flight: Any = next(
            (f for f in self.flights if f["flight_no"] == flight_no and f["status"] == "available"), None
        )
        total = flight["economy_price"] if cabin == "Economy Class" else flight["business_price"]
        total += self.calculate_baggage_fee(user["membership_level"], cabin, baggage_count)
        if payment_method not in ["cash", "bank"]:
            return "Invalid payment method"
        account = self.users[user_id]
        if total > account[f"{payment_method}_balance"]:
            return f"Your {payment_method} balance is insufficient. Please consider using another payment method."
        account[f"{payment_method}_balance"] -= total
        flight["seats_available"] -= 1
        reservation_id = f"res_{len(self.reservations) + 1}"
        self.reservations.append(
            {
                "reservation_id": reservation_id,
                "user_id": user_id,
                "flight_no": flight_no,
                "payment_method": payment_method,
                "cabin": cabin,
                "baggage": baggage_count,
            }
        )
        return (
            f"Booking successful. Reservation ID: {reservation_id}. Total cost: {total} yuan (including baggage "
            "fees)."
        )

    def modify_flight(  # noqa: PLR0917 - ACEBench's signature (its TypeError texts name these)
        self,
        user_id: Any,
        reservation_id: Any,
        new_flight_no: Any = None,
        new_cabin: Any = None,
        add_baggage: Any = 0,
        new_payment_method: Any = None,
    ) -> str:
        """Change a reservation's flight (same route), cabin (pay or refund the difference) or add bags."""
        reservation = next(
            (
                r
                for r in self.reservations
                if r["reservation_id"] == reservation_id and r["user_id"] == user_id
            ),
            None,
        )
        if not reservation:
            return "Reservation not found or user ID does not match."
        current = next((f for f in self.flights if f["flight_no"] == reservation["flight_no"]), None)
        if not current:
            return "Flight information not found."
        payment = new_payment_method if new_payment_method else reservation["payment_method"]
        user = self.users[user_id]
        if not user:
            return "User information not found."
        notes: list[str] = []
        if new_flight_no and new_flight_no != reservation["flight_no"]:
            new = next((f for f in self.flights if f["flight_no"] == new_flight_no), None)
            if not (
                new and new["origin"] == current["origin"] and new["destination"] == current["destination"]
            ):
                return "Flight change failed: Invalid new flight number or destination does not match."
            reservation["flight_no"] = new_flight_no
            notes.append("Flight number has been changed.")
        if new_cabin and new_cabin != reservation.get("cabin"):
            notes += self._change_cabin(user, reservation, current, new_cabin, payment)
        if add_baggage > 0:
            notes += self._add_bags(user, reservation, add_baggage, payment)
        return " ".join(notes or ["Modification completed with no additional fees."])

    def _change_cabin(
        self, user: Any, reservation: dict[str, Any], flight: dict[str, Any], cabin: Any, payment: Any
    ) -> list[str]:
        difference = self.calculate_price_difference(flight, reservation["cabin"], cabin)
        reservation["cabin"] = cabin
        if difference > 0:
            if self.update_balance(user, payment, -difference):
                return [f"Cabin change successful. Price difference paid: {difference}."]
            return ["Insufficient balance to pay the cabin price difference."]
        if difference < 0:
            self.update_balance(user, payment, -difference)
            return [f"Cabin change successful. Price difference refunded: {-difference}."]
        return []

    def _add_bags(self, user: Any, reservation: dict[str, Any], bags: Any, payment: Any) -> list[str]:
        free = self.get_baggage_allowance(user["membership_level"], reservation["cabin"])
        total = reservation.get("baggage", 0) + bags
        cost = max(0, total - free) * 50
        notes = []
        if cost > 0:
            if self.update_balance(user, payment, -cost):
                notes.append(f"Baggage has been added. Additional fee to be paid: {cost}.")
            else:
                notes.append("Insufficient balance to pay the additional baggage fees.")
        reservation["baggage"] = total
        return notes

    def cancel_reservation(self, user_id: Any, reservation_id: Any, reason: Any) -> str:
        """Refund a reservation to cash: in full when the airline cancelled or more than a day ahead, else 90%."""
        user = self.users.get(user_id, None)
        if not user:
            return "Invalid user ID."
        reservation = next(
            (
                r
                for r in self.reservations
                if r["reservation_id"] == reservation_id and r["user_id"] == user_id
            ),
            None,
        )
        if not reservation:
            return "Invalid reservation ID or it does not belong to the user."
        flight = next((f for f in self.flights if f["flight_no"] == reservation["flight_no"]), None)
        if not flight:
            return "Invalid flight information."
        depart = datetime.strptime(flight["depart_time"], _STAMP)
        if depart < CLOCK:
            return "The flight segment has been used and cannot be canceled."
        price = (
            flight["economy_price"] if reservation["cabin"] == "Economy Class" else flight["business_price"]
        )
        if reason == AIRLINE_CANCELLED:
            self.process_refund(user, price)
            return (
                f"The flight has been canceled. Your reservation will be canceled free of charge, and {price} yuan "
                "has been refunded."
            )
        if depart - CLOCK > timedelta(days=1):
            self.process_refund(user, price)
            return f"More than 24 hours before departure. Free cancellation successful, {price} yuan has been refunded."
        fee = price * 0.1
        self.process_refund(user, price - fee)
        return (
            f"Less than 24 hours before departure. A cancellation fee of {fee} yuan has been deducted, and "
            f"{price - fee} yuan has been refunded."
        )

    def process_refund(self, user: Any, amount: Any) -> None:
        """Add ``amount`` to the user's cash balance (ACEBench also prints a line)."""
        user["cash_balance"] += amount

    def calculate_price_difference(self, flight: Any, old_cabin: Any, new_cabin: Any) -> Any:
        """New cabin's price minus the old one's (0 for an unknown cabin)."""
        prices = {"Economy Class": flight["economy_price"], "Business Class": flight["business_price"]}
        return prices.get(new_cabin, 0) - prices.get(old_cabin, 0)
