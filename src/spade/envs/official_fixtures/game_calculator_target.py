"""SPADE self-play generated game"""

import random
import re
from collections import deque
from typing import Tuple


class CalculatorTargetEnv:
    """Reach the target number from the start value with a broken calculator's few buttons."""

    def __init__(self, max_turns=10, **kwargs):
        self.max_turns = max_turns
        self.turn_count = 0
        self.value = 0
        self.target = 0
        self.buttons = []
        self.history = []
        self.reset()

    def reset(self, seed=None) -> Tuple[str, dict]:
        if seed is not None:
            random.seed(seed)
        self.turn_count = 0
        self.value = random.randint(1, 9)
        add = random.randint(2, 7)
        mul = random.randint(2, 3)
        sub = random.randint(1, 4)
        self.buttons = [f"+{add}", f"*{mul}", f"-{sub}"]
        # pick a target that needs 3-5 presses
        while True:
            self.target = random.randint(20, 80)
            path = self._shortest_path()
            if path is not None and 3 <= len(path) <= 5:
                break
        self.history = [self.value]
        return self._render("Welcome to the Broken Calculator!"), {}

    def _apply(self, value, button):
        amount = int(button[1:])
        if button[0] == "+":
            return value + amount
        if button[0] == "*":
            return value * amount
        return value - amount

    def _shortest_path(self):
        start = self.value
        queue = deque([(start, [])])
        seen = {start}
        while queue:
            value, path = queue.popleft()
            if value == self.target:
                return path
            if len(path) >= 6:
                continue
            for button in self.buttons:
                nxt = self._apply(value, button)
                if -50 <= nxt <= 500 and nxt not in seen:
                    seen.add(nxt)
                    queue.append((nxt, [*path, button]))
        return None

    def _render(self, msg):
        return (
            f"{msg}\n"
            f"Display: {self.value} | Target: {self.target}\n"
            f"Buttons: {', '.join(self.buttons)}\n"
            f"Turn {self.turn_count}/{self.max_turns}\n"
            f"Press a button with \\boxed{{+3}} (use one of the buttons above)."
        )

    def step(self, action: str) -> Tuple[str, float, bool, bool, dict]:
        self.turn_count += 1
        truncated = self.turn_count >= self.max_turns
        match = re.search(r"\\boxed\{([^}]*)\}", action)
        if not match:
            return ("Use \\boxed{button} format.", 0.0, False, truncated, {})
        button = match.group(1).strip().replace(" ", "")
        if button not in self.buttons:
            return (self._render(f"No button '{button}'."), 0.0, False, truncated, {})
        self.value = self._apply(self.value, button)
        self.history.append(self.value)
        if self.value == self.target:
            return (f"Display shows {self.value}. Target reached, you win!", 1.0, True, False, {})
        if truncated:
            return (f"Out of presses. Display: {self.value}, target {self.target}.", 0.0, False, True, {})
        return (self._render(f"Pressed {button}."), 0.0, False, False, {})

    def solution(self) -> str:
        path = self._shortest_path()
        return ", ".join(path) if path else "no solution"

    def close(self):
        pass
