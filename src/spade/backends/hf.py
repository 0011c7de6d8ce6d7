"""The transformers Policy: batched KV-cached generation with exact token ids and log-probabilities.

Generation is ``model.generate`` (left padding, KV cache) with one extra logits processor and one stopping
criterion that record, at every step, the log-probability of the sampled token. Speed is that of plain
``generate`` at equal batch (see ``bench/hf_vs_generate.py``).

Log-probabilities: the recorded value is ``log_softmax`` of the RAW logits (temperature 1, no top-k / top-p)
at the sampled token — the same quantity vLLM reports by default and the same one the trainer recomputes
(``spade.training.grpo.token_logprobs``), so the trainer compares like with like. Temperature, top-k and top-p only
shape which token is drawn. (With temperature ≠ 1 the draw is thus slightly off-policy for the T=1 model
being trained; that is the usual GRPO convention and the TIS weight can correct stale samples.)

Token accounting: ``token_ids_T`` are all sampled tokens up to and including the one that ended the reply
(an EOS / end-of-turn token, or the token completing a stop string). ``text`` excludes a final EOS and
everything from a stop string on (as OpenAI-style servers do), so ``text`` may be shorter than
``decode(token_ids_T)``.

Concurrency: ``sample`` may be awaited by many plays at once; pending requests with equal sampling params are
coalesced into shared ``generate`` batches (at most ``max_batch`` sequences) that run in a worker thread, so
the event loop is never blocked. Requests that carry a seed are batched only with their own call, which makes
them reproducible.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    LogitsProcessorList,
    StoppingCriteria,
    StoppingCriteriaList,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from spade import stopping
from spade.backends.embedded import resolve_model
from spade.backends.template import HFChatTemplate
from spade.config import ModelConfig
from spade.errors import SpadeError
from spade.types import Completion, SamplingParams

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def pick_device(device: str) -> torch.device:
    """``auto`` → the first CUDA device if present, else CPU; anything else as given."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def fast_bf16(device: torch.device) -> bool:
    """Whether ``device`` is a CPU with bf16 matrix instructions (AVX512-BF16 or AMX), where bfloat16 matrix
    products run faster than float32 ones (elsewhere on CPU they run slower)."""
    return device.type == "cpu" and (
        torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    )


class _Recorder(StoppingCriteria):
    """Logits processor + stopping criterion: warps scores and records sampled tokens' raw logprobs.

    ``generate`` calls the processor with step t's raw logits, samples token t, then calls the stopping
    criterion with token t appended; so the criterion can gather token t's raw log-probability at once.
    """

    def __init__(self, params: SamplingParams, prompt_len: int, stop_check: _StopStrings | None) -> None:
        self.warpers: list[Any] = []
        if params.temperature > 0:
            if params.temperature != 1.0:
                self.warpers.append(TemperatureLogitsWarper(params.temperature))
            if params.top_k > 0:
                self.warpers.append(TopKLogitsWarper(params.top_k))
            if params.top_p < 1.0:
                self.warpers.append(TopPLogitsWarper(params.top_p))
        self.prompt_len = prompt_len
        self.stop_check = stop_check
        self.step_logprobs: list[torch.Tensor] = []
        self._last: torch.Tensor | None = None

    def process(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        self._last = torch.log_softmax(scores.float(), dim=-1)
        for warp in self.warpers:
            scores = warp(input_ids, scores)
        return scores

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.BoolTensor:
        if self._last is not None:
            self.step_logprobs.append(self._last.gather(1, input_ids[:, -1:]).squeeze(1))
            self._last = None
        if stopping.requested():  # a stop request ends the batch at this decode step (spade.stopping)
            return torch.ones(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)  # type: ignore[return-value]
        if self.stop_check is None:
            return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)  # type: ignore[return-value]
        return self.stop_check(input_ids[:, self.prompt_len :])


class _Stopped(SpadeError, RuntimeError):
    """Raised inside the model's forward when a stop is requested (ends a long prefill within one layer)."""


def _raise_if_stopped(_module: Any, _args: Any) -> None:
    if stopping.requested():
        raise _Stopped("stopped")


