"""Switchboard: find out by experiment which switches make each lamp light up.

Causal inference seed environment. Every lamp follows one hidden rule over the switches (it copies a
switch; on harder levels it may invert one, or need two switches both on, or either of two on). The
agent flips switches to run experiments, sees every lamp after each flip, and states one lamp's rule per
turn. A conclusion is accepted only once the experiments seen so far rule out every other possible rule
for that lamp; a conclusion the experiments already contradict loses the game.
"""

from __future__ import annotations

import itertools
import random
import re
from typing import Any

from spade.env import TextEnv

Rule = tuple[str, int, int]
"""(kind, first switch, second switch) with switches numbered from 0; ``-1`` when unused."""
Config = tuple[bool, ...]
# (switches, lamps, rule kinds, spare turns) per difficulty level
LEVELS: tuple[tuple[int, int, tuple[str, ...], int], ...] = (
    (3, 3, ("is",), 3),
    (4, 3, ("is", "not"), 3),
    (4, 4, ("is", "not", "and", "or"), 4),
)
KIND_TEXT = {
    "is": "it is on exactly when one particular switch is on (answer like A 2)",
    "not": "it is on exactly when one particular switch is off (answer like A not 2)",
    "and": "it is on exactly when two particular switches are both on (answer like A 1 and 3)",
    "or": "it is on exactly when at least one of two particular switches is on (answer like A 1 or 3)",
}
ANSWER_RE = re.compile(
    r"^(?:lamp\s*)?([a-d])\s*(?:[:=]|is|follows)?\s*(?:switch\s*)?(not\s*)?(\d)(?:\s*(and|or)\s*(?:switch\s*)?(\d))?$"
)
TOGGLE_RE = re.compile(r"^(?:toggle|flip|switch|press)\s*(?:switch\s*)?(\d)$")


def clean(action: str) -> str:
    """Unwrap an optional \\boxed{...}, lower-case, and drop surrounding spaces and punctuation."""
    text = str(action)
    boxed = re.search(r"\\boxed\s*\{(.*)\}", text, re.DOTALL)
    if boxed:
        text = boxed.group(1)
    return re.sub(r"\s+", " ", text).strip().strip(".,;:!?\"'`()[]{} ").lower()


def holds(rule: Rule, config: Config) -> bool:
    """Whether a lamp following ``rule`` is on under the switch settings ``config``."""
    kind, a, b = rule
    if kind == "is":
        return config[a]
    if kind == "not":
        return not config[a]
    if kind == "and":
        return config[a] and config[b]
    return config[a] or config[b]


def all_rules(switches: int, kinds: tuple[str, ...]) -> list[Rule]:
    """Every rule of the given kinds over ``switches`` switches."""
    rules: list[Rule] = [(k, a, -1) for k in kinds if k in ("is", "not") for a in range(switches)]
    pairs = list(itertools.combinations(range(switches), 2))
    rules += [(k, a, b) for k in kinds if k in ("and", "or") for a, b in pairs]
    return rules


def index(config: Config) -> int:
    """The number of a switch setting (switch ``i`` on sets bit ``i``), used to index truth tables."""
    return sum(1 << i for i, on in enumerate(config) if on)


def rule_text(rule: Rule) -> str:
    """The answer text of a rule, e.g. ``not 2`` or ``1 and 3`` (switches numbered from 1)."""
    kind, a, b = rule
    if kind == "is":
        return str(a + 1)
    if kind == "not":
        return f"not {a + 1}"
    return f"{a + 1} {kind} {b + 1}"


