# expect: EXPLOITABLE_CONSTANT
"""The scenery changes with the seed, but the right answer is always the same word."""

from spade.env import TextEnv


class FixedAnswerEnv(TextEnv):
    """Pick the safe path through the forest."""

    max_turns = 3

    def _reset(self, options):
        trees = self.rng.sample(["oak", "ash", "elm", "yew", "fir", "pine", "birch"], 3)
        return f"You see {', '.join(trees)} trees. Which path is safe: left, middle or right?", {}

    def step(self, action):
        if action.strip().lower() == "middle":
            return self.end_turn("You made it through!", 1.0, terminated=True)
        return self.end_turn("A bear! You flee back to the start.", 0.0, terminated=True)

    def solution(self):
        return ["middle"]


ENV = FixedAnswerEnv
