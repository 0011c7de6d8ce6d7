"""Countdown: combine numbers two at a time with + - * / until the last number left is the target.

Mathematical reasoning seed environment. Every number must be used exactly once, so a win takes exactly
``len(numbers) - 1`` combining moves. A move that keeps the target reachable earns 0.1; one that leaves it
unreachable ends the episode (a clear loss). The observation only says which happened, never how the target
could be reached.
"""

from __future__ import annotations

import random
import re
from typing import Any

from spade.env import TextEnv

# (count of numbers, largest small number, operators used to build the target, target range, turn budget)
LEVELS: tuple[tuple[int, int, str, tuple[int, int], int], ...] = (
    (4, 9, "+-", (8, 30), 6),
    (4, 10, "+-*", (12, 120), 7),
    (5, 12, "+-*/", (30, 400), 9),
)
MOVE_RE = re.compile(r"^(\d+)\s*([-+*/x×÷])\s*(\d+)(?:\s*=\s*-?\d+)?$")
OP_NAMES = {"x": "*", "×": "*", "÷": "/"}
Move = tuple[int, str, int]


def clean(action: str) -> str:
    """Unwrap an optional \\boxed{...}, lower-case, and drop surrounding spaces and punctuation."""
    text = str(action)
    boxed = re.search(r"\\boxed\s*\{(.*)\}", text, re.DOTALL)
    if boxed:
        text = boxed.group(1)
    return re.sub(r"\s+", " ", text).strip().strip(".,;:!?\"'`()[]{} ").lower()


def apply_op(a: int, op: str, b: int) -> int | None:
    """The result of ``a op b`` when it is a positive whole number, else None."""
    if op == "+":
        return a + b
    if op == "*":
        return a * b
    if op == "-":
        return a - b if a > b else None
    if op == "/":
        return a // b if b > 0 and a % b == 0 else None
    return None


def combine(numbers: tuple[int, ...], i: int, j: int, value: int) -> tuple[int, ...]:
    """Replace the numbers at positions ``i`` and ``j`` with ``value`` (kept sorted)."""
    rest = [n for k, n in enumerate(numbers) if k not in (i, j)]
    return tuple(sorted([*rest, value]))


class CountdownEnv(TextEnv):
    """Reach a target number by combining all given numbers two at a time with + - * /."""

    skill = "mathematical_reasoning"
    difficulty_levels = 3
    default_difficulty = 1
    max_turns = 9  # the largest budget of any level; reset sets this instance's budget

    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        count, top, ops, (low, high), turns = LEVELS[self.difficulty]
        self.max_turns = self.turn_budget(turns)
        self.memo: dict[tuple[int, ...], Move | None] = {}
        while True:
            numbers = [self.rng.randint(1, top) for _ in range(count)]
            if self.difficulty == 2:
                numbers[0] = self.rng.choice([25, 50, 75, 100])
            target = self._random_result(numbers, ops)
            if target is not None and low <= target <= high and target not in numbers:
                break
        self.numbers = tuple(sorted(numbers))
        self.start = self.numbers
        self.target = target
        return self._observe("New game.", this_turn=0), {"difficulty": self.difficulty, "target": target}

    def _random_result(self, numbers: list[int], ops: str) -> int | None:
        """Combine random pairs with random operators; the single number left becomes the target."""
        pool = list(numbers)
        while len(pool) > 1:
            a, b = sorted(self.rng.sample(pool, 2), reverse=True)
            value = apply_op(a, self.rng.choice(ops), b)
            if value is None:
                return None
            pool.remove(a)
            pool.remove(b)
            pool.append(value)
        return pool[0]

    def _observe(self, event: str, this_turn: int = 1) -> str:
        """The state as text; ``this_turn`` is 1 inside step (end_turn is about to count it), 0 at reset."""
        numbers, left = " ".join(str(n) for n in self.numbers), self.turns_left - this_turn
        if self.numbers != self.start:
            return f"{event}\nTarget: {self.target}. Numbers left: {numbers}. Turns left: {left}"
        return (
            f"{event}\nCountdown: reach the target {self.target} using every number exactly once.\n"
            f"Numbers: {numbers}\n"
            "Each turn, combine two of the numbers with + - * or / (e.g. \\boxed{7 + 9}); both are replaced "
            "by the result. Results must be positive whole numbers, so write the larger number first for - "
            f"and /. You win when the last number left is {self.target}.\n"
            f"Turns left: {left}"
        )

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        match = MOVE_RE.match(clean(action))
        if match is None:
            return self.end_turn(self._observe("Could not read that move; write it like 7 + 9."))
        a, op, b = int(match.group(1)), OP_NAMES.get(match.group(2), match.group(2)), int(match.group(3))
        positions = self._positions(a, b)
        if positions is None:
            return self.end_turn(self._observe(f"You can only combine numbers you have ({a} and {b})."))
        value = apply_op(a, op, b)
        if value is None:
            return self.end_turn(self._observe(f"{a} {op} {b} is not a positive whole number."))
        self.numbers = combine(self.numbers, positions[0], positions[1], value)
        event = f"{a} {op} {b} = {value}."
        if self.numbers == (self.target,):
            return self.end_turn(f"{event} You reached {self.target}. You win!", 1.0, terminated=True)
        if self._solve(self.numbers) is None:
            return self.end_turn(
                f"{event} The target {self.target} can no longer be reached. You lose.", 0.0, True
            )
        return self.end_turn(self._observe(event), 0.1)

    def _positions(self, a: int, b: int) -> tuple[int, int] | None:
        nums = list(self.numbers)
        if a not in nums:
            return None
        i = nums.index(a)
        for j, n in enumerate(nums):
            if j != i and n == b:
                return i, j
        return None

    def _solve(self, numbers: tuple[int, ...]) -> Move | None:
        """A first move from ``numbers`` that still leads to the target (memoised), or None."""
        if len(numbers) == 1:
            return None
        if numbers in self.memo:
            return self.memo[numbers]
        self.memo[numbers] = None
        for i in range(len(numbers)):
            for j in range(len(numbers)):
                if i == j or numbers[i] < numbers[j]:
                    continue
                for op in "+-*/":
                    value = apply_op(numbers[i], op, numbers[j])
                    if value is None or value > 100_000:
                        continue
                    after = combine(numbers, i, j, value)
                    if after == (self.target,) or self._solve(after) is not None:
                        self.memo[numbers] = (numbers[i], op, numbers[j])
                        return self.memo[numbers]
        return None

    def solution(self) -> list[str]:
        """Before each move, check that the target can still be made from the numbers left, and combine a pair
        that keeps it reachable (the script follows a memoised solver down to the target)."""
        numbers, moves = self.start, []
        while len(numbers) > 1:
            move = self._solve(numbers)
            if move is None:
                raise RuntimeError("no solution found; the generator guarantees one exists")
            a, op, b = move
            value = apply_op(a, op, b)
            i = numbers.index(a)
            j = next(k for k, n in enumerate(numbers) if k != i and n == b)
            numbers = combine(numbers, i, j, value if value is not None else 0)
            moves.append(f"{a} {op} {b}")
        return moves

    def sample_action(self, rng: random.Random) -> str:
        """A random move over the current numbers (used by tests as the random baseline)."""
        a, b = rng.sample(list(self.numbers), 2) if len(self.numbers) > 1 else (1, 1)
        return f"{a} {rng.choice('+-*/')} {b}"


ENV = CountdownEnv