class SwitchboardEnv(TextEnv):
    """Flip switches to discover the hidden rule that lights each lamp, then state each rule."""

    skill = "causal_inference"
    difficulty_levels = 3
    default_difficulty = 1
    max_turns = 18  # the largest budget of any level; reset sets this instance's budget

    def _reset(self, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        switches, lamps, self.kinds, spare = LEVELS[self.difficulty]
        self.rules = all_rules(switches, self.kinds)
        configs = list(itertools.product((False, True), repeat=switches))
        self.tables = {r: sum(holds(r, c) << index(c) for c in configs) for r in self.rules}
        while True:
            self.hidden = [self.rng.choice(self.rules) for _ in range(lamps)]
            if self.difficulty == 0:
                self.start: Config = (False,) * switches
            else:
                self.start = tuple(self.rng.random() < 0.5 for _ in range(switches))
            wanted = self.difficulty < 2 or any(r[0] in ("and", "or") for r in self.hidden)
            budget = len(self.solution()) + spare
            if wanted and budget <= SwitchboardEnv.max_turns:
                break
        self.max_turns = self.turn_budget(budget)
        self.config = self.start
        self.seen: list[Config] = [self.config]
        self.solved: dict[int, Rule] = {}
        return self._observe("New switchboard.", this_turn=0), {"difficulty": self.difficulty}

    def lamps(self, config: Config) -> list[bool]:
        """The lamp states under a switch setting."""
        return [holds(rule, config) for rule in self.hidden]

    def consistent(self, lamp: int, seen: list[Config]) -> list[Rule]:
        """The rules of ``lamp`` that agree with every experiment in ``seen``."""
        return self._fitting(lamp, sum(1 << index(c) for c in seen))

    def _fitting(self, lamp: int, mask: int) -> list[Rule]:
        """The rules of ``lamp`` agreeing with the experiments whose setting numbers are bits of ``mask``."""
        truth = self.tables[self.hidden[lamp]]
        return [r for r in self.rules if (self.tables[r] ^ truth) & mask == 0]

    def _describe(self, config: Config) -> str:
        switches = " ".join(f"{i + 1}={'on' if s else 'off'}" for i, s in enumerate(config))
        lamps = " ".join(f"{'ABCD'[i]}={'on' if s else 'off'}" for i, s in enumerate(self.lamps(config)))
        return f"switches {switches} -> lamps {lamps}"

    def _observe(self, event: str, this_turn: int = 1) -> str:
        """The state as text; ``this_turn`` is 1 inside step (end_turn is about to count it), 0 at reset."""
        n, letters = len(self.config), "ABCD"[: len(self.hidden)]
        kinds = "; or ".join(KIND_TEXT[k] for k in self.kinds)
        log = "\n".join(f"  {k + 1}. {self._describe(c)}" for k, c in enumerate(self.seen))
        found = ", ".join(f"{'ABCD'[i]} = {rule_text(r)}" for i, r in sorted(self.solved.items())) or "none"
        return (
            f"{event}\nSwitches 1-{n} control lamps {', '.join(letters)}. Each lamp follows one hidden rule: "
            f"{kinds}.\nExperiments so far:\n{log}\nRules proven: {found}.\n"
            "Each turn either flip one switch, e.g. \\boxed{toggle 2}, or state one lamp's rule. A rule is "
            "accepted only once your experiments rule out every other rule for that lamp; a rule they "
            "contradict loses the game. State all lamps' rules to win.\n"
            f"Turns left: {self.turns_left - this_turn}"
        )

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        text = clean(action)
        toggle = TOGGLE_RE.match(text)
        if toggle:
            switch = int(toggle.group(1)) - 1
            if not 0 <= switch < len(self.config):
                return self.end_turn(self._observe(f"There is no switch {switch + 1}."))
            self.config = tuple(not s if i == switch else s for i, s in enumerate(self.config))
            if self.config not in self.seen:
                self.seen.append(self.config)
            return self.end_turn(
                self._observe(f"You flipped switch {switch + 1}: {self._describe(self.config)}.")
            )
        answer = ANSWER_RE.match(text)
        rule = self._parse_rule(answer) if answer else None
        if answer is None or rule is None:
            return self.end_turn(self._observe("Could not read that; use toggle N or a rule like A 2."))
        return self._conclude("abcd".index(answer.group(1)), rule)

    def _parse_rule(self, answer: re.Match[str]) -> Rule | None:
        first = int(answer.group(3)) - 1
        if answer.group(4):
            second = int(answer.group(5)) - 1
            rule: Rule = (answer.group(4), min(first, second), max(first, second))
        else:
            rule = ("not" if answer.group(2) else "is", first, -1)
        return rule if rule in self.rules else None

    def _conclude(self, lamp: int, rule: Rule) -> tuple[str, float, bool, bool, dict[str, Any]]:
        name = "ABCD"[lamp]
        if lamp >= len(self.hidden):
            return self.end_turn(self._observe(f"There is no lamp {name}."))
        if lamp in self.solved:
            return self.end_turn(self._observe(f"Lamp {name} is already proven."))
        fits = self.consistent(lamp, self.seen)
        if rule not in fits:
            return self.end_turn(
                f"Your experiments contradict '{name} = {rule_text(rule)}'. You lose.", 0.0, True
            )
        if len(fits) > 1:
            event = (
                f"Not proven yet: {len(fits)} rules for lamp {name} (yours included) fit your experiments."
            )
            return self.end_turn(self._observe(event))
        self.solved[lamp] = rule
        if len(self.solved) == len(self.hidden):
            return self.end_turn(
                f"Lamp {name} = {rule_text(rule)} is proven. All rules found. You win!", 1.0, True
            )
        return self.end_turn(self._observe(f"Proven: lamp {name} = {rule_text(rule)}."), 0.1)

    def solution(self) -> list[str]:
        """Walk to the nearest informative switch setting until every lamp is pinned down, then answer."""
        n, lamps = len(self.start), range(len(self.hidden))
        config, seen, actions = index(self.start), 1 << index(self.start), []
        while True:
            open_rules = [self._fitting(lamp, seen) for lamp in lamps]
            if all(len(rules) == 1 for rules in open_rules):
                break
            goal = min(
                (c for c in range(1 << n) if not seen >> c & 1),
                key=lambda c: (not self._informative(c, open_rules), (c ^ config).bit_count(), c),
            )
            for i in range(n):
                if (config ^ goal) >> i & 1:
                    config ^= 1 << i
                    seen |= 1 << config
                    actions.append(f"toggle {i + 1}")
        return actions + [
            f"{'ABCD'[lamp]} {rule_text(rules[0])}" for lamp, rules in zip(lamps, open_rules, strict=True)
        ]

    def _informative(self, config: int, open_rules: list[list[Rule]]) -> bool:
        """Whether observing setting number ``config`` would rule out a rule still open for some lamp."""
        return any(len({self.tables[r] >> config & 1 for r in rules}) > 1 for rules in open_rules)

    def sample_action(self, rng: random.Random) -> str:
        """A random flip or a random rule for a random lamp (used by tests as the random baseline)."""
        if rng.random() < 0.6:
            return f"toggle {rng.randint(1, len(self.config))}"
        return f"{rng.choice('ABCD'[: len(self.hidden)])} {rule_text(rng.choice(self.rules))}"


ENV = SwitchboardEnv
