"""Data and behaviour shared across modules: frozen dataclasses for data, Protocols for behaviour.

Shape suffixes name sequence axes: ``_T`` per token of one sequence.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

Message = dict[str, Any]
"""An OpenAI-style chat message: ``{"role", "content"}`` plus ``tool_calls`` / ``tool_call_id`` / ``name``."""

ToolSchema = dict[str, Any]
"""An OpenAI function-format tool schema: ``{"type": "function", "function": {...}}``."""

Role = Literal["agent", "designer"]
"""Which of the model's two roles produced a sample."""

FinishReason = Literal["stop", "length", "error"]
"""``stop``: end of sequence or a stop string; ``length``: cut at ``max_tokens``; ``error``: nothing usable."""


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """Per-call sampling parameters."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    """0 disables top-k."""
    max_tokens: int = 256
    stop: tuple[str, ...] = ()
    seed: int | None = None


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One parsed tool call of an assistant turn."""

    name: str
    arguments: dict[str, Any]
    id: str = ""


@dataclass(frozen=True, slots=True)
class Completion:
    """One sampled continuation with exact token accounting.

    ``token_ids_T`` are the tokens the engine sampled (never re-tokenised text) and ``logprobs_T`` their
    log-probabilities under the sampling policy; both are empty when the engine cannot report them.
    """

    text: str
    token_ids_T: tuple[int, ...]
    logprobs_T: tuple[float, ...]
    finish_reason: FinishReason
    prompt_tokens: int = 0
    error: str | None = None
    policy_version: int = 0
    """Weight loads (``Policy.load_weights``) the engine had applied when it sampled this (0: the starting
    weights); the openai backend stamps the serving endpoint's version."""


@runtime_checkable
class ChatTemplate(Protocol):
    """Renders conversations to token ids the way the policy's chat template does."""

    def render(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSchema] | None = None,
        *,
        add_generation_prompt: bool,
    ) -> list[int]:
        """Token ids of a whole conversation."""
        ...

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of token ids (special tokens kept)."""
        ...


@runtime_checkable
class Policy(Protocol):
    """A model that samples continuations of token prompts (token in, token out)."""

    @property
    def template(self) -> ChatTemplate:
        """The chat template prompts are rendered with."""
        ...

    async def sample(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        """Sample one completion per prompt; a failed request yields ``finish_reason="error"``, not a raise."""
        ...

    def load_weights(self, path: Path) -> None:
        """Pick up updated weights (a full model folder or a LoRA adapter folder) written by a Trainer."""
        ...


@dataclass(frozen=True, slots=True)
class TrainSample:
    """One token sequence for the update: the loss applies where ``mask_T`` is 1 (assistant tokens)."""

    tokens_T: tuple[int, ...]
    mask_T: tuple[int, ...]
    sample_logprobs_T: tuple[float, ...]
    """Log-probabilities recorded at sampling time (0 where the mask is 0)."""
    advantage: float
    role: Role
    staleness: int = 0
    """How many updates ago the sample was drawn (delayed designer credit); > 0 enables the IS correction."""


@runtime_checkable
class Trainer(Protocol):
    """Updates the policy's weights from scored samples."""

    def train_step(self, samples: Sequence[TrainSample]) -> dict[str, float]:
        """One optimiser step over all samples (micro-batched inside); returns metrics."""
        ...

    def export_weights(self, path: Path) -> Path:
        """Write the current weights (or adapter) where a Policy can ``load_weights`` them."""
        ...

    def save(self, path: Path) -> None:
        """Checkpoint weights, optimiser and RNG state."""
        ...

    def load(self, path: Path) -> None:
        """Restore a checkpoint written by ``save``."""
        ...


