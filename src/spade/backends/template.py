"""Chat templating and exact multi-turn token accounting (token in, token out).

:class:`HFChatTemplate` renders conversations with a Hugging Face tokenizer's chat template.
:class:`TokenStream` builds the token stream of a multi-turn conversation so that the trainer sees exactly the
tokens the policy sampled, with no re-tokenisation drift:

- it starts from the rendered prompt (mask 0);
- each sampled completion's token ids are appended verbatim (mask 1, with the logprobs recorded at sampling);
- the next user / tool messages and the generation prompt are appended as a *suffix render* (mask 0): the new
  messages are rendered after a fixed sentinel conversation ``[user, assistant <sentinel>]`` and everything up
  to the end of the sentinel assistant content is cut away, so the suffix never depends on re-tokenising the
  model's earlier text. The suffix starts with the template's closing of an assistant turn (e.g.
  ``<|im_end|>\\n``); if the sampled ids already end with the end-of-turn token (generation stopped on it)
  that token is not repeated, otherwise (a stop string or ``max_tokens`` cut the reply) it is appended with
  mask 0, so the stream always looks like a well-formed conversation to the model.

Reasoning blocks: some templates (Qwen3 and later) drop ``<think>`` blocks of earlier assistant turns when a
whole conversation is re-rendered. The stream deliberately keeps what was sampled: the next turn is sampled
from the stream's own tokens (token in), so sampling and training see the same context and the logprob ratio
compares like with like. The stream is therefore not byte-identical to a canonical re-render of the same
messages when such a template strips reasoning; it is identical for templates that do not. A template whose
``thinking`` is set (``model.thinking``) is used the other way by :mod:`spade.play.agent`: each turn is sampled
from the template's own rendering of the conversation with earlier replies split into ``content`` and
``reasoning_content`` (:func:`spade.replies.split_reasoning`), so the model sees its history as the template presents it
at deployment, and each turn is trained on the prompt it was sampled from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from spade.errors import SpadeError
from spade.types import ChatTemplate, Completion, Message, Role, ToolSchema, TrainSample

_SENTINEL_USER = "spade-sentinel-user"
_SENTINEL = "spade-sentinel-7f3a9c"


class TemplateError(SpadeError, ValueError):
    """A chat template that cannot be used for token accounting; the message says why and what to do."""


@runtime_checkable
class TurnTemplate(ChatTemplate, Protocol):
    """A chat template that also renders the tokens that follow a sampled assistant turn."""

    end_of_turn_id: int | None
    """The special token that closes an assistant turn (None when the template has none)."""
    thinking: bool
    """Whether the model reasons in ``<think>`` blocks that earlier turns are rendered without
    (``model.thinking``)."""

    def render_suffix(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSchema] | None = None,
        *,
        add_generation_prompt: bool,
    ) -> list[int]:
        """Tokens after a sampled assistant turn: its closing, ``messages``, maybe the generation prompt."""
        ...

    def encode(self, text: str) -> list[int]:
        """Token ids of plain text (no special tokens added)."""
        ...


class HFChatTemplate:
    """:class:`~spade.types.ChatTemplate` over a Hugging Face tokenizer.

    Args:
        tokenizer: a ``transformers`` tokenizer.
        chat_template: a Jinja template overriding the tokenizer's own (e.g. a Qwen-style one in tests).
        thinking: the model reasons in ``<think>`` blocks (see :attr:`TurnTemplate.thinking`).

    Raises:
        TemplateError: the tokenizer has no chat template and none was given.
    """

    def __init__(self, tokenizer: Any, chat_template: str | None = None, *, thinking: bool = False) -> None:
        self.tokenizer = tokenizer
        self.thinking = thinking
        self.chat_template: str | None = chat_template or getattr(tokenizer, "chat_template", None)
        if not self.chat_template:
            raise TemplateError(
                "the tokenizer has no chat template; use an instruction-tuned model folder whose tokenizer "
                "has one, or pass chat_template=..."
            )
        self.end_of_turn_id = self._find_end_of_turn()

    # -- ChatTemplate ---------------------------------------------------------------------------------------

    def render(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSchema] | None = None,
        *,
        add_generation_prompt: bool,
    ) -> list[int]:
        """Token ids of a whole conversation, as the tokenizer's ``apply_chat_template`` makes them."""
        return self.encode(self.render_text(messages, tools, add_generation_prompt=add_generation_prompt))

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of token ids (special tokens kept)."""
        return str(self.tokenizer.decode(list(token_ids), skip_special_tokens=False))

    # -- TurnTemplate ---------------------------------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        """Token ids of plain text (no BOS/EOS added; the template writes its own special tokens)."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def render_text(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSchema] | None = None,
        *,
        add_generation_prompt: bool,
    ) -> str:
        """The rendered conversation as text."""
        text = self.tokenizer.apply_chat_template(
            list(messages),
            tools=list(tools) if tools else None,
            chat_template=self.chat_template,
            add_generation_prompt=add_generation_prompt,
            tokenize=False,
        )
        return str(text)

    def render_suffix(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSchema] | None = None,
        *,
        add_generation_prompt: bool,
    ) -> list[int]:
        """Tokens that follow a sampled assistant turn (see module docstring).

        The result starts with the template's closing of the assistant turn (end-of-turn token and separator),
        then ``messages``, then the generation prompt if asked.
        """
        head: list[Message] = [
            {"role": "user", "content": _SENTINEL_USER},
            {"role": "assistant", "content": _SENTINEL},
        ]
        text = self.render_text([*head, *messages], tools, add_generation_prompt=add_generation_prompt)
        cut = text.find(_SENTINEL)
        if cut < 0:
            raise TemplateError(
                "the chat template dropped the content of an assistant message followed by other messages; "
                "multi-turn token accounting needs a template that renders earlier assistant replies"
            )
        return self.encode(text[cut + len(_SENTINEL) :])

    def stop_token_ids(self) -> list[int]:
        """Token ids that end a reply: the tokenizer's EOS and the template's end-of-turn token."""
        ids = [self.tokenizer.eos_token_id, self.end_of_turn_id]
        return sorted({int(i) for i in ids if i is not None})

    def _find_end_of_turn(self) -> int | None:
        head: list[Message] = [
            {"role": "user", "content": _SENTINEL_USER},
            {"role": "assistant", "content": _SENTINEL},
        ]
        text = self.render_text(head, add_generation_prompt=False)
        cut = text.find(_SENTINEL)
        if cut < 0:
            raise TemplateError(
                "the chat template does not render assistant messages; it cannot be used for play"
            )
        closing = self.encode(text[cut + len(_SENTINEL) :])
        special = set(getattr(self.tokenizer, "all_special_ids", [])) | set(
            getattr(self.tokenizer, "added_tokens_decoder", {})
        )
        if closing and closing[0] in special:
            return int(closing[0])
        return None


