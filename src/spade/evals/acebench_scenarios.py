"""ACEBench's English phone platform (``model_inference/multi_step/scenariosen/phone_platform``), ported.

The agent categories run the model's calls against these classes, and the end state (``SAVED``'s attributes)
is what ACEBench compares with ``ground_truth``. Each class, method, parameter name, return value and message
is ACEBench's, so a call gets the reply ACEBench gives it (a Python error, such as a missing argument, reads
the same because the names are the same). ACEBench's quirks are kept on purpose: ``MessageApi``,
``ReminderApi`` and ``FoodPlatform`` read only ``wifi``/``logged_in`` (and ``logged_in_users``) from a
scenario, ignoring their own ``initial_config`` entry; a message sent here has no ``time``, so the
latest/earliest-id calls fail on it (``KeyError: 'time'``) as in ACEBench; ``check_balance`` of an unknown
user returns 0.0 (ACEBench also prints a line). The multi-step and multi-turn copies of these files in
ACEBench are identical; the multi-step copy is the one cited.
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any

MESSAGE_USERS: dict[str, dict[str, Any]] = {
    "Eve": {"user_id": "USR100", "phone_number": "123-456-7890", "occupation": "Software Engineer"},
    "Frank": {"user_id": "USR101", "phone_number": "234-567-8901", "occupation": "Data Scientist"},
    "Grace": {"user_id": "USR102", "phone_number": "345-678-9012", "occupation": "Product Manager"},
    "Helen": {"user_id": "USR103", "phone_number": "456-789-0123", "occupation": "UX Designer"},
    "Isaac": {"user_id": "USR104", "phone_number": "567-890-1234", "occupation": "DevOps Engineer"},
    "Jack": {"user_id": "USR105", "phone_number": "678-901-2345", "occupation": "Marketing Specialist"},
}
_INBOX = (
    ("USR100", "USR101", "Hey Frank, don't forget about our meeting on 2024-06-11 at 4 PM in Conference Room 1.",
     "2024-06-09"),
    ("USR101", "USR102", "Can you help me order a \"Margherita Pizza\" delivery? The merchant is Domino's.",
     "2024-03-09"),
    ("USR102", "USR103", "Please check the milk tea delivery options available from Heytea and purchase a cheaper "
     "milk tea for me. After making the purchase, remember to reply to me with \"Already bought.\"", "2023-12-05"),
    ("USR103", "USR102", "No problem Helen, I can assist you.", "2024-09-09"),
    ("USR104", "USR105", "Isaac, are you available for a call?", "2024-06-06"),
    ("USR105", "USR104", "Yes Jack, let's do it in 30 minutes.", "2024-01-15"),
)  # fmt: skip
INBOX: dict[int, dict[str, Any]] = {
    k: {"sender_id": s, "receiver_id": r, "message": m, "time": t} for k, (s, r, m, t) in enumerate(_INBOX, 1)
}
REMINDERS: dict[int, dict[str, Any]] = {
    1: {"reminder_id": 1001, "title": "Doctor's Appointment", "description": "Visit Dr. Smith for a checkup.",
        "time": "2024-07-15 09:30", "notified": False},
    2: {"reminder_id": 1002, "title": "Team Meeting", "description": "Monthly project review with the team.",
        "time": "2024-07-17 11:00", "notified": False},
    3: {"reminder_id": 1003, "title": "To-do list", "description": "First, help Frank place a food delivery order "
        "at \"Hema Fresh,\" ordering two \"Fresh Gift Packs.\" Then, send a message to Frank saying, \"The price "
        "of the purchased goods is () yuan.\" Replace the parentheses with the actual amount, keeping one decimal "
        "place.", "time": "2024-07-16 11:00", "notified": False},
}  # fmt: skip
FOOD_USERS: dict[str, dict[str, Any]] = {
    "Eve": {"user_id": "U100", "password": "password123", "balance": 500.0},
    "Frank": {"user_id": "U101", "password": "password456", "balance": 300.0},
    "Grace": {"user_id": "U102", "password": "password789", "balance": 150.0},
    "Helen": {"user_id": "U103", "password": "password321", "balance": 800.0},
    "Isaac": {"user_id": "U104", "password": "password654", "balance": 400.0},
    "Jack": {"user_id": "U105", "password": "password654", "balance": 120.0},
}
_MERCHANTS = (
    ("Domino's", "M100", "Pizza", (("Margherita Pizza", 68.0), ("Super Supreme Pizza", 88.0))),
    (
        "Rice Village Bibimbap",
        "M101",
        "Bibimbap",
        (("Stone Pot Bibimbap", 35.0), ("Korean Beef Bibimbap", 45.0)),
    ),
    ("Haidilao", "M102", "Hotpot", (("Beef Rolls", 68.0), ("Seafood Platter", 88.0))),
    ("Heytea", "M103", "Milk Tea", (("Cheese Milk Tea", 25.0), ("Four Seasons Spring Milk Tea", 22.0))),
    ("Hema Fresh", "M104", "Fresh Grocery", (("Organic Vegetable Pack", 15.0), ("Fresh Gift Pack", 99.0))),
    ("Jiutian BBQ", "M105", "BBQ", (("Korean Grilled Beef", 128.0), ("Grilled Pork Belly", 78.0))),
)
MERCHANTS: dict[str, dict[str, Any]] = {
    name: {"merchant_id": mid, "service_type": kind, "menu": [{"product": p, "price": c} for p, c in menu]}
    for name, mid, kind, menu in _MERCHANTS
}


def _off(flag: Any) -> bool:
    """ACEBench's ``flag == False`` test (kept: ``not flag`` would also refuse a None)."""
    return bool(flag == False)  # noqa: E712 - ACEBench's own comparison, see the docstring