class PlayStatus(enum.Enum):
    """How one episode ended."""

    TERMINATED = "terminated"
    """The environment ended the episode (win or loss)."""
    TRUNCATED = "truncated"
    """The environment's turn budget ran out."""
    TURN_BUDGET = "turn_budget"
    """The agent's turn budget ran out before the environment ended the episode."""
    CONTEXT_BUDGET = "context_budget"
    """The conversation no longer fits the context budget."""
    LENGTH = "length"
    """A reply was cut at the per-turn token budget."""
    ENV_ERROR = "env_error"
    """The environment crashed, hung or returned an invalid value (a SandboxError)."""
    MODEL_ERROR = "model_error"
    """The policy failed to produce a reply."""


STATUS_WORDS: dict[str, str] = {
    PlayStatus.TERMINATED.value: "the environment ended it (a win or a loss)",
    PlayStatus.TRUNCATED.value: "the environment's own turn limit ran out",
    PlayStatus.TURN_BUDGET.value: "the agent's turn budget ran out (play.max_turns)",
    PlayStatus.CONTEXT_BUDGET.value: "the context budget ran out (play.context_tokens)",
    PlayStatus.LENGTH.value: "a reply was cut at the per-turn token budget (play.turn_tokens)",
    PlayStatus.ENV_ERROR.value: "the environment failed (it crashed, hung or returned a bad value)",
    PlayStatus.MODEL_ERROR.value: "the model produced no reply",
    "unfinished": "the scripted solution ran out of actions before the environment ended it",
    "no_solution": "the environment defines no solution() to play",
}
"""How an episode ended, in words: every :class:`PlayStatus`, and the two outcomes only the scripted solver
of ``spade eval envs --solver`` has. What a person reads (``spade play``, eval records, the report) shows
these; metrics and file fields keep the codes."""


def plural(n: int, word: str) -> str:
    """``1 turn``, ``2 turns``: the count and its noun, as every line a person reads writes them."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def status_words(status: PlayStatus | str) -> str:
    """The words of a status or its code (an unknown code as it is: a record written by a newer version)."""
    code = status.value if isinstance(status, PlayStatus) else status
    return STATUS_WORDS.get(code, code)


@dataclass(frozen=True, slots=True)
class Transition:
    """One agent turn: what it saw, what it said, what the environment did."""

    observation: str
    reply: str
    action: str
    reward: float
    terminated: bool
    truncated: bool


@dataclass(frozen=True, slots=True)
class TurnTokens:
    """One agent turn of a thinking model (``model.thinking``): the prompt it was sampled from and its reply."""

    tokens_T: tuple[int, ...]
    """The prompt then the reply."""
    mask_T: tuple[int, ...]
    """1 on the reply's sampled tokens, 0 on the prompt."""
    sample_logprobs_T: tuple[float, ...]
    """Sampling log-probabilities on the reply (0 on the prompt, and where the engine reported none)."""


@dataclass(frozen=True, slots=True)
class Trajectory:
    """One episode of one environment instance.

    ``tokens_T`` is the episode as one token stream, every reply as sampled. With ``turns`` (a thinking
    model, whose later prompts leave out earlier reasoning) that stream is the record of what was said, and
    each turn is trained on its own prompt instead.
    """

    env_id: str
    seed: int
    hinted: bool
    status: PlayStatus
    transitions: tuple[Transition, ...]
    episode_return: float
    success: bool
    tokens_T: tuple[int, ...] = ()
    mask_T: tuple[int, ...] = ()
    sample_logprobs_T: tuple[float, ...] = ()
    error: str = ""
    turns: tuple[TurnTokens, ...] = ()


@dataclass(frozen=True, slots=True)
class CorpusDoc:
    """One grounding document."""

    doc_id: str
    title: str
    text: str


@dataclass(frozen=True, slots=True)
class EnvSource:
    """An environment's code with its provenance."""

    code: str
    skill: str
    env_id: str
    parent_id: str | None = None
    doc_id: str | None = None
    created_step: int = 0
    extra: dict[str, str] = field(default_factory=dict)