def _stop_hooks(model: Any, *, fine: bool) -> list[Any]:
    """Forward pre-hooks that let a stop request interrupt a forward pass.

    The stopping criterion ends generation between decode steps; these end the prompt's forward (the
    prefill), which on a busy CPU takes seconds per layer for long designer prompts. ``fine``: a hook on
    every leaf module of every layer (CPU: sub-second granularity); else one per layer (accelerators,
    where a layer takes milliseconds and per-module hooks would cost decode speed).
    """
    layers = [m for lst in model.modules() if isinstance(lst, torch.nn.ModuleList) for m in lst]
    if fine:
        layers = [leaf for layer in layers for leaf in layer.modules() if next(leaf.children(), None) is None]
    return [layer.register_forward_pre_hook(_raise_if_stopped) for layer in layers]


class _StopStrings:
    """Per step: does the generated text of each row contain a stop string (checked on a recent window)?"""

    def __init__(self, tokenizer: Any, stops: Sequence[str]) -> None:
        self.tokenizer = tokenizer
        self.stops = [s for s in stops if s]
        # A token decodes to >= 1 character except partial UTF-8 bytes; 8 tokens of slack cover those.
        self.window = max(len(s) for s in self.stops) + 8

    def __call__(self, generated: torch.Tensor) -> torch.BoolTensor:
        tail = generated[:, -self.window :].tolist()
        texts = self.tokenizer.batch_decode(tail, skip_special_tokens=False)
        done = [any(s in t for s in self.stops) for t in texts]
        return torch.tensor(done, dtype=torch.bool, device=generated.device)  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class _Request:
    prompt: tuple[int, ...]
    params: SamplingParams
    group: int | None
    future: asyncio.Future[Completion]


