# expect: GLOBAL_RNG
"""Official format that uses the global random module but never seeds it from reset's seed."""

import random
import re


class UnseededGuessEnv:
    def __init__(self, max_turns=8, **kwargs):
        self.max_turns = max_turns
        self.turn_count = 0

    def reset(self, seed=None):
        self.turn_count = 0
        self.secret = random.randint(1, 100)
        return "Guess a number between 1 and 100: answer like \\boxed{50}.", {}

    def step(self, action):
        self.turn_count += 1
        match = re.search(r"\\boxed\{(-?\d+)\}", action)
        if match and int(match.group(1)) == self.secret:
            return "Correct!", 1.0, True, False, {}
        done = self.turn_count >= self.max_turns
        return "Wrong.", 0.0, False, done, {}

    def solution(self):
        return f"\\boxed{{{self.secret}}}"
