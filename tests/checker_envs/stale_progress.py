"""Turn four keys in order, but reset forgets the progress counter: a second episode on the same instance
starts with the last episode's keys turned, so any key opens the door (a fresh instance plays it right)."""

from spade.env import TextEnv

KEYS = ("red", "green", "blue", "gold", "iron")


class KeyChainEnv(TextEnv):
    """Name the hidden order of four keys one at a time; a wrong key is refused and the order stays."""

    max_turns = 12

    def __init__(self, max_turns=None):
        super().__init__(max_turns)
        self.turned = 0  # the defect: set here once, never cleared in _reset

    def _reset(self, options):
        self.order = self.rng.sample(KEYS, 4)
        return (
            f"Four of the keys {', '.join(KEYS)} open the door, in a hidden order. Name one key per turn.",
            {},
        )

    def step(self, action):
        key = action.strip().lower()
        if self.turned < len(self.order) and key != self.order[self.turned]:
            return self.end_turn(f"The lock refuses {key!r}; {self.turned} key(s) turned so far.")
        self.turned += 1
        if self.turned >= len(self.order):
            return self.end_turn("The door opens.", 1.0, terminated=True)
        return self.end_turn(f"Click: {self.turned} key(s) turned.")

    def solution(self):
        return list(self.order)


ENV = KeyChainEnv