def _fail(message: str) -> dict[str, Any]:
    return {"status": False, "message": message}


class BaseApi:
    """The device: Wi-Fi and log-in (ACEBench's ``phone_platform/base_api.py``)."""

    def __init__(self) -> None:
        self.wifi: Any = False
        self.logged_in: Any = True

    def _load_scenario(self, scenario: dict[str, Any], long_context: bool = False) -> None:
        self.wifi = scenario.get("wifi", False)
        self.logged_in = scenario.get("logged_in", True)

    def turn_on_wifi(self) -> dict[str, Any]:
        """Turn on Wi-Fi."""
        self.wifi = True
        return {"status": True, "message": "Wi-Fi has been turned on"}

    def login_device(self) -> dict[str, Any]:
        """Log in to the device."""
        self.logged_in = True
        return {"status": True, "message": "Device has been logged in"}


class MessageApi(BaseApi):
    """Text messages between six users, six messages at most (``phone_platform/message.py``)."""

    def __init__(self) -> None:
        super().__init__()
        self.max_capacity = 6
        self.user_list = copy.deepcopy(MESSAGE_USERS)
        self.inbox: dict[Any, dict[str, Any]] = copy.deepcopy(INBOX)
        self.message_id_counter = 6

    def send_message(self, sender_name: Any, receiver_name: Any, message: Any) -> dict[str, Any]:
        """Send a message (refused when logged out, offline, the inbox is full or a user is unknown)."""
        if _off(self.logged_in):
            return _fail("Device not logged in, unable to send message")
        if _off(self.wifi):
            return _fail("Wi-Fi is turned off, cannot send messages at this time")
        if len(self.inbox) >= self.max_capacity:
            return _fail("Inbox capacity is full. You need to ask the user which message to delete.")
        if sender_name not in self.user_list or receiver_name not in self.user_list:
            return _fail("Sender or receiver does not exist")
        self.message_id_counter += 1
        self.inbox[self.message_id_counter] = {
            "sender_id": self.user_list[sender_name]["user_id"],
            "receiver_id": self.user_list[receiver_name]["user_id"],
            "message": message,
        }
        return {"status": True, "message": f"Message successfully sent to {receiver_name}."}

    def delete_message(self, message_id: Any) -> dict[str, Any]:
        """Delete a message by id."""
        if _off(self.logged_in):
            return _fail("Device not logged in, unable to delete message")
        if message_id not in self.inbox:
            return _fail("Message ID does not exist")
        del self.inbox[message_id]
        return {"status": True, "message": f"Message ID {message_id} has been successfully deleted."}

    def view_messages_between_users(self, sender_name: Any, receiver_name: Any) -> dict[str, Any]:
        """The messages sent from one user to another."""
        if _off(self.logged_in):
            return _fail("Device not logged in, unable to view message information")
        if sender_name not in self.user_list:
            return _fail("Sender does not exist")
        if receiver_name not in self.user_list:
            return _fail("Receiver does not exist")
        sender_id = self.user_list[sender_name]["user_id"]
        receiver_id = self.user_list[receiver_name]["user_id"]
        found = [
            {"id": k, "sender": sender_name, "receiver": receiver_name, "message": m["message"]}
            for k, m in self.inbox.items()
            if m["sender_id"] == sender_id and m["receiver_id"] == receiver_id
        ]
        if not found:
            return _fail("No related message records found")
        return {"status": True, "messages": found}

    def search_messages(self, user_name: Any, keyword: Any) -> dict[str, Any]:
        """A user's sent and received messages that contain ``keyword`` (any case)."""
        if user_name not in self.user_list:
            return _fail("User does not exist")
        user_id = self.user_list[user_name]["user_id"]
        found = [
            {"id": k, "sender_id": m["sender_id"], "receiver_id": m["receiver_id"], "message": m["message"]}
            for k, m in self.inbox.items()
            if user_id in (m["sender_id"], m["receiver_id"]) and keyword.lower() in m["message"].lower()
        ]
        if not found:
            return _fail("No messages found containing the keyword")
        return {"status": True, "messages": found}

    def get_all_message_times_with_ids(self) -> dict[Any, Any]:
        """Every message's time by id."""
        if _off(self.logged_in):
            return _fail(
                "Device not logged in, unable to retrieve all message times and their corresponding message IDs."
            )
        return {k: m["time"] for k, m in self.inbox.items()}

    def _extreme_id(self, latest: bool) -> Any:
        best_id, best = None, None
        for message_id, data in self.inbox.items():
            when = datetime.strptime(data["time"], "%Y-%m-%d")
            if best is None or (when > best if latest else when < best):
                best, best_id = when, message_id
        return best_id

    def get_latest_message_id(self) -> dict[str, Any]:
        """The id of the message with the latest time (the first of equal times)."""
        if _off(self.logged_in):
            return _fail("Device not logged in, unable to retrieve the latest sent message ID.")
        if not self.inbox:
            return _fail("No message records found")
        found = self._extreme_id(latest=True)
        return {"status": True, "message": f"The latest message ID is {found}", "message_id": found}

    def get_earliest_message_id(self) -> dict[str, Any]:
        """The id of the message with the earliest time (the first of equal times)."""
        if _off(self.logged_in):
            return _fail("Device not logged in, unable to retrieve the earliest sent message ID.")
        if not self.inbox:
            return _fail("No message records found")
        found = self._extreme_id(latest=False)
        return {"status": True, "message": f"The earliest message ID is {found}", "message_id": found}


