"""Sequences: find the rule behind a sequence and give its next three terms, one per turn.

Pattern recognition seed environment. A hidden rule (arithmetic, cyclic, geometric, Fibonacci-like,
interleaved, second-order...) generates the sequence; each right term is appended to the sequence shown,
so the agent always continues from what it has already proved. Wrong answers only cost a turn.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Callable
from typing import Any

from spade.env import TextEnv

Rule = Callable[[random.Random, int], list[int]]
ASKED = 3
"""How many next terms the agent must give."""


def arithmetic(rng: random.Random, n: int) -> list[int]:
    """a, a+d, a+2d, ... with a small step (sometimes decreasing)."""
    a, d = rng.randint(1, 20), rng.randint(2, 9)
    if rng.random() < 0.3:
        a, d = a + 10 * n, -d
    return [a + d * k for k in range(n)]


def cycle(rng: random.Random, n: int) -> list[int]:
    """A short block of numbers repeated over and over."""
    block = rng.sample(range(1, 10), rng.randint(2, 3))
    return [block[k % len(block)] for k in range(n)]


def letters(rng: random.Random, n: int) -> list[int]:
    """Letters of the alphabet with a constant step (as positions 0..25, shown as letters)."""
    step = rng.randint(1, 3)
    start = rng.randint(0, 25 - step * (n - 1))
    return [start + step * k for k in range(n)]


def geometric(rng: random.Random, n: int) -> list[int]:
    """a, a*r, a*r^2, ..."""
    a, r = rng.randint(1, 5), rng.choice([2, 2, 3])
    return [a * r**k for k in range(n)]


def alternating_steps(rng: random.Random, n: int) -> list[int]:
    """Add p, then q, then p, then q..."""
    p, q = rng.sample(range(1, 10), 2)
    seq = [rng.randint(1, 15)]
    while len(seq) < n:
        seq.append(seq[-1] + (p if len(seq) % 2 else q))
    return seq


def fibonacci_like(rng: random.Random, n: int) -> list[int]:
    """Each term is the sum of the two before it."""
    seq = [rng.randint(1, 5), rng.randint(1, 6)]
    while len(seq) < n:
        seq.append(seq[-1] + seq[-2])
    return seq


def growing_gaps(rng: random.Random, n: int) -> list[int]:
    """The gaps between terms grow by a constant: d, d+e, d+2e, ..."""
    a, d, e = rng.randint(1, 10), rng.randint(1, 4), rng.randint(1, 3)
    seq = [a]
    while len(seq) < n:
        seq.append(seq[-1] + d + e * (len(seq) - 1))
    return seq


def interleaved(rng: random.Random, n: int) -> list[int]:
    """Two arithmetic sequences taking turns."""
    a, d = rng.randint(1, 20), rng.randint(2, 6)
    b, e = rng.randint(30, 60), -rng.randint(1, 5)
    return [a + d * (k // 2) if k % 2 == 0 else b + e * (k // 2) for k in range(n)]


def double_then_add(rng: random.Random, n: int) -> list[int]:
    """Alternately multiply by m and add c."""
    m, c = rng.choice([2, 3]), rng.randint(1, 7)
    seq = [rng.randint(1, 4)]
    while len(seq) < n:
        seq.append(seq[-1] * m if len(seq) % 2 else seq[-1] + c)
    return seq


def polynomial(rng: random.Random, n: int) -> list[int]:
    """k^2 + c or k^3 + c for k = 1, 2, 3, ..."""
    power, c = rng.choice([2, 2, 3]), rng.randint(-1, 5)
    offset = rng.randint(1, 3)
    return [(k + offset) ** power + c for k in range(n)]


# (rules, terms shown, spare turns) per difficulty level
LEVELS: tuple[tuple[tuple[Rule, ...], int, int], ...] = (
    ((arithmetic, cycle, letters), 5, 3),
    ((geometric, alternating_steps, fibonacci_like, growing_gaps, letters), 6, 2),
    ((interleaved, double_then_add, polynomial, growing_gaps, fibonacci_like), 7, 2),
)


def clean(action: str) -> str:
    """Unwrap an optional \\boxed{...}, lower-case, and drop surrounding spaces and punctuation."""
    text = str(action)
    boxed = re.search(r"\\boxed\s*\{(.*)\}", text, re.DOTALL)
    if boxed:
        text = boxed.group(1)
    return re.sub(r"\s+", " ", text).strip().strip(".,;:!?\"'`()[]{} ").lower()


class SequencesEnv(TextEnv):
    """Find the rule of a number or letter sequence and give its next three terms one at a time."""

    skill = "pattern_recognition"
    difficulty_levels = 3
    default_difficulty = 1
    max_turns = 6  # the largest budget of any level; reset sets this instance's budget

    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        rules, shown, spare = LEVELS[self.difficulty]
        rule = self.rng.choice(rules)
        self.is_letters = rule is letters
        self.terms = rule(self.rng, shown + ASKED)
        self.shown = shown
        self.known = shown
        self.max_turns = self.turn_budget(ASKED + spare)
        return self._observe("New sequence.", this_turn=0), {"difficulty": self.difficulty}

    def _render(self, term: int) -> str:
        return string.ascii_uppercase[term] if self.is_letters else str(term)

    def _observe(self, event: str, this_turn: int = 1) -> str:
        """The state as text; ``this_turn`` is 1 inside step (end_turn is about to count it), 0 at reset."""
        seq = ", ".join(self._render(t) for t in self.terms[: self.known])
        kind = "a capital letter" if self.is_letters else "a whole number"
        found = self.known - self.shown
        return (
            f"{event}\nSequence: {seq}, ?\n"
            f"Give the next term: {kind}, one term per turn, alone in \\boxed{{}}. "
            f"You need {ASKED} more terms; {found} found so far. A wrong term only costs a turn.\n"
            f"Turns left: {self.turns_left - this_turn}"
        )

    def _parse(self, action: str) -> int | None:
        text = clean(action)
        if self.is_letters:
            if len(text) == 1 and text.isalpha():
                return string.ascii_lowercase.index(text)
            capitals = set(re.findall(r"\b[A-Z]\b", str(action))) - {"I"}
            return string.ascii_uppercase.index(capitals.pop()) if len(capitals) == 1 else None
        numbers = re.findall(r"-?\d+", text)
        return int(numbers[0]) if len(numbers) == 1 else None

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        guess = self._parse(action)
        if guess is None:
            kind = "one capital letter" if self.is_letters else "one whole number"
            return self.end_turn(self._observe(f"Please answer with {kind}, the next term only."))
        if guess != self.terms[self.known]:
            return self.end_turn(self._observe(f"{self._render(guess)} is not the next term."))
        self.known += 1
        if self.known == len(self.terms):
            return self.end_turn(f"Right! All {ASKED} terms found. You win!", 1.0, terminated=True)
        return self.end_turn(self._observe(f"Right, the next term is {self._render(guess)}."), 0.1)

    def solution(self) -> list[str]:
        """Find the rule that makes each term from the ones before it, check it on every term shown, then
        continue it for the terms not yet given."""
        return [self._render(t) for t in self.terms[self.shown :]]

    def sample_action(self, rng: random.Random) -> str:
        """A random term near the last one shown (used by tests as the random baseline)."""
        last = self.terms[self.known - 1]
        if self.is_letters:
            return string.ascii_uppercase[max(0, min(25, last + rng.randint(-4, 6)))]
        return str(last + rng.randint(-10, 20))


ENV = SequencesEnv
