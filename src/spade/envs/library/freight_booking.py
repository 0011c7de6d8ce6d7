"""Freight booking: compose order, customer, catalogue, stock, rating and booking APIs.

The agent ships one customer order. No single API knows enough: the order names a customer and a product,
the customer record gives the destination zone, the catalogue gives the unit weight, the stock API lists the
warehouses (and their zones) that hold the product, and the rating API prices a lane from an origin zone to a
destination zone for a given weight. The outputs of each call are the inputs of the next. The agent must book
the cheapest (warehouse, service) pair that can ship the whole quantity within the order's deadline and
answer with the tracking number. The final state is checked: exactly one live booking, the optimal one.
"""

from __future__ import annotations

import random
from typing import Any, ClassVar

from spade.env import ToolEnv, answer_action, function_schema, tool_call_action

SERVICES = ("ground", "express", "priority")
# service -> (base fee, fee per kg, days at distance 0, extra days per zone of distance)
_TARIFF = {
    "ground": (6.0, 0.9, 2.0, 1.0),
    "express": (12.0, 1.6, 1.0, 0.5),
    "priority": (25.0, 2.4, 1.0, 0.0),
}
_PRODUCTS = (
    "cast-iron skillet", "espresso grinder", "standing desk frame", "camping stove", "air purifier",
    "cordless drill kit", "rowing machine rail", "ceramic planter set", "studio monitor pair", "bike trainer",
)  # fmt: skip
_FIRST = ("Ada", "Bilal", "Chen", "Dara", "Elif", "Femi", "Greta", "Hugo", "Iris", "Joao", "Kemal", "Lena")
_LAST = ("Okafor", "Lindqvist", "Moreau", "Tanaka", "Reyes", "Novak", "Haddad", "Kowalski", "Byrne", "Sato")
_SITES = ("Northgate", "Riverside", "Harbor Point", "Eastfield", "Millbrook", "Westcliff", "Stonebridge")
N_ZONES = 8


