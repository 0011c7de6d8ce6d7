"""Probe policies: randomised random-play and degenerate action generators.

Every probe draws from an explicit ``random.Random``; the actions depend on the run's seed and on what the
environment shows (words and numbers of the observation), so no fixed, recognisable probe set exists that an
environment could special-case.
"""

from __future__ import annotations

import json
import random
import re
import string
from collections.abc import Callable, Sequence

Policy = Callable[[str, int], str | None]
"""``policy(observation, turn) -> action``; None ends the episode early (a script that ran out)."""

_INTEGER = re.compile(r"(?<![\w.])-?\d+")  # "1-12" is 1 and 12
_TOKEN = re.compile(r"-?\d+(?:\.\d+)?|[A-Za-z][A-Za-z_'-]{0,23}")
_FORMAT_BREAKERS = (
    "\\boxed{", "}", "\\boxed{}", "\\boxed{\\boxed{", "{{", "}}{", "<answer>", "</answer>",
    "<answer></answer>", "<tool_call>", "</tool_call>", "<tool_call>{</tool_call>", "```", "\x00", "NaN",
    "nan", "inf", "-inf",
    "-1e309", "1e999", "null", "None", "[]", "{}", "'\"", "\\", "%s%n", "\n\n\n", "\t", "ÿ€𝛑", "<think>",
    "</think>", "$(", ";", "--", "0x", "-0", "+", "=",
)  # fmt: skip
_FILLERS = (
    "yes", "no", "true", "false", "ok", "done", "a", "b", "c", "up", "down", "left", "right", "next", "start",
    "help", "pass", "skip", "finish", "submit", "answer", "x", "y", "north", "south", "east", "west",
)  # fmt: skip


def tokens(observation: str) -> list[str]:
    """Words and numbers shown in an observation, in order, without repeats."""
    return list(dict.fromkeys(_TOKEN.findall(observation)))


def random_word(rng: random.Random) -> str:
    """A short random lower-case word."""
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(1, 8)))


class RandomActions:
    """Random play: varied, plausible-looking actions built from the observation and random values."""

    def __init__(self, rng: random.Random, tool_names: Sequence[str] = ()) -> None:
        self.rng = rng
        self.tool_names = list(tool_names)
        self._makers: list[Callable[[list[str]], str]] = [
            self._number, self._seen, self._seen_pair, self._expression, self._letter, self._coords,
            self._word, self._numbers, self._boxed, self._filler,
        ]  # fmt: skip
        if self.tool_names:
            self._makers += [self._tool_call, self._tool_call, self._answer]

    def __call__(self, observation: str, turn: int) -> str:
        seen = tokens(observation)
        return self.rng.choice(self._makers)(seen)

    def _number(self, seen: list[str]) -> str:
        return str(self.rng.randint(-5, self.rng.choice((5, 10, 30, 100, 1000))))

    def _seen(self, seen: list[str]) -> str:
        return self.rng.choice(seen) if seen else self._word(seen)

    def _seen_pair(self, seen: list[str]) -> str:
        return f"{self._seen(seen)} {self._seen(seen)}"

    def _expression(self, seen: list[str]) -> str:
        numbers = [t for t in seen if t.lstrip("-").isdigit()] or ["1", "2"]
        return f"{self.rng.choice(numbers)} {self.rng.choice('+-*/')} {self.rng.choice(numbers)}"

    def _letter(self, seen: list[str]) -> str:
        return self.rng.choice(string.ascii_uppercase[: self.rng.randint(2, 26)])

    def _coords(self, seen: list[str]) -> str:
        r, c = self.rng.randint(0, 9), self.rng.randint(0, 9)
        return self.rng.choice((f"{r} {c}", f"({r}, {c})", f"{r},{c}", f"{string.ascii_uppercase[c]}{r}"))

    def _word(self, seen: list[str]) -> str:
        return random_word(self.rng)

    def _numbers(self, seen: list[str]) -> str:
        sep = self.rng.choice((", ", " ", ","))
        return sep.join(str(self.rng.randint(0, 20)) for _ in range(self.rng.randint(2, 6)))

    def _boxed(self, seen: list[str]) -> str:
        inner = self.rng.choice(self._makers[:7])(seen)
        return f"\\boxed{{{inner}}}"

    def _filler(self, seen: list[str]) -> str:
        return self.rng.choice(_FILLERS)

    def _tool_call(self, seen: list[str]) -> str:
        name = self.rng.choice([*self.tool_names, random_word(self.rng)])
        args = {random_word(self.rng): self._seen(seen) for _ in range(self.rng.randint(0, 2))}
        return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"

    def _answer(self, seen: list[str]) -> str:
        return f"<answer>{self._seen(seen)}</answer>"


