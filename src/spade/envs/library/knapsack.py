"""Knapsack: pack the most valuable set of items that fits in a bag, then say done.

Optimization seed environment. Items are added or removed one per turn; the bag never accepts more than
its capacity. Saying ``done`` ends the episode: a load worth the optimum wins (1.0), anything less earns a
partial reward below 0.5 in proportion to its value. Instances are drawn so that the best load holds at
least three items and, on harder levels, taking items greedily by value per weight (or by value) is not
optimal, so the agent has to compare combinations.
"""

from __future__ import annotations

import random
import re
from typing import Any

from spade.env import TextEnv

ITEMS = (
    "rope",
    "tent",
    "stove",
    "lamp",
    "map",
    "radio",
    "kettle",
    "blanket",
    "axe",
    "camera",
    "flute",
    "jar",
)
# (item count, largest weight, largest value, spare turns) per difficulty level
LEVELS: tuple[tuple[int, int, int, int], ...] = ((4, 9, 15, 3), (6, 12, 20, 4), (8, 15, 30, 5))


def clean(action: str) -> str:
    """Unwrap an optional \\boxed{...}, lower-case, and drop surrounding spaces and punctuation."""
    text = str(action)
    boxed = re.search(r"\\boxed\s*\{(.*)\}", text, re.DOTALL)
    if boxed:
        text = boxed.group(1)
    return re.sub(r"\s+", " ", text).strip().strip(".,;:!?\"'`()[]{} ").lower()


def greedy(weights: list[int], values: list[int], capacity: int, key: list[float]) -> int:
    """Value of the load built by taking items in decreasing ``key`` order while they fit."""
    load, total = 0, 0
    for i in sorted(range(len(weights)), key=lambda i: -key[i]):
        if load + weights[i] <= capacity:
            load, total = load + weights[i], total + values[i]
    return total


class KnapsackEnv(TextEnv):
    """Choose items of given weight and value to maximise the value packed in a bag of fixed capacity."""

    skill = "optimization"
    difficulty_levels = 3
    default_difficulty = 1
    max_turns = 13  # the largest budget of any level; reset sets this instance's budget

    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        count, max_weight, max_value, spare = LEVELS[self.difficulty]
        while True:
            self.names = self.rng.sample(ITEMS, count)
            self.weights = [self.rng.randint(1, max_weight) for _ in range(count)]
            self.values = [self.rng.randint(1, max_value) for _ in range(count)]
            self.capacity = sum(self.weights) * self.rng.randint(45, 65) // 100
            self.best, self.best_set = self._optimum()
            if self._interesting():
                break
        self.packed: set[int] = set()
        self.max_turns = self.turn_budget(len(self.best_set) + 1 + spare)
        return self._observe("New bag.", this_turn=0), {"difficulty": self.difficulty}

    def _optimum(self) -> tuple[int, tuple[int, ...]]:
        """Best value by exhaustive search, with the smallest optimal item set (items numbered from 0)."""
        n = len(self.weights)
        weight, value = [0] * (1 << n), [0] * (1 << n)
        best = 0
        for subset in range(1, 1 << n):
            low = subset & -subset
            item = low.bit_length() - 1
            weight[subset] = weight[subset ^ low] + self.weights[item]
            value[subset] = value[subset ^ low] + self.values[item]
            if weight[subset] <= self.capacity and value[subset] > value[best]:
                best = subset
            elif weight[subset] <= self.capacity and value[subset] == value[best]:
                best = min(best, subset, key=int.bit_count)
        return value[best], tuple(i for i in range(n) if best >> i & 1)

    def _interesting(self) -> bool:
        """At least three items in the best load, and greedy shortcuts fail on harder levels."""
        if len(self.best_set) < 3 or self.capacity >= sum(self.weights):
            return False
        ratio = [v / w for v, w in zip(self.values, self.weights, strict=True)]
        by_ratio = greedy(self.weights, self.values, self.capacity, ratio)
        by_value = greedy(self.weights, self.values, self.capacity, [float(v) for v in self.values])
        if self.difficulty >= 1 and by_ratio == self.best:
            return False
        return not (self.difficulty >= 2 and by_value == self.best)

    def _observe(self, event: str, this_turn: int = 1) -> str:
        """The state as text; ``this_turn`` is 1 inside step (end_turn is about to count it), 0 at reset."""
        items = "\n".join(
            f"{i + 1}. {name}: weight {w}, value {v}" + ("  [packed]" if i in self.packed else "")
            for i, (name, w, v) in enumerate(zip(self.names, self.weights, self.values, strict=True))
        )
        weight = sum(self.weights[i] for i in self.packed)
        value = sum(self.values[i] for i in self.packed)
        return (
            f"{event}\nPack the most valuable load that fits in a bag of capacity {self.capacity}.\n"
            f"Items:\n{items}\nBag: weight {weight}/{self.capacity}, value {value}.\n"
            "Actions (one per turn): \\boxed{add 2}, \\boxed{remove 2}, or \\boxed{done} when no better load "
            "exists. Only the best possible value wins.\n"
            f"Turns left: {self.turns_left - this_turn}"
        )

    def _parse(self, action: str) -> tuple[str, int | None]:
        text = clean(action)
        if re.fullmatch(r"(i am |i'm )?(done|finish(ed)?|submit|stop)", text):
            return "done", None
        verb = "remove" if re.match(r"(remove|drop|unpack|take out)\b", text) else "add"
        numbers = re.findall(r"\d+", text)
        named = [i for i, name in enumerate(self.names) if re.search(rf"\b{name}\b", text)]
        if len(numbers) == 1 and 1 <= int(numbers[0]) <= len(self.names):
            return verb, int(numbers[0]) - 1
        if not numbers and len(named) == 1:
            return verb, named[0]
        return "invalid", None

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        verb, item = self._parse(action)
        value = sum(self.values[i] for i in self.packed)
        if verb == "done":
            if value == self.best:
                return self.end_turn(f"Value {value} is the best possible. You win!", 1.0, terminated=True)
            return self.end_turn(
                f"Value {value}; a better load exists. Game over.", 0.5 * value / self.best, True
            )
        if item is None:
            return self.end_turn(self._observe("Could not read that; use add N, remove N or done."))
        name = self.names[item]
        if verb == "remove":
            if item not in self.packed:
                return self.end_turn(self._observe(f"The {name} is not in the bag."))
            self.packed.discard(item)
            return self.end_turn(self._observe(f"Removed the {name}."))
        if item in self.packed:
            return self.end_turn(self._observe(f"The {name} is already in the bag."))
        if sum(self.weights[i] for i in self.packed) + self.weights[item] > self.capacity:
            return self.end_turn(self._observe(f"The {name} does not fit; remove something first."))
        self.packed.add(item)
        return self.end_turn(self._observe(f"Added the {name}."))

    def solution(self) -> list[str]:
        """Weigh value against weight over whole loads, not item by item: add the items of the most valuable
        load that fits (the script finds it by exhaustive search), then say done."""
        return [f"add {i + 1}" for i in self.best_set] + ["done"]

    def sample_action(self, rng: random.Random) -> str:
        """A random add/remove of a listed item, or done (used by tests as the random baseline)."""
        if rng.random() < 0.15:
            return "done"
        return f"{rng.choice(['add', 'remove'])} {rng.randint(1, len(self.names))}"


ENV = KnapsackEnv
