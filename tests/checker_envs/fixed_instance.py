"""A safe whose four-digit code is the same whatever the seed: one memorised script opens every instance."""

from spade.env import TextEnv

CODE = "3141"


class FixedSafeEnv(TextEnv):
    """Open the safe by entering its code one digit per turn; a wrong digit clears what was entered."""

    max_turns = 24

    def _reset(self, options):
        self.entered = ""
        return (
            "A safe with a 4-digit code. Enter one digit per turn as \\boxed{d}; a wrong digit clears it.",
            {},
        )

    def step(self, action):
        digit = action.strip().removeprefix("\\boxed{").removesuffix("}").strip()
        if len(digit) != 1 or not digit.isdigit():
            return self.end_turn("Enter exactly one digit, e.g. \\boxed{7}.")
        if CODE[len(self.entered)] != digit:
            self.entered = ""
            return self.end_turn("Buzz: wrong digit, the entry is cleared.")
        self.entered += digit
        if self.entered == CODE:
            return self.end_turn("Click: the safe opens.", 1.0, terminated=True)
        return self.end_turn(f"Beep: {len(self.entered)} digit(s) accepted.")

    def solution(self):
        return [f"\\boxed{{{d}}}" for d in CODE]


ENV = FixedSafeEnv
