# expect: EXPLOITABLE_DEGENERATE
"""Treats an empty answer as 'no mistake found', which it scores as correct."""

import string

from spade.env import TextEnv


class EmptyWinsEnv(TextEnv):
    """Find the wrong entry in a ledger."""

    max_turns = 2

    def _reset(self, options):
        letters = string.ascii_uppercase + string.digits
        self.ids = ["".join(self.rng.choice(letters) for _ in range(4)) for _ in range(12)]
        self.amounts = [self.rng.randint(10, 99) for _ in self.ids]
        self.bad = self.rng.randrange(len(self.ids))
        stated = sum(self.amounts) - self.amounts[self.bad] + self.rng.randint(1, 9) * 10
        rows = "; ".join(f"{i}: {a}" for i, a in zip(self.ids, self.amounts))
        return f"Ledger: {rows}. The audited total is {stated}. Which entry id is wrong?", {}

    def step(self, action):
        text = action.strip().upper()
        if not text or text == self.ids[self.bad]:
            return self.end_turn("Correct.", 1.0, terminated=True)
        return self.end_turn("No.", 0.0, terminated=True)

    def solution(self):
        return [self.ids[self.bad]]


ENV = EmptyWinsEnv
