# expect: ANSWER_LEAK
"""Prints the secret in the prompt it is supposed to hide it from."""

from spade.env import TextEnv


class LeakyEnv(TextEnv):
    """Guess the password."""

    max_turns = 3

    def _reset(self, options):
        self.secret = "".join(self.rng.choice("abcdefghjkmnpqrstuvwxyz") for _ in range(6))
        return f"[debug] secret={self.secret}\nGuess my six-letter password.", {}

    def step(self, action):
        if action.strip().lower() == self.secret:
            return self.end_turn("Correct!", 1.0, terminated=True)
        return self.end_turn("No.", 0.0, terminated=True)

    def solution(self):
        return [self.secret]


ENV = LeakyEnv