class ReminderApi(BaseApi):
    """Reminders, six at most (``phone_platform/reminder.py``; like ACEBench's, its __init__ skips BaseApi's)."""

    def __init__(self) -> None:  # like ACEBench's: BaseApi.__init__ is not called
        self.max_capacity = 6
        self.reminder_list: dict[Any, dict[str, Any]] = copy.deepcopy(REMINDERS)
        self.reminder_id_counter = 3

    def _check_capacity(self) -> bool:
        return len(self.reminder_list) >= self.max_capacity

    def view_reminder_by_title(self, title: Any) -> dict[str, Any]:
        """The first reminder with this exact title."""
        if _off(self.logged_in):
            return _fail("The device is not logged in, so you cannot view notifications")
        for reminder in self.reminder_list.values():
            if reminder["title"] == title:
                return {"status": True, "reminder": reminder}
        return _fail(f"No reminder found with the title '{title}'.")

    def add_reminder(self, title: Any, description: Any, time: Any) -> dict[str, Any]:
        """Add a reminder (its id is the counter's next value)."""
        if _off(self.logged_in):
            return _fail("Device not logged in. Unable to add a new reminder.")
        if self._check_capacity():
            return _fail("Reminder capacity is full. Unable to add a new reminder.")
        self.reminder_id_counter += 1
        reminder_id = self.reminder_id_counter
        self.reminder_list[reminder_id] = {
            "reminder_id": reminder_id,
            "title": title,
            "description": description,
            "time": time,
            "notified": False,
        }
        return {"status": True, "message": f"Reminder '{title}' was successfully added."}

    def delete_reminder(self, reminder_id: Any) -> dict[str, Any]:
        """Delete a reminder by its key in the list."""
        if _off(self.logged_in):
            return _fail("Device not logged in. Unable to delete the specified reminder.")
        if reminder_id not in self.reminder_list:
            return _fail("Reminder ID does not exist.")
        del self.reminder_list[reminder_id]
        return {"status": True, "message": f"Reminder ID {reminder_id} was successfully deleted."}

    def view_all_reminders(self) -> dict[str, Any]:
        """Every reminder (title, description, time, notified)."""
        if not self.reminder_list:
            return _fail("No reminders found.")
        keys = ("title", "description", "time", "notified")
        return {"status": True, "reminders": [{k: r[k] for k in keys} for r in self.reminder_list.values()]}


