"""A one-reply game: any answer ends the episode, right or wrong, so the agent never acts on feedback."""

from spade.env import TextEnv


class SumOnceEnv(TextEnv):
    """Add two numbers; one answer, then the game is over."""

    max_turns = 5

    def _reset(self, options):
        self.a, self.b = self.rng.randint(100, 999), self.rng.randint(100, 999)
        return f"What is {self.a} + {self.b}? Answer with the number.", {}

    def step(self, action):
        right = action.strip() == str(self.a + self.b)
        return self.end_turn("Correct!" if right else "Wrong.", 1.0 if right else 0.0, terminated=True)

    def solution(self):
        return [str(self.a + self.b)]


ENV = SumOnceEnv
