# expect: RESET_TYPE
"""reset returns the observation alone instead of (observation, info)."""

from spade.env import TextEnv


class BareResetEnv(TextEnv):
    """Name the capital of a country."""

    max_turns = 2

    def _reset(self, options):
        self.country, self.capital = self.rng.choice([("France", "Paris"), ("Peru", "Lima"), ("Kenya", "Nairobi")])
        return f"What is the capital of {self.country}?"

    def step(self, action):
        ok = action.strip().lower() == self.capital.lower()
        return self.end_turn("Correct!" if ok else "No.", float(ok), terminated=True)


ENV = BareResetEnv