class TokenStream:
    """The token stream of one multi-turn conversation, built piece by piece (see module docstring).

    Args:
        template: the policy's template.
        prompt_ids: the rendered prompt, usually ``template.render(msgs, tools, add_generation_prompt=True)``.
    """

    def __init__(self, template: TurnTemplate, prompt_ids: Sequence[int]) -> None:
        self.template = template
        self._tokens: list[int] = list(prompt_ids)
        self._mask: list[int] = [0] * len(self._tokens)
        self._logprobs: list[float] = [0.0] * len(self._tokens)
        self._open_turn = False
        self._last_reply = (0, 0)
        self.exact = True
        """False once a completion without token ids or logprobs was appended (its text was re-tokenised)."""

    @classmethod
    def from_messages(
        cls, template: TurnTemplate, messages: Sequence[Message], tools: Sequence[ToolSchema] | None = None
    ) -> TokenStream:
        """A stream starting from the rendered prompt of ``messages`` (with the generation prompt)."""
        return cls(template, template.render(messages, tools, add_generation_prompt=True))

    @property
    def tokens_T(self) -> tuple[int, ...]:
        """All tokens so far: the next prompt to sample from."""
        return tuple(self._tokens)

    @property
    def mask_T(self) -> tuple[int, ...]:
        """1 on sampled assistant tokens, 0 elsewhere."""
        return tuple(self._mask)

    @property
    def logprobs_T(self) -> tuple[float, ...]:
        """Sampling logprobs on sampled tokens, 0 elsewhere."""
        return tuple(self._logprobs)

    def __len__(self) -> int:
        return len(self._tokens)

    def add_completion(self, completion: Completion) -> None:
        """Append a sampled reply verbatim (mask 1).

        Raises:
            ValueError: the completion is an error or a reply is already open (call ``add_messages`` between).
        """
        if completion.finish_reason == "error":
            raise ValueError(f"cannot append a failed completion to a token stream: {completion.error}")
        if self._open_turn:
            raise ValueError(
                "two completions in a row: append the next messages with add_messages() in between"
            )
        ids = list(completion.token_ids_T)
        logprobs = list(completion.logprobs_T)
        if not ids:  # an engine that reports text only: re-tokenise it and say so
            ids = self.template.encode(completion.text)
            self.exact = False
        if len(logprobs) != len(ids):
            logprobs = [0.0] * len(ids)
            self.exact = False
        self._last_reply = (len(self._tokens), len(self._tokens) + len(ids))
        self._append(ids, 1, logprobs)
        self._open_turn = True

    def drop_last_reply_loss(self) -> None:
        """Take the last appended reply out of the loss (mask 0 on its tokens; they stay in the stream)."""
        start, end = self._last_reply
        self._mask[start:end] = [0] * (end - start)

    def add_messages(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSchema] | None = None,
        *,
        add_generation_prompt: bool = True,
    ) -> None:
        """Append the closing of the last reply, ``messages`` and (by default) the generation prompt (mask 0).

        Raises:
            ValueError: no reply is open (the stream must alternate completions and messages).
        """
        if not self._open_turn:
            raise ValueError(
                "add_messages() must follow a completion; start the stream from the whole prompt"
            )
        suffix = self.template.render_suffix(messages, tools, add_generation_prompt=add_generation_prompt)
        self._append(self._skip_sampled_end(suffix), 0)
        self._open_turn = False

    def close(self) -> None:
        """End the conversation: append the end-of-turn token (mask 0) if the last reply lacks it."""
        eot = self.template.end_of_turn_id
        if self._open_turn and eot is not None and (not self._tokens or self._tokens[-1] != eot):
            self._append([eot], 0)
        self._open_turn = False

    def train_sample(self, advantage: float, role: Role, staleness: int = 0) -> TrainSample:
        """The stream as a :class:`~spade.types.TrainSample`."""
        return TrainSample(
            tokens_T=self.tokens_T,
            mask_T=self.mask_T,
            sample_logprobs_T=self.logprobs_T,
            advantage=advantage,
            role=role,
            staleness=staleness,
        )

    def _skip_sampled_end(self, suffix: list[int]) -> list[int]:
        eot = self.template.end_of_turn_id
        if eot is not None and suffix and suffix[0] == eot and self._tokens and self._tokens[-1] == eot:
            return suffix[1:]
        return suffix

    def _append(self, ids: Sequence[int], mask: int, logprobs: Sequence[float] | None = None) -> None:
        self._tokens.extend(int(i) for i in ids)
        self._mask.extend([mask] * len(ids))
        self._logprobs.extend(logprobs if logprobs is not None else [0.0] * len(ids))
