"""Which policy an evaluation scores: a model on any backend, a run's trained policy, or the scripted solver."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from spade.config import ModelConfig, to_dict
from spade.errors import SpadeError
from spade.evals.base import EvalError
from spade.scripted.policy import ByteTemplate
from spade.types import ChatTemplate, Completion, Policy, SamplingParams

PolicyKind = Literal["model", "run", "solver"]
UNBATCHED_BACKENDS = ("vllm",)
"""Backends whose policy runs one engine call at a time: :func:`load_policy` wraps them in a
:class:`~spade.backends.batching.BatchingPolicy`, so concurrent episodes share batches as in training (hf
batches by itself; servers batch what they receive)."""
GATHER_S = 0.1
"""The batching wrapper's longest wait for the episodes still stepping their environments (as cpu-tiny's
``rollout.batch_gather_s``)."""


class ScriptedSolver:
    """Not a model: tells the ``envs`` suite to play each instance's own ``solution()``.

    Other suites cannot use it; asked to sample, it answers with an error completion saying so.
    """

    def __init__(self) -> None:
        self.template: ChatTemplate = ByteTemplate()

    async def sample(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        """Error completions: the solver plays environments only."""
        message = "the scripted solver only plays environments (suite envs)"
        return [Completion("", (), (), "error", error=message) for _ in prompts]

    def load_weights(self, path: Path) -> None:
        """The solver has no weights."""
        raise EvalError("the scripted solver has no weights to load")


@dataclass(frozen=True, slots=True)
class PolicySource:
    """Where the evaluated policy comes from."""

    kind: PolicyKind = "model"
    """'model': ``model`` as configured; 'run': a run's trained policy; 'solver': the scripted solver."""
    model: ModelConfig = field(default_factory=ModelConfig)
    run: Path | None = None
    checkpoint: int | None = None
    """'run': the step of a kept checkpoint (None: the latest exported policy, ``<run>/policy``)."""
    seed: int = 0
    """Seed of the policy's own sampling stream."""

    def describe(self) -> dict[str, Any]:
        """JSON-safe description, recorded with the results."""
        out: dict[str, Any] = {"kind": self.kind, "seed": self.seed}
        if self.kind == "model":
            out["model"] = to_dict(self.model)
        if self.kind == "run":
            out |= {"run": str(self.run), "checkpoint": self.checkpoint}
        return out


def run_weights(run: Path, checkpoint: int | None) -> tuple[ModelConfig, Path]:
    """The run's model configuration and the folder of its trained policy.

    Raises:
        EvalError: not a run directory, or no policy (no update finished yet, or the checkpoint is gone).
    """
    from spade.rundir import RunDir  # noqa: PLC0415 - only runs need it

    rd = RunDir(run)
    try:
        cfg = rd.load_config()
    except (SpadeError, FileNotFoundError) as exc:
        raise EvalError(f"{run} is not a readable run directory ({exc}); pass runs/<name>") from None
    if checkpoint is None:
        weights = run / "policy"
        if not weights.is_dir() or not any(weights.iterdir()):
            raise EvalError(
                f"run {run} has no trained policy yet ({weights} is missing: no update has finished); "
                "train it longer, or evaluate the base model without --run"
            )
        return cfg.model, weights
    weights = rd.checkpoints / f"step_{checkpoint}" / "trainer" / "weights"
    if not weights.is_dir():
        kept = sorted(p.name for p in rd.checkpoints.glob("step_*"))
        raise EvalError(
            f"run {run} has no policy weights for checkpoint {checkpoint} (kept checkpoints: "
            f"{', '.join(kept) or 'none'}; the scripted backend keeps none); omit --checkpoint for the latest"
        )
    return cfg.model, weights


