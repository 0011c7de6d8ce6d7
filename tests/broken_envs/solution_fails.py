# expect: SOLUTION_FAILS
"""The scripted solution is off by one: it indexes the hidden list from 0, the game from 1."""

from spade.env import TextEnv


class OffByOneEnv(TextEnv):
    """Say which box holds the key."""

    max_turns = 3

    def _reset(self, options):
        self.boxes = self.rng.randint(5, 9)
        self.key = self.rng.randrange(self.boxes)
        return f"There are {self.boxes} boxes, numbered 1 to {self.boxes}. Which box holds the key?", {}

    def step(self, action):
        if action.strip() == str(self.key + 1):
            return self.end_turn("You found the key!", 1.0, terminated=True)
        return self.end_turn("Empty.")

    def solution(self):
        return [str(self.key)]


ENV = OffByOneEnv
