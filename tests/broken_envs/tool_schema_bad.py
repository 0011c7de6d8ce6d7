# expect: TOOL_SCHEMA
"""Tool schemas with a missing parameters type and a required name that is not a property."""

from typing import Any, ClassVar

from spade.env import ToolEnv


class BadSchemaEnv(ToolEnv):
    """Look up a stock price and report it."""

    max_turns = 6
    tools: ClassVar[list[dict[str, Any]]] = [
        {
            "type": "function",
            "function": {
                "name": "get_price",
                "description": "Price of a ticker",
                "parameters": {"properties": {"ticker": {"type": "ticker-symbol"}}, "required": ["symbol"]},
            },
        }
    ]

    def _reset(self, options):
        self.prices = {t: round(self.rng.uniform(5, 500), 2) for t in ("ACME", "GLOBX", "INITECH")}
        self.ticker = self.rng.choice(list(self.prices))
        return f"What is the price of {self.ticker}? Use get_price, then <answer>price</answer>.", {}

    def tool_get_price(self, ticker):
        return str(self.prices.get(str(ticker).upper(), "unknown ticker"))

    def check_answer(self, answer):
        return answer.strip() == str(self.prices[self.ticker])

    def solution(self):
        return [f"<answer>{self.prices[self.ticker]}</answer>"]


ENV = BadSchemaEnv
