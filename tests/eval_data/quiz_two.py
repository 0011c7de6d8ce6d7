"""Arithmetic quiz chain (2 questions): each right answer reveals the next question."""

from spade.env import TextEnv


class Quiz000001Env(TextEnv):
    """Answer 2 arithmetic questions in a row; one wrong answer ends the game."""

    skill = "mathematical_reasoning"
    max_turns = 4

    def _reset(self, options):
        self.questions = [
            (self.rng.randint(1, 9), self.rng.choice(["+"]), self.rng.randint(1, 9)) for _ in range(2)
        ]
        self.index = 0
        return self._ask("Answer each question with \\boxed{number}."), {}

    def _ask(self, prefix):
        a, op, b = self.questions[self.index]
        return f"{prefix} Question {self.index + 1}/2: What is {a} {op} {b}?"

    def _value(self, a, op, b):
        return a + b if op == "+" else a - b if op == "-" else a * b

    def step(self, action):
        text = action.strip().removeprefix("\\boxed{").removesuffix("}").strip()
        if not text.lstrip("-").isdigit():
            return self.end_turn("Please answer with a whole number.")
        if int(text) != self._value(*self.questions[self.index]):
            return self.end_turn("Wrong answer. Game over.", 0.0, terminated=True)
        self.index += 1
        if self.index == len(self.questions):
            return self.end_turn("All correct. You win!", 1.0, terminated=True)
        return self.end_turn(self._ask("Correct."))

    def solution(self):
        return [str(self._value(*q)) for q in self.questions]


ENV = Quiz000001Env
