"""A policy double for suite tests: replies are a pure function of the rendered prompt's text."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from spade.scripted.policy import ByteTemplate
from spade.types import Completion, SamplingParams


class ReplyPolicy:
    """Answers every prompt with ``answer(prompt_text)`` under the scripted byte-level chat template."""

    def __init__(self, answer: Callable[[str], str]) -> None:
        self.template = ByteTemplate()
        self.answer = answer
        self.prompts: list[str] = []

    async def sample(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        """One reply per prompt (token ids are the reply's bytes)."""
        out = []
        for ids in prompts:
            text = self.template.decode(ids)
            self.prompts.append(text)
            reply = self.answer(text)
            tokens = tuple(reply.encode())
            out.append(Completion(reply, tokens, (0.0,) * len(tokens), "stop", prompt_tokens=len(ids)))
        return out

    def load_weights(self, path: Path) -> None:
        """Nothing to load."""