def constant(action: str) -> Policy:
    """Send the same action every turn."""
    return lambda observation, turn: action


def constant_candidates(
    rng: random.Random, observation: str, tool_env: bool, extra: Sequence[str]
) -> list[str]:
    """Shuffled one-string actions worth trying as a constant policy (``extra``: known winning actions)."""
    pool = [*tokens(observation)[:40], *rng.sample(_FILLERS, 6), *(str(rng.randint(0, 9)) for _ in range(3))]
    rng.shuffle(pool)
    picks = [*extra, *pool]
    if tool_env:
        done = rng.choice(("done", "DONE", "Done", "complete", "finished"))
        picks = [f"<answer>{a}</answer>" for a in (*extra, done, *pool)]
    return list(dict.fromkeys(picks))


def enumeration(rng: random.Random, observation: str, tool_env: bool) -> str:
    """One action listing many candidate answers at once (catches checks like ``answer in action``)."""
    high = rng.choice((100, 300, 1000))
    numbers = [str(n) for n in range(rng.randint(-2, 1), high + 1)]
    words = tokens(observation)
    items = numbers + words if rng.random() < 0.5 else words + numbers
    text = rng.choice((" ", ", ", "\n", " | ")).join(items)
    return f"<answer>{text}</answer>" if tool_env else text


def long_action(rng: random.Random, observation: str, length: int) -> str:
    """A very long action: a random phrase of observation words, digits and markup, repeated to ``length``."""
    seen = tokens(observation) or ["x"]
    pieces = [
        rng.choice((rng.choice(seen), str(rng.randint(0, 999)), random_word(rng), "\\boxed{", "}"))
        for _ in range(rng.randint(5, 40))
    ]
    phrase = " ".join(pieces) + " "
    return (phrase * (length // len(phrase) + 1))[:length]


def format_breaker(rng: random.Random, observation: str) -> str:
    """Malformed markup, special numbers and control characters, sometimes around a seen token."""
    pieces = rng.sample(_FORMAT_BREAKERS, rng.randint(1, 3))
    seen = tokens(observation)
    if seen and rng.random() < 0.5:
        pieces.insert(rng.randint(0, len(pieces)), rng.choice(seen))
    return "".join(pieces)


def degenerate(kind: str, rng: random.Random, cfg_long_chars: int, tool_env: bool) -> Policy:
    """A degenerate policy: ``empty``, ``enumerate``, ``long`` or ``format``, re-drawn each turn."""

    def act(observation: str, turn: int) -> str:
        if kind == "empty":
            return rng.choice(("", " ", "\n"))
        if kind == "enumerate":
            return enumeration(rng, observation, tool_env)
        if kind == "long":
            return long_action(rng, observation, cfg_long_chars)
        return format_breaker(rng, observation)

    return act


def number_guess(rng: random.Random, max_span: int = 1000) -> Policy:
    """Guess ``\\boxed{n}`` each turn, ``n`` drawn at random from the whole numbers between the smallest and
    the largest number the first observation shows (at most ``max_span`` above the smallest), ignoring all
    feedback: it wins often only where the answer space is tiny for the turn budget. No number is guessed
    twice before every number of the range was (a repeat only wastes a turn, and a guesser that ignores
    higher or lower still remembers what it tried): 8 guesses in 1-30 win 8/30 of the games."""
    todo: list[int] = []
    span: list[int] = []

    def act(observation: str, turn: int) -> str:
        if not span:
            numbers = [int(t) for t in _INTEGER.findall(observation)] or [0, 10]
            low = min(numbers)
            span.extend((low, min(max(numbers), low + max_span)))
        if not todo:
            todo.extend(range(span[0], span[1] + 1))
            rng.shuffle(todo)
        return f"\\boxed{{{todo.pop()}}}"

    return act


def scripted(actions: Sequence[str]) -> Policy:
    """Play ``actions`` in order, then stop."""
    script = list(actions)
    return lambda observation, turn: script[turn] if turn < len(script) else None