class HFPolicy:
    """:class:`~spade.types.Policy` on a transformers causal LM (CPU or CUDA).

    Args:
        model_dir: a model folder (see :func:`spade.backends.embedded.resolve_model`).
        device: ``auto``, ``cpu`` or ``cuda[:N]``.
        dtype: weight dtype name.
        max_context: context window; prompt + reply never exceed it (capped at the model's own limit).
        max_batch: most sequences generated together.
        seed: seed of the policy's sampling stream for calls without ``params.seed``.
    """

    def __init__(
        self,
        model_dir: Path,
        *,
        device: str = "auto",
        dtype: str = "float32",
        max_context: int = 2048,
        max_batch: int = 32,
        seed: int = 0,
    ) -> None:
        self.device = pick_device(device)
        self.dtype = DTYPES[dtype]
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.template = HFChatTemplate(self.tokenizer)
        self.model = self._load_full(model_dir)
        limit = int(getattr(self.model.config, "max_position_embeddings", max_context) or max_context)
        self.max_context = min(max_context, limit)
        self.max_batch = max_batch
        self.stop_ids = self.template.stop_token_ids()
        self.pad_id = int(
            self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.stop_ids[0]
        )
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._pristine: dict[str, torch.Tensor] | None = None
        self._queue: list[_Request] = []
        self._worker: asyncio.Task[None] | None = None
        self._calls = 0
        self.policy_version = 0
        """Weight loads applied (stamped on every completion)."""

    @classmethod
    def from_config(cls, cfg: ModelConfig, *, seed: int = 0) -> HFPolicy:
        """A policy for ``cfg`` (``cfg.model`` resolved with :func:`resolve_model`)."""
        return cls(
            resolve_model(cfg.model),
            device=cfg.device,
            dtype=cfg.dtype,
            max_context=cfg.max_context,
            max_batch=cfg.max_concurrency,
            seed=seed,
        )

    # -- Policy ----------------------------------------------------------------------------------------------

    async def sample(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        """One completion per prompt (see module docstring); failures are ``finish_reason="error"``."""
        loop = asyncio.get_running_loop()
        self._calls += 1
        group = self._calls if params.seed is not None else None
        requests = [_Request(tuple(p), params, group, loop.create_future()) for p in prompts]
        self._queue.extend(requests)
        if self._worker is None or self._worker.done() or self._worker.get_loop() is not loop:
            self._worker = loop.create_task(self._drain())
        return list(await asyncio.gather(*(r.future for r in requests)))

    def load_weights(self, path: Path) -> None:
        """Load a full model folder (``config.json``) or a peft LoRA adapter folder (``adapter_config.json``).

        An adapter is applied to the pristine base weights and merged, so generation runs at base-model speed
        and successive adapters never accumulate.
        """
        path = Path(path)
        with self._lock:
            if (path / "adapter_config.json").is_file():
                self._merge_adapter(path)
            elif (path / "config.json").is_file():
                self.model = self._load_full(path)
                self._pristine = None
            else:
                raise FileNotFoundError(
                    f"{path} holds neither adapter_config.json (a LoRA adapter) nor config.json (a model "
                    "folder); pass a folder written by Trainer.export_weights"
                )
            self.policy_version += 1

    # -- generation ------------------------------------------------------------------------------------------

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        """Synchronous batched sampling (what ``sample`` runs in its worker thread)."""
        out: list[Completion | None] = [None] * len(prompts)
        valid = []
        for i, prompt in enumerate(prompts):
            problem = self._check_prompt(len(prompt), params)
            if problem:
                out[i] = Completion("", (), (), "error", prompt_tokens=len(prompt), error=problem)
            else:
                valid.append(i)
        valid.sort(key=lambda i: len(prompts[i]))
        for start in range(0, len(valid), self.max_batch):
            chunk = valid[start : start + self.max_batch]
            seed = self._chunk_seed(params, start)
            for i, completion in zip(
                chunk, self._generate_batch([prompts[i] for i in chunk], params, seed), strict=True
            ):
                out[i] = completion
        return [c for c in out if c is not None]

    def _check_prompt(self, n: int, params: SamplingParams) -> str | None:
        if n == 0:
            return "empty prompt: render the conversation with the chat template first"
        if n >= self.max_context:
            return (
                f"prompt has {n} tokens but the context window is {self.max_context}: shorten the "
                "conversation (context budget) or raise model.max_context"
            )
        if params.max_tokens < 1:
            return f"max_tokens must be >= 1 (got {params.max_tokens})"
        return None

    def _chunk_seed(self, params: SamplingParams, start: int) -> int:
        if params.seed is not None:
            return (params.seed * 1_000_003 + start) % (2**63)
        return self._rng.getrandbits(63)

    def _generate_batch(
        self, prompts: list[Sequence[int]], params: SamplingParams, seed: int
    ) -> list[Completion]:
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):
            ids[row, width - len(prompt) :] = torch.tensor(list(prompt), dtype=torch.long)
            attention[row, width - len(prompt) :] = 1
        budgets = [min(params.max_tokens, self.max_context - len(p)) for p in prompts]
        stops = _StopStrings(self.tokenizer, params.stop) if any(params.stop) else None
        recorder = _Recorder(params, width, stops)
        config = GenerationConfig(  # type: ignore[no-untyped-call]
            max_new_tokens=max(budgets),
            do_sample=params.temperature > 0,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            eos_token_id=self.stop_ids,
            pad_token_id=self.pad_id,
            use_cache=True,
        )
        with self._lock, torch.random.fork_rng(devices=self._rng_devices()), torch.inference_mode():
            torch.manual_seed(seed)
            hooks = _stop_hooks(self.model, fine=self.device.type == "cpu")
            try:
                sequences = self.model.generate(
                    input_ids=ids.to(self.device),
                    attention_mask=attention.to(self.device),
                    generation_config=config,
                    logits_processor=LogitsProcessorList([recorder.process]),
                    stopping_criteria=StoppingCriteriaList([recorder]),
                )
            finally:
                for hook in hooks:
                    hook.remove()
        generated = sequences[:, width:].cpu().tolist()
        logprobs = torch.stack(recorder.step_logprobs, dim=1).cpu().tolist() if recorder.step_logprobs else []
        return [
            self._finish(
                generated[row], logprobs[row] if logprobs else [], budgets[row], params, len(prompts[row])
            )
            for row in range(len(prompts))
        ]

    def _rng_devices(self) -> list[int]:
        return [self.device.index or 0] if self.device.type == "cuda" else []

    def _finish(
        self, ids: list[int], logprobs: list[float], budget: int, params: SamplingParams, prompt_len: int
    ) -> Completion:
        """Cut one row at its first stop token, stop string or budget; set text and finish reason."""
        end, reason = min(len(ids), budget), "length"
        stop_at = next((k for k, t in enumerate(ids[:end]) if t in self.stop_ids), None)
        if stop_at is not None:
            end, reason = stop_at + 1, "stop"
        text_end: int | None = None
        if params.stop:
            cut = self._stop_string_cut(ids[:end], params.stop)
            if cut is not None:
                end, text_end, reason = cut[0], cut[1], "stop"
        kept = ids[:end]
        body = kept[:-1] if kept and kept[-1] in self.stop_ids and text_end is None else kept
        text = str(self.tokenizer.decode(body, skip_special_tokens=True))
        if text_end is not None:
            text = str(self.tokenizer.decode(kept, skip_special_tokens=False))[:text_end]
        return Completion(
            text=text,
            token_ids_T=tuple(kept),
            logprobs_T=tuple(float(x) for x in logprobs[:end]),
            finish_reason="stop" if reason == "stop" else "length",
            prompt_tokens=prompt_len,
            policy_version=self.policy_version,
        )

    def _stop_string_cut(self, ids: list[int], stops: Sequence[str]) -> tuple[int, int] | None:
        """(tokens to keep, text length before the stop string) of the first stop string completed."""
        text = str(self.tokenizer.decode(ids, skip_special_tokens=False))
        cuts = [(self._tokens_to_complete(ids, s), text.find(s)) for s in stops if s and s in text]
        return min(cuts) if cuts else None

    def _tokens_to_complete(self, ids: list[int], stop: str) -> int:
        """Length of the shortest prefix of ``ids`` whose text contains ``stop`` (binary search)."""
        lo, hi = 1, len(ids)
        while lo < hi:
            mid = (lo + hi) // 2
            if stop in str(self.tokenizer.decode(ids[:mid], skip_special_tokens=False)):
                hi = mid
            else:
                lo = mid + 1
        return lo

    # -- weights ---------------------------------------------------------------------------------------------

    def _load_full(self, path: Path) -> Any:
        model: Any = AutoModelForCausalLM.from_pretrained(path, dtype=self.dtype)
        return model.to(self.device).eval()

    def _merge_adapter(self, path: Path) -> None:
        from peft import PeftModel  # noqa: PLC0415 -- only needed with LoRA

        if self._pristine is None:
            self._pristine = {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}
        else:
            self.model.load_state_dict(self._pristine)
        merged = PeftModel.from_pretrained(self.model, path).merge_and_unload()
        self.model = merged.eval()

    # -- request coalescing ----------------------------------------------------------------------------------

    async def _drain(self) -> None:
        while self._queue:
            head = self._queue[0]
            batch = [r for r in self._queue if r.params == head.params and r.group == head.group][
                : self.max_batch
            ]
            taken = {id(r) for r in batch}
            self._queue = [r for r in self._queue if id(r) not in taken]
            results = await asyncio.to_thread(self._generate_safely, [r.prompt for r in batch], head.params)
            for request, result in zip(batch, results, strict=True):
                if not request.future.done():
                    request.future.set_result(result)

    def _generate_safely(self, prompts: list[tuple[int, ...]], params: SamplingParams) -> list[Completion]:
        """The I/O boundary of the engine: an engine failure becomes error completions, never a raise."""
        try:
            out = self.generate(prompts, params)
        except (RuntimeError, ValueError) as exc:  # torch errors (incl. out of memory) and bad inputs
            message = f"hf generation failed: {type(exc).__name__}: {exc}"
            return [Completion("", (), (), "error", prompt_tokens=len(p), error=message) for p in prompts]
        if stopping.requested():  # replies cut by a stop request are not real samples
            return [Completion("", (), (), "error", prompt_tokens=len(p), error="stopped") for p in prompts]
        return out