def _text(value: object, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string")
    return value.strip().upper()


def _number(value: object, name: str) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be a number")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    raise ValueError(f"{name} must be a number, got {value!r}")


class FreightBookingEnv(ToolEnv):
    """Ship a customer order at the lowest cost that meets its deadline by chaining five logistics APIs.

    Difficulty sets how many warehouses hold the product, how many of them can ship the whole quantity and
    how tight the deadline is (level 0: one eligible warehouse and a loose deadline).
    """

    skill = "api_orchestration"
    difficulty_levels = 3
    default_difficulty = 1
    max_turns = 20
    tools: ClassVar[list[dict[str, Any]]] = [
        function_schema("get_order", "Look up an order: customer, SKU, quantity, deadline.",
                        order_id=("string", "Order id, e.g. ORD-12345")),
        function_schema("get_customer", "Look up a customer: name and delivery zone.",
                        customer_id=("string", "Customer id, e.g. C-104")),
        function_schema("get_product", "Look up a catalogue item: name and unit weight in kg.",
                        sku=("string", "Stock keeping unit, e.g. SKU-4410")),
        function_schema("check_stock", "List the warehouses that hold a SKU, with units on hand and zone.",
                        sku=("string", "Stock keeping unit")),
        function_schema("quote_rate", "Price a shipment on a lane for every service (ground, express, "
                        "priority): cost and transit days.",
                        origin_zone=("string", "Zone of the shipping warehouse, e.g. Z3"),
                        dest_zone=("string", "Zone of the customer, e.g. Z7"),
                        weight_kg=("number", "Total shipment weight in kg")),
        function_schema("book_shipment", "Book the shipment of a whole order; returns a tracking number.",
                        order_id=("string", "Order id"), warehouse_id=("string", "Warehouse id, e.g. WH-2"),
                        service=("string", "One of: ground, express, priority")),
        function_schema("cancel_shipment", "Cancel a booked shipment and release its stock.",
                        tracking_number=("string", "Tracking number returned by book_shipment")),
        function_schema("track_shipment", "Show the status of a booked shipment.",
                        tracking_number=("string", "Tracking number")),
    ]  # fmt: skip

    # -- world ------------------------------------------------------------------------------------------
    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        holders, eligible = ((2, 1), (4, 2), (6, 3))[self.difficulty]
        while True:
            self._build_world(holders, eligible)
            if self._pick_deadline():
                break
        self.bookings: dict[str, dict[str, Any]] = {}
        self._tracking_pool = [f"1Z{self.rng.randrange(16**8):08X}" for _ in range(12)]
        order = self.orders[self.order_id]
        task = (
            f"Customer service ticket: order {self.order_id} has not shipped yet. Ship the whole order "
            "from one warehouse that has every unit in stock, using the cheapest service that still "
            f"arrives within the order's deadline ({order['deadline_days']} days). Book it, then answer "
            "with the tracking number."
        )
        return self._intro(task), {"difficulty": self.difficulty}

    def _build_world(self, holders: int, eligible: int) -> None:
        rng = self.rng
        self.lane = {
            (a, b, s): rng.uniform(0.85, 1.25)
            for a in range(1, N_ZONES + 1)
            for b in range(1, N_ZONES + 1)
            for s in SERVICES
        }
        self.customers: dict[str, dict[str, Any]] = {
            f"C-{100 + i}": {
                "name": f"{rng.choice(_FIRST)} {rng.choice(_LAST)}",
                "zone": rng.randint(1, N_ZONES),
            }
            for i in range(rng.randint(8, 14))
        }
        skus = rng.sample(range(1000, 9999), len(_PRODUCTS))
        self.products: dict[str, dict[str, Any]] = {
            f"SKU-{n}": {"name": p, "kg": round(rng.uniform(0.8, 9.5), 1)}
            for n, p in zip(skus, _PRODUCTS, strict=True)
        }
        sites = rng.sample(_SITES, 6)
        self.warehouses: dict[str, dict[str, Any]] = {
            f"WH-{i + 1}": {"site": s, "zone": rng.randint(1, N_ZONES)} for i, s in enumerate(sites)
        }
        self.stock = {
            sku: {w: rng.randint(0, 40) for w in rng.sample(list(self.warehouses), 3)}
            for sku in self.products
        }
        self.orders: dict[str, dict[str, Any]] = {}
        for _ in range(12):
            self.orders[f"ORD-{rng.randrange(10000, 99999)}"] = {
                "customer": rng.choice(list(self.customers)),
                "sku": rng.choice(list(self.products)),
                "qty": rng.randint(1, 6),
                "deadline_days": rng.randint(3, 8),
            }
        self.order_id = rng.choice(list(self.orders))
        order = self.orders[self.order_id]
        order["qty"] = rng.randint(8, 20)
        holding = rng.sample(list(self.warehouses), holders)
        self.stock[order["sku"]] = {
            w: (
                rng.randint(order["qty"], order["qty"] + 30)
                if i < eligible
                else rng.randint(1, order["qty"] - 1)
            )
            for i, w in enumerate(holding)
        }
        # the customer lives away from the eligible warehouses so distance matters
        self.customers[order["customer"]]["zone"] = rng.randint(1, N_ZONES)

    def _options(self) -> list[tuple[float, int, str, str]]:
        """Every (cost, days, warehouse, service) that can ship the whole target order."""
        order = self.orders[self.order_id]
        dest = self.customers[order["customer"]]["zone"]
        weight = round(order["qty"] * self.products[order["sku"]]["kg"], 1)
        out = []
        for wid, units in self.stock[order["sku"]].items():
            if units >= order["qty"]:
                for service in SERVICES:
                    cost, days = self._rate(self.warehouses[wid]["zone"], dest, weight, service)
                    out.append((cost, days, wid, service))
        return sorted(out)

    def _pick_deadline(self) -> bool:
        """Choose a deadline with a unique cheapest feasible option (tighter at higher difficulty)."""
        options = self._options()
        days = sorted({d for _, d, _, _ in options})
        pick = (
            days[-1]
            if self.difficulty == 0
            else days[min(len(days) - 1, self.rng.randint(0, len(days) // 2))]
        )
        feasible = [o for o in options if o[1] <= pick]
        if len(feasible) >= 2 and feasible[1][0] - feasible[0][0] < 0.5:
            return False
        self.orders[self.order_id]["deadline_days"] = pick
        self.best = feasible[0]
        return True

    def _rate(self, origin: int, dest: int, weight: float, service: str) -> tuple[float, int]:
        base, per_kg, days0, per_zone = _TARIFF[service]
        distance = abs(origin - dest)
        cost = (base + per_kg * weight) * (1 + 0.15 * distance) * self.lane[(origin, dest, service)]
        return round(cost, 2), int(days0 + per_zone * distance + 0.5)

    def _intro(self, task: str) -> str:
        lines = [task, "", "Tools:"]
        for schema in self.tools:
            fn = schema["function"]
            lines.append(f"- {fn['name']}({', '.join(fn['parameters']['properties'])}): {fn['description']}")
        lines += [
            "",
            'Call tools with <tool_call>{"name": "<tool>", "arguments": {...}}</tool_call>'
            " (one or more per turn).",
            "Finish with <answer>TRACKING_NUMBER</answer>; your first answer ends the episode.",
        ]
        return "\n".join(lines)

    # -- tools ------------------------------------------------------------------------------------------
    def tool_get_order(self, order_id: object) -> str:
        oid = _text(order_id, "order_id")
        if oid not in self.orders:
            return f"Error: no order {oid}."
        o = self.orders[oid]
        return (
            f"{oid}: customer {o['customer']}, sku {o['sku']}, quantity {o['qty']}, "
            f"deadline {o['deadline_days']} days"
        )

    def tool_get_customer(self, customer_id: object) -> str:
        cid = _text(customer_id, "customer_id")
        if cid not in self.customers:
            return f"Error: no customer {cid}."
        c = self.customers[cid]
        return f"{cid}: {c['name']}, delivery zone Z{c['zone']}"

    def tool_get_product(self, sku: object) -> str:
        key = _text(sku, "sku")
        if key not in self.products:
            return f"Error: no product {key}."
        p = self.products[key]
        return f"{key}: {p['name']}, unit weight {p['kg']} kg"

    def tool_check_stock(self, sku: object) -> str:
        key = _text(sku, "sku")
        if key not in self.stock:
            return f"Error: no product {key}."
        rows = [
            f"{w} ({self.warehouses[w]['site']}, zone Z{self.warehouses[w]['zone']}): {n} units"
            for w, n in self.stock[key].items()
        ]
        return f"Stock for {key}:\n" + "\n".join(rows)

    def tool_quote_rate(self, origin_zone: object, dest_zone: object, weight_kg: object) -> str:
        origin, dest = self._zone(origin_zone, "origin_zone"), self._zone(dest_zone, "dest_zone")
        weight = _number(weight_kg, "weight_kg")
        if not 0 < weight <= 2000:
            return "Error: weight_kg must be in (0, 2000]."
        rows = []
        for service in SERVICES:
            cost, days = self._rate(origin, dest, weight, service)
            rows.append(f"{service}: {cost:.2f} EUR, {days} day{'s' if days != 1 else ''}")
        return f"Lane Z{origin} -> Z{dest}, {weight:g} kg:\n" + "\n".join(rows)

    def _zone(self, value: object, name: str) -> int:
        text = _text(value, name).removeprefix("Z")
        if not text.isdigit() or not 1 <= int(text) <= N_ZONES:
            raise ValueError(f"{name} must be a zone Z1..Z{N_ZONES}")
        return int(text)

    def tool_book_shipment(self, order_id: object, warehouse_id: object, service: object) -> str:
        oid, wid = _text(order_id, "order_id"), _text(warehouse_id, "warehouse_id")
        svc = _text(service, "service").lower()
        if oid not in self.orders:
            return f"Error: no order {oid}."
        if wid not in self.warehouses:
            return f"Error: no warehouse {wid}."
        if svc not in SERVICES:
            return f"Error: service must be one of {', '.join(SERVICES)}."
        live = [t for t, b in self.bookings.items() if b["order"] == oid and b["status"] == "booked"]
        if live:
            return f"Error: order {oid} is already booked ({live[0]}); cancel it first to rebook."
        order = self.orders[oid]
        if self.stock[order["sku"]].get(wid, 0) < order["qty"]:
            return f"Error: {wid} does not hold {order['qty']} units of {order['sku']}."
        self.stock[order["sku"]][wid] -= order["qty"]
        tracking = self._tracking_pool[len(self.bookings) % len(self._tracking_pool)]
        tracking = tracking if tracking not in self.bookings else f"{tracking}{len(self.bookings)}"
        self.bookings[tracking] = {"order": oid, "warehouse": wid, "service": svc, "status": "booked"}
        return f"Booked {oid} from {wid} by {svc}. Tracking number {tracking}."

    def tool_cancel_shipment(self, tracking_number: object) -> str:
        tracking = _text(tracking_number, "tracking_number")
        booking = self.bookings.get(tracking)
        if booking is None or booking["status"] != "booked":
            return f"Error: no live shipment {tracking}."
        booking["status"] = "cancelled"
        order = self.orders[booking["order"]]
        self.stock[order["sku"]][booking["warehouse"]] += order["qty"]
        return f"Cancelled {tracking}; stock released."

    def tool_track_shipment(self, tracking_number: object) -> str:
        tracking = _text(tracking_number, "tracking_number")
        booking = self.bookings.get(tracking)
        if booking is None:
            return f"Error: unknown tracking number {tracking}."
        status, service, wid = booking["status"], booking["service"], booking["warehouse"]
        return f"{tracking}: {status}, {service} from {wid} (awaiting pickup)"

    # -- verdict ----------------------------------------------------------------------------------------
    def check_answer(self, answer: str) -> bool:
        live = {t: b for t, b in self.bookings.items() if b["status"] == "booked"}
        _, _, wid, service = self.best
        if len(live) != 1:
            return False
        tracking, booking = next(iter(live.items()))
        right = (
            booking["order"] == self.order_id
            and booking["warehouse"] == wid
            and booking["service"] == service
        )
        return right and answer.strip().upper() == tracking

    def solution(self) -> list[str]:
        order = self.orders[self.order_id]
        dest = self.customers[order["customer"]]["zone"]
        weight = round(order["qty"] * self.products[order["sku"]]["kg"], 1)
        eligible = [w for w, n in self.stock[order["sku"]].items() if n >= order["qty"]]
        tracking = self._tracking_pool[len(self.bookings) % len(self._tracking_pool)]
        return [
            tool_call_action("get_order", order_id=self.order_id),
            tool_call_action("get_customer", customer_id=order["customer"]),
            tool_call_action("get_product", sku=order["sku"]),
            tool_call_action("check_stock", sku=order["sku"]),
            *[
                tool_call_action(
                    "quote_rate",
                    origin_zone=f"Z{self.warehouses[w]['zone']}",
                    dest_zone=f"Z{dest}",
                    weight_kg=weight,
                )
                for w in eligible
            ],
            tool_call_action(
                "book_shipment", order_id=self.order_id, warehouse_id=self.best[2], service=self.best[3]
            ),
            answer_action(tracking),
        ]

    def sample_action(self, rng: random.Random) -> str:
        """A random plausible action: a tool call with arguments drawn from the world, or a guess."""
        roll = rng.random()
        if roll < 0.15:
            return answer_action(rng.choice(self._tracking_pool))
        zone = f"Z{rng.randint(1, N_ZONES)}"
        calls: list[tuple[str, dict[str, Any]]] = [
            ("get_order", {"order_id": rng.choice(list(self.orders))}),
            ("get_customer", {"customer_id": rng.choice(list(self.customers))}),
            ("get_product", {"sku": rng.choice(list(self.products))}),
            ("check_stock", {"sku": rng.choice(list(self.products))}),
            (
                "quote_rate",
                {
                    "origin_zone": zone,
                    "dest_zone": f"Z{rng.randint(1, N_ZONES)}",
                    "weight_kg": round(rng.uniform(1, 150), 1),
                },
            ),
            (
                "book_shipment",
                {
                    "order_id": rng.choice([self.order_id, *self.orders]),
                    "warehouse_id": rng.choice(list(self.warehouses)),
                    "service": rng.choice(SERVICES),
                },
            ),
            ("cancel_shipment", {"tracking_number": rng.choice([*self.bookings, *self._tracking_pool[:2]])}),
            ("track_shipment", {"tracking_number": rng.choice(self._tracking_pool)}),
        ]
        name, args = rng.choice(calls)
        return tool_call_action(name, **args)


ENV = FreightBookingEnv