def load_policy(source: PolicySource, concurrency: int, *, top_k: int = 0) -> Policy:
    """Build the policy (engines batch up to ``concurrency`` sequences; see :data:`UNBATCHED_BACKENDS`).

    Raises:
        EvalError: the model, engine or run cannot be loaded, or ``top_k`` (the largest any suite samples
            with) goes to the OpenAI API, which has none; the message says what to do.
    """
    if source.kind == "solver":
        return ScriptedSolver()
    from spade.backends import make_policy  # noqa: PLC0415 - heavy engines only when a model is used

    model, weights = source.model, None
    if source.kind == "run":
        if source.run is None:
            raise EvalError("policy kind 'run' needs a run directory (--run runs/<name>)")
        model, weights = run_weights(source.run, source.checkpoint)
    model = dataclasses.replace(model, max_concurrency=max(model.max_concurrency, concurrency))
    if model.backend == "openai":  # a server that is down is one line now, not an outage wait later
        from spade.backends.openai_server import top_k_refusal  # noqa: PLC0415 - httpx only for servers
        from spade.backends.server_check import check_servers  # noqa: PLC0415
        from spade.errors import SetupError  # noqa: PLC0415

        if top_k > 0 and (refusal := top_k_refusal(model.openai.base_urls)):
            raise EvalError(refusal)

        try:
            check_servers(model.openai.base_urls)
        except SetupError as exc:
            raise EvalError(f"the policy cannot generate: {exc}") from None
    try:
        policy = make_policy(model, seed=source.seed)
        if weights is not None:
            policy.load_weights(weights)
    except ModuleNotFoundError as exc:
        raise EvalError(
            f"backend {model.backend!r} needs the package {exc.name!r}: install it (see `make setup`)"
        ) from None
    except (FileNotFoundError, ValueError, OSError) as exc:
        raise EvalError(f"cannot load the policy ({model.backend} {model.model}): {exc}") from None
    if model.backend in UNBATCHED_BACKENDS:
        from spade.backends.batching import BatchingPolicy  # noqa: PLC0415 - with the engine it wraps

        policy = BatchingPolicy(policy, max_batch=model.max_concurrency, gather_s=GATHER_S)
    return policy


async def preflight(policy: Policy) -> None:
    """One tiny request, so that a server that is down fails before anything is written.

    Raises:
        EvalError: the policy cannot generate; the message carries its error.
    """
    if isinstance(policy, ScriptedSolver):
        return
    prompt = policy.template.render([{"role": "user", "content": "Hi"}], add_generation_prompt=True)
    reply = (await policy.sample([prompt], SamplingParams(temperature=0.0, max_tokens=1)))[0]
    if reply.finish_reason == "error":
        raise EvalError(
            f"the policy cannot generate: {reply.error}; check that the model or server is up and reachable"
        )


PROBE_TOKENS = 16
"""Tokens each request of :func:`probe_rate` asks for: enough decode steps to time, few enough to take seconds."""
PROBE_PROMPT = "Count from 1 to 100, separated by commas."
"""A prompt whose greedy reply runs past :data:`PROBE_TOKENS` tokens on any model."""


async def probe_rate(policy: Policy, in_flight: int, tokens: int = PROBE_TOKENS) -> float | None:
    """The engine's decode rate with ``in_flight`` sequences at once: tokens per second of each sequence.

    One batch of ``in_flight`` short greedy requests, timed (prefill included): a few seconds on a CPU, so an
    evaluation can say what it will roughly cost before its first round is done. Greedy and seeded, so the
    backend's own sampling stream (the evaluation's draws) is left as it was. None when the policy cannot
    say (every reply failed or was empty).
    """
    prompt = policy.template.render([{"role": "user", "content": PROBE_PROMPT}], add_generation_prompt=True)
    started = time.perf_counter()
    replies = await policy.sample(
        [prompt] * max(1, in_flight), SamplingParams(temperature=0.0, max_tokens=tokens, seed=0)
    )
    elapsed = time.perf_counter() - started
    steps = max((len(r.token_ids_T) for r in replies if r.finish_reason != "error"), default=0)
    return steps / elapsed if steps > 0 and elapsed > 0 else None