class FoodPlatform(BaseApi):
    """Food delivery: users with balances, six merchants (``phone_platform/food_services.py``)."""

    def __init__(self) -> None:  # like ACEBench's: BaseApi.__init__ is not called
        self.users = copy.deepcopy(FOOD_USERS)
        self.merchant_list = copy.deepcopy(MERCHANTS)
        self.logged_in_users: Any = []
        self.orders: list[dict[str, Any]] = []

    def _load_scenario(self, scenario: dict[str, Any], long_context: bool = False) -> None:
        super()._load_scenario(scenario, long_context)
        self.logged_in_users = scenario.get("logged_in_users", [])

    def login_food_platform(self, username: Any, password: Any) -> dict[str, Any]:
        """Log a user in (needs Wi-Fi and the user's password)."""
        if _off(self.wifi):
            return _fail("Wi-Fi is not enabled, unable to login")
        if username not in self.users:
            return _fail("User does not exist")
        if self.users[username]["password"] != password:
            return _fail("Incorrect password")
        if username in self.logged_in_users:
            return _fail(f"{username} is already logged in")
        self.logged_in_users.append(username)
        return {"status": True, "message": f"User {username} has successfully logged in!"}

    def view_logged_in_users(self) -> dict[str, Any]:
        """The users logged in to the platform."""
        if not self.logged_in_users:
            return _fail("No users are currently logged in to the food platform")
        return {"status": True, "logged_in_users": self.logged_in_users}

    def check_balance(self, user_name: Any) -> Any:
        """A user's balance (0.0 for an unknown user)."""
        if user_name in self.users:
            return self.users[user_name]["balance"]
        return 0.0

    def _priced(self, merchant_name: Any, items: Any) -> tuple[float, list[dict[str, Any]]] | dict[str, Any]:
        total, lines = 0.0, []
        for item in items:
            product, quantity = item.get("product"), item.get("quantity", 1)
            if not isinstance(quantity, int) or quantity <= 0:
                return _fail(f"Invalid quantity {quantity} for product {product}")
            entry = next(
                (p for p in self.merchant_list[merchant_name]["menu"] if p["product"] == product), None
            )
            if entry is None:
                return _fail(f"Product {product} does not exist in {merchant_name}'s menu")
            total += entry["price"] * quantity
            lines.append({"product": product, "quantity": quantity, "price_per_unit": entry["price"]})
        return total, lines

    def add_food_delivery_order(self, username: Any, merchant_name: Any, items: Any) -> dict[str, Any]:
        """Order ``items`` (``[{"product": ..., "quantity": ...}]``) and pay from the user's balance."""
        if username not in self.logged_in_users:
            return _fail(f"User {username} is not logged in to the food platform")
        if merchant_name not in self.merchant_list:
            return _fail("Merchant does not exist")
        priced = self._priced(merchant_name, items)
        if isinstance(priced, dict):
            return priced
        total, lines = priced
        if total > self.users[username]["balance"]:
            return _fail("Insufficient balance to place the order")
        self.users[username]["balance"] -= total
        order = {"user_name": username, "merchant_name": merchant_name, "items": lines, "total_price": total}
        self.orders.append(order)
        return {
            "status": True,
            "message": f"Food delivery order successfully placed with {merchant_name}. Total amount: {total} yuan",
        }

    def get_products(self, merchant_name: Any) -> Any:
        """A merchant's menu."""
        merchant = self.merchant_list.get(merchant_name)
        if merchant:
            return merchant["menu"]
        return _fail(f"Merchant '{merchant_name}' does not exist")

    def view_orders(self, user_name: Any) -> dict[str, Any]:
        """A user's orders."""
        found = [o for o in self.orders if o["user_name"] == user_name]
        if not found:
            return _fail("User has no order records")
        return {"status": True, "orders": found}

    def search_orders(self, keyword: Any) -> dict[str, Any]:
        """Orders whose merchant or a product contains ``keyword`` (any case)."""
        found = [
            o
            for o in self.orders
            if keyword.lower() in o["merchant_name"].lower()
            or any(keyword.lower() in i["product"].lower() for i in o.get("items", []))
        ]
        if not found:
            return _fail("No matching orders found")
        return {"status": True, "orders": found}
