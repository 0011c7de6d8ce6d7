# expect: REWARD_RANGE
"""Rewards unreadable input with a million points: the harness rejects the value itself."""

from spade.env import TextEnv


class HugeRewardEnv(TextEnv):
    """Name the colour of the day."""

    max_turns = 4

    def _reset(self, options):
        self.colour = self.rng.choice(["red", "green", "blue", "amber", "violet"])
        return "Name the colour of the day (red, green, blue, amber or violet).", {}

    def step(self, action):
        word = action.strip().lower()
        if word == self.colour:
            return self.end_turn("Yes!", 1.0, terminated=True)
        if word not in ("red", "green", "blue", "amber", "violet"):
            return self.end_turn("That is not a colour.", 1e6)
        return self.end_turn("No.")

    def solution(self):
        return [self.colour]


ENV = HugeRewardEnv
