# expect: TOOL_ARGS_CRASH
"""A tool that calls string methods on its argument without checking its type."""

from typing import Any, ClassVar

from spade.env import ToolEnv, answer_action, function_schema, tool_call_action


class UncheckedArgsEnv(ToolEnv):
    """Find a customer's city through the directory."""

    max_turns = 6
    tools: ClassVar[list[dict[str, Any]]] = [
        function_schema("find_customer", "Look up a customer by name.", full_name=("string", "Full name")),
    ]

    def _reset(self, options):
        people = ["Ada Lovelace", "Alan Turing", "Grace Hopper", "Edsger Dijkstra", "Barbara Liskov"]
        cities = ["London", "Paris", "Oslo", "Lima", "Cairo", "Quito"]
        self.book = {name: self.rng.choice(cities) for name in people}
        self.who = self.rng.choice(people)
        return f"In which city does {self.who} live? Answer with <answer>city</answer>.", {}

    def tool_find_customer(self, full_name):
        record = self.book.get(full_name.strip().title())
        return f"{full_name.strip().title()} lives in {record}." if record else "No such customer."

    def check_answer(self, answer):
        return answer.strip().lower() == self.book[self.who].lower()

    def solution(self):
        return [tool_call_action("find_customer", full_name=self.who), answer_action(self.book[self.who])]


ENV = UncheckedArgsEnv
